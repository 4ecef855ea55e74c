"""candle 0.11.0 `models::llama`: the serde mirror of `LlamaConfig` and what `into_config(false)` makes of it.

`LlamaConfig` is `#[derive(serde::Deserialize)]` with 13 fields and no
`deny_unknown_fields` (candle-transformers-0.11.0/src/models/llama.rs:38-54);
`into_config(false)` fills `num_key_value_heads` (default: heads) and `tie_word_embeddings`
(default false) (llama.rs:56-85); `rope_theta` has a serde default of 10000 that applies only
when the key is absent (llama.rs:47,62-64); head_dim is always hidden_size / heads
(llama.rs:156,366-367,379). `effective()` is, key for key, what
`portkit_native.candle_config(text)` returns: the native oracle test holds the two together.
"""

from __future__ import annotations

import math

from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_ROPE_THETA = 10000.0

_de_rope_type = serde.de_enum(("llama3", "default"))
_de_llama3 = serde.de_struct(
    "Llama3RopeConfig",
    (
        Field("factor", serde.de_f32),
        Field("low_freq_factor", serde.de_f32),
        Field("high_freq_factor", serde.de_f32),
        Field("original_max_position_embeddings", serde.de_usize),
        Field("rope_type", _de_rope_type),
    ),
)
_de_eos = serde.de_untagged("LlamaEosToks", serde.de_u32, serde.de_vec(serde.de_u32))

FIELDS = (
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("vocab_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_option(serde.de_usize), None),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f32, DEFAULT_ROPE_THETA),
    Field("bos_token_id", serde.de_option(serde.de_u32), None),
    Field("eos_token_id", serde.de_option(_de_eos), None),
    Field("rope_scaling", serde.de_option(_de_llama3), None),
    Field("max_position_embeddings", serde.de_usize),
    Field("tie_word_embeddings", serde.de_option(serde.de_bool), None),
)
REQUIRED_FIELDS = tuple(f.name for f in FIELDS if f.default is serde.MISSING)

# --- what differs from the other families, as data the shared rules read ----------------------
CANDLE_NAME = "candle {release}"  # how messages name this module (the first family: no module name)
F32_FIELDS = frozenset({"rope_theta"})  # serde reads it as f32: compare transformers' value in f32
LOAD_PANICS = "Llama::load"  # builds each block with `.unwrap()` (llama.rs:524): a bad layer tensor panics
NAME_SCHEME = "Llama names"  # how PK203 names the tensor names this module looks up
# the only rope scaling candle's llama computes, and the shape `Llama3RopeConfig` reads it in
CANDLE_ROPE_SCALING = "llama3"
ROPE_KEYS_SHOWN = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
# the names `Llama::load` looks up, and the layer parts transformers' LlamaForCausalLM may add
# (biases, a stored `rotary_emb.inv_freq`): PK203 holds a checkpoint to this list
_LAYER_PARTS = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
)
_ATTN_BIAS = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "self_attn.o_proj.bias")
_MLP_BIAS = ("mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias")
KNOWN_TENSOR_NAMES = (
    frozenset({"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"}),
    frozenset(_LAYER_PARTS + _ATTN_BIAS + _MLP_BIAS + ("self_attn.rotary_emb.inv_freq",)),
)
# PK202's reasons in llama's words: its transformers tensor table says what transformers loads
UNREAD_TEXTS = {
    "tied-lm-head": "`tie_word_embeddings` is true, so both use the embedding matrix instead",
    "other": "transformers does not load them either",
}


def _finite_or_none(v: Any) -> Any:
    # serde_json writes a non-finite f32 as null: the oracle returns None
    return None if isinstance(v, float) and not math.isfinite(v) else v


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads, kv, rs = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rope_scaling"]
    scaling = None
    if rs is not None:
        scaling = {
            k: _finite_or_none(v) if k in ("factor", "low_freq_factor", "high_freq_factor") else v
            for k, v in rs.items()
        }
    return {
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"],
        "vocab_size": cfg["vocab_size"],
        "num_hidden_layers": cfg["num_hidden_layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": heads if kv is None else kv,
        "head_dim": cfg["hidden_size"] // heads if heads else None,  # candle divides by zero at load
        "rms_norm_eps": _finite_or_none(cfg["rms_norm_eps"]),
        "rope_theta": _finite_or_none(cfg["rope_theta"]),
        "bos_token_id": cfg["bos_token_id"],
        "eos_token_id": cfg["eos_token_id"],
        "rope_scaling": scaling,
        "max_position_embeddings": cfg["max_position_embeddings"],
        "tie_word_embeddings": bool(cfg["tie_word_embeddings"]) if cfg["tie_word_embeddings"] is not None else False,
        "use_flash_attn": False,
    }


def rope_scaling_applied(values: dict[str, Any], rope_type: str) -> bool:
    """Whether candle computes transformers' `rope_type` scaling from these values: llama3 only,
    from a top-level `rope_scaling` whose `rope_type` is llama3 (`default` is unscaled, llama.rs:166-171)."""
    rs = values.get("rope_scaling")
    return rope_type == "llama3" and isinstance(rs, dict) and rs.get("rope_type") == "llama3"


def rope_scaling_tail(values: dict[str, Any], rope_type: str, who: str) -> str:
    """What candle's llama does with transformers' `rope_type` scaling (PK102)."""
    if values.get("rope_scaling") is not None:
        tail = f"{who} reads `rope_scaling` with `rope_type`=default and computes unscaled frequencies"
    else:
        tail = f"{who} reads no top-level `rope_scaling` and computes unscaled frequencies"
    if rope_type != CANDLE_ROPE_SCALING:
        tail += f"; {who} has no `{rope_type}` scaling"
    return tail


def rope_scaling_edits(params: dict[str, Any]) -> dict[str, Any]:
    """transformers' standardized llama3 rope dict in the shape candle's `Llama3RopeConfig` reads."""
    return {
        "factor": params["factor"],
        "low_freq_factor": params["low_freq_factor"],
        "high_freq_factor": params["high_freq_factor"],
        "original_max_position_embeddings": params["original_max_position_embeddings"],
        "rope_type": "llama3",
    }


def transformers_tensors(ftv: Any) -> dict[str, tuple[int, ...]]:
    """What `LlamaForCausalLM` loads for transformers' view of the config
    (`portkit.semantics.transformers.FamilyTransformersView`; modeling_llama.py:205-229, :156-161,
    :410-421): candle's table plus the biases `attention_bias`/`mlp_bias` add. PK202 and PK206
    say whether transformers expects what the file holds."""
    v = ftv.values
    return _tensors(v, attention_bias=bool(v["attention_bias"]), mlp_bias=bool(v["mlp_bias"]))


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `Llama::load` requests (llama.rs:515-525): embed, `lm_head.weight` unless
    `tie_word_embeddings` (:517-521), `model.norm`, then the layers with no biases (:362-371,
    :410-416, :452-461); a failed layer tensor is a panic (`Block::load(...).unwrap()`, :524)."""
    return _tensors(values)


def _tensors(
    values: dict[str, Any], *, attention_bias: bool = False, mlp_bias: bool = False
) -> dict[str, tuple[int, ...]]:
    """Llama's decoder in load order; candle's has no biases, transformers' has those its flags ask for."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    t: T.Table = {}
    T.embedding(t, values)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    T.norm(t, "model.norm", h)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=attention_bias, o_bias=attention_bias)
        T.gated_mlp(t, p, h, values["intermediate_size"], bias=mlp_bias)
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    return t
