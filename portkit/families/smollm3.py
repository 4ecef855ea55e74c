"""candle 0.11.0 `models::smol::smollm3` (SmolLM3: `SmolLM3ForCausalLM`): the serde mirror of
`Config` (smol/smollm3.rs:9-36); the module arrived in 0.9.2.

`rope_theta` is required (no serde default): a transformers-5 save keeps it only inside
`rope_parameters`, so candle refuses it with ``missing field `rope_theta` ``. The NoPE layers are
`no_rope_layers` (0: no rotary) where the list reaches, else every `no_rope_layer_interval`-th,
else none (smol/smollm3.rs:39-56); transformers computes the list from the interval, 4 by default,
when config.json has none. `use_sliding_window` true fails the build (smol/smollm3.rs:172-175).
`lm_head` is `embed_tokens` when `tie_word_embeddings`, else `lm_head.weight` (smol/smollm3.rs:451-455).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import BatchMask
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

SLIDING_WINDOW = "unsupported"  # smol/smollm3.rs:172-175 (`sliding window is not supported`)
# one row's mask as the buffer of (b, 1, tgt, tgt + offset), cast to the model dtype on every multi-token forward
BATCH_MASK = BatchMask("undersized", source="smol/smollm3.rs:396-420, :288-290", built="always", read="every-device")

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize),
    Field("tie_word_embeddings", serde.de_bool),
    Field("rope_theta", serde.de_f64),
    Field("rms_norm_eps", serde.de_f64),
    Field("hidden_act", de_activation),
    Field("attention_bias", serde.de_option(serde.de_bool), None),
    Field("attention_dropout", serde.de_option(serde.de_f64), None),
    Field("mlp_bias", serde.de_option(serde.de_bool), None),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
    Field("use_sliding_window", serde.de_option(serde.de_bool), None),
    Field("rope_scaling", serde.de_option(serde.de_json), None),
    Field("bos_token_id", serde.de_option(serde.de_u32), None),
    Field("eos_token_id", serde.de_option(serde.de_u32), None),
    Field("pad_token_id", serde.de_option(serde.de_u32), None),
    Field("max_window_layers", serde.de_option(serde.de_usize), None),
    Field("no_rope_layers", serde.de_option(serde.de_vec(serde.de_usize)), None),
    Field("no_rope_layer_interval", serde.de_option(serde.de_usize), None),
)


def skips_rope(cfg: dict[str, Any], layer: int) -> bool:
    """`Config::should_skip_rope` (smol/smollm3.rs:39-56)."""
    listed, interval = cfg.get("no_rope_layers"), cfg.get("no_rope_layer_interval")
    if listed is not None and layer < len(listed):
        return bool(listed[layer] == 0)
    return interval is not None and interval > 0 and (layer + 1) % interval == 0


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `smollm3::ModelForCausalLM::new` requests: q/k/v/o with bias iff `attention_bias`
    (smol/smollm3.rs:184-209), the MLP with bias iff `mlp_bias` (:114-131), norms, and
    `lm_head.weight` unless tied (:451-455)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    bias, mlp_bias = bool(values["attention_bias"]), bool(values["mlp_bias"])
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bias, o_bias=bias)
        T.gated_mlp(t, p, h, values["intermediate_size"], mlp_bias)
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t
