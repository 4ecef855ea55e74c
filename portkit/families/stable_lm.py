"""candle 0.11.0 `models::stable_lm`: the serde mirror of `Config` (stable_lm.rs:24).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (stable_lm.rs).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-loaded"  # stable_lm.rs:383

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "stable_lm.rs:92-110, :375"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("hidden_act", de_activation),
    Field("partial_rotary_factor", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("max_position_embeddings", serde.de_usize),
    Field("layer_norm_eps", serde.de_f64),
    Field("use_cache", serde.de_bool),
    Field("use_qkv_bias", serde.de_bool, False),
    Field("use_flash_attn", serde.de_bool, False),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `stable_lm::Model::new` requests: q/k/v with bias iff `use_qkv_bias`, o without
    (stable_lm.rs:206-215); LayerNorms with weight and bias (stable_lm.rs:323-332, 382); no
    `q_layernorm`/`k_layernorm`; `lm_head.weight` always (stable_lm.rs:383)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=values["use_qkv_bias"])
        T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "input_layernorm", h, bias=True)
        T.norm(t, p + "post_attention_layernorm", h, bias=True)
    T.norm(t, "model.norm", h, bias=True)
    T.lm_head(t, values)
    return t
