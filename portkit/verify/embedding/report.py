"""The record of one embedding run (`EmbeddingReport`) and its counterfactuals: what `run.py` builds,
`confirm.py` judges the findings on, and the reports print."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from portkit.encoders import BY_NAME
from portkit.verify.embedding.judge import BatchCheck, RowCheck, worst_cosine
from portkit.verify.embedding.reference import EmbeddingReference
from portkit.verify.embedding.tokens import TokensFed
from portkit.verify.judge.verdicts import Confirmation
from portkit.verify.outcome import AGREE, EXIT_AGREE, EXIT_MISMATCH, EXIT_NONFINITE, MISMATCH, NONFINITE

#: At f16/bf16 nothing in the run measures a floor (the truth is f32-or-better); a healthy half-precision
#: encoder keeps the embedding's direction: judged by its cosine to the f32 reference
HALF_COSINE = 0.999
#: the module PK620's counterfactual program loads a RoBERTa-family checkpoint with (candle's bert example's)
WRONG_MODULE = "bert"
#: how the correct program runs the padded batch: an encoder gets the mask in its module's convention;
#: a decoder's base model takes none and attends causally, so the batch is padded on the right
BATCH_PROGRAM = {
    False: "mask passed as the module expects",
    True: "padded on the right, no mask (the module takes none), each row pooled at its own last token",
}


@dataclass
class Counterfactual:
    """A program that does one thing otherwise, on the padded batch: what it costs."""

    name: str  # "no-mask", "pool-over-pads", "bert-module", "tokenizer-padded-batch", "one-model"
    what: str  # one line: what that program does
    batch: BatchCheck | None
    failure: str | None = None
    padded: bool = True  # its rows are a padded batch's (False: texts one after another)

    @property
    def worst_cosine(self) -> float:
        return worst_cosine(self.batch.rows) if self.batch is not None else math.nan

    @property
    def differs(self) -> bool:
        """The program's vectors are out of the floor the correct program's stay in."""
        return self.failure is not None or (self.batch is not None and not self.batch.ok)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "what": self.what,
            "differs": self.differs,
            "worst_cosine": self.worst_cosine,
            "failure": self.failure,
            "padded": self.padded,
            "batch": self.batch.to_json() if self.batch else None,
        }


@dataclass
class ReferenceCounterfactual:
    """sentence-transformers run again with config.json patched to what candle reads (a lint
    finding's `{"reference": {...}}`), against candle's texts alone: whether that is the whole difference."""

    name: str  # "reference: activation=gelu_pytorch_tanh"
    patch: dict[str, Any]
    rows: list[RowCheck]
    failure: str | None = None

    @property
    def agrees(self) -> bool:
        return self.failure is None and bool(self.rows) and all(r.ok for r in self.rows)

    @property
    def worst_ratio(self) -> float:
        ratios = [r.embedding.ratio for r in self.rows if r.embedding is not None]
        return max(ratios) if ratios else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "patch": self.patch,
            "agrees": self.agrees,
            "worst_ratio": self.worst_ratio,
            "failure": self.failure,
            "texts": [r.to_json() for r in self.rows],
        }


@dataclass
class EmbeddingReport:
    options: Any  # VerifyOptions
    family: str
    reference: EmbeddingReference
    singles: list[RowCheck]
    batch: BatchCheck | None
    counterfactuals: list[Counterfactual]
    findings: list[Confirmation]
    load_failure: str | None = None
    references: list[ReferenceCounterfactual] = field(default_factory=list)
    lint_note: str | None = None
    tokens: TokensFed | None = None  # what each side feeds: sentence-transformers' ids and the crate's
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def batch_program(self) -> str:
        return BATCH_PROGRAM[BY_NAME[self.family].decoder]

    @property
    def half(self) -> bool:
        return self.options.dtype != "f32"

    def row_ok(self, r: RowCheck) -> bool:
        if self.half:
            return r.failure is None and not math.isnan(r.cosine) and r.cosine >= HALF_COSINE
        return r.ok

    @property
    def nonfinite(self) -> bool:
        rows = self.singles + (self.batch.rows if self.batch else [])
        return any(r.nonfinite for r in rows)

    @property
    def candle_ok(self) -> bool:
        rows = self.singles + (self.batch.rows if self.batch else [])
        return self.load_failure is None and all(self.row_ok(r) for r in rows)

    @property
    def confirmed(self) -> list[Confirmation]:
        return [c for c in self.findings if c.confirmed]

    @property
    def exit_code(self) -> int:
        if self.nonfinite:
            return EXIT_NONFINITE
        return EXIT_AGREE if self.candle_ok else EXIT_MISMATCH

    def verdict(self) -> tuple[str, str]:
        n = len(self.singles)
        if self.nonfinite:
            return NONFINITE, f"NON-FINITE: candle's {self.options.dtype} embeddings hold NaN or inf"
        if self.load_failure is not None:
            return MISMATCH, f"MISMATCH: candle cannot load the checkpoint: {self.load_failure}"
        if self.candle_ok:
            batch = f" and as one padded batch of {len(self.batch.rows)}" if self.batch else ""
            conf = (
                f"; {len(self.confirmed)} finding{'s' if len(self.confirmed) != 1 else ''} about other programs "
                "confirmed"
                if self.confirmed
                else ""
            )
            return AGREE, f"candle agrees with sentence-transformers on {n} texts alone{batch}{conf}"
        bad = [r for r in self.singles if not self.row_ok(r)]
        bits = [f"{len(bad)} of {n} texts differ"] if bad else []
        if self.batch is not None and not all(self.row_ok(r) for r in self.batch.rows):
            bits.append("the padded batch differs")
        return MISMATCH, "MISMATCH: " + "; ".join(bits)

    def to_json(self) -> dict[str, Any]:
        ref = self.reference
        return {
            "schema_version": 1,
            "kind": "embedding",
            "model_dir": str(self.options.model_dir),
            "family": self.family,
            "device": self.options.device,
            "dtype": self.options.dtype,
            "versions": self.versions,
            "pipeline": {"modules": ref.pipeline(), "max_seq_length": ref.max_seq_length, "prompt": ref.prompt},
            "reference": {
                "runtime": "sentence-transformers",
                "attn_implementation": "eager",
                "dtype": "f32",
                "truth": "f64",
                "device": "cpu",
            },
            "tolerance": ({"kind": "cosine", "bound": HALF_COSINE} if self.half else {"kind": "floor", "truth": "f64"}),
            "load_failure": self.load_failure,
            "tokens_fed": self.tokens.to_json() if self.tokens else None,
            "texts": [r.to_json() for r in self.singles],
            "batch": self.batch.to_json() if self.batch else None,
            "batch_program": self.batch_program,
            "counterfactuals": [c.to_json() for c in self.counterfactuals],
            "counterfactual_references": [c.to_json() for c in self.references],
            "lint": {"ran": self.lint_note is None, "note": self.lint_note, "findings": len(self.findings)},
            "findings": [c.to_json() for c in self.findings],
            "verdict": self.verdict()[0],
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }
