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


__all__ = ["BY_NAME", "ENCODERS", "Encoder", "detect"]
