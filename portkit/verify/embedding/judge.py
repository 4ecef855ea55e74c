"""Judging an embedding model's run: each text's sentence embedding and encoder output against the
truth (sentence-transformers in f64) on a floor measured in the run (`judge.floor.Floor`: candle
may be `FACTOR` times as far from the truth as the f32 reference is), each layer the same way to
say where a difference starts, and each row of one padded batch against the reference's batch
and against the same text alone. Only attended positions count: a pad's hidden state is nobody's
output. Pure numpy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portkit.verify.embedding.candle import CandleSide
from portkit.verify.embedding.pooling import cosine
from portkit.verify.embedding.reference import Side
from portkit.verify.judge.floor import FACTOR, LAYER_FACTOR, Floor, usable_truth


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return math.nan if np.isnan(d).any() else float(d.max()) if d.size else 0.0


def floor_of(
    candle: np.ndarray, reference: np.ndarray, truth: np.ndarray, factor: float = FACTOR, kind: str = "value"
) -> Floor:
    if usable_truth(reference, truth - reference) is None and np.isfinite(reference).all():
        # transformers in f64 gave NaN where its f32 run did not (ModernBERT's padded batch does):
        # no truth to measure a floor on; candle against the f32 reference on the least floor
        return Floor(
            candle=_max_abs(candle, reference),
            reference=0.0,
            scale=float(np.abs(reference).max()) if reference.size else 0.0,
            factor=factor,
            kind="no-truth",
        )
    return Floor(
        candle=_max_abs(candle, truth),
        reference=_max_abs(reference, truth),
        scale=float(np.abs(truth).max()) if truth.size else 0.0,
        factor=factor,
        kind=kind,
    )


@dataclass(frozen=True)
class LayerRow:
    name: str  # "embeddings", "layers.0.attention", "layers.0.intermediate", "layers.0", ...
    floor: Floor
    max_diff: float  # max |candle - reference|


@dataclass
class RowCheck:
    """One text: its embedding, its encoder output and (with the capture) its layers."""

    text: str
    tag: str
    tokens: int
    embedding: Floor | None = None
    output: Floor | None = None
    cosine: float = math.nan  # candle's embedding vs the reference's
    max_diff: float = math.nan  # max |candle - reference| of the embedding
    layers: list[LayerRow] = field(default_factory=list)
    alone_diff: float | None = None  # a batch row: max |row - the same text alone| (candle's embedding)
    failure: str | None = None
    candle_nonfinite: bool = False  # candle's own embedding holds NaN or inf

    @property
    def ok(self) -> bool:
        return (
            self.failure is None
            and self.embedding is not None
            and self.embedding.ok
            and (self.output is None or self.output.ok)
        )

    @property
    def first_layer_out(self) -> str | None:
        return next((r.name for r in self.layers if not r.floor.ok), None)

    @property
    def nonfinite(self) -> bool:
        return self.candle_nonfinite

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tag": self.tag,
            "tokens": self.tokens,
            "ok": self.ok,
            "cosine": self.cosine,
            "max_abs_diff": self.max_diff,
            "embedding": self.embedding.to_json() if self.embedding else None,
            "output": self.output.to_json() if self.output else None,
            "first_layer_out_of_floor": self.first_layer_out,
            "layers": [{"name": r.name, "max_abs_diff": r.max_diff, **r.floor.to_json()} for r in self.layers],
            **({"alone_max_abs_diff": self.alone_diff} if self.alone_diff is not None else {}),
            **({"failure": self.failure} if self.failure else {}),
        }


def check_row(
    text: str, tag: str, mask_row: np.ndarray, got: CandleSide, ref: Side, truth: Side, row: int = 0
) -> RowCheck:
    """Row `row` of one forward. `mask_row`: [seq] 1 on the text's tokens."""
    keep = mask_row.astype(bool)
    c = RowCheck(text=text, tag=tag, tokens=int(keep.sum()))
    if got.failure is not None or got.embeddings is None or got.last is None:
        c.failure = got.failure or "candle returned nothing"
        return c
    ge, re_, te = got.embeddings[row], ref.embeddings[row], truth.embeddings[row]
    c.candle_nonfinite = not bool(np.isfinite(ge).all())
    c.embedding = floor_of(ge, re_, te)
    c.cosine = float(cosine(ge[None], re_[None])[0])
    c.max_diff = _max_abs(ge, re_)
    c.output = floor_of(got.last[row][keep], ref.last[row][keep], truth.last[row][keep])
    if (
        got.hidden is not None
        and ref.hidden is not None
        and truth.hidden is not None
        and got.hidden.shape[0] == ref.hidden.shape[0]
    ):
        for i in range(got.hidden.shape[0]):
            name = "embeddings" if i == 0 else f"layers.{i - 1}"
            # a layer's sub-layers, in its order, before its output: where inside it a difference starts
            subs = [
                k
                for k in got.sublayers
                if i and k.startswith(f"{name}.") and k in ref.sublayers and k in truth.sublayers
            ]
            for k in subs:
                g, r, t = got.sublayers[k][row][keep], ref.sublayers[k][row][keep], truth.sublayers[k][row][keep]
                c.layers.append(LayerRow(k, floor_of(g, r, t, factor=LAYER_FACTOR), _max_abs(g, r)))
            g, r, t = got.hidden[i][row][keep], ref.hidden[i][row][keep], truth.hidden[i][row][keep]
            c.layers.append(LayerRow(name, floor_of(g, r, t, factor=LAYER_FACTOR), _max_abs(g, r)))
    return c


@dataclass
class BatchCheck:
    """One padded batch of every text: each row against the reference's batch and against the same text alone."""

    rows: list[RowCheck]
    seq: int  # the padded length

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def padded_rows(self) -> int:
        return sum(1 for r in self.rows if r.tokens < self.seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seq": self.seq,
            "padded_rows": self.padded_rows,
            "rows": [r.to_json() for r in self.rows],
        }


def check_batch(
    texts: Sequence[tuple[str, str]],
    mask: np.ndarray,
    got: CandleSide,
    ref: Side,
    truth: Side,
    alone: Sequence[CandleSide],
) -> BatchCheck:
    rows = []
    for i, (text, tag) in enumerate(texts):
        r = check_row(text, tag, mask[i], got, ref, truth, row=i)
        own = alone[i].embeddings
        if got.embeddings is not None and own is not None:
            r.alone_diff = _max_abs(got.embeddings[i], own[0])
        rows.append(r)
    return BatchCheck(rows=rows, seq=int(mask.shape[1]))


def check_alone(
    texts: Sequence[tuple[str, str]],
    singles: Sequence[Any],
    rows: Sequence[CandleSide],
    refs: Sequence[Side],
    truths: Sequence[Side],
    alone: Sequence[CandleSide],
    seq: int,
) -> BatchCheck:
    """Rows that each hold one text's own tokens (a right-padded batch's rows cut to them, or the
    texts one after another through one model) against the same text alone through
    sentence-transformers, and against candle's run of it alone."""
    out = []
    for (text, tag), enc, got, r, t, a in zip(texts, singles, rows, refs, truths, alone, strict=False):
        row = check_row(text, tag, enc.mask[0], got, r, t)
        if got.embeddings is not None and a.embeddings is not None:
            row.alone_diff = _max_abs(got.embeddings[0], a.embeddings[0])
        out.append(row)
    return BatchCheck(rows=out, seq=seq)


def worst_cosine(rows: Sequence[RowCheck]) -> float:
    vals = [r.cosine for r in rows if not math.isnan(r.cosine)]
    if any(math.isnan(r.cosine) for r in rows if r.failure is None):
        return math.nan
    return min(vals) if vals else math.nan
