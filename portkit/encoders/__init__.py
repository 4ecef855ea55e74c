"""The encoder registry: candle 0.11.0's embedding-model modules (bert.rs and its kin), and the
transformers checkpoints people load into each.

Kept beside the decoder registry (`portkit.families`), not in it: the decoder rules, fixtures
and the families differential iterate `portkit.families.BY_NAME` as "the decoders", and none of
their facts (rope, KV caches, lm_head, chat paths) is about an encoder. Data only, like the
decoders' table: nothing here imports torch or the native wheel.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, Mapping

CANDLE_VERSION = "0.11.0"


@dataclass(frozen=True, slots=True)
class Encoder:
    """One candle encoder module and the checkpoints that load into it."""

    name: str  # candle_transformers::models::{name}
    model_types: tuple[str, ...]  # config.json `model_type` values it serves
    architectures: tuple[str, ...]  # config.json `architectures[0]` values (they decide before model_type: jina_bert's checkpoints say "bert")
    source: str  # candle-transformers-0.11.0/src/models/{source}
    model: str  # the struct candle's example builds
    #: how its forward takes the padding mask: "attend" (1 = a token, transformers' own), "masked"
    #: (1 = a pad), None (its forward takes none)
    mask: str | None
    mask_source: str  # where, in candle's source
    transformers_class: str | None  # transformers 5's own class for it (None: remote code only, never run)

    @property
    def module(self) -> str:
        return f"candle_transformers::models::{self.name}"

    @property
    def who(self) -> str:
        return f"candle {CANDLE_VERSION}'s `{self.name}`"


ENCODERS: tuple[Encoder, ...] = (
    Encoder("bert", ("bert",), ("BertModel", "BertForMaskedLM"), "bert.rs", "BertModel", "attend",
            "bert.rs:495-528 `forward(input_ids, token_type_ids, attention_mask: Option<&Tensor>)`", "BertModel"),
    Encoder("distilbert", ("distilbert",), ("DistilBertModel", "DistilBertForMaskedLM"), "distilbert.rs", "DistilBertModel", "masked",
            "distilbert.rs:183-186 `masked_fill(scores, mask, f32::NEG_INFINITY)`: 1 is masked", "DistilBertModel"),
    Encoder("xlm_roberta", ("xlm-roberta", "roberta", "camembert"), ("XLMRobertaModel", "RobertaModel", "CamembertModel"), "xlm_roberta.rs",
            "XLMRobertaModel", "attend", "xlm_roberta.rs:373-390 `prepare_4d_attention_mask(attention_mask, ..)`", "XLMRobertaModel"),
    Encoder("modernbert", ("modernbert",), ("ModernBertModel", "ModernBertForMaskedLM"), "modernbert.rs", "ModernBert", "attend",
            "modernbert.rs:390-393 `prepare_4d_attention_mask(mask, ..)`", "ModernBertModel"),
    Encoder("jina_bert", (), ("JinaBertForMaskedLM", "JinaBertModel"), "jina_bert.rs", "BertModel", None,
            "jina_bert.rs:400 `fn forward(&self, input_ids: &Tensor)`: no mask", None),
    Encoder("nomic_bert", ("nomic_bert",), ("NomicBertModel",), "nomic_bert.rs", "NomicBertModel", "attend",
            "nomic_bert.rs:442-462 `forward(input_ids, token_type_ids, attention_mask: Option<&Tensor>)`", "NomicBertModel"),
)  # fmt: skip

#: the keys each module's serde `Config` requires (no `#[serde(default)]`, not an `Option`), in the
#: struct's order: serde names the first one missing (bert.rs:57-75, distilbert.rs:58-72,
#: xlm_roberta.rs:8-22, modernbert.rs:21-39, jina_bert.rs:23-36; nomic_bert.rs:21 is
#: `#[serde(default)]` as a whole: it requires none and defaults every key it does not find)
REQUIRED: dict[str, tuple[str, ...]] = {
    "bert": ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
             "hidden_dropout_prob", "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id"),
    "distilbert": ("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "activation", "max_position_embeddings", "initializer_range", "pad_token_id"),
    "xlm_roberta": ("hidden_size", "layer_norm_eps", "attention_probs_dropout_prob", "hidden_dropout_prob", "num_attention_heads",
                    "position_embedding_type", "intermediate_size", "hidden_act", "num_hidden_layers", "vocab_size",
                    "max_position_embeddings", "type_vocab_size", "pad_token_id"),
    "modernbert": ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings",
                   "layer_norm_eps", "pad_token_id", "global_attn_every_n_layers", "global_rope_theta", "local_attention", "local_rope_theta"),
    "jina_bert": ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
                  "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id", "position_embedding_type"),
    "nomic_bert": (),
}  # fmt: skip
#: where transformers 5 saves what a required key holds, when it saves it under another name
SAVED_AS: dict[tuple[str, str], str] = {
    ("modernbert", "layer_norm_eps"): "norm_eps",
    ("modernbert", "global_rope_theta"): "rope_parameters.full_attention.rope_theta",
    ("modernbert", "local_rope_theta"): "rope_parameters.sliding_attention.rope_theta",
    ("modernbert", "global_attn_every_n_layers"): "layer_types",
}
#: nomic_bert.rs:20-40 reads GPT-2-style keys, each defaulted: transformers' own key -> candle's
NOMIC_KEYS: dict[str, str] = {"hidden_size": "n_embd", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer",
                              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions", "layer_norm_eps": "layer_norm_epsilon"}  # fmt: skip
#: nomic_bert.rs:42-62 `Default`: what candle uses for each key it does not find
NOMIC_DEFAULTS: dict[str, object] = {"n_embd": 768, "n_head": 12, "n_layer": 12, "n_inner": 3072, "n_positions": 8192, "layer_norm_epsilon": 1e-12}

BY_NAME: dict[str, Encoder] = {e.name: e for e in ENCODERS}
_BY_MODEL_TYPE: dict[str, Encoder] = {mt: e for e in ENCODERS for mt in e.model_types}
_BY_ARCHITECTURE: dict[str, Encoder] = {a: e for e in ENCODERS for a in e.architectures}


def detect(config: Mapping[str, Any] | Any) -> Encoder | None:
    """The encoder module of a parsed config.json: by `architectures[0]` (jina-embeddings-v2
    checkpoints say `model_type` "bert"), else by `model_type`."""
    if not isinstance(config, dict):
        return None
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0] in _BY_ARCHITECTURE:
        return _BY_ARCHITECTURE[archs[0]]
    mt = config.get("model_type")
    return _BY_MODEL_TYPE.get(mt) if isinstance(mt, str) else None


__all__ = ["BY_NAME", "ENCODERS", "NOMIC_DEFAULTS", "NOMIC_KEYS", "REQUIRED", "SAVED_AS", "Encoder", "detect"]
