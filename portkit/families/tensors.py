"""Building blocks for each family's `expected_tensors(values, available)`: the tensor names and
shapes a candle 0.11.0 module asks its VarBuilder for, in the order it asks.

Each family module (`portkit.families.<name>`) composes these from candle's effective config
(`FamilyView.values`); `portkit.rules.weights` compares the result with a checkpoint's headers,
and tests/native/test_family_weights_oracle.py holds it equal to what the real module requests
(`portkit_native.requested_tensors`). Order matters: candle stops at the first request that
fails, and that name is the one its error quotes.

candle-nn 0.11.0: `linear`/`linear_b` ask for `weight` [out, in] then `bias` [out]
(linear.rs); `embedding` for `weight` [vocab, hidden] (embedding.rs); `rms_norm` and gemma's own
RmsNorm for `weight` [size]; `layer_norm(size, eps: f64)` for `weight` and `bias` (layer_norm.rs:52-60,
146-164: an f64 eps means affine).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

Shape = tuple[int, ...]
Table = dict[str, Shape]


def linear(t: Table, name: str, d_in: int, d_out: int, bias: bool = False) -> None:
    t[f"{name}.weight"] = (d_out, d_in)
    if bias:
        t[f"{name}.bias"] = (d_out,)


def norm(t: Table, name: str, size: int, bias: bool = False) -> None:
    t[f"{name}.weight"] = (size,)
    if bias:
        t[f"{name}.bias"] = (size,)


def embedding(t: Table, v: dict[str, Any]) -> None:
    t["model.embed_tokens.weight"] = (v["vocab_size"], v["hidden_size"])


def lm_head(t: Table, v: dict[str, Any]) -> None:
    linear(t, "lm_head", v["hidden_size"], v["vocab_size"])


def attention(
    t: Table,
    p: str,
    h: int,
    heads: int,
    kv: int,
    hd: int,
    *,
    qkv_bias: bool = False,
    o_bias: bool = False,
    qk_norm: tuple[int, int] | None = None,
) -> None:
    """q/k/v/o projections under `{p}self_attn.`, then `q_norm`/`k_norm` of the given sizes."""
    linear(t, f"{p}self_attn.q_proj", h, heads * hd, qkv_bias)
    linear(t, f"{p}self_attn.k_proj", h, kv * hd, qkv_bias)
    linear(t, f"{p}self_attn.v_proj", h, kv * hd, qkv_bias)
    linear(t, f"{p}self_attn.o_proj", heads * hd, h, o_bias)
    if qk_norm is not None:
        norm(t, f"{p}self_attn.q_norm", qk_norm[0])
        norm(t, f"{p}self_attn.k_norm", qk_norm[1])


def gated_mlp(t: Table, p: str, h: int, inter: int, bias: bool = False) -> None:
    """gate/up/down projections under `{p}mlp.` (candle's have no bias; transformers' llama
    adds them with `mlp_bias`)."""
    linear(t, f"{p}mlp.gate_proj", h, inter, bias)
    linear(t, f"{p}mlp.up_proj", h, inter, bias)
    linear(t, f"{p}mlp.down_proj", inter, h, bias)


def dims(v: dict[str, Any]) -> tuple[int, int, int, int]:
    """(hidden, heads, kv_heads, head_dim) from candle's effective values."""
    return v["hidden_size"], v["num_attention_heads"], v["num_key_value_heads"], v["head_dim"]


def layer_prefixes(v: dict[str, Any]) -> list[str]:
    return [f"model.layers.{i}." for i in range(v["num_hidden_layers"])]


def standard(
    v: dict[str, Any],
    *,
    qkv_bias: bool = False,
    o_bias: bool = False,
    head_qk_norm: bool = False,
    extra_norms: tuple[str, ...] = (),
) -> Table:
    """embed, then per layer attention (with per-head `q_norm`/`k_norm` [head_dim] when
    `head_qk_norm`), gated MLP, `input_layernorm`, `extra_norms`,
    `post_attention_layernorm` (RmsNorm), then `model.norm`: the mistral/qwen2/gemma shape."""
    h, heads, kv, hd = dims(v)
    t: Table = {}
    embedding(t, v)
    for p in layer_prefixes(v):
        attention(t, p, h, heads, kv, hd, qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=(hd, hd) if head_qk_norm else None)
        gated_mlp(t, p, h, v["intermediate_size"])
        norm(t, f"{p}input_layernorm", h)
        for n in extra_norms:
            norm(t, f"{p}{n}", h)
        norm(t, f"{p}post_attention_layernorm", h)
    norm(t, "model.norm", h)
    return t
