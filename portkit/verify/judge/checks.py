"""Numeric comparisons between the reference (transformers) and candle (docs/verify.md, "Tolerances").

Pure numpy. Shapes are checked first (a shape difference is a failure with its own message);
every verdict carries the measured number next to the tolerance used, never a bare pass/fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from portkit.families.sublayers import is_sublayer
from portkit.verify.judge import floor as floors
from portkit.verify.judge.floor import Floor


class ShapeMismatch(ValueError):
    """The two sides produced arrays of different shapes: not a numeric difference."""


@dataclass(frozen=True)
class Tolerance:
    """How close candle must be for one weight dtype or GGUF quantization, and why."""

    name: str
    logits_atol: float | None  # last-position and per-step logits; None: judged by argmax + margins
    layer_rtol: float | None  # per-layer max|diff| / max|ref|; None: not judged per layer
    near_tie: float  # a teacher-forced step whose reference top-2 margin is below this is a near tie
    reason: str

    @property
    def by_floors(self) -> bool:
        """Whether this dtype's logits are judged by values against floors measured in the run (f32), not
        by argmax and margins alone (half precision, a GGUF quantization)."""
        return self.logits_atol is not None


TOLERANCES: dict[str, Tolerance] = {
    t.name: t
    for t in (
        Tolerance(
            "f32",
            1e-4,
            1e-5,
            1e-4,
            "two correct f32 implementations differ only in summation order: on SmolLM2-135M-Instruct (Linux "
            "CPU) candle's logits differed from transformers' by up to 6.4e-5 at the last position and 9.2e-5 "
            "at a teacher-forced step (max|ref| 33.6), and every layer stayed under 5.5e-6 relative, while a "
            "wrong rms eps gave 5.3e-4 at layer 0 (docs/measurements.md)",
        ),
        Tolerance(
            "f16",
            None,
            None,
            0.0625,
            "f16 spacing is 0.0156 near 16-32; half-precision runs differ from f32 by 2.5-4 spacings "
            "(0.04-0.06 on SmolLM2), so a flip is expected only where the reference's top-2 margin is "
            "under about 4 spacings (docs/measurements.md)",
        ),
        Tolerance(
            "bf16",
            None,
            None,
            0.5,
            "bf16 spacing is 0.125 near 16-32; bf16 runs differ from f32 by 4-5 spacings (0.47-0.60), "
            "so flips are expected where the reference's top-2 margin is under about 4 spacings (docs/measurements.md)",
        ),
        Tolerance(
            "q8_0",
            None,
            None,
            0.3,
            "Q8_0 logits differ 0.42 (dequantized) to 0.72 (CPU, activations quantized too) at max|ref| "
            "34; every teacher-forced flip was at a reference top-2 margin under 0.3 (docs/measurements.md)",
        ),
        Tolerance(
            "q4_k",
            None,
            None,
            0.6,
            "Q4_K_M logits differ about 2.5 at max|ref| 34; flips happened at margins up to 0.53 "
            "(docs/measurements.md)",
        ),
    )
}


def _check_shapes(what: str, ref: np.ndarray, got: np.ndarray) -> None:
    if ref.shape != got.shape:
        raise ShapeMismatch(f"{what}: shape {tuple(got.shape)} from candle, {tuple(ref.shape)} from the reference")


@dataclass(frozen=True)
class LogitsCheck:
    n: int
    max_abs_diff: float
    max_abs_ref: float
    worst_index: int
    tolerance: float | None  # None: reported only (half precision, quantized: judged per step)
    ok: bool
    #: the criterion measured in the run (transformers in f64 as the truth); None: `tolerance` is
    #: the fallback constant
    floor: Floor | None = None

    def line(self, label: str = "logits") -> str:
        head = f"{label:<10} n={self.n:<6} max|diff|={self.max_abs_diff:.2e}  max|ref|={self.max_abs_ref:.3g}  "
        if self.tolerance is None:
            return head + "(reported; judged by per-step argmax)"
        if self.floor is not None:
            return head + f"{self.floor.phrase()}  {'OK' if self.ok else 'MISMATCH'}"
        return head + f"tol={self.tolerance:.0e} (fallback)  {'OK' if self.ok else 'MISMATCH'}"


def compare_logits(
    ref: np.ndarray, got: np.ndarray, atol: float | None, delta: np.ndarray | None = None
) -> LogitsCheck:
    """`delta`: the truth's difference from `ref` (`Reference.truth`): then an f32 candle is judged
    against the floor measured in the run, not `atol`."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    _check_shapes("logits", ref, got)
    diff = np.abs(ref - got)
    worst = int(np.argmax(diff)) if diff.size else 0
    max_diff = float(diff.max()) if diff.size else 0.0
    if np.isnan(diff).any():
        max_diff = float("nan")
    truth = floors.usable_truth(ref, delta) if atol is not None else None
    fl = floors.measure(ref, truth, got) if truth is not None else None
    return LogitsCheck(
        n=int(ref.size),
        max_abs_diff=max_diff,
        max_abs_ref=float(np.abs(ref).max()) if ref.size else 0.0,
        worst_index=worst,
        tolerance=atol if fl is None else fl.bound,
        ok=fl.ok
        if fl is not None
        else bool(max_diff <= (np.inf if atol is None else atol)),  # NaN compares False: a mismatch
        floor=fl,
    )


@dataclass(frozen=True)
class LayerRow:
    """One captured value. `max_abs_diff` is the error accumulated up to it. For a decoder layer
    (`layer.N`), `rel` is the error it adds (its output's difference less its input's, over the
    larger of the two's max|ref|) and `floor` its own error where transformers ran it on candle's
    input (`Floor.kind` "own"), else that added error ("added"); for the rest, max|diff| / max|ref|
    and the accumulated floor ("value").
    """

    name: str
    max_abs_ref: float
    max_abs_diff: float
    rel: float
    over: bool
    nonfinite: str | None = None  # "transformers" | "candle" | "both": NaN/inf here, not a difference
    floor: Floor | None = None  # the criterion measured in the run (None: `rel` against the fallback rtol)

    @property
    def rel_bound(self) -> float | None:
        """The measured bound as a relative error (None: the fallback's rtol applies)."""
        if self.floor is None:
            return None
        return self.floor.bound / self.floor.scale if self.floor.scale > 0 else math.inf


@dataclass(frozen=True)
class LayerCheck:
    """Every captured value's relative error.

    The values between the layers (embeddings, `layer.N`, norm, logits) are judged. With the truth
    (transformers in f64), each decoder layer on its own error (the f64 layer on candle's own
    input, beside the f32 layer's distance from it: nothing carried in), or where that was not run,
    on the error it adds at `floor.LAYER_FACTOR`; the embeddings, the norm and the logits on their
    accumulated floor. Without the truth (a dump without it, an as-candle reference), the
    fallback: `rel` against `rtol`, a layer's `rel` being the error it adds, so that a layer that
    cancels a massive activation is not read as the cause of the error carried into it. The
    sub-layers inside a layer (`layer.N.mlp`, ...) are measured the same way and localise a
    mismatch inside the first bad layer (`portkit.verify.judge.localise`), but never decide it.
    """

    rows: list[LayerRow]
    rtol: float
    #: the f64 values (`floor.truth_of`) by name, where measured
    truth: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return any(r.floor is not None for r in self.rows)

    @property
    def layer_rows(self) -> list[LayerRow]:
        return [r for r in self.rows if not is_sublayer(r.name)]

    def row(self, name: str) -> LayerRow | None:
        return next((r for r in self.rows if r.name == name), None)

    @property
    def first_over(self) -> str | None:
        """The first value between the layers over its bound. Where that is the final norm or the
        logits (judged at the logits' 8x) while no decoder layer reached its 64x, the layer
        before it whose added error is beyond 8x its floor is named instead: a weight off by 1e-3
        in one layer's MLP can stay under 64x at its layer and show only further on (the layer
        adding the most is then a later one that amplifies it: SmolLM2's layer.11)."""
        first = next((r for r in self.layer_rows if r.over), None)
        if first is None or first.name.startswith("layer.") or first.name == "embeddings":
            return first.name if first is not None else None
        before = self.layer_rows[: self.layer_rows.index(first)]
        suspects = [
            r for r in before if r.name.startswith("layer.") and r.floor is not None and r.floor.ratio > floors.FACTOR
        ]
        return suspects[0].name if suspects else first.name

    @property
    def first_nonfinite(self) -> str | None:
        return next((r.name for r in self.rows if r.nonfinite), None)

    @property
    def ok(self) -> bool:
        return self.first_over is None and self.first_nonfinite is None

    @property
    def max_rel(self) -> float:
        return max((r.rel for r in self.layer_rows if not r.nonfinite), default=0.0)

    @property
    def max_ratio(self) -> float | None:
        """The largest measured ratio (candle's distance from the truth in floors), None: none measured."""
        ratios = [r.floor.ratio for r in self.rows if r.floor is not None and not r.nonfinite]
        return max(ratios) if ratios else None

    def table(self) -> str:
        head = f"{'name':<12}{'max|ref|':>12}{'max|diff|':>12}{'rel':>10}"
        lines = [head + (f"{'f64 candle':>12}{'f64 floor':>11}{'ratio':>7}" if self.measured else "")]
        for r in self.rows:
            mark = "  <- over" if r.over else (f"  non-finite ({r.nonfinite})" if r.nonfinite else "")
            measured = (
                f"{r.floor.candle:>12.3e}{r.floor.floor:>11.3e}{r.floor.ratio:>7.2g}" if r.floor is not None else ""
            )
            lines.append(f"{r.name:<12}{r.max_abs_ref:>12.4g}{r.max_abs_diff:>12.3e}{r.rel:>10.2e}{measured}{mark}")
        return "\n".join(lines)


def compare_layers(
    ref: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    rtol: float,
    deltas: Mapping[str, np.ndarray] | None = None,
    own: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> LayerCheck:
    """Relative error per captured value, in the reference's order; names must match exactly.
    `deltas`: the truth's difference from `ref` by name (`Reference.truth`): those values are
    judged against their measured floor, the others by the fallback (`LayerCheck`). `own`: a
    decoder layer's (and its sub-layers') values as transformers computes them on candle's own
    input to the layer, (f32 value, f64 difference): where given, the layer is judged on its own
    error, candle's output against the f64 layer on the same input, at the logits' factor."""
    own = own or {}
    if list(ref) != list(got):
        raise ShapeMismatch(f"captured names differ: candle {list(got)}, reference {list(ref)}")
    deltas = deltas or {}
    truth: dict[str, np.ndarray] = {}
    rows = []
    # the previous value between the layers (reference, candle, truth's delta): a decoder layer is
    # judged on the error it adds, (candle_N - candle_N-1) - (ref_N - ref_N-1). A residual stream
    # carries its input's error through unchanged, and a layer that cancels a massive activation
    # shrinks the value, not the error that came in with it (SmolLM2's layer.9: 533 -> 117)
    prev: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
    for name, r in ref.items():
        r = np.asarray(r, dtype=np.float64)
        g = np.asarray(got[name], dtype=np.float64)
        _check_shapes(name, r, g)
        bad_r, bad_g = not np.isfinite(r).all(), not np.isfinite(g).all()
        if bad_r or bad_g:
            # NaN/inf is named, never counted as a relative error (nonfinite.py gives the verdict)
            side = "both" if bad_r and bad_g else ("transformers" if bad_r else "candle")
            rows.append(LayerRow(name, float("nan"), float("nan"), float("nan"), over=False, nonfinite=side))
            continue
        max_ref = float(np.abs(r).max())
        max_diff = float(np.abs(r - g).max())
        d = floors.usable_truth(r, deltas.get(name))
        if d is not None:
            truth[name] = floors.truth_of(r, d)
        between = not is_sublayer(name)
        layer = between and name.startswith("layer.") and prev is not None and prev[0].shape == r.shape
        if layer:
            assert prev is not None
            pr, pg, pd = prev
            scale = max(max_ref, float(np.abs(pr).max()))  # the stream's scale: what its additions round at
            added = float(np.abs((g - pg) - (r - pr)).max())
            rel = added / scale if scale > 0 else added
        else:
            rel = max_diff / max_ref if max_ref > 0 else max_diff
        fed = own.get(name)
        if fed is not None and np.shape(fed[0]) == r.shape and np.isfinite(fed[1]).all():
            # the same input on both sides; its addition to the stream rounds at the larger of the
            # stream's magnitudes in and out (SmolLM2's layer.9: 882 in, 222 out)
            stream = max(max_ref, float(np.abs(prev[0]).max())) if layer and prev is not None else None
            fl: Floor | None = floors.measure(fed[0], fed[1], g, scale=stream, factor=floors.OWN_FACTOR, kind="own")
            truth[name] = floors.truth_of(*fed)
        elif layer and d is not None and prev is not None and prev[2] is not None:
            pr, pg, pd = prev
            # an input candle computed bit for bit as the reference (layer.0's embeddings, a lookup)
            # carries nothing in: what the layer adds is then its own error
            same_input = bool(np.array_equal(pr, pg))
            fl = floors.measure(
                r - pr,
                d - pd,
                g - pg,
                scale=max(max_ref, float(np.abs(pr).max())),
                factor=floors.OWN_FACTOR if same_input else floors.LAYER_FACTOR,
                kind="own" if same_input else "added",
            )
        else:
            fl = floors.measure(r, d, g) if d is not None else None
        if between:
            prev = (r, g, d)
        rows.append(
            LayerRow(name, max_ref, max_diff, rel, over=not fl.ok if fl is not None else not (rel <= rtol), floor=fl)
        )
    return LayerCheck(rows=rows, rtol=rtol, truth=truth)


@dataclass(frozen=True)
class StepDisagreement:
    step: int
    ref_token: int
    got_token: int
    ref_margin: float  # reference's top-1 minus top-2 logit at this step
    near_tie: bool


@dataclass(frozen=True)
class StepCheck:
    steps: int
    agree: int
    max_abs_diff: float
    median_abs_diff: float
    max_abs_ref: float
    disagreements: list[StepDisagreement] = field(default_factory=list)
    atol: float | None = None
    near_tie: float = 0.0
    nonfinite_steps: list[int] = field(default_factory=list)  # NaN/inf on either side: no argmax to compare
    floor: Floor | None = None  # every step's logits against the truth (None: `atol`, the fallback)

    @property
    def real_flips(self) -> list[StepDisagreement]:
        return [d for d in self.disagreements if not d.near_tie]

    @property
    def ok(self) -> bool:
        if self.floor is not None:
            within = self.floor.ok
        else:
            within = self.atol is None or self.max_abs_diff <= self.atol
        return within and not self.real_flips and not self.nonfinite_steps

    def line(self) -> str:
        flips = " ".join(f"{d.step}({d.ref_margin:.2g}{'' if d.near_tie else '!'})" for d in self.disagreements)
        return (
            f"steps={self.steps} argmax {self.agree}/{self.steps}  max|diff|={self.max_abs_diff:.2e} "
            f"median={self.median_abs_diff:.2e} max|ref|={self.max_abs_ref:.3g}"
            + (f"  differing steps (ref margin): {flips}" if flips else "")
            + (f"  {self.floor.phrase()}" if self.floor is not None else "")
        )


def top2_margin(row: np.ndarray) -> float:
    top = np.partition(np.asarray(row, dtype=np.float64), -2)[-2:]
    return float(top[1] - top[0])


def compare_steps(
    ref_rows: np.ndarray, got_rows: np.ndarray, *, near_tie: float, atol: float | None, delta: np.ndarray | None = None
) -> StepCheck:
    """Teacher-forced rows ([steps, vocab], same inputs on both sides): argmax agreement per step,
    with the reference's top-2 margin at every disagreeing step. `delta`: the truth's difference
    from `ref_rows` (`Reference.truth`): every step's logits are then judged against the floor
    measured in the run, not `atol`."""
    ref = np.asarray(ref_rows, dtype=np.float64)
    got = np.asarray(got_rows, dtype=np.float64)
    _check_shapes("per-step logits", ref, got)
    finite = np.isfinite(ref).all(axis=1) & np.isfinite(got).all(axis=1)
    per_step = np.abs(ref - got).max(axis=1)
    ref_arg = ref.argmax(axis=1)
    got_arg = got.argmax(axis=1)
    dis = []
    # a step with NaN/inf has no meaningful argmax: it is listed as non-finite, never as a flip
    for step in np.nonzero((ref_arg != got_arg) & finite)[0]:
        margin = top2_margin(ref[step])
        dis.append(StepDisagreement(int(step), int(ref_arg[step]), int(got_arg[step]), margin, margin < near_tie))
    fin = per_step[finite]
    # a step with NaN/inf on either side is named, and judged by the constants
    truth = floors.usable_truth(ref, delta) if atol is not None and finite.all() else None
    fl = floors.measure(ref, truth, got) if truth is not None else None
    return StepCheck(
        steps=int(ref.shape[0]),
        agree=int(((ref_arg == got_arg) & finite).sum()),
        max_abs_diff=float(fin.max()) if fin.size else float("nan"),
        median_abs_diff=float(np.median(fin)) if fin.size else float("nan"),
        max_abs_ref=float(np.abs(ref[np.isfinite(ref).all(axis=1)]).max())
        if np.isfinite(ref).all(axis=1).any()
        else float("nan"),
        disagreements=dis,
        atol=atol,
        near_tie=near_tie,
        nonfinite_steps=[int(i) for i in np.nonzero(~finite)[0]],
        floor=fl,
    )


@dataclass(frozen=True)
class GreedyCheck:
    """Free greedy generation on both sides. A fork is a failure unless the reference's top-2
    margin at the forking position is under the near-tie line (then either token is a fair
    pick: docs/measurements.md); without a margin (`ref_margin=None`) any fork is a failure."""

    ref: list[int]
    got: list[int]
    ref_margin: float | None = None  # reference's top-2 margin where the two first differ
    near_tie: float | None = None
    #: False when `ref` is only the start of the reference's generation (one forward over another
    #: continuation decides it up to its first fork from that continuation): agreeing with all of
    #: it is agreeing as far as the reference is known.
    ref_complete: bool = True

    @property
    def first_divergence(self) -> int | None:
        for i, (a, b) in enumerate(zip(self.ref, self.got, strict=False)):
            if a != b:
                return i
        if not self.ref_complete and len(self.got) >= len(self.ref):
            return None
        return None if len(self.ref) == len(self.got) else min(len(self.ref), len(self.got))

    @property
    def at_near_tie(self) -> bool:
        return (
            self.first_divergence is not None
            and self.ref_margin is not None
            and self.near_tie is not None
            and self.ref_margin < self.near_tie
        )

    @property
    def ok(self) -> bool:
        return self.first_divergence is None or self.at_near_tie

    def line(self) -> str:
        d = self.first_divergence
        if d is None:
            where = "identical"
        else:
            where = f"first divergence at token {d}"
            if self.ref_margin is not None:
                where += f" (ref margin {self.ref_margin:.2g}{', near tie' if self.at_near_tie else ''})"
        return f"greedy     n={len(self.ref):<6} {where}"


def compare_greedy(
    ref: Sequence[int],
    got: Sequence[int],
    *,
    ref_rows: np.ndarray | None = None,
    prompt_len: int | None = None,
    near_tie: float | None = None,
    step_rows: np.ndarray | None = None,
    ref_complete: bool = True,
) -> GreedyCheck:
    """The margin where the generations fork is read from the reference's logits: `step_rows`
    ([n, vocab], row k decided token k), or `ref_rows` ([T, vocab] over prompt + `ref`, row
    `prompt_len - 1 + k` decided token k)."""
    check = GreedyCheck(list(ref), list(got), ref_complete=ref_complete)
    d = check.first_divergence
    if d is None or d >= len(check.ref):
        return check
    if step_rows is not None:
        rows, row = step_rows, d
    elif ref_rows is not None and prompt_len is not None:
        rows, row = ref_rows, prompt_len - 1 + d
    else:
        return check
    if not 0 <= row < len(rows):
        return check
    return GreedyCheck(
        list(ref), list(got), ref_margin=top2_margin(rows[row]), near_tie=near_tie, ref_complete=ref_complete
    )
