"""What verify asks transformers, typed: one request class per kind, the JSON line each travels
as to the child process (`portkit.verify.reference.child`, its protocol), and `answer`, the one
function that computes an answer, called by the child and by the in-process path alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from portkit.verify.reference import compute


@dataclass(frozen=True)
class ForwardRequest:
    """The reference: one forward over the prompt and `forced` (or, without it, its own greedy
    tokens), the prefill's layers and sub-layers, a continuation's and a batch's rows (`extra`),
    the f64 truth (`truth`) and the decoder layers re-run on candle's inputs (`refeed`)."""

    kind: ClassVar[str] = "forward"
    model_dir: str
    files: list[str]
    mode: str  # streamed | whole
    prompt: list[int]
    forced: list[int] | None
    tokens: int
    sublayers: list[str] = field(default_factory=list)
    extra: dict[str, Any] | None = None
    truth: bool = False
    #: decoder layer index -> candle's input to it; travels after the line, as an `arrayblob`
    refeed: dict[int, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def line(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(
            kind=self.kind,
            model_dir=self.model_dir,
            files=self.files,
            mode=self.mode,
            prompt=self.prompt,
            forced=self.forced,
            tokens=self.tokens,
            sublayers=self.sublayers,
        )
        if self.extra is not None:  # only then: the plain request stays as it was
            doc["extra"] = self.extra
        if self.truth:
            doc["truth"] = True
        return doc


@dataclass(frozen=True)
class TruthRequest:
    """The f64 truth of a reference sent without it (`ForwardRequest.truth` False): transformers
    in f64 on `fed` (`compute.truth_forward`), its rows and layers in f64, and the decoder layers
    re-run on candle's inputs (`refeed`); the f32 reference's error is taken by who asked
    (`compute.truth_deltas`)."""

    kind: ClassVar[str] = "truth"
    model_dir: str
    files: list[str]
    prompt: list[int]
    fed: list[int]
    tokens: int
    sublayers: list[str] = field(default_factory=list)
    refeed: dict[int, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def line(self) -> dict[str, Any]:
        return dict(
            kind=self.kind,
            model_dir=self.model_dir,
            files=self.files,
            prompt=self.prompt,
            fed=self.fed,
            tokens=self.tokens,
            sublayers=self.sublayers,
        )


@dataclass(frozen=True)
class AsCandleRequest:
    """transformers as candle computes (`CandleEdit.as_candle`): the edited config and tensors, on the
    reference's inputs; with `scan_len`, the effect by position over a longer prompt."""

    kind: ClassVar[str] = "as-candle"
    model_dir: str
    files: list[str]
    config_text: str
    tensor_edits: dict[str, str]
    prompt: list[int]
    forced: list[int]
    tokens: int
    scan_len: int
    sublayers: list[str] = field(default_factory=list)
    rope_table: str | None = None  # "f16" | "bf16": candle's RoPE table in that dtype (`rope_table.patch_rotary`)

    def line(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(
            kind=self.kind,
            model_dir=self.model_dir,
            files=self.files,
            config_text=self.config_text,
            tensor_edits=self.tensor_edits,
            prompt=self.prompt,
            forced=self.forced,
            tokens=self.tokens,
            scan_len=self.scan_len,
            sublayers=self.sublayers,
        )
        if self.rope_table is not None:  # only then: the plain request stays as it was
            doc["rope_table"] = self.rope_table
        return doc


@dataclass(frozen=True)
class TokenizerRequest:
    """transformers' tokenizer, recorded (`portkit.verify.reference.tokenizer.record`)."""

    kind: ClassVar[str] = "tokenizer"
    model_dir: str
    text: str | None = None
    chat: str | None = None

    def line(self) -> dict[str, Any]:
        return dict(kind=self.kind, model_dir=self.model_dir, text=self.text, chat=self.chat)


Request = ForwardRequest | TruthRequest | AsCandleRequest | TokenizerRequest
#: what `answer` gives: a forward's or an as-candle run's outputs (the effect by position among
#: its layers, `compute.EFFECT`), or a tokenizer's record
Answer = compute.ReferenceOutputs | dict


def loads_model(req: Request) -> bool:
    """Whether answering it loads a model's weights (all but the tokenizer's record): such a
    request waits for candle's turn in `portkit verify A B` (`alternation`, `session.candle_first`)."""
    return not isinstance(req, TokenizerRequest)


def from_line(doc: dict[str, Any], refeed: dict[int, np.ndarray] | None = None) -> Request:
    """The request a JSON line carries (`refeed`: the arrays that came after it)."""
    kind = doc.get("kind", "forward")
    if kind == "tokenizer":
        return TokenizerRequest(str(doc["model_dir"]), doc.get("text"), doc.get("chat"))
    if kind == "forward":
        return ForwardRequest(
            str(doc["model_dir"]),
            list(doc["files"]),
            doc["mode"],
            list(doc["prompt"]),
            doc.get("forced"),
            int(doc["tokens"]),
            list(doc.get("sublayers", [])),
            doc.get("extra"),
            bool(doc.get("truth")),
            refeed,
        )
    if kind == "truth":
        return TruthRequest(
            str(doc["model_dir"]),
            list(doc["files"]),
            list(doc["prompt"]),
            list(doc["fed"]),
            int(doc["tokens"]),
            list(doc.get("sublayers", [])),
            refeed,
        )
    if kind == "as-candle":
        return AsCandleRequest(
            str(doc["model_dir"]),
            list(doc["files"]),
            doc["config_text"],
            dict(doc.get("tensor_edits") or {}),
            list(doc["prompt"]),
            list(doc["forced"]),
            int(doc["tokens"]),
            int(doc["scan_len"]),
            list(doc.get("sublayers", [])),
            doc.get("rope_table"),
        )
    raise ValueError(f"unknown request {kind!r}")


def answer(req: Request, progress: Callable[[str], None]) -> Answer:
    """The request computed, in this process (compute.ReferenceFailed for a failure)."""
    if isinstance(req, TokenizerRequest):
        from portkit.verify.reference.tokenizer import record

        progress("tokenizer: transformers")
        return record(Path(req.model_dir), text=req.text, chat=req.chat)
    files = [Path(f) for f in req.files]
    if isinstance(req, TruthRequest):
        try:
            rows, layers = compute.truth_forward(
                Path(req.model_dir), files, req.prompt, req.fed, req.tokens, req.sublayers, progress, req.refeed
            )
        except Exception as e:  # no f64 kernel for an op (torch's grouped MoE matmul): who asked goes on without it
            raise compute.ReferenceFailed("truth", compute.truth_not_computed(e)) from None
        return compute.ReferenceOutputs(greedy=[], rows=rows, layers=layers, nonfinite_weights=[])
    if isinstance(req, ForwardRequest):
        return compute.forward_reference(
            Path(req.model_dir),
            files,
            req.prompt,
            req.forced,
            req.tokens,
            req.mode,
            progress,
            req.sublayers,
            req.extra,
            req.truth,
            req.refeed,
        )
    rows, layers, effect = compute.as_candle_reference(
        Path(req.model_dir),
        files,
        req.config_text,
        req.tensor_edits,
        req.prompt,
        req.forced,
        req.tokens,
        req.scan_len,
        progress,
        req.sublayers,
        req.rope_table,
    )
    return compute.ReferenceOutputs(
        greedy=[], rows=rows, layers={**layers, compute.EFFECT: effect}, nonfinite_weights=[]
    )
