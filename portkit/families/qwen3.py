"""candle 0.11.0 `models::qwen3`: the serde mirror of `Config` (qwen3.rs:16).

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

SLIDING_WINDOW = "unsupported"  # qwen3.rs:126-128 (`sliding window is not supported`)
# before 0.11.0 built for every multi-token forward and added on every device (qwen3.rs 0.10.2:317-352); from
# 0.11.0 built only where it is read: off the CPU (on the CPU with the flash-attn feature), qwen3.rs:473-480
BATCH_MASK = Changed(
    since="0.11.0",
    by="qwen3.rs 0.11.0's CPU flash-attention path, which masks inside the kernel",
    before=BatchMask("undersized", source="qwen3.rs 0.10.2:317-352", built="always", read="every-device"),
    after=BatchMask("undersized", source="qwen3.rs:441-466", built="where-read"),
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
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `qwen3::ModelForCausalLM::new` requests: q/k/v/o with bias iff `attention_bias`,
    per-head `q_norm`/`k_norm` [head_dim] (qwen3.rs:135-161); `lm_head.weight` unless
    `tie_word_embeddings` (qwen3.rs:500-504)."""
    from portkit.families import tensors as T

    t = T.standard(values, qkv_bias=values["attention_bias"], o_bias=values["attention_bias"], head_qk_norm=True)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    return t
