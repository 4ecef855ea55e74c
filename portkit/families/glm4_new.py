"""candle 0.11.0 `models::glm4_new` (GLM-4-0414: `Glm4ForCausalLM`, `model_type` `glm4`): the serde
mirror of `Config` (glm4_new.rs:10-28), the same fields in every release from 0.9.2 (which added the
module) to 0.11.1. (`models::glm4` is the older ChatGLM module: THUDM's `chatglm` checkpoints with
their own config keys, `ChatGLMModel`; it reads no `Glm4ForCausalLM` save.)

Required (no serde default): `rope_theta`, so a transformers-5 save, which keeps it only inside
`rope_parameters`, is refused with ``missing field `rope_theta` ``; and `tie_word_embeddings`,
`hidden_act`, the sizes and `rms_norm_eps`. Optional: `head_dim` (default hidden_size /
num_attention_heads, glm4_new.rs:39-41 and :136-138; transformers' is 128), `partial_rotary_factor`
(an f32: absent, candle rotates the whole head, glm4_new.rs:42-46; transformers rotates half),
`attention_bias` (absent: no q/k/v bias, glm4_new.rs:143-160; transformers' default is true),
`sliding_window` (read, never used) and `eos_token_id`.
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import BatchMask
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

F32_FIELDS = frozenset({"partial_rotary_factor"})  # `Config.partial_rotary_factor: Option<f32>` (glm4_new.rs:18)
# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "glm4_new.rs:38-62, :311"
# one row's mask as the buffer of (b, 1, tgt, tgt + offset), cast to the model dtype on every multi-token forward
# and added on every device (0.11.1 builds it with `utils::build_additive_causal_mask`)
BATCH_MASK = BatchMask("undersized", source="glm4_new.rs:332-357, :366", built="always", read="every-device")
# transformers' Glm4DecoderLayer: a norm after the attention and after the MLP too
SUBLAYERS = (
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn",
    "post_self_attn_layernorm",
    "post_attention_layernorm",
    "mlp",
    "post_mlp_layernorm",
)


def _de_eos(v: Any) -> Any:
    """glm4.rs:20-58 `EosTokenId`'s own visitor: a u64 no larger than u32::MAX, or a sequence of u32."""
    serde._check_range(v)
    if isinstance(v, list):
        return serde.de_vec(serde.de_u32)(v)
    n = serde.number(v)
    serde._check_range(n)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise serde.invalid_type(v, "an integer or a list of integers")
    if n > serde.U32_MAX:
        raise serde.SerdeError("value too large for u32")
    return n


FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("head_dim", serde.de_option(serde.de_usize), None),
    Field("partial_rotary_factor", serde.de_option(serde.de_f32), None),
    Field("attention_bias", serde.de_option(serde.de_bool), None),
    Field("num_key_value_heads", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
    Field("tie_word_embeddings", serde.de_bool),
    Field("rope_theta", serde.de_f64),
    Field("rms_norm_eps", serde.de_f64),
    Field("hidden_act", de_activation),
    Field("eos_token_id", serde.de_option(_de_eos), None),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads, hd = cfg["num_attention_heads"], cfg["head_dim"]
    return {
        **cfg,
        "head_dim": (cfg["hidden_size"] // heads if heads else None) if hd is None else hd,
        "attention_bias": bool(cfg["attention_bias"]),
    }


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `glm4_new::ModelForCausalLM::new` requests: the embedding, then per layer q/k/v with a
    bias iff `attention_bias` and `o_proj` without (glm4_new.rs:142-166), one fused
    `mlp.gate_up_proj` of 2 x intermediate_size and `mlp.down_proj` (glm4_new.rs:88-96), four norms
    (input, post_attention, post_self_attn, post_mlp: glm4_new.rs:252-269); `model.norm`; `lm_head`
    unless `tie_word_embeddings` (glm4_new.rs:385-389)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    inter = values["intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bool(values["attention_bias"]))
        T.linear(t, p + "mlp.gate_up_proj", h, 2 * inter)
        T.linear(t, p + "mlp.down_proj", inter, h)
        for norm in ("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm", "post_mlp_layernorm"):
            T.norm(t, p + norm, h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t
