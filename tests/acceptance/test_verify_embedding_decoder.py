"""verify on a decoder used as an embedding model (fixtures.embedding_models.decoder_embedding_model:
a tiny Qwen3-Embedding: Qwen3ForCausalLM weights, last-token pooling). candle's `qwen3::Model`
agrees with sentence-transformers on each text alone and on the batch padded on the right; the
batch as the tokenizer pads it (left) and one model kept across the texts (its KV cache) are the
programs that differ, and confirm PK621 and PK622. Negative controls: a tokenizer that pads on the
right gives no PK621 and its padded batch the same vectors; a plain qwen3 decoder (no modules.json)
gets neither rule; candle's vectors moved by 1e-3 read MISMATCH."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import portkit_native as pn
from fixtures.embedding_models import decoder_embedding_model
from fixtures.families import family_fixture
from portkit.lint import lint_paths
from portkit.verify.embedding.judge import check_alone

CODES = {"PK621", "PK622"}


def _verify(path):
    from portkit.verify.pipeline import VerifyOptions, verify

    return verify(VerifyOptions(model_dir=path))


@pytest.fixture(scope="module")
def left():
    return _verify(decoder_embedding_model("qwen3", "left"))


def test_left_padded_qwen3_embedding_agrees_and_both_programs_are_confirmed(left) -> None:
    assert left.family == "qwen3" and left.exit_code == 0, left.verdict()
    assert all(r.ok for r in left.singles) and left.batch is not None and left.batch.ok and left.batch.padded_rows >= 4
    by = {c.code: c.verdict for c in left.findings}
    assert by["PK621"] == by["PK622"] == by["PK602"] == "CONFIRMED", by
    cfs = {c.name: c for c in left.counterfactuals}
    assert set(cfs) == {"tokenizer-padded-batch", "pool-over-pads", "one-model"}
    assert all(c.differs for c in cfs.values())
    # one model kept: the first text agrees (nothing cached yet), every later one differs
    rows = cfs["one-model"].batch.rows
    assert rows[0].ok and not any(r.ok for r in rows[1:])
    assert left.to_json()["batch_program"].startswith("padded on the right")


def test_right_padding_tokenizer_has_no_pk621_and_its_batch_agrees() -> None:
    rep = _verify(decoder_embedding_model("qwen3", "right"))
    assert rep.exit_code == 0, rep.verdict()
    by = {c.code: c.verdict for c in rep.findings}
    assert "PK621" not in by and by["PK622"] == "CONFIRMED"
    cf = next(c for c in rep.counterfactuals if c.name == "tokenizer-padded-batch")
    assert not cf.differs and "on the right" in cf.what  # causal attention never looks at the pads after a token


def test_a_plain_qwen3_decoder_is_not_an_embedding_model() -> None:
    d = family_fixture("qwen3", "legacy")
    assert not CODES & {f.code for f in lint_paths([d]).findings}


def test_lint_names_both_rules_where_the_files_say_it(tmp_path) -> None:
    d = decoder_embedding_model("qwen3", "left")
    found = {f.code: f for f in lint_paths([d]).findings}
    assert CODES <= set(found)
    assert found["PK621"].filename.endswith("tokenizer_config.json")
    assert "qwen3.rs:435" in found["PK622"].message and "pull/3384" in found["PK622"].message


def test_candle_moved_by_1e3_is_a_mismatch(left) -> None:
    """The floors are measured against the f64 truth: an embedding 1e-3 away from candle's own,
    judged as the batch's rows are, is out of every text's floor."""
    ref = left.reference
    sides = _sides(left)
    clean = check_alone([(t, "t") for t in ref.texts], ref.single, sides, ref.reference, ref.truth, sides, seq=1)
    moved = [dataclasses.replace(s, embeddings=s.embeddings + 1e-3) for s in sides]
    bad = check_alone([(t, "t") for t in ref.texts], ref.single, moved, ref.reference, ref.truth, sides, seq=1)
    assert all(r.ok for r in clean.rows) and not any(r.ok for r in bad.rows)


def _sides(rep):
    """candle's singles again, through a fresh runner (the report keeps the judged rows, not the arrays)."""
    from portkit.verify.embedding.candle import run_encoder

    d = rep.options.model_dir
    runner = pn.EncoderRunner("qwen3", [str(d / "model.safetensors")], (d / "config.json").read_text())
    return [run_encoder(runner, "qwen3", e, rep.reference.steps, capture=False) for e in rep.reference.single]


def test_the_native_module_refuses_a_mask_and_keeps_its_cache() -> None:
    d = decoder_embedding_model("qwen3", "left")
    runner = pn.EncoderRunner("qwen3", [str(d / "model.safetensors")], (d / "config.json").read_text())
    a, b = [[2, 28, 29, 3]], [[2, 5, 18, 3]]
    with pytest.raises(ValueError, match="takes no padding mask"):
        runner.hidden_states(a, None, [[1, 1, 1, 1]])
    fresh = np.asarray(runner.hidden_states(b))
    assert np.array_equal(np.asarray(runner.hidden_states(b)), fresh)  # a fresh model per call: the same
    assert np.array_equal(
        np.asarray(runner.hidden_states_one_model(a)), np.asarray(runner.hidden_states(a))
    )  # nothing cached yet
    assert not np.allclose(np.asarray(runner.hidden_states_one_model(b)), fresh, atol=1e-3)  # b attends to a's keys
    assert json.loads(runner.config_json())["num_hidden_layers"] == 2
