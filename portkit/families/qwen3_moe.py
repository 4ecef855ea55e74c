"""candle 0.11.0 `models::qwen3_moe`: the serde mirror of `Config` (qwen3_moe.rs:13).

Required fields have no serde default: a missing key is ``missing field `X` ``.
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import BatchMask, Changed
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

SLIDING_WINDOW = "unsupported"  # it builds qwen3's attention (qwen3_moe.rs:50-55, :211)
# built for every multi-token forward and cast to the model dtype (qwen3_moe.rs:333-337), read where qwen3's
# attention reads it: on every device before 0.11.0, off the CPU from 0.11.0 (its CPU flash-attention path)
BATCH_MASK = Changed(
    since="0.11.0",
    by="qwen3.rs 0.11.0's CPU flash-attention path, which qwen3_moe's attention takes too",
    before=BatchMask("undersized", source="qwen3_moe.rs:302-327", built="always", read="every-device"),
    after=BatchMask("undersized", source="qwen3_moe.rs:302-327", built="always"),
)

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("head_dim", serde.de_usize),
    Field("attention_bias", serde.de_bool),
    Field("num_key_value_heads", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
    Field("max_window_layers", serde.de_usize),
    Field("tie_word_embeddings", serde.de_bool),
    Field("rope_theta", serde.de_f64),
    Field("rms_norm_eps", serde.de_f64),
    Field("use_sliding_window", serde.de_bool),
    Field("hidden_act", de_activation),
    Field("decoder_sparse_step", serde.de_usize),
    Field("moe_intermediate_size", serde.de_usize),
    Field("num_experts_per_tok", serde.de_usize),
    Field("num_experts", serde.de_usize),
    Field("norm_topk_prob", serde.de_bool),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `qwen3_moe::ModelForCausalLM::new` requests: qwen3's attention; a sparse MoE block
    (`mlp.gate`, `mlp.experts.{e}.{gate,up,down}_proj` of `moe_intermediate_size`) on layers where
    `num_experts > 0` and `(i + 1)` is a multiple of `decoder_sparse_step`, else a dense MLP
    (qwen3_moe.rs:222-233, 105-113, 68-83); `lm_head.weight` unless tied (qwen3_moe.rs:355-359).
    A CUDA build packs the experts (`FusedMoe`) from the same names and shapes (fused_moe.rs:32-62)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    bias, experts, step = values["attention_bias"], values["num_experts"], values["decoder_sparse_step"]
    moe_inter = values["moe_intermediate_size"]
    t: T.Table = {}
    T.embedding(t, values)
    for i, p in enumerate(T.layer_prefixes(values)):
        T.attention(t, p, h, heads, kv, hd, qkv_bias=bias, o_bias=bias, qk_norm=(hd, hd))
        if experts > 0 and step > 0 and (i + 1) % step == 0:
            T.linear(t, p + "mlp.gate", h, experts)
            for e in range(experts):
                T.linear(t, f"{p}mlp.experts.{e}.gate_proj", h, moe_inter)
                T.linear(t, f"{p}mlp.experts.{e}.up_proj", h, moe_inter)
                T.linear(t, f"{p}mlp.experts.{e}.down_proj", moe_inter, h)
        else:
            T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t
