"""candle 0.11.0 `models::qwen2`: the serde mirror of `Config` (qwen2.rs:23).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: hidden_size / num_attention_heads (qwen2.rs:50, 133).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import ContinuationMask, PaddingMask
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "probed"  # `vb.contains_tensor("lm_head.weight")`, never the flag (qwen2.rs:380-384)
SLIDING_WINDOW = "every-layer"  # qwen2.rs:291, :303-314 (`use_sliding_window`, `max_window_layers` never read)
CONTINUATION_MASK = ContinuationMask(
    "prefix-in-model-dtype", source="qwen2.rs:316-318"
)  # `Tensor::zeros(.., self.dtype, ..)` cat an f32 mask
PADDING_MASK = PaddingMask(
    "bidirectional", source="qwen2.rs:326-338, :347-348"
)  # `Model::forward(.., Some(attn_mask))`

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "qwen2.rs:47-63, :279"

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
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    return {**cfg, "head_dim": cfg["hidden_size"] // heads if heads else None}


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `qwen2::ModelForCausalLM::new` requests: q/k/v with bias, o without (qwen2.rs:136-139);
    `lm_head.weight` only when the checkpoint has it: `vb.contains_tensor` decides, and
    `tie_word_embeddings` is never consulted (qwen2.rs:380-384)."""
    from portkit.families import tensors as T

    t = T.standard(values, qkv_bias=True)
    if "lm_head.weight" in available:
        T.lm_head(t, values)
    return t
