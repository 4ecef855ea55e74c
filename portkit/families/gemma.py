"""candle 0.11.0 `models::gemma`: the serde mirror of `Config` (gemma.rs:17).

Required fields have no serde default: a missing key is ``missing field `X` ``.
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-tied"  # gemma.rs:359
ACTIVATION_KEYS = ("hidden_act", "hidden_activation")  # either one; both or neither fail (gemma.rs:37-43)

# `RotaryEmbedding::new(vb.dtype(), ..)`: `inv_freq` and `Tensor::arange(0u32, ..)` `.to_dtype(dtype)`, then
# `t.matmul(&inv_freq)` in it
ROPE_TABLE_IN_MODEL_DTYPE = "gemma.rs:83-99, :350"

FIELDS = (
    Field("attention_bias", serde.de_bool),
    Field("head_dim", serde.de_usize),
    Field("hidden_act", serde.de_option(de_activation), None),
    Field("hidden_activation", serde.de_option(de_activation), None),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_key_value_heads", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("vocab_size", serde.de_usize),
    Field("max_position_embeddings", serde.de_usize, 4096),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    return dict(cfg)


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `gemma::Model::new` requests: q/k/v/o with bias iff `attention_bias` (gemma.rs:177-181);
    never `lm_head.weight`: the head is always `embed_tokens` (gemma.rs:359)."""
    from portkit.families import tensors as T

    return T.standard(values, qkv_bias=values["attention_bias"], o_bias=values["attention_bias"])
