"""The RoPE table candle 0.11.0 builds in the model dtype, emulated op by op (PK317, PK412).

phi3, qwen2, gemma, gemma2, gemma3, mixtral, olmo2, starcoder2 and stable_lm build their cos/sin
table in `RotaryEmbedding::new(vb.dtype(), ..)` (qwen2.rs:47-63, the others alike):

1. `inv_freq[i] = 1f32 / theta.powf(i / dim) as f32`, then `.to_dtype(dtype)`: rounded to dtype;
2. `Tensor::arange(0u32, max_seq_len).to_dtype(dtype)`: every position rounded to dtype (f16
   holds integers exactly only up to 2048, bf16 up to 256);
3. `t.matmul(&inv_freq)` in dtype: a (L, 1) x (1, D/2) product, one multiply per entry, the
   exact product (two 11- or 8-bit mantissas fit f32) rounded once to dtype;
4. `freqs.sin()` / `freqs.cos()` in dtype: candle's f16/bf16 unary ops compute in f32 and round.

transformers computes `position_ids.float() * inv_freq` and its cos/sin in f32. `candle_cos_sin`
is that table for any positions; `patch_rotary` makes transformers' rotary modules return it (the
reference-side counterfactual: transformers run with candle's table, `CandleEdit.as_candle`'s
`rope_table`); `table_error` measures it against the f32 table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The first position a dtype cannot hold (the integer after the last exact one, 2^(mantissa+1)).
FIRST_ROUNDED = {"f16": 2049, "bf16": 257}


def round_to(x: Any, dtype: str) -> np.ndarray:
    """`x` rounded to `dtype` (round to nearest even, as candle's `half` crate and torch), as f64."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        return b.view(np.float32).astype(np.float64)
    if dtype == "f32":
        return x.astype(np.float32).astype(np.float64)
    raise ValueError(f"unknown dtype {dtype!r}")


def candle_angles(inv_freq: Any, positions: Any, dtype: str) -> np.ndarray:
    """[..., D/2] angles as candle's table holds them: round(round(t) * round(inv_freq))."""
    t = round_to(positions, dtype)
    return round_to(t[..., None] * round_to(inv_freq, dtype), dtype)


def candle_cos_sin(inv_freq: Any, positions: Any, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """candle's cos and sin rows for `positions` ([..., D/2], f64 holding dtype values)."""
    a = candle_angles(inv_freq, positions, dtype).astype(np.float32)
    return round_to(np.cos(a), dtype), round_to(np.sin(a), dtype)


def table_error(inv_freq: Any, length: int, dtype: str) -> dict[str, Any]:
    """candle's table over positions 0..length-1 against transformers' f32 one: the largest
    angle, cos and sin errors (radians; the angle error not wrapped, so past pi it means the
    angle is arbitrary) and the position where each first exceeds a thousandth of a radian."""
    inv = np.asarray(inv_freq, dtype=np.float32)
    pos = np.arange(length, dtype=np.float64)
    exact = (pos.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
    got = candle_angles(inv, pos, dtype)
    cos, sin = candle_cos_sin(inv, pos, dtype)
    da = np.abs(got - exact)
    dc = np.abs(cos - np.cos(exact.astype(np.float32)))
    ds = np.abs(sin - np.sin(exact.astype(np.float32)))
    over = np.nonzero(da.max(axis=1) > 1e-3)[0]
    return {
        "dtype": dtype,
        "length": int(length),
        "first_rounded_position": FIRST_ROUNDED.get(dtype),
        "first_angle_error_over_1e-3": int(over[0]) if over.size else None,
        "max_angle_error": float(da.max()) if da.size else 0.0,
        "max_angle_error_position": int(np.unravel_index(da.argmax(), da.shape)[0]) if da.size else 0,
        "max_cos_error": float(dc.max()) if dc.size else 0.0,
        "max_sin_error": float(ds.max()) if ds.size else 0.0,
    }


def patch_rotary(model: Any, dtype: str) -> int:
    """Every rotary module of `model` (transformers' `*RotaryEmbedding`: `inv_freq`, or gemma3's
    `{layer_type}_inv_freq`, and `attention_scaling`) returns candle's `dtype` table instead of
    its f32 one; returns how many it patched (0: nothing to patch, the caller says so)."""
    import torch

    n = 0
    for mod in model.modules():
        if not type(mod).__name__.endswith("RotaryEmbedding"):
            continue

        def forward(x: Any, position_ids: Any, layer_type: str | None = None, _m: Any = mod) -> tuple[Any, Any]:
            pre = f"{layer_type}_" if layer_type else ""
            inv = getattr(_m, pre + "inv_freq").detach().to("cpu", torch.float32).numpy()
            scale = getattr(_m, pre + "attention_scaling", 1.0)
            cos, sin = candle_cos_sin(inv, position_ids.detach().cpu().numpy(), dtype)
            cos, sin = np.concatenate([cos, cos], -1) * scale, np.concatenate([sin, sin], -1) * scale
            return (
                torch.from_numpy(cos.astype(np.float32)).to(x.device, x.dtype),
                torch.from_numpy(sin.astype(np.float32)).to(x.device, x.dtype),
            )

        mod.forward = forward
        n += 1
    return n
