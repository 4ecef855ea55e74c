"""Non-finite values (NaN, inf), named instead of counted as a difference.

Once a value is NaN on one side, every max|diff| after it is NaN and every argmax arbitrary: a
"mismatch" there says nothing about candle and transformers reading the checkpoint differently.
verify instead says which side turns non-finite first, at which captured value (embeddings,
layer.N, norm, logits), and whether the checkpoint itself holds non-finite weights (found from
the tensors by the reference while it loads them). That is its own verdict, `non-finite`, with
its own exit code (`portkit.verify.outcome.EXIT_NONFINITE`, 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


def first_nonfinite(values: Mapping[str, np.ndarray] | None, order: Sequence[str] | None = None) -> str | None:
    """The first captured value (in `order`, else the mapping's own) holding a NaN or inf."""
    if not values:
        return None
    for name in order if order is not None else list(values):
        v = values.get(name)
        if v is not None and not np.isfinite(np.asarray(v)).all():
            return name
    return None


def _nonfinite_steps(rows: np.ndarray | None) -> list[int]:
    if rows is None:
        return []
    r = np.asarray(rows)
    return [int(i) for i in np.nonzero(~np.isfinite(r).all(axis=tuple(range(1, r.ndim))))[0]]


def _side(layers: Mapping[str, np.ndarray] | None, rows: np.ndarray | None, order: Sequence[str]) -> str | None:
    name = first_nonfinite(layers, order)
    if name is not None:
        return name
    steps = _nonfinite_steps(rows)
    if steps:
        return "logits" if steps[0] == 0 else f"logits at step {steps[0]}"
    return None


@dataclass(frozen=True)
class NonFinite:
    """Where each side first holds NaN/inf (None: finite throughout), and the checkpoint's own
    non-finite tensors."""

    reference_first: str | None
    candle_first: str | None
    checkpoint_tensors: list[str] = field(default_factory=list)
    candle_label: str = "candle"
    order: tuple[str, ...] = ()

    @property
    def first_side(self) -> str:
        """'transformers', 'candle' or 'both' (at the same captured value)."""
        r, c = self.reference_first, self.candle_first
        if r is not None and c is not None:
            ri, ci = self._rank(r), self._rank(c)
            return "both" if ri == ci else ("transformers" if ri < ci else self.candle_label)
        return "transformers" if r is not None else self.candle_label

    def _rank(self, name: str) -> int:
        base = name.split(" at step ")[0]
        return self.order.index(base) if base in self.order else len(self.order)

    def line(self) -> str:
        bits = []
        if self.checkpoint_tensors:
            shown = ", ".join(self.checkpoint_tensors[:3]) + (
                f" and {len(self.checkpoint_tensors) - 3} more" if len(self.checkpoint_tensors) > 3 else ""
            )
            bits.append(f"the checkpoint holds non-finite weights ({shown})")
        r, c = self.reference_first, self.candle_first
        if r is not None and c is not None:
            if self.first_side == "both":
                bits.append(f"both sides turn non-finite at {r}")
            else:
                first, at, other, other_at = (
                    ("transformers", r, self.candle_label, c)
                    if self.first_side == "transformers"
                    else (self.candle_label, c, "transformers", r)
                )
                bits.append(f"{first} turns non-finite first, at {at} ({other} at {other_at})")
        elif r is not None:
            bits.append(f"transformers turns non-finite at {r}; {self.candle_label} stays finite")
        elif c is not None:
            bits.append(f"{self.candle_label} turns non-finite at {c}; transformers stays finite")
        return "; ".join(bits)

    def to_json(self) -> dict[str, object]:
        return {
            "reference_first": self.reference_first,
            "candle_first": self.candle_first,
            "first_side": self.first_side,
            "checkpoint_tensors": list(self.checkpoint_tensors),
            "summary": self.line(),
        }


def analyse(
    ref_layers: Mapping[str, np.ndarray] | None,
    ref_rows: np.ndarray | None,
    got_layers: Mapping[str, np.ndarray] | None,
    got_rows: np.ndarray | None,
    checkpoint_tensors: Sequence[str] = (),
    candle_label: str = "candle",
) -> NonFinite | None:
    """None when both sides are finite everywhere and the checkpoint has no non-finite tensor."""
    order = [k for k in (ref_layers or {}) if k != "logits"] + ["logits"]
    ref_layers = {k: v for k, v in (ref_layers or {}).items() if k != "logits"}
    got_layers = {k: v for k, v in (got_layers or {}).items() if k != "logits"}
    r = _side(ref_layers, ref_rows, order)
    c = _side(got_layers, got_rows, order)
    if r is None and c is None and not checkpoint_tensors:
        return None
    return NonFinite(r, c, list(checkpoint_tensors), candle_label, tuple(order))
