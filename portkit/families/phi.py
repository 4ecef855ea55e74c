"""candle 0.11.0 `models::phi` (phi-1, phi-1.5, phi-2: `PhiForCausalLM`): the serde mirror of
`Config` (phi.rs:26-41), the same in every release from 0.9.1 to 0.11.1.

Every field but `num_key_value_heads` is required (no serde default): a transformers-5 save keeps
`rope_theta` and `partial_rotary_factor` only inside `rope_parameters`, so candle refuses it with
``missing field `rope_theta` ``. `rope_theta` is an f32 (phi.rs:38). `num_key_value_heads`
defaults to `num_attention_heads` (phi.rs:44-46); `head_dim` is hidden_size /
num_attention_heads (phi.rs:48-50). `tie_word_embeddings` is read and never used: `lm_head`
(with its bias) is always loaded (phi.rs:334).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

F32_FIELDS = frozenset({"rope_theta"})  # `Config.rope_theta: f32` (phi.rs:38)
LM_HEAD = "always-loaded"  # phi.rs:334
# transformers' PhiDecoderLayer: one norm feeding the attention and the MLP in parallel
SUBLAYERS = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn", "mlp")

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_option(serde.de_usize), None),
    Field("hidden_act", de_activation),
    Field("max_position_embeddings", serde.de_usize),
    Field("layer_norm_eps", serde.de_f64),
    Field("tie_word_embeddings", serde.de_bool),
    Field("rope_theta", serde.de_f32),
    Field("partial_rotary_factor", serde.de_f64),
    Field("qk_layernorm", serde.de_bool),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    return {
        **cfg,
        "num_key_value_heads": heads if kv is None else kv,
        "head_dim": cfg["hidden_size"] // heads if heads else None,
    }


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `phi::Model::new` requests: q/k/v and `dense` with biases (phi.rs:155-158), per-head
    `q_layernorm`/`k_layernorm` iff `qk_layernorm` (phi.rs:161-166), `mlp.fc1`/`mlp.fc2` with
    biases (phi.rs:101-102), LayerNorms with weight and bias (phi.rs:282-286, 323-327; the final
    one before the layers), and `lm_head` with its bias always (phi.rs:334)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    inter = values["intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    T.norm(t, "model.final_layernorm", h, bias=True)  # built before the layers (phi.rs:323-327)
    for p in T.layer_prefixes(values):
        T.linear(t, p + "self_attn.q_proj", h, heads * hd, True)
        T.linear(t, p + "self_attn.k_proj", h, kv * hd, True)
        T.linear(t, p + "self_attn.v_proj", h, kv * hd, True)
        T.linear(t, p + "self_attn.dense", heads * hd, h, True)
        if values["qk_layernorm"]:
            T.norm(t, p + "self_attn.q_layernorm", hd, bias=True)
            T.norm(t, p + "self_attn.k_layernorm", hd, bias=True)
        T.linear(t, p + "mlp.fc1", h, inter, True)
        T.linear(t, p + "mlp.fc2", inter, h, True)
        T.norm(t, p + "input_layernorm", h, bias=True)
    T.linear(t, "lm_head", h, values["vocab_size"], True)
    return t
