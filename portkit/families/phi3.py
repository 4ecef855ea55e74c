"""candle 0.11.0 `models::phi3`: the serde mirror of `Config` (phi3.rs:43-61), and 0.9.1's (`fields_at`).

`rope_scaling` is read only in the legacy LongRoPE shape `{short_factor, long_factor,
"type": "longrope"}` (`RopeScaling`, phi3.rs:33-39); transformers 5 moves it into
`rope_parameters`, which candle never reads. head_dim is hidden_size / num_attention_heads
(phi3.rs:175).
"""

from __future__ import annotations

from portkit.candle_release import key
from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

_de_rope_scaling = serde.de_struct(
    "RopeScaling",
    (
        Field("short_factor", serde.de_vec(serde.de_f32)),
        Field("long_factor", serde.de_vec(serde.de_f32)),
        Field("type", serde.de_enum(("longrope",))),
    ),
)

QUERY_PROJ = "qkv_proj"  # q, k and v fused in one projection (phi3.rs:184-187)

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "phi3.rs:77-136, :363"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_act", de_activation),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("bos_token_id", serde.de_option(serde.de_u32), None),
    Field("eos_token_id", serde.de_option(serde.de_u32), None),
    Field("rope_scaling", serde.de_option(_de_rope_scaling), None),
    Field("max_position_embeddings", serde.de_usize),
    Field("original_max_position_embeddings", serde.de_option(serde.de_usize), None),
    Field("partial_rotary_factor", serde.de_option(serde.de_f64), None),
    Field("tie_word_embeddings", serde.de_bool, False),
)


def _de_unused_string(v: Any) -> None:
    """0.9.1's `rope_scaling: Option<String>`: parsed (a LongRoPE object is refused) and never read again."""
    serde.de_option(serde.de_string)(v)
    return None


#: candle 0.9.1's Config (phi3.rs 0.9.1:28-43): `rope_scaling` is a string, and there is no
#: `original_max_position_embeddings`, `partial_rotary_factor` or `tie_word_embeddings` (`lm_head`
#: always loaded, :295); `RopeScaling` and the three fields arrived in 0.9.2 (phi3.rs 0.9.2:55-60)
_FIELDS_0_9_1 = (
    *FIELDS[:11],
    Field("rope_scaling", _de_unused_string, None),
    Field("max_position_embeddings", serde.de_usize),
)
#: what 0.9.1 computes for the fields it does not have (`effective`)
_ABSENT_IN_0_9_1 = {
    "original_max_position_embeddings": None,
    "partial_rotary_factor": None,
    "tie_word_embeddings": False,
}


def fields_at(release: str) -> tuple[Field, ...]:
    """The Config fields of phi3.rs in `release`."""
    return _FIELDS_0_9_1 if key(release) < key("0.9.2") else FIELDS


def rope_scaling_tail(values: dict[str, Any], rope_type: str, who: str) -> str:
    """What candle's phi3 does with transformers' `rope_type` scaling (PK102): it reads a legacy
    longrope `rope_scaling` (phi3.rs:95-140) and applies it its own way."""
    if rope_type == "longrope" and values.get("rope_scaling") is not None:
        return (
            f"{who} reads the legacy `rope_scaling` but multiplies the frequencies by the factors "
            "where transformers divides by them, and applies no attention factor"
        )
    return f"{who} reads no rope scaling and computes unscaled frequencies"


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**_ABSENT_IN_0_9_1, **cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `phi3::Model::new` requests: fused `qkv_proj` and `gate_up_proj`, no biases
    (phi3.rs:184-187, 278-281); `lm_head.weight` unless `tie_word_embeddings` (phi3.rs:371-375)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    inter = values["intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.linear(t, p + "self_attn.qkv_proj", h, heads * hd + 2 * kv * hd)
        T.linear(t, p + "self_attn.o_proj", heads * hd, h)
        T.linear(t, p + "mlp.gate_up_proj", h, 2 * inter)
        T.linear(t, p + "mlp.down_proj", inter, h)
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t


#: The sub-layers the porting kit records, in computation order (transformers modeling_phi3.py
#: Phi3DecoderLayer: one fused qkv_proj).
SUBLAYERS = (
    "input_layernorm",
    "self_attn.qkv_proj",
    "self_attn",
    "post_attention_layernorm",
    "mlp",
)
