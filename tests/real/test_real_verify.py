"""`portkit verify` on real weights (docs/measurements.md, "Measured here"): the transformers-5
save is PK101 CONFIRMED and greedy diverges; after `portkit fix --write` candle agrees within the
f32 tolerance, every layer too, while the residual stream reaches 2e4; the chat prompt's ids
are the same on both sides, with SmolLM's default system prompt; the published Q4_1 GGUF is
within the q4 tolerance. Each check has its negative control on the same weights.

The bars are the tolerances (portkit.verify.judge.checks.TOLERANCES), never the measured values.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures.real import DEFAULT_SYSTEM_PROMPT
from portkit.cli import main
from portkit.verify.judge.checks import TOLERANCES
from tests.real.inputs import CAPITAL, CAPITAL_TOKENS, CHAT, CHAT_TOKENS

F32 = TOLERANCES["f32"]
Q4 = TOLERANCES["q4_k"]


def _verdicts(report) -> dict[str, str]:
    return {f.code: f.verdict for f in report.all_findings}


# --------------------------------------------------------------------------- the transformers-5 save


def test_tf5_save_pk101_confirmed_and_greedy_diverges(capital):
    report = capital("tf5")
    assert report.family == "llama" and report.tolerance.name == "f32"
    assert report.prompt.ids == (504, 3575, 282, 4649, 314)  # docs/measurements.md's ids for the text
    assert _verdicts(report) == {"PK101": "CONFIRMED"}
    c = report.comparison
    assert not c.ok and report.exit_code == 1
    # far outside the tolerance, at the real logits' scale
    assert c.last.max_abs_diff > 100 * F32.logits_atol and 10 < c.last.max_abs_ref < 50
    assert c.greedy.first_divergence is not None and c.greedy.first_divergence < CAPITAL_TOKENS and not c.greedy.ok
    assert c.steps.real_flips  # at least one argmax flip where the reference is not near a tie
    # localised where a lost theta starts: layer.0's attention, position 0 agreeing
    assert (
        c.layers.first_over == "layer.0"
        and c.localisation.name == "layer.0.self_attn"
        and c.localisation.position0_agrees
    )
    # the probe: theta restored, candle is back within the tolerance
    (pk101,) = report.findings
    assert pk101.details["patch"] == {"rope_theta": 100000.0}
    fixed = pk101.details["fixed"]
    assert fixed["ok"] and fixed["greedy_first_divergence"] is None


# --------------------------------------------------------------------------- after `portkit fix --write`


def test_fixed_agrees_within_the_f32_tolerance(capital):
    """Last-position logits within their floor measured in the run (transformers in f64), every
    teacher-forced step too, greedy identical."""
    report = capital("fixed")
    c = report.comparison
    assert report.all_findings == [] and report.exit_code == 0 and c.ok
    assert c.last.floor is not None and c.last.floor.ok and c.last.tolerance == c.last.floor.bound
    assert c.steps.ok and c.steps.floor is not None and c.steps.agree == c.steps.steps == CAPITAL_TOKENS
    assert c.greedy.first_divergence is None and len(c.greedy.ref) == CAPITAL_TOKENS


def test_fixed_layers_within_the_relative_tolerance_while_the_residual_stream_reaches_2e4(capital):
    report = capital("fixed")
    L = report.comparison.layers
    names = [r.name for r in L.layer_rows]
    assert names == ["embeddings", *(f"layer.{i}" for i in range(30)), "norm", "logits"]
    assert L.ok and L.measured
    # why the line is measured, not absolute: from layer.11 on one channel of the residual stream
    # is over 1e4; each of those layers is within its own floor (transformers f32's own error there)
    big = [r for r in L.layer_rows if r.max_abs_ref > 1e4]
    assert (
        big
        and big[0].name == "layer.11"
        and all(r.floor is not None and r.floor.kind == "own" and r.floor.ok for r in big)
    )
    assert max(r.max_abs_diff for r in big) > F32.logits_atol  # an absolute line would fail a correct run


def test_negative_control_one_reference_logit_plus_1e3_is_a_mismatch(capital):
    """The same real run, one reference logit moved by 1e-3 (verify's own hook): MISMATCH, exit 1.
    Both sides come from the run caches the clean run wrote."""
    report = capital("fixed", perturb_reference=1e-3)
    c = report.comparison
    assert report.exit_code == 1 and not c.ok
    assert not c.last.ok and c.last.max_abs_diff >= 1e-3 - F32.logits_atol
    assert not c.steps.ok and c.last.floor.ratio > c.last.floor.factor
    assert "(bound " in c.headline() and "transformers' own f32 error" in c.headline()


def test_negative_control_the_unfixed_config_fails_the_agreement_test(capital):
    """The agreement assertions above, on the tf5 save of the same weights: each one fails."""
    c = capital("tf5").comparison
    assert not (c.last.max_abs_diff <= F32.logits_atol)
    assert not c.steps.ok and c.greedy.first_divergence is not None
    assert not c.layers.ok and c.layers.max_rel > F32.layer_rtol


def test_verify_exit_codes(capsys, real):
    """The command, in process, on the cached runs: 1 for the tf5 save, 0 after the fix, 2 for a
    bad option."""
    argv = ["--text", CAPITAL, "--tokens", str(CAPITAL_TOKENS), "--format", "json"]
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    try:
        codes = []
        for d in (real.tf5, real.fixed):
            codes.append(main(["verify", str(d), *argv]))
            doc = json.loads(capsys.readouterr().out)
            assert doc["exit_code"] == codes[-1]
        assert codes == [1, 0]
        assert main(["verify", str(real.fixed), "--tokens", "-1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
    finally:
        mp.undo()


# --------------------------------------------------------------------------- the chat prompt and the GGUF


def test_chat_prompt_ids_are_the_same_on_both_sides_with_the_default_system_prompt(chat):
    report = chat()
    p = report.prompt
    assert p.source == "--chat"
    assert p.text.startswith(
        f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{CHAT}<|im_end|>\n"
    )
    assert p.text.endswith("<|im_start|>assistant\n")
    assert p.candle_ids is not None and tuple(p.candle_ids) == tuple(p.ids) and len(p.ids) == 37
    assert p.ids[0] == 1  # <|im_start|>, one special token, not split into pieces
    tok = report.tokenizer
    assert tok.ok and tok.chat_text is not None and DEFAULT_SYSTEM_PROMPT in tok.chat_text and not tok.differing


def test_negative_control_one_candle_id_changed_is_a_mismatch(chat):
    """verify's tokens hook (one id of candle's first encode moved by one), the same prompt and
    checkpoint (the forward from the run caches; no GGUF: its pass judges no ids)."""
    report = chat(perturb_candle_tokens=True, gguf=None)
    assert not report.tokenizer.ok and len(report.tokenizer.differing) == 1 and report.exit_code == 1


def test_the_q4_1_gguf_is_within_the_q4_tolerance(chat):
    """Judged by the teacher-forced argmax: every flip at a reference top-2 margin under 0.6."""
    report = chat()
    g = report.gguf
    assert g.loader == "quantized_llama" and set(g.weight_types) == {"Q4_1", "Q8_0"} and g.tolerance is Q4
    c = g.comparison
    assert g.ok and c.ok and g.findings == []
    assert c.steps.steps == CHAT_TOKENS and not c.steps.real_flips
    assert all(d.ref_margin < Q4.near_tie for d in c.steps.disagreements)
    # quantization noise is visible: far over the f32 line, so it is the tolerance that passes it
    assert c.last.max_abs_diff > 100 * F32.logits_atol
    # and the f32 checkpoint agrees on this prompt too: the verdict covers both
    assert report.comparison.ok and report.exit_code == 0


def test_negative_control_a_reference_logit_past_the_near_tie_line_is_a_mismatch(chat):
    """The q4 judgement of the same GGUF run against the same reference with one logit moved (as
    verify's reference hook moves it: token 0 at the last prompt position), through the comparison
    the GGUF section runs (`compare_run`): 2 x the near-tie line above the reference's top makes
    the GGUF's first step a real flip, a MISMATCH; half the line, a near tie, still agreeing. (The
    f32 control's 1e-3 is far under this tolerance's resolution. Not a verify run: on the
    mismatch its GGUF pass would try the Q/K permutation, another Q4_1 run of a minute here.)"""
    from dataclasses import replace

    from portkit.verify.judge.comparison import compare_run

    report = chat()
    ref, run = report.reference, report.gguf.run
    row = ref.rows[0]
    assert int(row.argmax()) != 0 and run.rows is not None and int(run.rows[0].argmax()) == int(row.argmax())

    def judged(margin: float):
        rows = ref.rows.copy()
        rows[0, 0] = row.max() + np.float32(margin)
        return compare_run(replace(ref, rows=rows), run, Q4)

    assert compare_run(ref, run, Q4).ok  # the GGUF section's own verdict, recomputed
    bad = judged(2 * Q4.near_tie)
    assert not bad.ok and [(d.step, d.ref_token) for d in bad.steps.real_flips] == [(0, 0)]
    tie = judged(Q4.near_tie / 2)
    assert tie.steps.ok and tie.steps.disagreements[0].step == 0 and tie.steps.disagreements[0].near_tie
