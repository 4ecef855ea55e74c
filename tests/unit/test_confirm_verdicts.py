"""Every verdict path of `portkit.verify.judge.confirm`, on runs whose truth is set by the test.

A `World` is a model whose defects are known: each defect is a config key whose fix removes
a known shift from candle's logits, and a patch can be made to break the load. The
reference is a fixed logit table. So for every finding the test knows which verdict is
right, and checks the verdict, its evidence line and the numbers in its details. No torch,
no candle: confirm.py only judges `RunOutputs` and `Comparison`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from portkit.findings import Finding, Fix, declared_probe
from portkit.rules import RULES
from portkit.verify.candle.run import Failure, RunOutputs
from portkit.verify.judge.checks import TOLERANCES
from portkit.verify.judge.comparison import compare_run
from portkit.verify.judge.confirm import (
    Subject,
    candle_patch,
    confirm_all,
    confirm_crash,
    confirm_numeric,
    confirm_static,
    other_patches,
    probe,
)
from portkit.verify.judge.verdicts import IMPROVEMENT
from portkit.verify.reference.result import Reference

F32 = TOLERANCES["f32"]
BF16 = TOLERANCES["bf16"]
# three teacher-forced steps, vocab 6, clear top-2 margins (>= 3) so a small shift never flips
ROWS = np.array(
    [
        [9.0, 1.0, 0.5, -2.0, 3.0, 0.0],
        [0.0, 8.0, 1.0, 2.0, -1.0, 0.5],
        [1.0, 0.0, 7.0, 0.0, 2.0, -3.0],
    ],
    dtype=np.float32,
)
REF = Reference(prompt=[5, 6, 7], greedy=[0, 1, 2], rows=ROWS)
SHIFTED = 5  # the logit a defect moves: the lowest one, so argmax never changes


@dataclass
class World:
    """candle's logits = the reference's, plus the shift of every defect the patch leaves."""

    defects: dict[str, float] = field(default_factory=dict)
    breaks: dict[str, Failure] = field(default_factory=dict)  # a patch key whose run fails
    as_read_failure: Failure | None = None
    tolerance: Any = F32
    calls: list[dict[str, Any]] = field(default_factory=list)

    def run(self, patch: dict[str, Any]) -> RunOutputs:
        for key, fail in self.breaks.items():
            if key in patch:
                return RunOutputs(label="patched", failure=fail)
        shift = sum(size for key, size in self.defects.items() if key not in patch)
        rows = ROWS.copy()
        rows[:, SHIFTED] += np.float32(shift)
        return RunOutputs(label="candle", last=rows[0], rows=rows, greedy=list(REF.greedy))

    def run_patched(self, patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        self.calls.append(dict(patch))
        out = self.run(patch)
        return out, (None if out.failure else compare_run(REF, out, self.tolerance))

    def subject(self, **kw: Any) -> Subject:
        if self.as_read_failure is not None:
            return Subject(
                as_read=RunOutputs(label="candle", failure=self.as_read_failure),
                as_read_cmp=None,
                run_patched=self.run_patched,
                **kw,
            )
        out = self.run({})
        return Subject(
            as_read=out, as_read_cmp=compare_run(REF, out, self.tolerance), run_patched=self.run_patched, **kw
        )


def numeric(code: str, patch: dict[str, Any] | None = None, *, fix: dict[str, Any] | None = None) -> Finding:
    return Finding(
        code=code,
        name=f"rule-{code}",
        message=f"{code} message",
        filename="config.json",
        severity="error",
        fix=Fix(message="fix it", edits=fix) if fix else None,
        probe=declared_probe("numeric", f"{code}-probe", patch=patch, fix_edits=fix),
    )


def crash(code: str, expect: str | None) -> Finding:
    return Finding(
        code=code,
        name=f"rule-{code}",
        message=f"{code} message",
        filename="config.json",
        severity="error",
        # as its rule declares it: whether the failure it predicts comes at load
        probe=declared_probe(
            "crash", f"{code}-probe", expect=expect, at_load=code in RULES and RULES[code].effect == "load-error"
        ),
    )


def static(code: str) -> Finding:
    """As its rule makes it: the probe carries the rule's reason for not probing."""
    reason = RULES[code].not_probed if code in RULES else None
    return Finding(
        code=code,
        name=f"rule-{code}",
        message="m",
        filename="config.json",
        severity="info",
        probe=declared_probe("static-only", code, reason=reason),
    )


# --------------------------------------------------------------------------- the probe a finding carries


def test_a_numeric_probe_runs_its_patch_else_the_fix_and_a_crash_probe_is_repaired_by_the_same() -> None:
    assert candle_patch(numeric("PK101", {"rope_theta": 1.0}, fix={"rope_theta": 2.0})) == {"rope_theta": 1.0}
    assert candle_patch(numeric("PK101", fix={"rope_theta": 2.0})) == {"rope_theta": 2.0}
    assert candle_patch(numeric("PK105")) is None
    with_fix = Finding(
        code="PK103",
        name="n",
        message="m",
        filename="config.json",
        severity="error",
        fix=Fix(message="x", edits={"rope_scaling": {}}),
        probe=declared_probe("crash", "p", expect="missing field", fix_edits={"rope_scaling": {"rope_type": "llama3"}}),
    )
    assert candle_patch(with_fix) is None  # a crash probe runs no counterfactual
    assert with_fix.probe is not None and with_fix.probe.repair == {"rope_scaling": {"rope_type": "llama3"}}
    assert probe(static("PK111")).kind == "static-only" and probe(static("PK111")).reason
    # the patch handed out is a copy: confirm may not change the finding's own
    f = numeric("PK101", {"rope_theta": 1.0})
    candle_patch(f)["rope_theta"] = 3.0  # type: ignore[index]
    assert f.probe is not None and f.probe.declared == {"rope_theta": 1.0} and f.probe.edit == {"rope_theta": 1.0}


def test_static_finding_is_not_probed_and_says_why() -> None:
    """Nothing ran: NOT-PROBED with the rule's own reason, never NOT-REPRODUCED (which says the
    check ran and showed nothing)."""
    from portkit.rules import RULES

    c = confirm_static(static("PK111"))
    assert c.verdict == "NOT-PROBED" and not c.confirmed
    assert c.probe_kind == "static-only"
    assert c.evidence == f"not probed: {RULES['PK111'].not_probed}"
    assert "stops" in c.evidence
    j = c.to_json()
    assert j["code"] == "PK111" and j["probe"] == "static-only" and j["verdict"] == "NOT-PROBED"
    assert set(j) == {"code", "name", "severity", "message", "filename", "probe", "verdict", "evidence", "details"}
    assert (j["name"], j["severity"], j["message"], j["filename"]) == ("rule-PK111", "info", "m", "config.json")


# --------------------------------------------------------------------------- numeric, with a patch


def test_fix_restores_candle_confirmed_with_both_numbers() -> None:
    w = World(defects={"rope_theta": 4.0})
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    assert c.verdict == "CONFIRMED" and c.confirmed
    assert c.evidence == "logits differ 4 (tol 1e-4); with rope_theta=100000 restored, 0"
    assert w.calls == [{"rope_theta": 100000.0}]
    d = c.details
    assert d["patch"] == {"rope_theta": 100000.0}
    assert d["as_read"]["ok"] is False and d["as_read"]["last_max_abs_diff"] == pytest.approx(4.0)
    assert d["as_read"]["steps_max_abs_diff"] == pytest.approx(4.0)
    assert d["as_read"]["argmax_agree"] == 3 and d["as_read"]["steps"] == 3
    assert d["as_read"]["greedy_first_divergence"] is None
    assert d["as_read"]["summary"] == "logits differ 4 (tol 1e-4)"
    assert d["fixed"]["ok"] is True and d["fixed"]["last_max_abs_diff"] == 0.0
    assert "with_other_fixes" not in d


def test_fix_does_not_help_is_not_reproduced() -> None:
    """The written value is not what makes candle differ: the patch changes nothing."""
    w = World(defects={"hidden_act": 3.0})
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    assert c.verdict == "NOT-REPRODUCED" and not c.confirmed
    assert c.evidence == (
        "candle differs (logits differ 3 (tol 1e-4)) but with rope_theta=100000 restored it still does "
        "(logits differ 3 (tol 1e-4)): this finding does not explain the difference"
    )
    assert c.details["fixed"]["ok"] is False


@pytest.mark.parametrize(
    "left,verdict",
    [
        (2.0, "CONFIRMED"),  # exactly half of 4: "at least halves the difference"
        (1.0, "CONFIRMED"),
        (2.001, "NOT-REPRODUCED"),  # just short of halving
        (3.9, "NOT-REPRODUCED"),
    ],
)
def test_a_fix_that_at_least_halves_the_difference_confirms(left: float, verdict: str) -> None:
    """4.0 in all: the finding's own share is 4 - left, the rest comes from something unreported."""
    assert IMPROVEMENT == 0.5
    w = World(defects={"rope_theta": 4.0 - left, "unreported": left})
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    assert c.verdict == verdict, c.evidence
    if verdict == "CONFIRMED":
        assert c.evidence.startswith("logits differ 4 (tol 1e-4); with rope_theta=100000 restored, logits differ ")
        assert c.evidence.endswith("(a difference remains that is not this finding's)")
        assert c.details["fixed"]["last_max_abs_diff"] == pytest.approx(left, abs=1e-5)
    else:
        assert c.evidence.endswith("this finding does not explain the difference")


def test_a_nan_difference_is_never_halved() -> None:
    """distance() reads NaN as infinite: a patched run that still gives NaN is no improvement."""
    w = World(defects={"rope_theta": 4.0})
    nan_rows = ROWS.copy()
    nan_rows[:, SHIFTED] = np.nan
    nan_out = RunOutputs(label="candle", last=nan_rows[0], rows=nan_rows, greedy=list(REF.greedy))

    def run_patched(patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        return nan_out, compare_run(REF, nan_out, F32)

    s = Subject(as_read=nan_out, as_read_cmp=compare_run(REF, nan_out, F32), run_patched=run_patched)
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), s, {})
    assert c.verdict == "NOT-REPRODUCED" and "NaN" in c.evidence
    assert c.evidence.endswith("this finding does not explain the difference")
    # positive control: a fix that turns NaN into numbers close by does halve it
    s.run_patched = w.run_patched
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), s, {})
    assert c.verdict == "CONFIRMED" and c.evidence.endswith("with rope_theta=100000 restored, 0")


def test_leave_one_out_counts_only_the_findings_own_effect() -> None:
    w = World(defects={"rope_theta": 4.0, "rope_scaling": 1.5})
    others = {"rope_scaling": {"rope_type": "llama3"}}
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), others)
    assert c.verdict == "CONFIRMED"
    assert w.calls == [others, {**others, "rope_theta": 100000.0}]
    assert c.evidence == (
        "with the other findings' fixes (rope_scaling={llama3 ...}): logits differ 4 (tol 1e-4); "
        "with rope_theta=100000 restored, 0"
    )
    assert c.details["with_other_fixes"]["last_max_abs_diff"] == pytest.approx(4.0)
    assert c.details["with_other_fixes"]["ok"] is False


def test_other_patches_on_the_same_key_are_not_applied_twice() -> None:
    w = World(defects={"rope_theta": 4.0})
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {"rope_theta": 5.0})
    assert c.verdict == "CONFIRMED"
    assert w.calls == [{"rope_theta": 100000.0}]  # no "with other fixes" run: the only other key is mine
    assert "with_other_fixes" not in c.details and not c.evidence.startswith("with the other")


def test_no_effect_of_its_own_once_the_other_fixes_apply() -> None:
    """The difference is all the other finding's: with its fix, candle already agrees."""
    w = World(defects={"rope_scaling": 2.5})
    c = confirm_numeric(
        numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {"rope_scaling": {"rope_type": "llama3"}}
    )
    assert c.verdict == "NOT-REPRODUCED"
    assert c.evidence == (
        "no effect of its own: with the other findings' fixes (rope_scaling={llama3 ...}): "
        "candle already agrees with transformers (logits differ 0 (tol 1e-4))"
    )
    assert w.calls == [{"rope_scaling": {"rope_type": "llama3"}}]  # the fix itself never ran
    assert c.details["with_other_fixes"]["ok"] is True and "fixed" not in c.details


def test_when_the_other_fixes_break_the_run_the_as_read_difference_is_used() -> None:
    boom = Failure(stage="config", kind="ConfigError", message="missing field `low_freq_factor`")
    w = World(defects={"rope_theta": 4.0}, breaks={"rope_scaling": boom})
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {"rope_scaling": {"type": "linear"}})
    # the leave-one-out baseline failed, so the fix is measured against the run as read, and
    # the fix run carries the breaking patch too
    assert w.calls[0] == {"rope_scaling": {"type": "linear"}}
    assert c.details["with_other_fixes"] is None
    assert c.verdict == "NOT-REACHED" and not c.confirmed
    assert c.evidence == (
        "not reached: logits differ 4 (tol 1e-4), but with rope_theta=100000 restored candle stops: missing field "
        "`low_freq_factor`"
    )
    assert c.details["fixed_failure"] == {
        "stage": "config",
        "kind": "ConfigError",
        "message": "missing field `low_freq_factor`",
        "location": None,
    }


def test_other_fixes_failing_then_the_fix_restoring_confirms_without_prefix() -> None:
    boom = Failure(stage="load", kind="CandleError", message="cannot find tensor x")
    w = World(defects={"rope_theta": 4.0}, breaks={"only_alone": boom})

    def run_patched(patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        # the others alone fail; the others with the fix run
        if patch == {"only_alone": 1}:
            w.calls.append(patch)
            return RunOutputs(label="x", failure=boom), None
        return w.run_patched({k: v for k, v in patch.items() if k != "only_alone"})

    s = w.subject()
    s.run_patched = run_patched
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), s, {"only_alone": 1})
    assert c.verdict == "CONFIRMED"
    assert c.evidence == "logits differ 4 (tol 1e-4); with rope_theta=100000 restored, 0"


def test_a_fix_whose_run_gives_no_numbers_is_not_reached() -> None:
    w = World(defects={"rope_theta": 4.0})
    s = w.subject()
    s.run_patched = lambda patch: (RunOutputs(label="x"), None)
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), s, {})
    assert c.verdict == "NOT-REACHED"
    assert (
        c.evidence
        == "not reached: logits differ 4 (tol 1e-4), but with rope_theta=100000 restored candle stops: no numbers"
    )
    assert c.details["fixed_failure"] is None


def test_as_read_failure_or_no_numbers_is_not_reached() -> None:
    """candle stopped before the check: NOT-REACHED says so, where NOT-REPRODUCED would read as
    "the finding is false"."""
    boom = Failure(stage="forward", kind="CandleError", message="narrow invalid args\nmore")
    w = World(defects={"rope_theta": 4.0}, as_read_failure=boom)
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    assert c.verdict == "NOT-REACHED" and not c.confirmed
    assert c.evidence == "not reached: candle stopped before any number (candle error at forward: narrow invalid args)"
    assert c.details == {"as_read": None, "failure": boom.to_json()}
    assert w.calls == []
    s = Subject(as_read=RunOutputs(label="candle"), as_read_cmp=None, run_patched=w.run_patched)
    c = confirm_numeric(numeric("PK101", {"rope_theta": 1.0}), s, {})
    assert c.verdict == "NOT-REACHED" and c.evidence == "not reached: candle stopped before any number (no numbers)"
    assert c.details == {"as_read": None, "failure": None}


def test_no_measurable_effect_when_candle_already_agrees() -> None:
    w = World(defects={"rope_theta": 5e-5})  # under f32's 1e-4
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {"rope_scaling": {}})
    assert c.verdict == "NOT-REPRODUCED"
    assert c.evidence.startswith("no measurable effect: candle agrees with transformers (logits differ 5")
    assert w.calls == []
    assert c.details["patch"] == {"rope_theta": 100000.0}


def test_subject_words_are_used_for_a_gguf() -> None:
    w = World(defects={"rope_freqs": 4.0})
    s = w.subject(what="the GGUF in candle", patch_word="")
    c = confirm_numeric(numeric("PK401", {"rope_freqs": True}), s, {})
    assert c.verdict == "CONFIRMED" and c.evidence == "logits differ 4 (tol 1e-4); with rope_freqs=true, 0"
    c = confirm_numeric(numeric("PK401", {"other": 1}), s, {})
    assert c.evidence.startswith("the GGUF in candle differs (")


def test_restored_in_half_precision_reports_the_headline() -> None:
    """bf16 has no logits tolerance: a restored run is described by its headline, not one number."""
    w = World(defects={"rope_theta": 4.0}, tolerance=BF16)
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    # bf16 judges by argmax only, so a shift that keeps every argmax is "no measurable effect"
    assert c.verdict == "NOT-REPRODUCED" and c.evidence.startswith("no measurable effect")
    w = World(defects={"rope_theta": 20.0}, tolerance=BF16)  # moves token 5 to the top at every step
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), w.subject(), {})
    assert c.verdict == "CONFIRMED"
    assert c.evidence.endswith("with rope_theta=100000 restored, logits differ 0 (max|ref| 9), argmax 3/3")


# --------------------------------------------------------------------------- numeric, no patch


def test_unfixable_difference_is_confirmed_alone() -> None:
    w = World(defects={"attention_bias": 2.0})
    c = confirm_numeric(numeric("PK105"), w.subject(), {})
    assert c.verdict == "CONFIRMED"
    assert c.evidence == "logits differ 2 (tol 1e-4); no config edit can fix this"
    assert w.calls == []


def test_unfixable_difference_is_measured_with_the_other_fixes() -> None:
    w = World(defects={"attention_bias": 2.0, "rope_theta": 4.0})
    c = confirm_numeric(numeric("PK105"), w.subject(unfixable="weights needed"), {"rope_theta": 100000.0})
    assert c.verdict == "CONFIRMED"
    assert c.evidence == "logits differ 2 (tol 1e-4) with the other findings' fixes applied; weights needed"
    assert w.calls == [{"rope_theta": 100000.0}]
    assert c.details["with_other_fixes"]["last_max_abs_diff"] == pytest.approx(2.0)


def test_unfixable_finding_with_no_effect_of_its_own() -> None:
    """A zero bias: all of candle's difference is the rope_theta finding's."""
    w = World(defects={"rope_theta": 4.0})
    c = confirm_numeric(numeric("PK105"), w.subject(), {"rope_theta": 100000.0})
    assert c.verdict == "NOT-REPRODUCED"
    assert c.evidence == (
        "no effect of its own: with the other findings' fixes (rope_theta=100000) "
        "candle agrees with transformers (logits differ 0 (tol 1e-4))"
    )


def test_unfixable_finding_when_the_other_fixes_break_the_run() -> None:
    boom = Failure(stage="load", kind="CandleError", message="boom")
    w = World(defects={"attention_bias": 2.0, "rope_theta": 4.0}, breaks={"rope_theta": boom})
    c = confirm_numeric(numeric("PK105"), w.subject(), {"rope_theta": 100000.0})
    assert c.verdict == "CONFIRMED"
    assert c.evidence == "logits differ 6 (tol 1e-4); no config edit can fix this"
    assert c.details["with_other_fixes"] is None


# --------------------------------------------------------------------------- crash


PANIC = Failure(
    stage="load",
    kind="CandlePanic",
    message="panicked at candle-transformers-0.11.0/src/models/llama.rs:524:9: shape mismatch for "
    "model.layers.0.self_attn.q_proj.weight",
)
LM_HEAD = Failure(stage="load", kind="CandleError", message="cannot find tensor lm_head.weight")


def crash_subject(f: Failure | None) -> Subject:
    out = RunOutputs(label="candle", failure=f) if f else World().run({})
    return Subject(as_read=out, as_read_cmp=None, run_patched=World().run_patched)


def test_crash_confirmed_quotes_candles_own_text() -> None:
    c = confirm_crash(crash("PK104", "SHAPE MISMATCH for model.layers.0"), crash_subject(PANIC), "the prompt")
    assert c.verdict == "CRASH-CONFIRMED" and c.confirmed  # matched case-insensitively
    assert (
        c.evidence
        == "candle panicked at load: candle-transformers-0.11.0/src/models/llama.rs:524:9: shape mismatch for "
        "model.layers.0.self_attn.q_proj.weight"
    )
    assert c.details["expect"] == "SHAPE MISMATCH for model.layers.0"
    assert c.details["failure"]["location"] == "candle-transformers-0.11.0/src/models/llama.rs:524"


def test_crash_not_reproduced_when_candle_runs() -> None:
    c = confirm_crash(crash("PK306", "narrow invalid args"), crash_subject(None), "the prompt and 8 tokens")
    assert c.verdict == "NOT-REPRODUCED"
    assert c.evidence == "candle loaded and ran the prompt and 8 tokens without an error"
    assert c.details == {"expect": "narrow invalid args", "failure": None}


def test_crash_that_failed_differently_is_not_confirmed() -> None:
    """The planted bug: a PK206 predicting one text must not be confirmed by another failure.
    candle stopped where no finding predicts, so PK206's check never ran: NOT-REACHED."""
    c = confirm_crash(crash("PK206", "unexpected tensor model.extra"), crash_subject(LM_HEAD), "the prompt")
    assert c.verdict == "NOT-REACHED" and not c.confirmed
    assert (
        c.evidence
        == "not reached: candle stopped at a failure no finding predicts: candle error at load: cannot find tensor "
        "lm_head.weight"
    )
    assert c.details["failure"]["message"] == "cannot find tensor lm_head.weight"


def test_a_load_error_candle_got_past_is_not_reproduced() -> None:
    """A finding that predicts a failure at load, on a run that failed later (at forward) with
    another text: candle loaded, so the predicted failure did not happen."""
    late = Failure(stage="forward", kind="CandleError", message="narrow invalid args")
    c = confirm_crash(crash("PK201", "cannot find tensor model.norm.weight"), crash_subject(late), "the prompt")
    assert c.verdict == "NOT-REPRODUCED"
    assert c.evidence == (
        "candle loaded without the predicted error (expected `cannot find tensor model.norm.weight`); "
        "it failed later: candle error at forward: narrow invalid args"
    )


def test_crash_that_stopped_earlier_names_the_finding_that_predicted_it() -> None:
    """head-dim-mismatch with untied embeddings: candle panics on q_proj's shape (PK104) before
    it ever looks for lm_head (PK205)."""
    pk104 = crash("PK104", "shape mismatch for model.layers.0.self_attn.q_proj.weight")
    pk205 = crash("PK205", "cannot find tensor lm_head.weight")
    pk111 = static("PK111")
    findings = [pk205, pk111, pk104]
    c = confirm_crash(pk205, crash_subject(PANIC), "the prompt", findings)
    assert c.verdict == "NOT-REACHED" and not c.confirmed
    assert c.evidence == "not reached: candle stopped earlier, at the failure PK104 predicts"
    assert confirm_crash(pk104, crash_subject(PANIC), "the prompt", findings).verdict == "CRASH-CONFIRMED"


def test_siblings_that_cannot_explain_the_failure_are_not_blamed() -> None:
    me = crash("PK205", "cannot find tensor lm_head.weight")
    no_text = crash("PK999", None)  # a crash sibling that predicts nothing explains nothing
    empty = crash("PK998", "")
    numeric_sibling = Finding(
        code="PK101",
        name="n",
        message="m",
        filename="config.json",
        severity="error",
        probe=declared_probe("numeric", "p", patch={"rope_theta": 1.0}, expect="shape mismatch"),
    )
    other_text = crash("PK204", "cannot find tensor model.layers.1")
    c = confirm_crash(me, crash_subject(PANIC), "the prompt", [me, no_text, empty, numeric_sibling, other_text])
    # the siblings without a text are confirmed by any failure, but predict none: the stop is
    # one no finding predicts, and PK205's check never ran
    assert c.verdict == "NOT-REACHED", c.evidence
    assert c.evidence.startswith(
        "not reached: candle stopped at a failure no finding predicts: candle panicked at load"
    ), c.evidence
    assert confirm_crash(no_text, crash_subject(PANIC), "the prompt", [me, no_text]).verdict == "CRASH-CONFIRMED"


def test_crash_without_a_predicted_text_is_confirmed_by_any_failure() -> None:
    c = confirm_crash(crash("PK301", None), crash_subject(LM_HEAD), "the prompt")
    assert c.verdict == "CRASH-CONFIRMED" and c.evidence == "candle error at load: cannot find tensor lm_head.weight"


def test_config_refusal_is_quoted_as_such() -> None:
    refused = Failure(stage="config", kind="ConfigError", message="missing field `low_freq_factor` at line 3 column 1")
    c = confirm_crash(crash("PK103", "missing field `low_freq_factor`"), crash_subject(refused), "x")
    assert c.verdict == "CRASH-CONFIRMED"
    assert c.evidence == "candle refused config.json: missing field `low_freq_factor` at line 3 column 1"


# --------------------------------------------------------------------------- confirm_all


def test_other_patches_merges_only_the_other_numeric_patches() -> None:
    me = numeric("PK101", {"rope_theta": 1.0})
    scaling = numeric("PK102", fix={"rope_scaling": {"rope_type": "llama3"}})
    bias = numeric("PK105")
    crash_with_fix = Finding(
        code="PK103",
        name="n",
        message="m",
        filename="config.json",
        severity="error",
        fix=Fix(message="x", edits={"crash_key": 1}),
        probe=declared_probe("crash", "p", patch={"crash_key": 2}, fix_edits={"crash_key": 1}, expect="x"),
    )
    s = crash_subject(None)
    assert other_patches([me, scaling, bias, crash_with_fix, static("PK111")], me, s) == {
        "rope_scaling": {"rope_type": "llama3"}
    }
    assert other_patches([me], me, s) == {}


def test_confirm_all_gives_each_kind_its_own_verdict_in_order() -> None:
    w = World(defects={"rope_theta": 4.0, "attention_bias": 2.0})
    findings = [
        numeric("PK101", {"rope_theta": 100000.0}),
        numeric("PK105"),
        crash("PK306", "narrow invalid args"),
        static("PK111"),
    ]
    out = confirm_all(findings, w.subject(), "the prompt and 4 tokens")
    assert [c.code for c in out] == ["PK101", "PK105", "PK306", "PK111"]
    assert [c.verdict for c in out] == ["CONFIRMED", "CONFIRMED", "NOT-REPRODUCED", "NOT-PROBED"]
    # PK101 measured with PK105's (empty) patch: nothing else to apply, so 6 = 4 + 2 as read
    assert (
        out[0].evidence
        == "logits differ 6 (tol 1e-4); with rope_theta=100000 restored, logits differ 2 (tol 1e-4) (a difference "
        "remains that is not this finding's)"
    )
    # PK105 measured with PK101's fix applied: only its own 2 is left
    assert (
        out[1].evidence
        == "logits differ 2 (tol 1e-4) with the other findings' fixes applied; no config edit can fix this"
    )
    assert out[2].evidence == "candle loaded and ran the prompt and 4 tokens without an error"
    assert out[3].probe_kind == "static-only"


# --------------------------------------------------------------------------- details and partial runs


def test_details_of_a_comparison_with_parts_missing() -> None:
    from portkit.verify.judge.comparison import Comparison
    from portkit.verify.judge.confirm import comparison_summary

    assert comparison_summary(None) is None
    empty = comparison_summary(Comparison(tolerance=F32))
    assert empty == {
        "ok": False,
        "summary": "",
        "last_max_abs_diff": None,
        "steps_max_abs_diff": None,
        "argmax_agree": None,
        "steps": None,
        "greedy_first_divergence": None,
    }
    forked = RunOutputs(label="candle", last=ROWS[0], rows=ROWS, greedy=[0, 2, 2])
    j = comparison_summary(compare_run(REF, forked, F32))
    assert j is not None and j["greedy_first_divergence"] == 1 and j["steps"] == 3 and j["argmax_agree"] == 3


def partial(world: World, fail_on: str) -> Any:
    """run_patched whose run with `fail_on` in the patch has numbers *and* a failure (candle
    failed after the forward, at generate): such a run is no baseline."""
    late = Failure(stage="generate", kind="CandleError", message="late")

    def run_patched(patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        out, cmp = world.run_patched(patch)
        if fail_on in patch and not all(k in patch for k in ("rope_theta", fail_on)):
            out.failure = late
        return out, cmp

    return run_patched


def test_a_baseline_run_that_failed_late_is_not_used() -> None:
    w = World(defects={"rope_theta": 4.0})
    s = w.subject()
    s.run_patched = partial(w, "other")
    c = confirm_numeric(numeric("PK101", {"rope_theta": 100000.0}), s, {"other": 1})
    # the failed baseline is ignored: measured against the run as read, without the prefix
    assert c.verdict == "CONFIRMED" and c.evidence == "logits differ 4 (tol 1e-4); with rope_theta=100000 restored, 0"


def test_an_unfixable_baseline_run_that_failed_late_is_not_used() -> None:
    w = World(defects={"attention_bias": 2.0})
    s = w.subject()
    s.run_patched = partial(w, "other")
    c = confirm_numeric(numeric("PK105"), s, {"other": 1})
    assert c.verdict == "CONFIRMED" and c.evidence == "logits differ 2 (tol 1e-4); no config edit can fix this"


def test_verdict_details_are_kept_on_every_path() -> None:
    w = World(defects={"rope_theta": 4.0})
    c = confirm_numeric(numeric("PK105"), w.subject(), {"rope_theta": 100000.0})
    assert c.evidence.startswith("no effect of its own") and c.probe_kind == "numeric"
    assert c.details["with_other_fixes"]["ok"] is True and c.details["as_read"]["ok"] is False
    pk104 = crash("PK104", "shape mismatch")
    c = confirm_crash(crash("PK306", "narrow invalid args"), crash_subject(PANIC), "x", [pk104])
    assert c.evidence.startswith("not reached") and c.probe_kind == "crash"
    assert c.details == {"expect": "narrow invalid args", "failure": PANIC.to_json()}


def test_confirm_all_tells_each_crash_finding_about_its_siblings() -> None:
    findings = [crash("PK104", "shape mismatch for model.layers.0"), crash("PK306", "narrow invalid args")]
    out = confirm_all(findings, crash_subject(PANIC), "the prompt")
    assert [c.verdict for c in out] == ["CRASH-CONFIRMED", "NOT-REACHED"]
    assert out[1].evidence == "not reached: candle stopped earlier, at the failure PK104 predicts"
