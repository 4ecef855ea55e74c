"""candle 0.11.0 `models::mistral`: the serde mirror of `Config` (mistral.rs:27).

Required fields have no serde default: a missing key is ``missing field `X` ``.
The effective `head_dim` is derived: `cfg.head_dim.unwrap_or(hidden_size / num_attention_heads)` (mistral.rs:105-108).
"""

from __future__ import annotations

from portkit.families.fields import de_activation
from portkit.semantics import serde
from portkit.semantics.serde import Field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

LM_HEAD = "always-loaded"  # mistral.rs:385
SLIDING_WINDOW = "every-layer"  # mistral.rs:402-406 (`j + sliding_window < i`), :385-391

FIELDS = (
    Field("vocab_size", serde.de_usize),
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize, 32),
    Field("head_dim", serde.de_option(serde.de_usize), None),
    Field("num_key_value_heads", serde.de_usize),
    Field("hidden_act", de_activation, "silu"),
    Field("max_position_embeddings", serde.de_usize),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f64),
    Field("sliding_window", serde.de_option(serde.de_usize), None),
    Field("use_flash_attn", serde.de_bool, False),
)


def effective(cfg: dict[str, Any]) -> dict[str, Any]:
    heads = cfg["num_attention_heads"]
    out = dict(cfg)
    if out["head_dim"] is None:
        out["head_dim"] = cfg["hidden_size"] // heads if heads else None
    return out


def expected_tensors(
    values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()
) -> dict[str, tuple[int, ...]]:
    """What `mistral::Model::new` requests (mistral.rs:372-386): no biases; `lm_head.weight`
    always, whatever `tie_word_embeddings` says (mistral.rs:385)."""
    from portkit.families import tensors as T

    t = T.standard(values)
    T.lm_head(t, values)
    return t
