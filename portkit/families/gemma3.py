"""candle 0.11.0 `models::gemma3`: the serde mirror of `Config` (gemma3.rs:13).

Required fields have no serde default: a missing key is ``missing field `X` ``.
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.families.traits import ContinuationMask
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

THETA_KEYS = ("rope_theta", "rope_local_base_freq")  # a second base for the sliding layers
LM_HEAD = "always-tied"  # gemma3.rs:458
SLIDING_WINDOW = "pattern"  # gemma3.rs:403, :192-193 (RotatingKvCache), :448 (pattern)
# the sliding layers' RotatingKvCache(sliding_window) vs a mask of offset + seq_len columns
CONTINUATION_MASK = ContinuationMask("rotating-window", source="gemma3.rs:192-193, :247-248, :417-423, :273")
ACTIVATION_KEYS = ("hidden_activation",)
TRANSFORMERS_ACTIVATION_KEY = "hidden_activation"

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "gemma3.rs:71-97, :326"

# transformers attends both ways with `use_bidirectional_attention: true` (configuration_gemma3.py:100-102)
BIDIRECTIONAL = (True, {"use_bidirectional_attention": False})

FIELDS = (
    Field("attention_bias", serde.de_bool),
    Field("head_dim", serde.de_usize),
    Field("hidden_activation", de_activation),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("rope_local_base_freq", serde.de_f64),
    Field("vocab_size", serde.de_usize),
    Field("final_logit_softcapping", serde.de_option(serde.de_f64), None),
    Field("attn_logit_softcapping", serde.de_option(serde.de_f64), None),
    Field("query_pre_attn_scalar", serde.de_usize),
    Field("sliding_window", serde.de_usize),
    Field("sliding_window_pattern", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `gemma3::Model::new` requests: gemma2's layers plus per-head `q_norm`/`k_norm`
    (gemma3.rs:186-191, 336-356); never `lm_head.weight` (gemma3.rs:458)."""
    from portkit.families import tensors as T

    bias = values["attention_bias"]
    return T.standard(
        values,
        qkv_bias=bias,
        o_bias=bias,
        head_qk_norm=True,
        extra_norms=("pre_feedforward_layernorm", "post_feedforward_layernorm"),
    )


#: The sub-layers the porting kit records, in computation order (transformers modeling_gemma3.py
#: Gemma3DecoderLayer (as gemma2; q_norm/k_norm act per head inside self_attn, not recorded)).
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
