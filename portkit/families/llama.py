"""candle 0.11.0 `models::llama`: its config mirror is `portkit.semantics.candle` (the family's
first and fullest view); this module holds what `Llama::load` asks the VarBuilder for."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


def expected_tensors(values: dict[str, Any], available: frozenset[str] | set[str] = frozenset()) -> dict[str, tuple[int, ...]]:
    """What `Llama::load` requests (llama.rs:515-525): embed, `lm_head.weight` unless
    `tie_word_embeddings` (:517-521), `model.norm`, then the layers with no biases (:362-371,
    :410-416, :452-461); a failed layer tensor is a panic (`Block::load(...).unwrap()`, :524)."""
    from portkit.families import tensors as T

    h, heads, kv, hd = T.dims(values)
    t: T.Table = {}
    T.embedding(t, values)
    if not values["tie_word_embeddings"]:
        T.lm_head(t, values)
    T.norm(t, "model.norm", h)
    for p in T.layer_prefixes(values):
        T.attention(t, p, h, heads, kv, hd)
        T.gated_mlp(t, p, h, values["intermediate_size"])
        T.norm(t, p + "input_layernorm", h)
        T.norm(t, p + "post_attention_layernorm", h)
    return t


#: The sub-layers the porting kit records, in computation order (transformers modeling_llama.py
#: LlamaDecoderLayer).
SUBLAYERS = (
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn",
    "post_attention_layernorm",
    "mlp",
)
