"""What accounts for a mismatch: the confirmed findings whose counterfactuals, applied together,
make candle agree; otherwise "unexplained", with the first bad layer and sub-layer.

Every mismatch verify reports is one or the other, never "something else": the verdict line
names the findings (candle with their patches against transformers with their as-candle edits,
within tolerance), or says what is left, where it starts (`portkit.verify.judge.localise`: the first
layer over the tolerance, the first sub-layer inside it, the pattern over the positions) and
what that points to. A candle failure is accounted for by the crash findings that predicted it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from portkit.verify.judge.comparison import Comparison, fmt_num
from portkit.verify.judge.confirm import Subject, as_candle_of, candle_patch, describe_patch, merge_as_candle
from portkit.verify.judge.localise import Localisation
from portkit.verify.judge.verdicts import Confirmation

if TYPE_CHECKING:  # the sides' records, read here; their code is never imported
    from portkit.verify.candle.run import RunOutputs


@dataclass
class Explanation:
    explained: bool
    by: list[str]  # the confirmed findings that account for it (in report order)
    summary: str  # one line, for the verdict
    as_written: float | None = None  # the distance as read
    with_counterfactuals: float | None = None  # candle (patched) vs transformers (as candle computes)
    localisation: Localisation | None = None  # where what is left starts (unexplained)
    where: str | None = None  # why there is no localisation, when there is none
    counterfactual: dict[str, Any] = field(default_factory=dict)  # {"patch": ..., "as_candle": ...}

    def to_json(self) -> dict[str, Any]:
        return {
            "explained": self.explained,
            "by": list(self.by),
            "summary": self.summary,
            "as_written": self.as_written,
            "with_counterfactuals": self.with_counterfactuals,
            "localisation": self.localisation.to_json() if self.localisation else None,
            "where": self.where,
            "counterfactual": self.counterfactual,
        }


def _where(loc: Localisation | None, no_layers: str | None, cmp: Comparison | None = None) -> str:
    if loc is not None:
        inside = f" at {loc.name}" if loc.name != loc.layer else ""
        return f"first bad {loc.layer}{inside} ({loc.diagnosis})"
    if cmp is not None and cmp.layers is not None and cmp.layers_judged and cmp.layers.ok:
        # the layers were compared and agree: they cover the prompt's positions only
        return (
            f"every one of the {len(cmp.layers.rows)} per-layer values over the prompt agrees, so it starts after "
            "the prefill's layers"
        )
    return no_layers or "no per-layer values to say where it starts"


def explain_failure(run: RunOutputs, confirmations: Sequence[Confirmation]) -> Explanation:
    """A run that failed: the crash findings that predicted its failure, or unexplained."""
    assert run.failure is not None
    crashes = [c for c in confirmations if c.verdict == "CRASH-CONFIRMED"]
    if crashes:
        codes = list(dict.fromkeys(c.code for c in crashes))
        n = len(crashes)
        return Explanation(
            True,
            codes,
            f"explained by {', '.join(codes)} ({n} crash{'es' if n != 1 else ''} confirmed, each with candle's own "
            "message)",
        )
    return Explanation(False, [], f"unexplained: no finding predicts {run.failure.line()}")


def explain(
    cmp: Comparison | None,
    run: RunOutputs,
    confirmations: Sequence[Confirmation],
    findings: Sequence[Any],
    subject: Subject | None,
    no_layers: str | None = None,
) -> Explanation | None:
    """The explanation of a section's mismatch (None when it agrees). `subject`: where the
    numeric probes ran (the repaired file after crash findings), to run every confirmed
    finding's counterfactual at once; `no_layers`: why the section has no per-layer values."""
    if run.failure is not None:
        why = explain_failure(run, confirmations)
        if subject is not None and subject.repaired and subject.as_read.failure is None:
            # the crash findings' fixes made candle run: what it computes then
            rest = explain(subject.as_read_cmp, subject.as_read, confirmations, findings, subject, no_layers)
            why.summary += f"; {subject.repaired}, candle " + (
                "agrees with transformers" if rest is None else f"differs: {rest.summary}"
            )
            if rest is not None and not rest.explained:
                why.explained = False
        return why
    if cmp is None or cmp.ok:
        return None
    by_code = {f.code: f for f in findings}
    confirmed = [c for c in confirmations if c.verdict == "CONFIRMED" and c.code in by_code]
    patch: dict[str, Any] = {}
    edits = []
    measured = []
    for c in confirmed:
        f = by_code[c.code]
        p = candle_patch(f)
        e = as_candle_of(f) if subject is not None and subject.reference_as is not None else None
        if p or e:
            patch.update(p or {})
            if e:
                edits.append(e)
            measured.append(c.code)
    unmeasured = [c.code for c in confirmed if c.code not in measured]
    as_written = cmp.distance()
    if measured and subject is not None:
        edit = merge_as_candle(edits)
        t = subject.trial(patch, edit)
        after = t.cmp
        cf = {"patch": patch or None, "as_candle": edit or None}
        names = ", ".join(dict.fromkeys(measured))
        how = _how(patch, edit)
        if after is not None and after.ok:
            line = (
                f"explained by {names} (as written {_num(cmp)}; {how}, {_num(after)}, within {after.tolerance.name} "
                "tolerance)"
            )
            return Explanation(
                True, list(dict.fromkeys(measured)), line, as_written, after.distance(), counterfactual=cf
            )
        if after is not None:
            # where what is left starts: against transformers as candle computes when candle's run
            # recorded layers (no candle-side patch), else as written
            loc = after.localisation if after.layers is not None else cmp.localisation
            where = _where(loc, no_layers, after if after.layers is not None else cmp) + (
                " (as written)" if loc is not None and after.layers is None else ""
            )
            unexplained = f"unexplained beyond {names}: {how}, {after.headline()}; {where}"
            return Explanation(
                False,
                list(dict.fromkeys(measured)),
                unexplained,
                as_written,
                after.distance(),
                loc,
                None if loc else no_layers,
                cf,
            )
    loc = cmp.localisation
    named = f" ({', '.join(unmeasured)} confirmed, with no counterfactual to measure)" if unmeasured else ""
    return Explanation(
        False,
        unmeasured,
        f"unexplained{named}: {_where(loc, no_layers, cmp)}",
        as_written,
        None,
        loc,
        None if loc else no_layers,
    )


def _how(patch: dict[str, Any], edit: dict[str, Any]) -> str:
    bits = []
    if patch:
        bits.append(f"candle with {describe_patch(patch)}")
    if edit:
        bits.append(f"against transformers with {edit.get('what')}")
    return " and ".join(bits)


def _num(c: Comparison) -> str:
    """The last position's max|diff| where logits are judged (f32), else the headline."""
    if c.tolerance.by_floors and c.last is not None:
        return fmt_num(c.last.max_abs_diff)
    return c.headline()
