"""One side (candle or a GGUF) judged against the reference: every number of `checks`, a
headline, a distance, and the first bad layer localised.

The two sides' records (`portkit.verify.candle.run.RunOutputs`, `portkit.verify.reference.result.Reference`)
are read here, never produced: judge/ imports neither side's code (annotations only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from portkit.verify.judge.checks import (
    GreedyCheck,
    LayerCheck,
    LogitsCheck,
    ShapeMismatch,
    StepCheck,
    Tolerance,
    compare_greedy,
    compare_layers,
    compare_logits,
    compare_steps,
    is_sublayer,
)
from portkit.verify.judge.floor import Floor
from portkit.verify.judge.localise import Localisation, localise
from portkit.verify.layer_inputs import refeed_digest

if TYPE_CHECKING:
    from portkit.verify.candle.run import RunOutputs
    from portkit.verify.reference.result import Reference


@dataclass
class Comparison:
    """One side (candle or a GGUF) judged against the reference, with every number."""

    tolerance: Tolerance
    last: LogitsCheck | None = None
    steps: StepCheck | None = None
    greedy: GreedyCheck | None = None
    layers: LayerCheck | None = None
    layers_judged: bool = True
    problem: str | None = None  # a shape mismatch: a failure of its own
    #: inside the first bad layer: the first bad sub-layer, its error per position, a diagnosis
    localisation: Localisation | None = None

    def judge_layers(
        self,
        ref: Mapping[str, np.ndarray],
        got: Mapping[str, np.ndarray],
        *,
        available: Sequence[str] = (),
        no_sublayers_hint: str,
        deltas: Mapping[str, np.ndarray] | None = None,
        own: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> None:
        """Every captured value's relative error; judged (and the first bad layer localised) only
        where the tolerance has a per-layer line (f32), reported below it. `available` and
        `no_sublayers_hint`: `localise`'s; `deltas` and `own`: the truth's, per name (`compare_layers`)."""
        rtol = self.tolerance.layer_rtol
        self.layers_judged = rtol is not None
        self.layers = (
            compare_layers(ref, got, rtol, deltas, own) if rtol is not None else compare_layers(ref, got, math.inf)
        )
        if self.layers_judged:
            self.localisation = localise(
                self.layers, ref, got, available=available, no_sublayers_hint=no_sublayers_hint
            )

    @property
    def measured(self) -> bool:
        """Judged against floors measured in the run (transformers in f64), not the fallback constants."""
        return any(getattr(c, "floor", None) is not None for c in (self.last, self.steps)) or bool(
            self.layers and self.layers.measured
        )

    @property
    def ok(self) -> bool:
        if self.problem is not None:
            return False
        parts = [c.ok for c in (self.last, self.steps, self.greedy) if c is not None]
        if self.layers is not None and self.layers_judged:
            parts.append(self.layers.ok)
        return all(parts) and bool(parts)

    def headline(self) -> str:
        """`logits differ 4.94 (tol 1e-4)`-style summary of the worst evidence: the numbers that
        decided, never one that passed beside a failure elsewhere."""
        if self.problem:
            return self.problem
        bits = []
        judged = self.tolerance.by_floors
        # the teacher-forced steps' number when they, not the last position, are out of bound
        steps_over = self.steps is not None and judged and (self.last is None or self.last.ok) and not self.steps.ok
        if self.last is not None and not steps_over:
            bits.append(
                f"logits differ {fmt_num(self.last.max_abs_diff)} "
                f"({_bound(self.last.floor, self.last.tolerance, self.last.max_abs_ref)})"
            )
        if steps_over and self.steps is not None:
            bits.append(
                f"teacher-forced logits differ {fmt_num(self.steps.max_abs_diff)} over {self.steps.steps} steps "
                f"({_bound(self.steps.floor, self.steps.atol, self.steps.max_abs_ref)})"
            )
        if self.layers is not None and self.layers_judged and not self.layers.ok and not bits_over(self):
            first = self.layers.first_over
            row = self.layers.row(first) if first else None
            if row is not None:
                bits.append(
                    f"{first} differs {row.rel:.2e} relative"
                    + (f" ({row.floor.phrase()})" if row.floor is not None else f" (tol {fmt_tol(self.layers.rtol)})")
                )
        if self.steps is not None and (self.steps.agree != self.steps.steps or not self.tolerance.by_floors):
            real = len(self.steps.real_flips)
            near = len(self.steps.disagreements) - real
            extra = []
            if real:
                extra.append(f"{real} real flip{'s' if real != 1 else ''}")
            if near:
                extra.append(f"{near} at near ties")
            bits.append(f"argmax {self.steps.agree}/{self.steps.steps}" + (f" ({', '.join(extra)})" if extra else ""))
        if self.steps is not None and self.steps.nonfinite_steps:
            bits.append(f"non-finite (NaN/inf) at {len(self.steps.nonfinite_steps)} of {self.steps.steps} steps")
        if self.greedy is not None and self.greedy.first_divergence is not None:
            bits.append(
                f"greedy diverges at token {self.greedy.first_divergence}"
                + (" (near tie)" if self.greedy.at_near_tie else "")
            )
        return ", ".join(bits)

    def distance(self) -> float:
        """max|diff| over the last position and every teacher-forced step (NaN: infinite)."""
        vals = [c.max_abs_diff for c in (self.last, self.steps) if c is not None]
        vals = [math.inf if math.isnan(v) else v for v in vals]
        return max(vals, default=0.0)


def bits_over(c: Comparison) -> bool:
    """The logits themselves are out of their bound (the headline quotes them, not a layer)."""
    return any(x is not None and not x.ok for x in (c.last, c.steps, c.greedy))


def _bound(fl: Floor | None, tol: float | None, max_ref: float) -> str:
    """What a logits number was judged against: the floor measured in the run, the fallback
    constant, or nothing (half precision, quantized: `max|ref|` for scale)."""
    if fl is not None:
        return f"bound {fmt_num(fl.bound)}: {fl.factor:g}x transformers' own f32 error {fmt_num(fl.reference)}"
    if tol is not None:
        return f"tol {fmt_tol(tol)}"
    return f"max|ref| {max_ref:.3g}"


def fmt_num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if x == 0:
        return "0"
    if 1e-2 <= abs(x) < 1e3:
        return f"{x:.3g}"
    return f"{x:.2e}"


def fmt_tol(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-").replace("e+0", "e+")


def compare_run(ref: Reference, got: RunOutputs, tol: Tolerance) -> Comparison:
    """verify's comparisons: last position, teacher-forced steps with margins, greedy fork
    with the margin where it forks, per-layer relative error (judged in f32 only)."""
    cmp = Comparison(tolerance=tol)
    truth = ref.truth if tol.by_floors else None  # measured floors judge f32 only
    try:
        if got.last is not None:
            cmp.last = compare_logits(ref.last, got.last, tol.logits_atol, truth.rows[0] if truth is not None else None)
        if got.rows is not None:
            cmp.steps = compare_steps(
                ref.rows,
                got.rows,
                near_tie=tol.near_tie,
                atol=tol.logits_atol,
                delta=truth.rows if truth is not None else None,
            )
        if got.greedy is not None:
            cmp.greedy = compare_greedy(
                ref.greedy, got.greedy, step_rows=ref.rows, near_tie=tol.near_tie, ref_complete=ref.greedy_complete
            )
        if got.layers is not None and ref.layers:
            # sub-layers where both sides have them (a family's capture may record none)
            ref_layers = {k: v for k, v in ref.layers.items() if not is_sublayer(k) or k in got.layers}
            got_layers = {k: v for k, v in got.layers.items() if not is_sublayer(k) or k in ref.layers}
            # each layer on candle's own input, where the reference ran it on this run's layers
            own = (
                truth.own
                if truth is not None and truth.own_inputs is not None and truth.own_inputs == refeed_digest(got.layers)
                else None
            )
            cmp.judge_layers(
                ref_layers,
                got_layers,
                no_sublayers_hint="this capture records no sub-layers",
                deltas=truth.layers if truth is not None else None,
                own=own,
            )
    except ShapeMismatch as e:
        cmp.problem = str(e)
    return cmp
