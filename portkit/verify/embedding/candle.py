"""candle's side: the family's own encoder module (portkit_native.EncoderRunner) on the reference's
ids, then the pipeline's pooling, Dense and Normalize as a candle program applies them
(`pooling`). What the program passes candle's forward is each family's own API: the mask in its
module's convention (`portkit.encoders.Encoder.mask`), or none where its forward takes none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from portkit.encoders import BY_NAME
from portkit.verify.embedding import pooling
from portkit.verify.embedding.reference import Encoded, Step
from portkit.verify.errors import one_line

T = TypeVar("T")


@dataclass(frozen=True)
class CandleSide:
    embeddings: np.ndarray | None  # [rows, dim]
    last: np.ndarray | None  # the module's forward: [rows, seq, hidden]
    hidden: np.ndarray | None  # the capture copy's [n_layers + 1, rows, seq, hidden], when it ran
    failure: str | None = None  # candle's own error, one line
    sublayers: dict[str, np.ndarray] = field(default_factory=dict)  # the copy's "layers.N.<name>": [rows, seq, hidden]


def program_mask(family: str, mask: np.ndarray, *, passed: bool = True) -> list[list[int]] | None:
    """The mask a correct candle program passes (`passed`), or the one a program that passes none gets."""
    how = BY_NAME[family].mask  # the module's own convention (`Encoder.mask_source`)
    if not passed or how is None:
        return None
    m = mask if how == "attend" else 1 - mask
    return m.astype(int).tolist()


def apply_steps(
    hidden: np.ndarray,
    mask: np.ndarray,
    steps: Sequence[Step],
    prompt_length: int = 0,
    *,
    pool_mask: np.ndarray | None = None,
) -> np.ndarray:
    """The pipeline after the encoder on [rows, seq, dim] hidden states. `pool_mask`: the mask the
    pooling sees (a program that pools over pads passes all ones); default the tokens' mask."""
    x = hidden
    pm = (mask if pool_mask is None else pool_mask).copy()
    for s in steps:
        if s.kind == "pool":
            if prompt_length and not s.include_prompt:
                pm[:, :prompt_length] = 0
            x = pooling.pool(x, pm, s.mode or "mean")
        elif s.kind == "dense":
            assert s.weight is not None
            x = pooling.dense(x, s.weight, s.bias, s.activation)
        else:
            x = pooling.normalize(x)
    return x


def candle_attempt(call: Callable[[], T]) -> tuple[T | None, str | None]:
    """`call()`'s value and None, or None and candle's error on one line: a refusal, a load error
    or a panic (pyo3's PanicException is no Exception); Ctrl-C and exit still propagate."""
    try:
        return call(), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return None, one_line(e, 400)


def run_encoder(
    runner: Any,
    family: str,
    enc: Encoded,
    steps: Sequence[Step],
    *,
    capture: bool,
    mask_passed: bool = True,
    pool_over_pads: bool = False,
    one_model: bool = False,
) -> CandleSide:
    """`one_model`: through the one model the runner keeps across calls (qwen3's KV cache grows with
    each), as a program that loads it once and embeds text after text."""
    ids = enc.ids.astype(int).tolist()
    type_ids = enc.type_ids.astype(int).tolist() if enc.type_ids is not None else None
    mask = program_mask(family, enc.mask, passed=mask_passed)

    def forward() -> tuple[np.ndarray, np.ndarray | None, dict[str, np.ndarray]]:
        if one_model:
            return np.asarray(runner.hidden_states_one_model(ids)), None, {}
        last = np.asarray(runner.hidden_states(ids, type_ids, mask))  # the module's own forward decides
        if not capture:
            return last, None, {}
        got = runner.capture(ids, type_ids, mask)  # the copy's layers localise a difference
        n = sum(1 for k in got if k.startswith("layers.") and k.count(".") == 1)
        hidden = np.stack([np.asarray(got["embeddings"])] + [np.asarray(got[f"layers.{i}"]) for i in range(n)])
        return last, hidden, {k: np.asarray(v) for k, v in got.items() if k.count(".") == 2}

    out, failure = candle_attempt(forward)
    if out is None:
        return CandleSide(None, None, None, failure=failure)
    last, hidden, subs = out
    pm = np.ones_like(enc.mask) if pool_over_pads else None
    return CandleSide(apply_steps(last, enc.mask, steps, enc.prompt_length, pool_mask=pm), last, hidden, sublayers=subs)


def right_padded(singles: Sequence[Encoded], pad_id: int) -> Encoded:
    """The texts as one batch padded on the right: for a causal module with no padding mask
    (`Encoder.decoder`) each row's tokens then sit where they sit alone and never see a pad."""
    seq = max(int(e.ids.shape[1]) for e in singles)
    ids = np.full((len(singles), seq), pad_id, dtype=np.int64)
    mask = np.zeros((len(singles), seq), dtype=np.int64)
    for i, e in enumerate(singles):
        n = int(e.ids.shape[1])
        ids[i, :n], mask[i, :n] = e.ids[0], 1
    return Encoded(ids=ids, type_ids=None, mask=mask, prompt_length=singles[0].prompt_length if singles else 0)


def row_sides(got: CandleSide, lengths: Sequence[int]) -> list[CandleSide]:
    """A right-padded batch's rows, each cut to its own tokens: the shape of the same text alone."""
    if got.embeddings is None or got.last is None:
        return [CandleSide(None, None, None, failure=got.failure) for _ in lengths]
    return [CandleSide(got.embeddings[i : i + 1], got.last[i : i + 1, :n], None) for i, n in enumerate(lengths)]
