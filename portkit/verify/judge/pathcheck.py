"""A run beyond the prompt (a second turn, a batch) judged, and the verdict on each finding
whose probe needs it (`Rule.probe_run`).

Each path run has three sets of rows over the same positions: candle's on the path, candle's
own on a control path that avoids it (the same positions fed one token at a time; each row
alone), and transformers'. Against transformers is the verdict of the run (`ok`, the exit
code); against the control is the attribution: a numeric finding is CONFIRMED when the path
differs from candle's own control, so an error the prompt's run has already is not counted again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from portkit.findings import ExpectedCrash, Finding
from portkit.verify.judge.checks import ShapeMismatch, Tolerance, compare_logits, compare_steps
from portkit.verify.judge.comparison import Comparison
from portkit.verify.judge.confirm import confirm_static, probe
from portkit.verify.judge.verdicts import Confirmation, fails_as_predicted, identity

if TYPE_CHECKING:  # the sides' records, read here; their code is never imported
    from portkit.verify.candle.run import Failure, RunOutputs

#: The failure stage of the path itself (another stage: candle stopped before the path ran).
PATH_STAGES = ("continuation", "batch", "padded-batch")


@dataclass
class PathRun:
    """What one path run computed: candle's rows on it (or its failure), its control, the reference."""

    name: str  # "turns" | "batch" | "padded-batch" (a rule's `probe_run`)
    description: str  # "a second turn of 8 tokens at offset 24 (...)"
    control_word: str  # how the control is named: "the same positions fed one token at a time"
    run: RunOutputs
    control: np.ndarray | None = None
    reference: np.ndarray | None = None
    control_failure: Failure | None = None  # candle failed on the control (the path still ran)

    @property
    def reached(self) -> bool:
        """The path itself ran (it may have failed there)."""
        f = self.run.failure
        return f is None or f.stage in PATH_STAGES


def compare_rows(ref: np.ndarray, got: np.ndarray, tol: Tolerance) -> Comparison:
    """Rows over the same positions, judged as verify's teacher-forced steps: max|diff| over all
    of them against the tolerance (f32), argmax with the reference's top-2 margins at every row."""
    cmp = Comparison(tolerance=tol)
    try:
        cmp.last = compare_logits(ref.reshape(-1), got.reshape(-1), tol.logits_atol)
        cmp.steps = compare_steps(ref, got, near_tie=tol.near_tie, atol=tol.logits_atol)
    except ShapeMismatch as e:
        cmp.problem = str(e)
    return cmp


@dataclass
class PathCheck:
    """One path run judged with the subject's tolerance."""

    path: PathRun
    tolerance: Tolerance
    vs_reference: Comparison | None = None
    vs_control: Comparison | None = None
    control_vs_reference: Comparison | None = None

    @classmethod
    def judge(cls, path: PathRun, tol: Tolerance) -> PathCheck:
        c = cls(path=path, tolerance=tol)
        got = path.run.rows
        if got is not None and path.run.failure is None:
            if path.reference is not None:
                c.vs_reference = compare_rows(path.reference, got, tol)
            if path.control is not None:
                c.vs_control = compare_rows(path.control, got, tol)
        if path.control is not None and path.reference is not None:
            c.control_vs_reference = compare_rows(path.reference, path.control, tol)
        return c

    @property
    def ok(self) -> bool:
        return self.path.run.failure is None and self.vs_reference is not None and self.vs_reference.ok

    def headline(self) -> str:
        f = self.path.run.failure
        if f is not None:
            return f.line() if self.path.reached else f"not reached: {f.line()}"
        bits = []
        if self.vs_reference is not None:
            bits.append(f"vs transformers: {self.vs_reference.headline()}")
        if self.vs_control is not None:
            bits.append(f"vs {self.path.control_word}: {self.vs_control.headline()}")
        return "; ".join(bits) or "no numbers"

    def to_json(self) -> dict[str, Any]:
        from portkit.verify.judge.confirm import comparison_summary

        return {
            "path": self.path.name,
            "description": self.path.description,
            "control": self.path.control_word,
            "control_failure": self.path.control_failure.to_json() if self.path.control_failure else None,
            "run": {
                "status": "ok" if self.path.run.failure is None else "failed",
                "failure": self.path.run.failure.to_json() if self.path.run.failure else None,
                "seconds": round(self.path.run.seconds, 4),
            },
            "vs_reference": comparison_summary(self.vs_reference),
            "vs_control": comparison_summary(self.vs_control),
            "control_vs_reference": comparison_summary(self.control_vs_reference),
            "ok": self.ok,
        }


@dataclass
class PathSection:
    """The path runs of one subject (candle on the checkpoint, or the GGUF) and their findings."""

    subject: str  # "candle" | "the GGUF in candle"
    tolerance: Tolerance
    checks: list[PathCheck] = field(default_factory=list)
    findings: list[Confirmation] = field(default_factory=list)
    #: why a path was not run at all (its name -> the reason)
    not_run: dict[str, str] = field(default_factory=dict)

    def check(self, name: str) -> PathCheck | None:
        return next((c for c in self.checks if c.path.name == name), None)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "tolerance": self.tolerance.name,
            "checks": [c.to_json() for c in self.checks],
            "not_run": self.not_run,
            "findings": [f.to_json() for f in self.findings],
            "ok": self.ok,
        }


def confirm(finding: Finding, section: PathSection) -> Confirmation:
    """The verdict on `finding`, on the path its probe needs."""
    p = probe(finding)
    kind, run_name = p.kind, p.run
    expect = p.expect if isinstance(p, ExpectedCrash) else None
    base = identity(finding, kind)
    check = section.check(run_name)
    what = section.subject
    if check is None:
        why = section.not_run.get(run_name, "verify did not run it")
        return Confirmation(**base, verdict="NOT-REACHED", evidence=f"not reached: {why}", details={"path": run_name})
    f = check.path.run.failure
    details: dict[str, Any] = {"path": run_name, "expect": expect, "failure": f.to_json() if f else None}
    if f is not None and not check.path.reached:
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {what} stopped before {check.path.description}: {f.line()}",
            details=details,
        )
    if kind == "crash":
        if f is None:
            return Confirmation(
                **base,
                verdict="NOT-REPRODUCED",
                evidence=f"{what} ran {check.path.description} without an error",
                details=details,
            )
        if not fails_as_predicted(expect, f.message):
            return Confirmation(
                **base,
                verdict="NOT-REPRODUCED",
                evidence=f"{what} failed on {check.path.description}, but not as predicted (expected `{expect}`): "
                f"{f.line()}",
                details=details,
            )
        return Confirmation(
            **base, verdict="CRASH-CONFIRMED", evidence=f"{f.line()}, on {check.path.description}", details=details
        )
    if kind != "numeric":
        return confirm_static(finding)  # nothing ran for it: NOT-PROBED, never NOT-REPRODUCED
    if f is not None:
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {what} stopped on {check.path.description} ({f.line()})",
            details=details,
        )
    details["check"] = check.to_json()
    vc, vr = check.vs_control, check.vs_reference
    if vc is None:
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: no control rows for {check.path.description}",
            details=details,
        )
    ref_part = f"; vs transformers: {vr.headline()}" if vr is not None else ""
    if not vc.ok:
        return Confirmation(
            **base,
            verdict="CONFIRMED",
            evidence=f"{check.path.description}: {vc.headline()} from {check.path.control_word}{ref_part}",
            details=details,
        )
    return Confirmation(
        **base,
        verdict="NOT-REPRODUCED",
        evidence=f"no effect: {check.path.description} agrees with {check.path.control_word} ({vc.headline()})",
        details=details,
    )


def confirm_on_paths(findings: Sequence[Finding], section: PathSection) -> list[Confirmation]:
    """Each finding's verdict, on the path its probe needs."""
    return [confirm(f, section) for f in findings]
