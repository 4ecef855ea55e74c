"""Turn each lint finding into evidence: run the probe the rule declares, and give a verdict.

- numeric, with a patch (the config edit `portkit fix` would make): candle on the config as
  written vs candle on the patched config, both against transformers. CONFIRMED when the
  written config differs and the patch brings candle closer (usually within tolerance).
- numeric, without a patch (biases, activation: no config edit can fix them): candle vs
  transformers alone, with every *other* finding's patch applied so that their effects are
  not counted here. CONFIRMED when candle still differs.
- crash: candle's own error or panic, reproduced, with the text the rule predicts:
  CRASH-CONFIRMED.
- anything that shows no measurable effect is NOT-REPRODUCED with the reason stated plainly.
- a static-only finding (nothing to run: stop ids, sampling settings, no candle module) is
  NOT-PROBED, with the rule's reason: the check did not run, so it is never NOT-REPRODUCED.
- a check that never ran because candle stopped earlier (an earlier failure, on the config as
  written or patched) is NOT-REACHED, with where candle stopped: it says nothing about the
  finding either way, unlike NOT-REPRODUCED.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from portkit.findings import Finding
from portkit.verify.runs import Comparison, Failure, RunOutputs, describe_patch, fmt_num

Verdict = Literal["CONFIRMED", "CRASH-CONFIRMED", "NOT-REPRODUCED", "NOT-REACHED", "NOT-PROBED"]
#: The verdicts that say nothing was shown (the rest confirm the finding).
UNCONFIRMED = ("NOT-REPRODUCED", "NOT-REACHED", "NOT-PROBED")
#: A patched run must at least halve the distance to count as "closer".
IMPROVEMENT = 0.5


@dataclass
class Confirmation:
    code: str
    name: str
    severity: str
    message: str
    filename: str
    probe_kind: str
    verdict: Verdict
    evidence: str  # one line, with the numbers or candle's text
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        return self.verdict not in UNCONFIRMED

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "filename": self.filename,
            "probe": self.probe_kind,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "details": self.details,
        }


def probe_of(finding: Finding) -> tuple[str, dict[str, Any] | None, str | None]:
    """(kind, patch, expect) of a lint finding; a numeric probe without a patch of its own
    runs the finding's fix."""
    probe = finding.probe
    if probe is None:
        return "static-only", None, None
    patch = probe.patch
    if patch is None and probe.kind == "numeric" and finding.fix is not None:
        patch = finding.fix.edits
    return probe.kind, (dict(patch) if patch else None), probe.expect


def _base(finding: Finding, kind: str) -> dict[str, Any]:
    return dict(
        code=finding.code,
        name=finding.name,
        severity=finding.severity,
        message=finding.message,
        filename=finding.filename,
        probe_kind=kind,
    )


def _cmp_json(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "ok": c.ok,
        "summary": c.headline(),
        "last_max_abs_diff": None if c.last is None else c.last.max_abs_diff,
        "steps_max_abs_diff": None if c.steps is None else c.steps.max_abs_diff,
        "argmax_agree": None if c.steps is None else c.steps.agree,
        "steps": None if c.steps is None else c.steps.steps,
        "greedy_first_divergence": None if c.greedy is None else c.greedy.first_divergence,
    }


def _restored(c: Comparison) -> str:
    """How close a patched run got: the last-position max|diff| in f32, else the headline."""
    if c.tolerance.logits_atol is not None and c.last is not None and c.ok:
        return fmt_num(c.last.max_abs_diff)
    return c.headline()


@dataclass
class Subject:
    """What the probes run against: the as-read run and a way to run a patched config."""

    as_read: RunOutputs
    as_read_cmp: Comparison | None
    run_patched: Callable[[dict[str, Any]], tuple[RunOutputs, Comparison | None]]
    what: str = "candle"  # "candle" | "the GGUF in candle"
    patch_word: str = "restored"
    unfixable: str = "no config edit can fix this"

    def patch_of(self, finding: Finding) -> dict[str, Any] | None:
        """The counterfactual lint declared for the finding (its probe's patch, else its fix)."""
        return probe_of(finding)[1]


def restores_prompt(before: Comparison, fixed: Comparison) -> bool:
    """The patched run agrees at the prompt's last position (judged, f32) where the run
    before the patch did not."""
    b, f = before.last, fixed.last
    return b is not None and f is not None and f.tolerance is not None and f.ok and not b.ok


def confirm_numeric(finding: Finding, subject: Subject, other_patches: dict[str, Any]) -> Confirmation:
    kind, _, _ = probe_of(finding)
    patch = subject.patch_of(finding)
    base = _base(finding, kind)
    run, cmp = subject.as_read, subject.as_read_cmp
    if run.failure is not None or cmp is None:
        why = run.failure.line() if run.failure else "no numbers"
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {subject.what} stopped before any number ({why})",
            details={"as_read": None, "failure": run.failure.to_json() if run.failure else None},
        )
    details: dict[str, Any] = {"as_read": _cmp_json(cmp), "patch": patch}
    if cmp.ok:
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"no measurable effect: {subject.what} agrees with transformers ({cmp.headline()})",
            details=details,
        )
    if patch:
        # Leave-one-out: every other finding's fix applied on both sides, so the difference
        # measured is this finding's alone.
        others = {k: v for k, v in other_patches.items() if k not in patch}
        before, prefix = cmp, ""
        if others:
            before_run, before_cmp = subject.run_patched(others)
            details["with_other_fixes"] = _cmp_json(before_cmp)
            if before_run.failure is None and before_cmp is not None:
                before, prefix = before_cmp, f"with the other findings' fixes ({describe_patch(others)}): "
                if before.ok:
                    return Confirmation(
                        **base,
                        verdict="NOT-REPRODUCED",
                        evidence=f"no effect of its own: {prefix}{subject.what} already agrees with transformers ({before.headline()})",
                        details=details,
                    )
        fixed_run, fixed = subject.run_patched({**others, **patch})
        details["fixed"] = _cmp_json(fixed)
        what_fixed = f"with {describe_patch(patch)}" + (f" {subject.patch_word}" if subject.patch_word else "")
        if fixed_run.failure is not None or fixed is None:
            details["fixed_failure"] = fixed_run.failure.to_json() if fixed_run.failure else None
            return Confirmation(
                **base,
                verdict="NOT-REACHED",
                evidence=f"not reached: {prefix}{before.headline()}, but {what_fixed} {subject.what} stops: "
                + (fixed_run.failure.head if fixed_run.failure else "no numbers"),
                details=details,
            )
        if fixed.ok:
            return Confirmation(**base, verdict="CONFIRMED", evidence=f"{prefix}{before.headline()}; {what_fixed}, {_restored(fixed)}", details=details)
        # `<` too: a NaN (infinite) distance that stays NaN is not halved
        if fixed.distance() <= IMPROVEMENT * before.distance() and fixed.distance() < before.distance():
            return Confirmation(
                **base,
                verdict="CONFIRMED",
                evidence=f"{prefix}{before.headline()}; {what_fixed}, {fixed.headline()} (something else still differs)",
                details=details,
            )
        if restores_prompt(before, fixed):
            # The patch makes the prompt's own forward agree: the finding is real there. What is
            # left differs only in the cached steps (a window candle drops in decode, for one).
            return Confirmation(
                **base,
                verdict="CONFIRMED",
                evidence=f"{prefix}{before.headline()}; {what_fixed}, the prompt's last position agrees "
                f"({fmt_num(fixed.last.max_abs_diff)}) but the generated steps still differ ({fixed.headline()})",
                details=details,
            )
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{prefix}{subject.what} differs ({before.headline()}) but {what_fixed} it still does ({fixed.headline()}): "
            "the difference comes from something else",
            details=details,
        )
    # No config edit fixes it: attribute only what is left once the other findings' fixes apply.
    if other_patches:
        res_run, res = subject.run_patched(other_patches)
        details["with_other_fixes"] = _cmp_json(res)
        if res_run.failure is None and res is not None:
            if res.ok:
                return Confirmation(
                    **base,
                    verdict="NOT-REPRODUCED",
                    evidence=f"no effect of its own: with the other findings' fixes ({describe_patch(other_patches)}) "
                    f"{subject.what} agrees with transformers ({res.headline()})",
                    details=details,
                )
            return Confirmation(
                **base,
                verdict="CONFIRMED",
                evidence=f"{res.headline()} with the other findings' fixes applied; {subject.unfixable}",
                details=details,
            )
    return Confirmation(**base, verdict="CONFIRMED", evidence=f"{cmp.headline()}; {subject.unfixable}", details=details)


def confirm_crash(finding: Finding, subject: Subject, ran: str, siblings: Sequence[Finding] = ()) -> Confirmation:
    """`ran`: what the as-read run did, for the not-reproduced line ("the prompt and 8 tokens");
    `siblings`: the other findings, to tell "failed differently" from "stopped before this"."""
    kind, _, expect = probe_of(finding)
    base = _base(finding, kind)
    f: Failure | None = subject.as_read.failure
    details: dict[str, Any] = {"expect": expect, "failure": f.to_json() if f else None}
    if f is None:
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{subject.what} loaded and ran {ran} without an error",
            details=details,
        )
    if expect and expect.lower() not in f.message.lower():
        earlier = next(
            (
                o
                for o in siblings
                if o is not finding and probe_of(o)[0] == "crash" and (probe_of(o)[2] or "").lower() in f.message.lower() and probe_of(o)[2]
            ),
            None,
        )
        if earlier is not None:
            return Confirmation(
                **base,
                verdict="NOT-REACHED",
                evidence=f"not reached: {subject.what} stopped earlier, at the failure {earlier.code} predicts",
                details=details,
            )
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{subject.what} failed, but not as predicted (expected `{expect}`): {f.line()}",
            details=details,
        )
    return Confirmation(**base, verdict="CRASH-CONFIRMED", evidence=f.line(), details=details)


def not_probed_reason(finding: Finding) -> str:
    """Why a static-only finding is not probed: its rule's `not_probed`."""
    from portkit.rules import RULES
    from portkit.rules.base import Rule

    rule = RULES.get(finding.code)
    return (rule or Rule).not_probed


def confirm_static(finding: Finding) -> Confirmation:
    kind, _, _ = probe_of(finding)
    return Confirmation(**_base(finding, kind), verdict="NOT-PROBED", evidence=f"not probed: {not_probed_reason(finding)}")


def other_patches(findings: Sequence[Finding], me: Finding, subject: Subject) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for f in findings:
        if f is me:
            continue
        kind = probe_of(f)[0]
        patch = subject.patch_of(f)
        if kind == "numeric" and patch:
            merged.update(patch)
    return merged


def confirm_all(findings: Sequence[Finding], subject: Subject, ran: str) -> list[Confirmation]:
    out = []
    for f in findings:
        kind, _, _ = probe_of(f)
        if kind == "numeric":
            out.append(confirm_numeric(f, subject, other_patches(findings, f, subject)))
        elif kind == "crash":
            out.append(confirm_crash(f, subject, ran, findings))
        else:
            out.append(confirm_static(f))
    return out


def both_alike(confirmed: list) -> str:
    """The verdict's tail for findings confirmed where both sides agree: they are reported, and
    they do not make a mismatch."""
    if not confirmed:
        return ""
    codes = ", ".join(dict.fromkeys(c.code for c in confirmed))
    return f"; {len(confirmed)} finding{'s' if len(confirmed) != 1 else ''} confirmed on both sides alike ({codes})"
