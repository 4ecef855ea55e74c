"""candle 0.11.0 `models::mixtral`: the serde mirror of `Config` (mixtral.rs:29).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (mixtral.rs:78, 158).
"""

from __future__ import annotations

from portkit.semantics import serde
from portkit.families.fields import de_activation
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

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
