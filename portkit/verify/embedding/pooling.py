"""What a candle program does after candle's encoder: the pooling, Dense and Normalize modules of
the sentence-transformers pipeline, written as such a program writes them (numpy here, candle ops
there), from the pipeline's own settings. Pure numpy.

sentence-transformers 6.3.0's own code, which the reference runs, is
sentence_transformers/sentence_transformer/modules/pooling.py (`Pooling._forward_padded`) and
sentence_transformers/base/modules/normalize.py.
"""

from __future__ import annotations

import numpy as np

MODES = ("mean", "cls", "max", "mean_sqrt_len_tokens", "lasttoken")


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """[batch, seq, dim] hidden states and a [batch, seq] 0/1 mask -> [batch, dim]."""
    h = hidden.astype(np.float64)
    m = mask.astype(np.float64)[:, :, None]
    if mode in ("mean", "mean_sqrt_len_tokens"):
        n = np.clip(m.sum(axis=1), 1e-9, None)
        total = (h * m).sum(axis=1)
        out = total / n if mode == "mean" else total / np.sqrt(n)
    elif mode == "cls":
        out = h[np.arange(h.shape[0]), mask.argmax(axis=1)]  # the first attended position
    elif mode == "max":
        out = np.where(m > 0, h, -np.inf).max(axis=1)
    elif mode == "lasttoken":
        # the last attended position, with left or right padding alike
        last = mask.shape[1] - 1 - mask[:, ::-1].argmax(axis=1)
        out = h[np.arange(h.shape[0]), last]
    else:
        raise ValueError(f"pooling mode {mode!r}: expected one of {', '.join(MODES)}")
    return out.astype(np.float32)


def dense(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, activation: str) -> np.ndarray:
    """sentence-transformers' Dense: activation(x @ W.T + b)."""
    y = x.astype(np.float64) @ weight.astype(np.float64).T
    if bias is not None:
        y = y + bias.astype(np.float64)
    if activation.endswith("Tanh"):
        y = np.tanh(y)
    elif not activation.endswith("Identity"):
        raise ValueError(f"Dense activation {activation!r}: only Tanh and Identity are computed here")
    return y.astype(np.float32)


def normalize(x: np.ndarray) -> np.ndarray:
    """L2 over the last axis, as torch.nn.functional.normalize (eps 1e-12)."""
    n = np.sqrt((x.astype(np.float64) ** 2).sum(axis=-1, keepdims=True))
    return (x / np.maximum(n, 1e-12)).astype(np.float32)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two [batch, dim] arrays (1.0 for identical rows, NaN where either has NaN)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    num = (a64 * b64).sum(axis=-1)
    den = np.sqrt((a64**2).sum(axis=-1) * (b64**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den
