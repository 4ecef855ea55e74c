"""candle 0.11.0 `models::starcoder2`: the serde mirror of `Config` (starcoder2.rs:23).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (starcoder2.rs).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-tied"  # starcoder2.rs:288
SLIDING_WINDOW = "every-layer"  # starcoder2.rs:306-310

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "starcoder2.rs:52-69, :280"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("hidden_act", de_activation),
    Field("max_position_embeddings", serde.de_usize),
    Field("norm_epsilon", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("use_bias", serde.de_bool),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `starcoder2::Model::new` requests: q/k/v/o and `mlp.c_fc`/`mlp.c_proj` with bias iff
    `use_bias` (starcoder2.rs:100-101, 138-142); LayerNorms with weight and bias (starcoder2.rs:229-235,
    287); never `lm_head.weight`: the head is always `embed_tokens` (starcoder2.rs:288)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    bias, inter = values["use_bias"], values["intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bias, o_bias=bias)
        T.linear(t, p + "mlp.c_fc", h, inter, bias)
        T.linear(t, p + "mlp.c_proj", inter, h, bias)
        T.norm(t, p + "input_layernorm", h, bias=True)
        T.norm(t, p + "post_attention_layernorm", h, bias=True)
    T.norm(t, "model.norm", h, bias=True)
    return t
