"""candle 0.11.0 `models::qwen2_moe` (Qwen1.5-MoE, Qwen2-57B-A14B: `Qwen2MoeForCausalLM`): the serde
mirror of `Config` (qwen2_moe.rs:24-46), the same fields in every release from 0.9.1 to 0.11.1.

Every field is required (no serde default): a transformers-5 save keeps `rope_theta` only inside
`rope_parameters`, so candle refuses it with ``missing field `rope_theta` ``. `sliding_window` is a
usize candle applies to every layer's prefill mask whatever `use_sliding_window` says
(qwen2_moe.rs:433-458); transformers 5 stores 0 there when `use_sliding_window` is false
(configuration_qwen2_moe.py `__post_init__`), which candle reads as a window of one key.
`mlp_only_layers` and `qkv_bias` are not fields: every layer `(i + 1) % decoder_sparse_step == 0`
is sparse (qwen2_moe.rs:356-360), q/k/v always have biases. `lm_head` is always loaded
(qwen2_moe.rs:421). The effective `head_dim` is hidden_size / num_attention_heads (qwen2_moe.rs:56, 140).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-loaded"  # qwen2_moe.rs:421
SLIDING_WINDOW = "every-layer"  # qwen2_moe.rs:433-458 (`use_sliding_window`, `max_window_layers` never read)
# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "qwen2_moe.rs:54-72, :414"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize),
    Field("sliding_window", serde.de_usize),
    Field("max_window_layers", serde.de_usize),
    Field("tie_word_embeddings", serde.de_bool),
    Field("rope_theta", serde.de_f64),
    Field("rms_norm_eps", serde.de_f64),
    Field("use_sliding_window", serde.de_bool),
    Field("hidden_act", de_activation),
    Field("decoder_sparse_step", serde.de_usize),
    Field("moe_intermediate_size", serde.de_usize),
    Field("shared_expert_intermediate_size", serde.de_usize),
    Field("num_experts_per_tok", serde.de_usize),
    Field("num_experts", serde.de_usize),
    Field("norm_topk_prob", serde.de_bool),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `qwen2_moe::Model::new` requests: q/k/v with bias, o without (qwen2_moe.rs:143-146); on
    layers where `num_experts > 0` and `(i + 1)` is a multiple of `decoder_sparse_step` the router
    `mlp.gate`, each `mlp.experts.{e}` of `moe_intermediate_size`, `mlp.shared_expert` of
    `shared_expert_intermediate_size` and `mlp.shared_expert_gate` (qwen2_moe.rs:236-249, 356-358), else
    a dense MLP of `intermediate_size`; norms; `lm_head.weight` always (qwen2_moe.rs:421)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    experts, step = values["num_experts"], values["decoder_sparse_step"]
    moe_inter, shared = values["moe_intermediate_size"], values["shared_expert_intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    for i, p in enumerate(T.layer_prefixes(values)):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=True)
        if experts > 0 and step > 0 and (i + 1) % step == 0:
            T.linear(t, p + "mlp.gate", h, experts)
            for e in range(experts):
                _mlp(t, f"{p}mlp.experts.{e}.", h, moe_inter)
            _mlp(t, f"{p}mlp.shared_expert.", h, shared)
            T.linear(t, p + "mlp.shared_expert_gate", h, 1)
        else:
            T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    T.lm_head(t, values)
    return t


def _mlp(t: dict[str, tuple[int, ...]], prefix: str, h: int, inter: int) -> None:
    """qwen2_moe.rs:99-104: gate/up/down without bias under `prefix`."""
    from portkit.families import tensors as T

    T.linear(t, prefix + "gate_proj", h, inter)
    T.linear(t, prefix + "up_proj", h, inter)
    T.linear(t, prefix + "down_proj", inter, h)
