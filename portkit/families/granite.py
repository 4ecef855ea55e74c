"""candle 0.11.0 `models::granite`: `GraniteConfig` (granite.rs:38-52) then `into_config(false)`
(granite.rs:64-82).

`rope_theta` is an f32 with serde default 10000 (granite.rs:46-47, 60-62): a transformers-5
save (theta only in `rope_parameters`) parses and runs at 10000. `num_key_value_heads`
defaults to `num_attention_heads` (granite.rs:56-58). The granite multipliers,
`tie_word_embeddings`, `hidden_act` and the bias flags are not fields: never read.
"""

from __future__ import annotations

from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_ROPE_THETA = 10000.0

_de_rope = serde.de_struct(
    "GraniteRopeConfig",
    (
        Field("factor", serde.de_f32),
        Field("low_freq_factor", serde.de_f32),
        Field("high_freq_factor", serde.de_f32),
        Field("original_max_position_embeddings", serde.de_usize),
        Field("rope_type", serde.de_enum(("granite", "default"))),
    ),
)
_de_eos = serde.de_untagged("GraniteEosToks", serde.de_u32, serde.de_vec(serde.de_u32))

F32_FIELDS = frozenset({"rope_theta"})  # `GraniteConfig.rope_theta: f32` (granite.rs:46-47)
LOAD_PANICS = "Granite::load"  # `Block::load(...).unwrap()` per layer (granite.rs:451)
LM_HEAD = "always-loaded"  # granite.rs:448

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
    Field("rope_scaling", serde.de_option(_de_rope), None),
    Field("max_position_embeddings", serde.de_usize),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    return {
        **cfg,
        "num_key_value_heads": heads if kv is None else kv,
        "use_flash_attn": False,
        "head_dim": cfg["hidden_size"] // heads if heads else None,
    }


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `granite::Granite::load` requests (granite.rs:446-452): embed, `lm_head.weight` always
    (there is no tie), `model.norm`, then the layers with no biases (granite.rs:316-324, 366-369);
    a failed layer tensor is a panic (`Block::load(...).unwrap()`)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    t: T.Table = {}
    T.embedding(t, values)
    T.lm_head(t, values)
    T.norm(t, "model.norm", h)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd)
        T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    return t
