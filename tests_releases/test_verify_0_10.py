"""`portkit verify --candle 0.10.x`: candle 0.10.0, 0.10.1 and 0.10.2's own crates (native/ built against
each on first use, its lock in native/releases/X.Y.Z/Cargo.lock, its capture copies generated from its
source with native/copies/X.Y.Z/ where a patch of its own is needed). Not part of `make test`, whose fresh
run has no time for three more candle builds: `make release-verify` runs these.

- every family's fixture agrees with transformers on each release, logits and (where the family has a
  capture copy) every layer and sub-layer: the copies generated for the release compute what its
  modules do;
- a llama chat's second turn: up to 0.10.1 llama.rs builds the mask of a multi-token forward as
  `(seq_len, seq_len)` whatever its cache holds (PK318), CRASH-CONFIRMED by 0.10.1's own code (`cannot
  broadcast [2, 2] to [1, 4, 2, 26]`); 0.10.2
  builds it over the cache (candle#3437) and the turn agrees;
- a phi GGUF's second turn: up to 0.10.1 quantized_phi builds its mask as `(seq_len, seq_len)` too (PK319),
  CRASH-CONFIRMED by 0.10.1; 0.10.2 builds it with `utils::build_causal_mask` and the turn agrees;
- a qwen3 batch of two: before 0.11.0 qwen3 adds its undersized mask on the CPU too (no CPU
  flash-attention path yet), so the batch panics, which PK311 predicts there and verify CRASH-CONFIRMS;
  on 0.11.0 the CPU builds no mask and the rows agree.
"""

from __future__ import annotations

import pytest

from fixtures.families import FAMILY_VARIANTS, family_fixture
from fixtures.proof import PHI_MHA_1E4, family_dir, gguf_of
from portkit.families import FAMILIES
from tests_releases.verify_cli import AGREEING, path_failure, verdicts, verify

RELEASES = ("0.10.0", "0.10.1", "0.10.2")


#: the variant of each family candle runs as transformers does (as tests/native/test_chat_paths.py)
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_every_family_agrees(family: str, release: str) -> None:
    fam = next(f for f in FAMILIES if f.name == family)
    variant = AGREEING.get(family, "legacy")
    assert variant in FAMILY_VARIANTS[family]
    code, doc, err = verify(family_fixture(family, variant), "--candle", release)
    if not fam.exists.holds(release):  # a module the release does not have yet: one line, nothing run
        assert code == 2 and doc == {} and len(err.strip().splitlines()) == 1, (code, err[-2000:])
        assert f"candle {release} has no `{family}` module, it arrived in {fam.exists.since}" in err, err
        return
    assert doc.get("versions", {}).get("candle") == release, err[-2000:]
    assert code == 0 and doc["verdict"] == "agree", (code, verdicts(doc), err[-2000:])


def test_a_llama_second_turn_fails_on_0_10_1_and_agrees_on_0_10_2() -> None:
    d = family_fixture("llama", "legacy")
    code, doc, err = verify(d, "--turns", "--candle", "0.10.1")
    assert verdicts(doc) == {"PK318": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    assert "cannot broadcast" in path_failure(doc, "turns"), path_failure(doc, "turns")
    code, doc, err = verify(d, "--turns", "--candle", "0.10.2")
    assert "PK318" not in verdicts(doc) and code == 0, (code, verdicts(doc), err[-2000:])


def test_a_qwen3_batch_panics_on_0_10_2_and_agrees_on_0_11_0() -> None:
    d = family_fixture("qwen3", "legacy")
    code, doc, err = verify(d, "--batch", "2", "--candle", "0.10.2")
    assert verdicts(doc) == {"PK311": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    assert "index out of bounds" in path_failure(doc, "batch"), path_failure(doc, "batch")
    code, doc, err = verify(d, "--batch", "2", "--candle", "0.11.0")
    assert "PK311" not in verdicts(doc) and code == 0, (code, verdicts(doc), err[-2000:])


def _gguf_turns(doc: dict) -> dict:
    return next(s for s in doc["paths"]["sections"] if s["subject"] == "the GGUF in candle")


def test_a_phi_gguf_second_turn_fails_on_0_10_1_and_agrees_on_0_10_2() -> None:
    """The GGUF's own turn; the checkpoint's (phi.rs, PK320 on every release) fails beside it."""
    d = family_dir("phi", "legacy", PHI_MHA_1E4)
    g = gguf_of(d, fuse_qkv=True)
    code, doc, err = verify(d, "--gguf", g, "--turns", "--candle", "0.10.1")
    assert verdicts(doc) == {"PK319": "CRASH-CONFIRMED", "PK320": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    failure = _gguf_turns(doc)["checks"][0]["run"]["failure"]["message"]
    assert "cannot broadcast" in failure, failure
    code, doc, err = verify(d, "--gguf", g, "--turns", "--candle", "0.10.2")
    assert verdicts(doc) == {"PK320": "CRASH-CONFIRMED"}, (code, verdicts(doc), err[-2000:])
    assert _gguf_turns(doc)["ok"], _gguf_turns(doc)
