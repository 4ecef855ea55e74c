"""candle 0.11.0 `models::mixtral`: the serde mirror of `Config` (mixtral.rs:29).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (mixtral.rs:78, 158).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-loaded"  # mixtral.rs:426
SLIDING_WINDOW = "every-layer"  # mixtral.rs:448

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "mixtral.rs:82-99, :418"

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("hidden_act", de_activation),
    Field("max_position_embeddings", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("sliding_window", serde.de_usize),
    Field("num_experts_per_tok", serde.de_usize),
    Field("num_local_experts", serde.de_usize),
    Field("use_flash_attn", serde.de_bool),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `mixtral::Model::new` requests (mixtral.rs:413-427): per layer attention, then
    `block_sparse_moe.gate` and per-expert `w1`/`w2`/`w3` (mixtral.rs:252-257, 282-288), then
    the two norms; `lm_head.weight` always (mixtral.rs:426)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    inter, experts = values["intermediate_size"], values["num_local_experts"]
    t: T.Table = {}
    T.embedding(t, values)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd)
        moe = f"{p}block_sparse_moe."
        T.linear(t, moe + "gate", h, experts)
        for e in range(experts):
            T.linear(t, f"{moe}experts.{e}.w1", h, inter)
            T.linear(t, f"{moe}experts.{e}.w2", inter, h)
            T.linear(t, f"{moe}experts.{e}.w3", h, inter)
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    T.norm(t, "model.norm", h)
    T.lm_head(t, values)
    return t
