"""candle 0.11.0 `models::gemma2`: the serde mirror of `Config` (gemma2.rs:17).

Required fields have no serde default: a missing key is ``missing field `X` ``.
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-tied"  # gemma2.rs:378
SLIDING_WINDOW = "every-layer"  # gemma2.rs:398-413 (every layer, where transformers alternates), :388
ACTIVATION_KEYS = ("hidden_activation",)
TRANSFORMERS_ACTIVATION_KEY = "hidden_activation"

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "gemma2.rs:76-92, :369"

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
    Field("vocab_size", serde.de_usize),
    Field("final_logit_softcapping", serde.de_option(serde.de_f64), None),
    Field("attn_logit_softcapping", serde.de_option(serde.de_f64), None),
    Field("query_pre_attn_scalar", serde.de_usize),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
    Field("max_position_embeddings", serde.de_usize, 4096),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `gemma2::Model::new` requests: gemma's layers plus `pre_feedforward_layernorm` and
    `post_feedforward_layernorm` (gemma2.rs:299-317); never `lm_head.weight` (gemma2.rs:378)."""
    from portkit.families import tensors as T

    bias = values["attention_bias"]
    return T.standard(
        values, qkv_bias=bias, o_bias=bias, extra_norms=("pre_feedforward_layernorm", "post_feedforward_layernorm")
    )


#: The sub-layers the porting kit records, in computation order (transformers modeling_gemma2.py
#: Gemma2DecoderLayer: post_attention_layernorm normalises the attention output, before the
#: residual add).
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
