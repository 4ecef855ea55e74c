"""Chained crash probes: each crash finding is probed on the file with every earlier one repaired
(its fix applied), so a config missing three required keys gives three CRASH-CONFIRMED, each
with candle's own message, and NOT-REACHED is left for a stop no finding predicts (or one no
edit repairs). The numeric probes then run on the repaired file. candle is a function of the
patch the test controls: a required key missing is serde's refusal, one at a time."""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.findings import ExpectedCrash, Finding, Fix, declared_probe
from portkit.verify.candle.run import Failure, RunOutputs
from portkit.verify.judge.checks import TOLERANCES
from portkit.verify.judge.comparison import compare_run
from portkit.verify.judge.confirm import Subject, confirm_section
from portkit.verify.judge.explain import explain
from portkit.verify.reference.result import Reference

F32 = TOLERANCES["f32"]
ROWS = np.array([[9.0, 1.0, 0.5, -2.0], [0.0, 8.0, 1.0, 2.0]], dtype=np.float32)
REF = Reference(prompt=[1, 2, 3], greedy=[0, 1], rows=ROWS)
REQUIRED = ("rope_theta", "rope_local_base_freq", "sliding_window_pattern")


def missing(key: str) -> Failure:
    return Failure(stage="config", kind="ConfigError", message=f"missing field `{key}` at line 49 column 1")


class Candle:
    """candle on config.json as written (none of REQUIRED) plus `patch`: serde names the first
    missing key; with all of them it runs, `shift` off on one logit unless `theta_fix` is in it."""

    def __init__(self, shift: float = 0.0, stop_after: Failure | None = None) -> None:
        self.shift, self.stop_after, self.calls = shift, stop_after, []

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        self.calls.append(dict(patch))
        for key in REQUIRED:
            if key not in patch:
                return RunOutputs(label="candle", failure=missing(key)), None
        if self.stop_after is not None:
            return RunOutputs(label="candle", failure=self.stop_after), None
        rows = ROWS.copy()
        if "theta_fix" not in patch:
            rows[:, 3] += np.float32(self.shift)
        out = RunOutputs(label="candle", rows=rows, last=rows[0], greedy=[0, 1])
        return out, compare_run(REF, out, F32)

    def subject(self) -> Subject:
        run, cmp = self({})
        return Subject(as_read=run, as_read_cmp=cmp, run_patched=self)


def pk110(key: str, value: Any) -> Finding:
    return Finding(
        code="PK110",
        name="missing-required-key",
        message=f"no {key}",
        filename="config.json",
        severity="error",
        fix=Fix(message="write it", edits={key: value}),
        probe=declared_probe("crash", "PK110", expect=f"missing field `{key}`", fix_edits={key: value}),
    )


THREE = [pk110("rope_theta", 1e6), pk110("rope_local_base_freq", 5e4), pk110("sliding_window_pattern", 6)]


def test_three_missing_keys_are_three_crash_confirmed_each_with_candles_own_message() -> None:
    candle = Candle()
    out, numeric_subject = confirm_section(THREE, candle.subject(), "the prompt")
    assert [c.verdict for c in out] == ["CRASH-CONFIRMED"] * 3, [c.evidence for c in out]
    assert out[0].evidence == "candle refused config.json: missing field `rope_theta` at line 49 column 1"
    assert out[1].evidence == (
        "candle refused config.json: missing field `rope_local_base_freq` at line 49 column 1 "
        "(with rope_theta=1000000: the fixes of the crashes before it)"
    )
    assert out[2].evidence.startswith("candle refused config.json: missing field `sliding_window_pattern`")
    assert out[2].details["repairs"] == {"rope_theta": 1e6, "rope_local_base_freq": 5e4}
    # one run per repair, each with every earlier one
    assert candle.calls == [
        {},
        {"rope_theta": 1e6},
        {"rope_theta": 1e6, "rope_local_base_freq": 5e4},
        {"rope_theta": 1e6, "rope_local_base_freq": 5e4, "sliding_window_pattern": 6},
    ]
    # with all three fixed candle runs and agrees: the numeric probes would run there
    assert numeric_subject.repaired.startswith("with the crash findings fixed (rope_theta=1000000")
    assert numeric_subject.as_read.failure is None and numeric_subject.as_read_cmp.ok
    e = explain(None, candle.subject().as_read, out, THREE, numeric_subject)
    assert e is not None and e.explained and e.by == ["PK110"]
    assert e.summary.startswith(
        "explained by PK110 (3 crashes confirmed, each with candle's own message); with the crash findings fixed"
    )
    assert e.summary.endswith("candle agrees with transformers")


def test_the_numeric_probes_run_on_the_repaired_file() -> None:
    theta = Finding(
        code="PK101",
        name="rope-theta-in-rope-parameters",
        message="m",
        filename="config.json",
        severity="error",
        probe=declared_probe("numeric", "PK101", patch={"theta_fix": 1}),
    )
    candle = Candle(shift=4.0)
    out, s = confirm_section([*THREE, theta], candle.subject(), "the prompt")
    assert out[3].verdict == "CONFIRMED", out[3].evidence
    assert out[3].evidence.startswith(
        "with the crash findings fixed (rope_theta=1000000, rope_local_base_freq=50000, sliding_window_pattern=6): "
    )
    assert candle.calls[-1] == {
        "rope_theta": 1e6,
        "rope_local_base_freq": 5e4,
        "sliding_window_pattern": 6,
        "theta_fix": 1,
    }


def test_a_stop_no_finding_predicts_is_the_only_not_reached() -> None:
    odd = Failure(stage="load", kind="CandleError", message="cannot find tensor model.norm.weight")
    candle = Candle(stop_after=odd)
    late = Finding(
        code="PK306",
        name="sequence-beyond-max-positions",
        message="m",
        filename="config.json",
        severity="error",
        probe=ExpectedCrash(id="PK306", expect="narrow invalid args"),
    )
    out, s = confirm_section([*THREE, late], candle.subject(), "the prompt")
    assert [c.verdict for c in out] == ["CRASH-CONFIRMED"] * 3 + ["NOT-REACHED"]
    assert out[3].evidence.startswith(
        "not reached: candle stopped at a failure no finding predicts (with rope_theta=1000000"
    )
    assert out[3].evidence.endswith("candle error at load: cannot find tensor model.norm.weight")
    assert s.as_read.failure is not None and not s.repaired  # the numeric probes stay on the run as read


def test_a_crash_no_edit_repairs_stops_the_chain_there() -> None:
    no_fix = Finding(
        code="PK110",
        name="missing-required-key",
        message="m",
        filename="config.json",
        severity="error",
        probe=ExpectedCrash(id="PK110", expect="missing field `rope_theta`"),
    )
    out, _ = confirm_section([no_fix, THREE[1]], Candle().subject(), "the prompt")
    assert [c.verdict for c in out] == ["CRASH-CONFIRMED", "NOT-REACHED"]
    assert out[1].evidence == "not reached: candle stopped earlier, at the failure PK110 predicts"
