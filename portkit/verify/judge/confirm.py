"""Turn each lint finding into evidence: run the probe the rule declares, and give a verdict.

- numeric, with a patch (the config edit `portkit fix` would make): candle on the config as
  written vs candle on the patched config, both against transformers. CONFIRMED when the
  written config differs and the patch brings candle closer (usually within tolerance).
- numeric, with a reference-side counterfactual (`CandleEdit.as_candle`: a behaviour candle
  hard-codes, an activation, a rope base, a bias it never reads): candle against transformers
  as written and against transformers run as candle computes. CONFIRMED when candle agrees
  with the second where it does not agree with the first; both distances are reported, and the
  effect (as written vs as candle) against the noise (candle vs as candle).
- numeric, with neither: candle vs transformers alone, with every *other* finding's
  counterfactual applied so that their effects are not counted here. CONFIRMED when candle
  still differs.
- crash: candle's own error or panic, reproduced, with the text the rule predicts:
  CRASH-CONFIRMED. Chained: each crash finding is probed on the file with every earlier one
  repaired (its fix applied), so a config missing three keys gives three CRASH-CONFIRMED, each
  with candle's own message; the numeric probes then run on the repaired file.
- anything that shows no measurable effect is NOT-REPRODUCED with the reason stated plainly.
- a static-only finding (nothing to run: stop ids, sampling settings, no candle module) is
  NOT-PROBED, with the rule's reason: the check did not run, so it is never NOT-REPRODUCED.
- a check that never ran because candle stopped earlier (a failure no finding predicts, or one
  no edit repairs) is NOT-REACHED, with where candle stopped: it says nothing about the
  finding either way, unlike NOT-REPRODUCED.

Leave-one-out throughout: a finding's counterfactual is measured with every other finding's
applied on both sides, so the difference measured is its own; when the others' already explain
the whole difference, a reference-side finding is measured alone (two findings that name one
hard-coded behaviour, a bias PK105 and PK202 both report, are both confirmed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from portkit.families import CANDLE_PATCH_KEY, CANDLE_PROGRAMS
from portkit.findings import CandleEdit, ExpectedCrash, Finding, NotProbed, Probe
from portkit.rules.base import Rule
from portkit.semantics.gguf import PERMUTE_QK
from portkit.verify.errors import one_line
from portkit.verify.judge.comparison import Comparison, fmt_num
from portkit.verify.judge.verdicts import Confirmation, explains, halved, identity, predicts, restores_prompt

if TYPE_CHECKING:  # the sides' records, read here; their code is never imported
    from portkit.verify.candle.run import Failure, RunOutputs
    from portkit.verify.reference.result import Reference

#: A finding with no probe: nothing to run, for the rule's default reason.
_NO_PROBE = NotProbed(id="", reason=Rule.not_probed)


def probe(finding: Finding) -> Probe:
    """The finding's probe (a static one for a finding that carries none)."""
    return finding.probe if finding.probe is not None else _NO_PROBE


def candle_patch(finding: Finding) -> dict[str, Any] | None:
    """A numeric finding's candle-side counterfactual (its probe's patch, else its fix), a copy."""
    p = probe(finding)
    return json.loads(json.dumps(p.edit)) if isinstance(p, CandleEdit) and p.edit else None


def as_candle_of(finding: Finding) -> dict[str, Any] | None:
    """The finding's reference-side counterfactual (`CandleEdit.as_candle`), a copy."""
    p = probe(finding)
    edit = p.as_candle if isinstance(p, CandleEdit) else None
    return json.loads(json.dumps(edit)) if edit else None


def describe_patch(patch: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        if isinstance(v, dict):
            kind = v.get("rope_type") or v.get("type")
            return f"{{{kind} ...}}" if kind else json.dumps(v)
        return json.dumps(v)

    def one(k: str, v: Any) -> str:
        if k == PERMUTE_QK:
            return "the Q/K rows permuted as llama.cpp's converter does"
        if k == CANDLE_PATCH_KEY:
            return CANDLE_PROGRAMS.get(v, f"the candle program {v}")
        return f"{k}={fmt(v)}" if v is not None else f"{k} removed"

    return ", ".join(one(k, v) for k, v in patch.items())


def comparison_summary(c: Comparison | None) -> dict[str, Any] | None:
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
    if c.tolerance.by_floors and c.last is not None and c.ok:
        return fmt_num(c.last.max_abs_diff)
    return c.headline()


# --------------------------------------------------------------------------- counterfactuals


def merge_as_candle(edits: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several findings' reference-side edits as one (later keys win; the words joined)."""
    out: dict[str, Any] = {}
    whats: list[str] = []
    for e in edits:
        if not e:
            continue
        if e.get("what") and e["what"] not in whats:
            whats.append(e["what"])
        for part in ("config", "tensors"):
            if e.get(part):
                out.setdefault(part, {}).update(e[part])
        if e.get("rope_table"):
            out["rope_table"] = e["rope_table"]
    if out:
        out["what"] = " and ".join(whats) or "the findings' edits"
    return out


def without_overlap(edit: dict[str, Any], mine: dict[str, Any] | None) -> dict[str, Any]:
    """`edit` without the config keys and tensors `mine` edits too (applied once, as mine)."""
    if not edit or not mine:
        return dict(edit)
    out = {k: v for k, v in edit.items() if k not in ("config", "tensors", "rope_table")}
    for part in ("config", "tensors"):
        left = {k: v for k, v in (edit.get(part) or {}).items() if k not in (mine.get(part) or {})}
        if left:
            out[part] = left
    if edit.get("rope_table") and not mine.get("rope_table"):
        out["rope_table"] = edit["rope_table"]
    return out if ("config" in out or "tensors" in out or "rope_table" in out) else {}


def describe_as_candle(edit: dict[str, Any]) -> str:
    """ "transformers with SiLU in the MLP (hidden_activation="silu")"."""
    bits = [describe_patch(edit["config"])] if edit.get("config") else []
    names = list(edit.get("tensors") or {})
    if names:
        bits.append(f"{len(names)} tensor{'s' if len(names) != 1 else ''}")
    if edit.get("rope_table"):
        bits.append(f"positions, inv_freq and angles rounded to {edit['rope_table']}")
    how = f" ({'; '.join(bits)})" if bits else ""
    return f"transformers with {edit.get('what') or 'the edit'}{how}"


@dataclass
class Trial:
    """One counterfactual world: candle (with a patch) against a reference (with an edit)."""

    run: RunOutputs
    cmp: Comparison | None
    reference: Reference | None = None  # the reference it was judged against (None: as written)
    failure: str | None = None  # the reference side could not run (transformers refused the edit)


@dataclass
class Subject:
    """What the probes run against: the as-read run, a way to run a patched config, and (where
    verify has a reference to re-run) a way to run transformers as candle computes."""

    as_read: RunOutputs
    as_read_cmp: Comparison | None
    run_patched: Callable[[dict[str, Any]], tuple[RunOutputs, Comparison | None]]
    what: str = "candle"  # "candle" | "the GGUF in candle"
    patch_word: str = "restored"
    unfixable: str = "no config edit can fix this"
    #: transformers with a `CandleEdit.as_candle` edit (memoised by the caller); None: not available
    reference_as: Callable[[dict[str, Any]], Reference] | None = None
    #: candle's run judged against another reference (the as-candle one)
    compare: Callable[[Reference, RunOutputs], Comparison | None] | None = None
    reference: Reference | None = None  # the reference as written (the effect is measured from it)
    #: the crash findings' repairs every run here starts from (chained crash probes), in words
    repaired: str = ""

    def patch_of(self, finding: Finding) -> dict[str, Any] | None:
        """The counterfactual lint declared for the finding (its probe's patch, else its fix)."""
        return candle_patch(finding)

    def as_candle_of(self, finding: Finding) -> dict[str, Any] | None:
        """The finding's reference-side edit, where this subject can run one."""
        return as_candle_of(finding) if self.reference_as is not None else None

    def trial(self, patch: dict[str, Any], edit: dict[str, Any] | None = None) -> Trial:
        """candle with `patch` (as read when empty) against transformers with `edit` (as
        written when empty)."""
        run, cmp = self.run_patched(patch) if patch else (self.as_read, self.as_read_cmp)
        if not edit:
            return Trial(run, cmp)
        assert self.reference_as is not None and self.compare is not None
        try:
            ref = self.reference_as(edit)
        except Exception as e:  # noqa: BLE001 - transformers refused the edited model: one line
            return Trial(run, None, failure=one_line(e) or type(e).__name__)
        return Trial(run, self.compare(ref, run) if run.failure is None else None, ref)

    def with_repairs(self, repairs: dict[str, Any], run: RunOutputs, cmp: Comparison | None, words: str) -> Subject:
        """This subject on the file with the crash findings' repairs applied (`run` is its run)."""
        base = self.run_patched
        return replace(self, as_read=run, as_read_cmp=cmp, run_patched=lambda p: base({**repairs, **p}), repaired=words)


def _effect(a: Reference | None, b: Reference | None) -> float | None:
    """max|a - b| over the teacher-forced rows of two references (None: not both known)."""
    if a is None or b is None or a.rows.shape != b.rows.shape:
        return None
    return float(np.abs(a.rows.astype(np.float64) - b.rows).max())


# --------------------------------------------------------------------------- numeric


def confirm_numeric(
    finding: Finding, subject: Subject, other_patches: dict[str, Any], other_edits: dict[str, Any] | None = None
) -> Confirmation:
    """`other_patches` / `other_edits`: the other findings' candle-side patches and
    reference-side edits (leave-one-out)."""
    kind = probe(finding).kind
    patch = subject.patch_of(finding)
    edit = subject.as_candle_of(finding)
    base = identity(finding, kind)
    run, cmp = subject.as_read, subject.as_read_cmp
    lead = f"{subject.repaired}: " if subject.repaired else ""
    if run.failure is not None or cmp is None:
        why = run.failure.line() if run.failure else "no numbers"
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {subject.what} stopped before any number ({why})",
            details={"as_read": None, "failure": run.failure.to_json() if run.failure else None},
        )
    details: dict[str, Any] = {"as_read": comparison_summary(cmp), "patch": patch}
    if edit:
        details["as_candle"] = edit
    if cmp.ok and not by_distance(cmp, edit):
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{lead}no measurable effect: {subject.what} agrees with transformers ({cmp.headline()})",
            details=details,
        )
    others_edit = without_overlap(other_edits or {}, edit) if subject.reference_as is not None else {}
    if patch or edit:
        return _leave_one_out(
            finding, subject, patch or {}, edit or {}, other_patches, others_edit, base, details, lead
        )
    # No counterfactual on either side: attribute only what is left once the others apply.
    if other_patches or others_edit:
        t = subject.trial(other_patches, others_edit)
        details["with_other_fixes"] = comparison_summary(t.cmp)
        if t.run.failure is None and t.cmp is not None:
            if t.cmp.ok:
                return Confirmation(
                    **base,
                    verdict="NOT-REPRODUCED",
                    evidence=f"{lead}no effect of its own: with the other findings' fixes "
                    f"({_describe(other_patches, others_edit)}) "
                    f"{subject.what} agrees with transformers ({t.cmp.headline()})",
                    details=details,
                )
            return Confirmation(
                **base,
                verdict="CONFIRMED",
                evidence=f"{lead}{t.cmp.headline()} with the other findings' fixes applied; {subject.unfixable}",
                details=details,
            )
    return Confirmation(
        **base, verdict="CONFIRMED", evidence=f"{lead}{cmp.headline()}; {subject.unfixable}", details=details
    )


def by_distance(cmp: Comparison, edit: dict[str, Any] | None) -> bool:
    """A half-precision run (no logits bound: judged by its argmax) that agrees, for a finding
    with a reference-side counterfactual: the argmax does not decide it, the logits distance does
    (halved against transformers as candle computes, the effect over the dtype's noise). A tiny
    model's greedy tokens can agree for 32 steps while its logits move by 5 (PK317 on gemma2)."""
    return bool(edit) and not cmp.tolerance.by_floors and cmp.tolerance.name in ("f16", "bf16")


def _describe(patch: dict[str, Any], edit: dict[str, Any]) -> str:
    bits = [describe_patch(patch)] if patch else []
    if edit:
        bits.append(describe_as_candle(edit))
    return "; ".join(bits)


def _what_fixed(subject: Subject, patch: dict[str, Any], edit: dict[str, Any]) -> str:
    """ "with rope_theta=100000 restored" / "against transformers with SiLU in the MLP (...)"."""
    bits = []
    if patch:
        bits.append(f"with {describe_patch(patch)}" + (f" {subject.patch_word}" if subject.patch_word else ""))
    if edit:
        bits.append(f"against {describe_as_candle(edit)}, as candle computes")
    return " and ".join(bits)


def _leave_one_out(
    finding: Finding,
    subject: Subject,
    patch: dict[str, Any],
    edit: dict[str, Any],
    other_patches: dict[str, Any],
    other_edits: dict[str, Any],
    base: dict[str, Any],
    details: dict[str, Any],
    lead: str,
) -> Confirmation:
    cmp = subject.as_read_cmp
    assert cmp is not None
    # Leave-one-out: every other finding's counterfactual applied on both sides, so the
    # difference measured is this finding's alone.
    others = {k: v for k, v in other_patches.items() if k not in patch}
    before, before_ref, prefix = cmp, None, lead
    what_fixed = _what_fixed(subject, patch, edit)
    if others or other_edits:
        b = subject.trial(others, other_edits)
        details["with_other_fixes"] = comparison_summary(b.cmp)
        if b.run.failure is None and b.cmp is not None:
            before, before_ref = b.cmp, b.reference
            prefix = (
                f"{lead}with the other findings' {'fixes' if not other_edits else 'counterfactuals'} "
                f"({_describe(others, other_edits)}): "
            )
            if before.ok:
                if edit:  # the others explain it all: is this finding the same cause, alone?
                    alone = subject.trial(patch, edit)
                    details["alone"] = comparison_summary(alone.cmp)
                    if alone.cmp is not None and explains(cmp, alone.cmp):
                        return Confirmation(
                            **base,
                            verdict="CONFIRMED",
                            evidence=f"{lead}{subject.what} vs transformers: {cmp.headline()}; on its own, "
                            f"{what_fixed}, {_restored(alone.cmp)}: "
                            "the finding explains the difference, as the other findings' counterfactuals do (one "
                            "cause, named twice)",
                            details={**details, "reference_side": _sides(subject, cmp, alone)},
                        )
                return Confirmation(
                    **base,
                    verdict="NOT-REPRODUCED",
                    evidence=f"no effect of its own: {prefix}{subject.what} already agrees with transformers "
                    f"({before.headline()})",
                    details=details,
                )
    fixed = subject.trial({**others, **patch}, merge_as_candle([other_edits, edit]) if edit else other_edits)
    details["fixed"] = comparison_summary(fixed.cmp)
    if edit:
        details["reference_side"] = _sides(subject, before, fixed, before_ref)
    if fixed.failure is not None:
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {prefix}{before.headline()}, but transformers as candle computes does not run: "
            f"{fixed.failure}",
            details=details,
        )
    if fixed.run.failure is not None or fixed.cmp is None:
        details["fixed_failure"] = fixed.run.failure.to_json() if fixed.run.failure else None
        return Confirmation(
            **base,
            verdict="NOT-REACHED",
            evidence=f"not reached: {prefix}{before.headline()}, but {what_fixed} {subject.what} stops: "
            + (fixed.run.failure.head if fixed.run.failure else "no numbers"),
            details=details,
        )
    return _judged_fix(base, details, subject, prefix, before, fixed.cmp, what_fixed, bool(edit))


def _judged_fix(
    base: dict[str, Any],
    details: dict[str, Any],
    subject: Subject,
    prefix: str,
    before: Comparison,
    after: Comparison,
    what_fixed: str,
    edit: bool,
) -> Confirmation:
    """The verdict once the finding's counterfactual ran: `before` (the others' applied) against
    `after` (its own too)."""
    explained = ": the finding explains the difference" if edit else ""
    side = details.get("reference_side") or {}
    effect, noise = side.get("effect"), side.get("noise")
    if before.ok:  # agreed by argmax (`by_distance`): only the distance can confirm
        if halved(before.distance(), after.distance()) and effect is not None and noise is not None and effect > noise:
            return Confirmation(
                **base,
                verdict="CONFIRMED",
                evidence=f"{prefix}{before.headline()}, max|diff| {fmt_num(before.distance())}; {what_fixed}, "
                f"max|diff| {fmt_num(after.distance())} "
                f"(effect {fmt_num(effect)} over the {after.tolerance.name} noise {fmt_num(noise)}){explained}, though "
                "the argmax agrees",
                details=details,
            )
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{prefix}no measurable effect: {subject.what} agrees with transformers ({before.headline()}, "
            f"max|diff| {fmt_num(before.distance())}), "
            f"and {what_fixed} it is not twice as close (max|diff| {fmt_num(after.distance())})",
            details=details,
        )
    if after.ok:
        return Confirmation(
            **base,
            verdict="CONFIRMED",
            evidence=f"{prefix}{before.headline()}; {what_fixed}, {_restored(after)}{explained}",
            details=details,
        )
    if halved(before.distance(), after.distance()) and not (
        effect is not None and noise is not None and effect <= noise
    ):
        return Confirmation(
            **base,
            verdict="CONFIRMED",
            evidence=f"{prefix}{before.headline()}; {what_fixed}, {after.headline()} (a difference remains that is not "
            "this finding's)",
            details=details,
        )
    if restores_prompt(before, after):
        # The patch makes the prompt's own forward agree: the finding is real there. What is
        # left differs only in the cached steps (a window candle drops in decode, for one).
        assert after.last is not None
        return Confirmation(
            **base,
            verdict="CONFIRMED",
            evidence=f"{prefix}{before.headline()}; {what_fixed}, the prompt's last position agrees "
            f"({fmt_num(after.last.max_abs_diff)}) but the generated steps still differ ({after.headline()})",
            details=details,
        )
    if effect is not None and noise is not None and effect <= noise:
        side["under_noise"] = True
        return Confirmation(
            **base,
            verdict="NOT-REPRODUCED",
            evidence=f"{prefix}{subject.what} differs ({before.headline()}); transformers as written and as candle "
            "computes differ "
            f"{fmt_num(effect)}, within the {after.tolerance.name} noise {fmt_num(noise)} ({subject.what} against "
            "transformers as candle computes): the divergence is not this finding's at this length",
            details=details,
        )
    return Confirmation(
        **base,
        verdict="NOT-REPRODUCED",
        evidence=f"{prefix}{subject.what} differs ({before.headline()}) but {what_fixed} it still does "
        f"({after.headline()}): this finding does not explain the difference",
        details=details,
    )


def _sides(subject: Subject, before: Comparison, fixed: Trial, before_ref: Reference | None = None) -> dict[str, Any]:
    """The reference-side numbers: both distances, the effect (transformers as written vs as
    candle computes) and the noise (candle vs as candle computes)."""
    noise = fixed.cmp.distance() if fixed.cmp is not None else None
    return {
        "as_written": before.distance(),
        "as_candle": noise,
        "effect": _effect(before_ref or subject.reference, fixed.reference),
        "noise": noise,
        "tokens": None
        if fixed.reference is None
        else len(fixed.reference.prompt) + max(fixed.reference.rows.shape[0] - 1, 0),
    }


# --------------------------------------------------------------------------- crash, chained


def confirm_crash(finding: Finding, subject: Subject, ran: str, siblings: Sequence[Finding] = ()) -> Confirmation:
    """One crash finding on the run as read (no chaining): `ran` says what the as-read run did,
    for the not-reproduced line ("the prompt and 8 tokens"); `siblings`, the other findings,
    to tell "stopped at another finding's failure" from "stopped at one no finding predicts"."""
    crashes = [finding] + [s for s in siblings if s is not finding and probe(s).kind == "crash"]
    return crash_chain(crashes, subject, ran, chain=False)[0][id(finding)]


def expected(finding: Finding) -> ExpectedCrash:
    """A crash finding's probe."""
    p = probe(finding)
    assert isinstance(p, ExpectedCrash), f"{finding.code}: not a crash probe"
    return p


def _predicts(finding: Finding, f: Failure) -> bool:
    return predicts(expected(finding).expect, f.message)


def _unpredicted_stop(c: Finding, f: Failure, what: str, on: str) -> Confirmation:
    """candle stopped where no finding's text says: `c`'s check never ran, unless its failure
    comes at load and candle got past it."""
    kind, expect = probe(c).kind, expected(c).expect
    details = {"expect": expect, "failure": f.to_json()}
    if expected(c).at_load and f.stage not in ("config", "load"):
        return Confirmation(
            **identity(c, kind),
            verdict="NOT-REPRODUCED",
            evidence=f"{what} loaded without the predicted error (expected `{expect}`){on}; "
            f"it failed later: {f.line()}",
            details=details,
        )
    return Confirmation(
        **identity(c, kind),
        verdict="NOT-REACHED",
        evidence=f"not reached: {what} stopped at a failure no finding predicts{on}: {f.line()}",
        details=details,
    )


def crash_chain(
    crashes: Sequence[Finding], subject: Subject, ran: str, *, chain: bool = True
) -> tuple[dict[int, Confirmation], Subject | None]:
    """Every crash finding's verdict (by `id`), chained: candle stops at the failure a finding
    predicts (CRASH-CONFIRMED with its text), the finding's repair is applied and candle runs
    again, until it runs through, stops at a failure no finding predicts, or at one no edit
    repairs (the rest NOT-REACHED). Returns the verdicts and, when the repairs made candle run
    through, the subject on the repaired file (the numeric probes run there); else None."""
    out: dict[int, Confirmation] = {}
    pending = list(crashes)
    repairs: dict[str, Any] = {}
    repaired_by: list[str] = []
    run, cmp = subject.as_read, subject.as_read_cmp
    on = ""  # "on the config with ... (the fixes of PK110)": where this run stands
    while True:
        f = run.failure
        if not pending and (f is None or not chain):
            break  # every finding judged (and, chained, the repairs run through once more)
        if f is None:
            for c in pending:
                kind, expect = probe(c).kind, expected(c).expect
                out[id(c)] = Confirmation(
                    **identity(c, kind),
                    verdict="NOT-REPRODUCED",
                    evidence=f"{subject.what} loaded and ran {ran} without an error{on}",
                    details={"expect": expect, "failure": None, **({"repairs": dict(repairs)} if repairs else {})},
                )
            break
        matched = [c for c in pending if _predicts(c, f)]
        specific = bool(matched)
        if not matched:  # a finding that predicts no text is confirmed by any failure
            matched = [c for c in pending if not expected(c).expect]
        for c in matched:
            kind, expect = probe(c).kind, expected(c).expect
            details = {"expect": expect, "failure": f.to_json(), **({"repairs": dict(repairs)} if repairs else {})}
            out[id(c)] = Confirmation(
                **identity(c, kind), verdict="CRASH-CONFIRMED", evidence=f.line() + on, details=details
            )
        pending = [c for c in pending if id(c) not in out]
        if not specific:
            out.update((id(c), _unpredicted_stop(c, f, subject.what, on)) for c in pending)
            break
        fix: dict[str, Any] = {}
        for c in matched if chain else ():
            fix.update(expected(c).repair or {})
        if not fix or all(repairs.get(k, object()) == v for k, v in fix.items()):
            if not pending:
                break
            codes = matched[0].code  # the first finding (in report order) that predicts it
            for c in pending:
                kind, expect = probe(c).kind, expected(c).expect
                out[id(c)] = Confirmation(
                    **identity(c, kind),
                    verdict="NOT-REACHED",
                    evidence=f"not reached: {subject.what} stopped earlier, at the failure {codes} predicts"
                    + (", which no edit repairs" if repaired_by else ""),
                    details={"expect": expect, "failure": f.to_json()},
                )
            break
        repairs.update(fix)
        repaired_by += [c.code for c in matched if c.code not in repaired_by]
        on = f" (with {describe_patch(repairs)}: the fixes of the crashes before it)"
        run, cmp = subject.run_patched(dict(repairs))
    if repairs and run.failure is None:
        words = f"with the crash findings fixed ({describe_patch(repairs)})"
        return out, subject.with_repairs(dict(repairs), run, cmp, words)
    return out, None


def confirm_static(finding: Finding) -> Confirmation:
    p = probe(finding)
    reason = p.reason if isinstance(p, NotProbed) else Rule.not_probed
    return Confirmation(**identity(finding, p.kind), verdict="NOT-PROBED", evidence=f"not probed: {reason}")


def _numeric_patches(findings: Sequence[Finding], skip: Finding | None = None) -> dict[str, Any]:
    """The candle-side patches of the numeric findings (but `skip`), merged in order."""
    merged: dict[str, Any] = {}
    for f in findings:
        patch = candle_patch(f)
        if f is not skip and patch:
            merged.update(patch)
    return merged


def other_patches(findings: Sequence[Finding], me: Finding, subject: Subject) -> dict[str, Any]:
    return _numeric_patches(findings, skip=me)


def all_fixes_patch(findings: Sequence[Finding]) -> dict[str, Any] | None:
    """The candle-side run `confirm_section` asks for first when the file as read differs: every
    numeric finding's patch at once (`_leave_one_out`'s `fixed`), or None where there is none or
    a crash finding's repair comes first (the numeric probes then run on the repaired file)."""
    if any(probe(f).kind == "crash" for f in findings):
        return None
    return _numeric_patches(findings) or None


def other_edits(findings: Sequence[Finding], me: Finding, subject: Subject) -> dict[str, Any]:
    """The other numeric findings' reference-side edits, merged."""
    return merge_as_candle(
        [e for f in findings if f is not me and probe(f).kind == "numeric" for e in [subject.as_candle_of(f)] if e]
    )


def confirm_all(findings: Sequence[Finding], subject: Subject, ran: str) -> list[Confirmation]:
    return confirm_section(findings, subject, ran)[0]


def confirm_section(findings: Sequence[Finding], subject: Subject, ran: str) -> tuple[list[Confirmation], Subject]:
    """Every finding's verdict, in order: the crash findings first, chained; the numeric ones on
    the file the crash repairs made run (or as read). Returns them and the subject the numeric
    probes ran on (`portkit.verify.judge.explain` runs their counterfactuals together there)."""
    crashes = [f for f in findings if probe(f).kind == "crash"]
    by_id, repaired = crash_chain(crashes, subject, ran) if crashes else ({}, None)
    numeric_subject = repaired or subject
    out = []
    for f in findings:
        kind = probe(f).kind
        if kind == "numeric":
            s = numeric_subject
            out.append(confirm_numeric(f, s, other_patches(findings, f, s), other_edits(findings, f, s)))
        elif kind == "crash":
            out.append(by_id[id(f)])
        else:
            out.append(confirm_static(f))
    return out, numeric_subject


def both_alike(confirmed: list) -> str:
    """The verdict's tail for findings confirmed where both sides agree: they are reported, and
    they do not make a mismatch."""

    def part(cs: list, how: str) -> str:
        codes = ", ".join(dict.fromkeys(c.code for c in cs))
        return f"; {len(cs)} finding{'s' if len(cs) != 1 else ''} {how} ({codes})"

    # a numeric finding confirmed under an agreeing verdict moved the logits less than the run's
    # tolerance judges (f16/bf16: the tokens): the sides differ, not alike
    numeric = [c for c in confirmed if getattr(c, "probe_kind", None) == "numeric"]
    # a sampling finding: the forward agrees; the program's sampler is another (a guessed one
    # unless stated, so not a mismatch)
    sampled = [c for c in confirmed if getattr(c, "probe_kind", None) == "sampling"]
    alike = [c for c in confirmed if c not in numeric and c not in sampled]
    return (
        (part(alike, "confirmed on both sides alike") if alike else "")
        + (
            part(numeric, "confirmed by the logits distance, within the tolerance this run judges by")
            if numeric
            else ""
        )
        + (
            part(
                sampled,
                "confirmed in the sampling section: the candle call draws from another distribution than generate()",
            )
            if sampled
            else ""
        )
    )
