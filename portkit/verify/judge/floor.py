"""A tolerance measured in the run (docs/verify.md, "Tolerances").

Two correct f32 implementations differ by summation order, by how much depends on the CPU's
kernels, the thread count, the prompt and the model. So the bound is not a constant: transformers
in f64 on the same inputs is the truth (`portkit.verify.reference.result.Truth`), the f32
reference's own distance from it is the floor, and candle, the other f32 implementation, must
stay within `FACTOR` times that floor of the truth. A value both sides compute exactly (an
embedding row) has a floor of zero; `MIN_ULPS` f32 steps of the value's magnitude stand in for it
there, so that candle rounding it once is not read as infinitely worse.

Pure numpy; every number that decides is kept, so the report prints it beside the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: candle may be this many times as far from the truth as the f32 reference is (docs/measurements.md,
#: "Floors": the healthy ratios and the weakest planted fault's on the real corpus).
FACTOR = 8.0
#: the same for a decoder layer's own error (transformers ran it on candle's input: nothing carried
#: in). Wider than the logits': the healthy ratio reached 5.7 on the real corpus where the logits
#: stayed under 2.2, and a weight tensor off by 1e-3 reads 58 at its layer (docs/measurements.md, "Floors")
OWN_FACTOR = 16.0
#: the same for a decoder layer's added error, where the layer could not be run on candle's own
#: input (`checks.compare_layers`: a patched run's layers, a cached decode): its sub-layers
#: transform the error its input carries (an MLP that cancels a massive activation amplifies it),
#: so two correct f32 implementations' added errors differ more than their own errors: up to 31x
#: on the real corpus (docs/measurements.md, "Floors")
LAYER_FACTOR = 64.0
#: the least floor, in f32 steps (2**-24 relative) of the value's largest magnitude
MIN_ULPS = 4.0
F32_STEP = 2.0**-24


@dataclass(frozen=True)
class Floor:
    """One value's measured criterion: candle's and the f32 reference's distance from the truth."""

    candle: float  # max |candle - truth|
    reference: float  # max |f32 reference - truth|: the floor as measured
    scale: float  # max |truth|
    factor: float = FACTOR  # how many floors candle may be from the truth
    #: what was measured: "value" (accumulated up to it), "own" (a layer on candle's own input,
    #: nothing carried in), "added" (a layer's output difference less its input's), "no-truth"
    #: (the f64 run was not finite: candle's distance from the f32 reference, on the least floor)
    kind: str = "value"

    @property
    def floor(self) -> float:
        return max(self.reference, MIN_ULPS * F32_STEP * self.scale)

    @property
    def bound(self) -> float:
        return self.factor * self.floor

    @property
    def ratio(self) -> float:
        """candle's distance from the truth in floors (inf for NaN)."""
        if math.isnan(self.candle):
            return math.inf
        return self.candle / self.floor if self.floor > 0 else (0.0 if self.candle == 0 else math.inf)

    @property
    def ok(self) -> bool:
        return bool(self.candle <= self.bound)  # NaN compares False: out of the floor

    def to_json(self) -> dict[str, float | str]:
        return {
            "kind": self.kind,
            "candle": self.candle,
            "reference": self.reference,
            "floor": self.floor,
            "bound": self.bound,
            "ratio": self.ratio,
        }

    def phrase(self) -> str:
        """`from f64: candle 4.1e-05, transformers f32 3.2e-05 (1.3x the floor 3.2e-05; bound 8x)`"""
        what = {"own": "own error on candle's input, ", "added": "error added, "}.get(self.kind, "")
        if self.kind == "no-truth":  # the f64 run itself was not finite there: judged against the f32 reference
            return (
                f"the f64 truth is not finite here; against transformers f32: candle {self.candle:.2e} "
                f"({self.ratio:.2g}x the least floor {self.floor:.2e}; bound {self.factor:g}x)"
            )
        return (
            f"{what}from f64: candle {self.candle:.2e}, transformers f32 {self.reference:.2e} "
            f"({self.ratio:.2g}x the floor {self.floor:.2e}; bound {self.factor:g}x)"
        )


def truth_of(ref: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The f64 value from the f32 reference and the truth's difference from it."""
    return np.asarray(ref, dtype=np.float64) + np.asarray(delta, dtype=np.float64)


def usable_truth(ref: np.ndarray, delta: np.ndarray | None) -> np.ndarray | None:
    """The truth's difference from `ref` (`Reference.truth`, f64 minus f32) shaped as `ref`,
    where it can measure a floor: present, one value per reference value, and finite on both
    sides (a NaN or inf measures nothing). None: the caller falls back, a decoder to its dtype's
    constants (`Tolerance`), an encoder to the least floor against the f32 reference
    (`embedding.judge.floor_of`, kind "no-truth"). The one test of the truth, for both."""
    if delta is None:
        return None
    d = np.asarray(delta)
    if d.size != np.size(ref) or not np.isfinite(d).all() or not np.isfinite(ref).all():
        return None
    return d.reshape(np.shape(ref))


def measure(
    ref: np.ndarray,
    delta: np.ndarray,
    got: np.ndarray,
    scale: float | None = None,
    factor: float = FACTOR,
    kind: str = "value",
) -> Floor:
    """`got` (candle) against the truth `ref + delta`, beside the f32 reference `ref`'s own distance.
    `scale`: the magnitude the least floor is counted in (default: the truth's max): a layer's
    addition to a residual stream rounds at the stream's magnitude, not the addition's."""
    truth = truth_of(ref, delta)
    g = np.asarray(got, dtype=np.float64)
    if truth.size == 0:
        return Floor(0.0, 0.0, 0.0)
    d = np.abs(g - truth)
    candle = float("nan") if np.isnan(d).any() else float(d.max())
    own = float(np.abs(np.asarray(delta, dtype=np.float64)).max())
    return Floor(
        candle=candle,
        reference=own,
        scale=float(np.abs(truth).max()) if scale is None else scale,
        factor=factor,
        kind=kind,
    )


def per_position(truth: np.ndarray, got: np.ndarray) -> np.ndarray:
    """candle's distance from the truth at each position (row) of a [T, features] value."""
    return np.abs(np.asarray(got, dtype=np.float64) - np.asarray(truth, dtype=np.float64)).max(axis=1)
