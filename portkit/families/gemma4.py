"""candle 0.11.0 `models::gemma4::text` (Gemma 4's text decoder, `TextModel`; `Gemma4ForCausalLM`,
`model_type` `gemma4_text`): the serde mirror of `Gemma4TextConfig` (gemma4/config.rs:70-112), the
same in 0.11.1; the module arrived in 0.11.0.

Required (no serde default): `hidden_size`, `intermediate_size`, `num_hidden_layers`,
`sliding_window`, `layer_types`; transformers 5 writes all five. The full-attention layers' head
size is `global_head_dim` (default 512, config.rs:43-45), a key transformers 5 never writes: it
keeps the value in `per_layer_config` (configuration_gemma4.py `__post_init__`). The full layers'
rope base is the top-level `rope_theta` (default 1e6, text.rs:536-543); the sliding layers' is
`rope_parameters.sliding_attention.rope_theta` (config.rs:131-137) and the rotated share
`rope_parameters.full_attention.partial_rotary_factor` (config.rs:123-129). `rope_type`s and
every scaling key are never read. `query_pre_attn_scalar` and `sliding_window_pattern` are parsed
and never used.

What the module computes apart from the config: every RmsNorm multiplies by `(weight + 1.0)`
(text.rs:28-41) and the attention scores are scaled by 1/sqrt(head_dim) (text.rs:359-363);
per-layer inputs, shared-KV layers, `attention_k_eq_v` and the MoE block are not implemented, and
`layer_scalar` is never read. `TextModel::forward` returns the last position's logits only
(text.rs:641-644).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

# the full layers always rotate proportionally (text.rs:109-136, :536-543): transformers' `proportional` rope
# type is computed, whatever `rope_type` says (a sliding layer's scaling is never computed: PK102 names it)
CANDLE_ROPE_SCALING = "proportional"
# text.rs:487-493 (the prefill mask: `j + sliding_window < i`), :271-275 (the sliding layers' RotatingKvCache of
# `effective_sliding_window`, config.rs:115-121), config.rs:139-144 (`is_sliding`: `layer_types`)
SLIDING_WINDOW = "layer-types"
ACTIVATION_KEYS = ("hidden_activation",)
TRANSFORMERS_ACTIVATION_KEY = "hidden_activation"
# transformers' Gemma4TextDecoderLayer, as gemma3's (q_norm/k_norm/v_norm act per head inside self_attn)
SUBLAYERS = (
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn",
    "post_attention_layernorm",
    "pre_feedforward_layernorm",
    "mlp",
    "post_feedforward_layernorm",
)
# PK202: the tensors transformers' Gemma4ForCausalLM reads that the module has no place for
UNREAD_TEXTS = {
    "other": "transformers reads them: the per-layer-input and expert weights where their switches are on (PK128, "
    "PK130)",
    "multiplier": "transformers multiplies each layer's output by them (1.0 as it initialises them); candle's module "
    "has no such factor and computes as if each were 1: another model unless each is 1",
}
#: text.rs has no `layer_scalar`: transformers' `hidden_states *= self.layer_scalar` (modeling_gemma4.py:1417)
UNREAD_MULTIPLIERS = ("layer_scalar",)
#: the one value candle's serde defaults `global_head_dim` to (config.rs:43-45)
default_global_head_dim = 512
#: candle's defaults of the rope values it derives (config.rs:123-137) and of the full layers' base (:25-27)
default_partial_rotary = 0.25
default_local_theta = 10000.0
#: the RmsNorm gain candle adds to every norm weight (text.rs:40: `&self.weight + 1.0`)
norm_offset = 1.0

_de_layer_rope = serde.de_struct(
    "Gemma4RopeLayerParams",
    (
        Field("rope_theta", serde.de_option(serde.de_f64), None),
        Field("rope_type", serde.de_option(serde.de_string), None),
        Field("partial_rotary_factor", serde.de_option(serde.de_f64), None),
    ),
)
_de_rope = serde.de_struct(
    "Gemma4RopeParameters",
    (
        Field("full_attention", serde.de_option(_de_layer_rope), None),
        Field("sliding_attention", serde.de_option(_de_layer_rope), None),
        Field("rope_theta", serde.de_option(serde.de_f64), None),
        Field("rope_type", serde.de_option(serde.de_string), None),
        Field("partial_rotary_factor", serde.de_option(serde.de_f64), None),
    ),
)

# transformers attends both ways with "all" (configuration_gemma4.py `__post_init__`; "vision" only among image
# tokens); candle reads the key only to size a rotating cache (config.rs:115-121): its masks stay causal.
# transformers' save also writes `is_causal: false`, which its masks read: causal again without both keys
BIDIRECTIONAL = ("all", {"use_bidirectional_attention": None, "is_causal": None})

FIELDS = (
    Field("attention_bias", serde.de_bool, False),
    Field("head_dim", serde.de_usize, 256),
    Field("hidden_activation", de_activation, "gelu_pytorch_tanh"),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_attention_heads", serde.de_usize, 8),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize, 4),
    Field("rms_norm_eps", serde.de_f64, 1e-6),
    Field("rope_theta", serde.de_f64, 1e6),
    Field("vocab_size", serde.de_usize, 262144),
    Field("sliding_window", serde.de_usize),
    Field("final_logit_softcapping", serde.de_option(serde.de_f64), None),
    Field("query_pre_attn_scalar", serde.de_usize, 256),
    Field("max_position_embeddings", serde.de_usize, 131072),
    Field("tie_word_embeddings", serde.de_bool, True),
    Field("sliding_window_pattern", serde.de_usize, 6, aliases=("_sliding_window_pattern",)),
    Field("layer_types", serde.de_vec(serde.de_string)),
    Field("global_head_dim", serde.de_usize, default_global_head_dim),
    Field("num_global_key_value_heads", serde.de_option(serde.de_usize), None),
    Field("rope_parameters", serde.de_option(_de_rope), None),
    Field("use_bidirectional_attention", serde.de_option(serde.de_string), None),
    Field("use_flash_attn", serde.de_bool, False),
)


def is_sliding(values: dict[str, Any], layer: int) -> bool:
    """`Gemma4TextConfig::is_sliding` (config.rs:139-144): only the exact string slides; a layer past
    the list is a full one."""
    types = values["layer_types"]
    return layer < len(types) and types[layer] == "sliding_attention"


def layer_attention(values: dict[str, Any], layer: int) -> tuple[int, int]:
    """(head_dim, kv heads) of one layer as `Attention::new` picks them (text.rs:254-261)."""
    if is_sliding(values, layer):
        return values["head_dim"], values["num_key_value_heads"]
    kv = values["num_global_key_value_heads"]
    return values["global_head_dim"], values["num_key_value_heads"] if kv is None else kv


def rope_scaling_applied(values: dict[str, Any], rope_type: str) -> bool:
    """Whether candle computes transformers' `rope_type` for the full layers: `proportional`, always."""
    return rope_type == CANDLE_ROPE_SCALING


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    rp = cfg["rope_parameters"] or {}
    full, local = rp.get("full_attention") or {}, rp.get("sliding_attention") or {}
    prf, local_theta = full.get("partial_rotary_factor"), local.get("rope_theta")
    return {
        **cfg,
        # config.rs:123-137: the two values candle derives from `rope_parameters`
        "partial_rotary_factor": default_partial_rotary if prf is None else prf,
        "rope_local_base_freq": default_local_theta if local_theta is None else local_theta,
    }


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `gemma4::text::TextModel::new` requests (text.rs:531-569): the embedding, then per layer
    q/k/v/o (a bias each with `attention_bias`) of that layer's head size and kv heads, per-head
    `q_norm`/`k_norm` (text.rs:264-269), the bias-free MLP (:416-422) and four norms (:423-439);
    `model.norm`; `lm_head` unless `tie_word_embeddings`."""
    from portkit.families import tensors as T

    h, heads = values["hidden_size"], values["num_attention_heads"]
    bias = bool(values["attention_bias"])
    t: T.Table = {}
    T.embedding(t, values)
    for i, p in enumerate(T.layer_prefixes(values)):
        hd, kv = layer_attention(values, i)
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bias, o_bias=bias, qk_norm=(hd, hd))
        T.gated_mlp(t, p, h, values["intermediate_size"])
        for norm in (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ):
            T.norm(t, p + norm, h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t
