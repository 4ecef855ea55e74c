"""candle 0.11.0 `models::olmo2`: the serde mirror of `Config` (olmo2.rs:13).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (olmo2.rs).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import ContinuationMask
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

CONTINUATION_MASK = ContinuationMask(
    "prefix-in-model-dtype", source="olmo2.rs:316-318"
)  # `Tensor::zeros(.., self.dtype, ..)` cat an f32 mask

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "olmo2.rs:36-52, :282"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("attention_bias", serde.de_bool),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("hidden_act", de_activation),
    Field("max_position_embeddings", serde.de_usize),
    Field("rope_theta", serde.de_f64),
    Field("tie_word_embeddings", serde.de_bool),
    Field("clip_qkv", serde.de_option(serde.de_f64), None),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `olmo2::Model::new` requests: q/k/v/o with bias iff `attention_bias`, `q_norm` over the
    whole hidden size and `k_norm` over kv_heads*head_dim (olmo2.rs:127-133); post-norms only
    (`post_feedforward_layernorm`, `post_attention_layernorm`, olmo2.rs:226-237); `lm_head.weight`
    unless `tie_word_embeddings` (olmo2.rs:290-294)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    bias = values["attention_bias"]
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bias, o_bias=bias, qk_norm=(h, kv * hd))
        T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "post_feedforward_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t


#: The sub-layers the porting kit records, in computation order (transformers modeling_olmo2.py
#: Olmo2DecoderLayer: no input norm; post-norms on the attention and MLP outputs, before each
#: residual add).
SUBLAYERS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn",
    "post_attention_layernorm",
    "mlp",
    "post_feedforward_layernorm",
)
