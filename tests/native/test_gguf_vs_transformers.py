"""candle's quantized_llama on GGUF files our writer made from the healthy fixture, vs transformers f32."""

from __future__ import annotations

import json

import pytest

from portkit.verify.candle.native import load_gguf
from portkit.verify.judge.checks import TOLERANCES, compare_logits, compare_steps
from portkit.verify.reference.runtime import ReferenceModel

F32 = TOLERANCES["f32"]
Q8 = TOLERANCES["q8_0"]


@pytest.fixture(scope="module")
def ref_and_ids(healthy_tied_dir):
    ids = json.loads((healthy_tied_dir / "prompt.json").read_text())["ids"]
    return ReferenceModel.load(healthy_tied_dir), ids


def test_f32_gguf_matches_transformers(ref_and_ids, gguf_file):
    ref, ids = ref_and_ids
    g = load_gguf(gguf_file("healthy-tied", qtype="f32"))
    check = compare_logits(ref.last_logits(ids), g.last_logits(ids), F32.logits_atol)
    print(check.line("gguf f32"))
    assert check.ok, check.line()
    steps = compare_steps(
        ref.all_logits(ids), g.teacher_forced_logits(ids), near_tie=F32.near_tie, atol=F32.logits_atol
    )
    assert steps.ok and steps.agree == steps.steps, steps.line()
    perturbed = ref.last_logits(ids).copy()
    perturbed[7] -= 1e-3
    assert not compare_logits(perturbed, g.last_logits(ids), F32.logits_atol).ok


def test_q8_0_reports_error_and_argmax_agreement(ref_and_ids, gguf_file):
    ref, ids = ref_and_ids
    g = load_gguf(gguf_file("healthy-tied", qtype="q8_0"))
    last = compare_logits(ref.last_logits(ids), g.last_logits(ids), None)
    steps = compare_steps(ref.all_logits(ids), g.teacher_forced_logits(ids), near_tie=Q8.near_tie, atol=None)
    print(last.line("gguf q8_0"))
    print("q8_0 teacher-forced", steps.line())
    # Quantization is visible (not silently the f32 file) but small against the logits' range.
    assert 1e-3 < last.max_abs_diff < 0.25 * last.max_abs_ref, last.line()
    assert steps.ok, steps.line()  # every argmax flip, if any, sits at a near tie


def test_unpermuted_qk_rows_diverge_in_gguf(ref_and_ids, gguf_file):
    """A converter that forgets llama.cpp's Q/K permutation: loads fine, computes another model."""
    ref, ids = ref_and_ids
    g = load_gguf(gguf_file("healthy-tied", qtype="f32", permute_qk=False))
    check = compare_logits(ref.last_logits(ids), g.last_logits(ids), F32.logits_atol)
    print(check.line("unpermuted"))
    assert check.max_abs_diff > 0.05, check.line()
