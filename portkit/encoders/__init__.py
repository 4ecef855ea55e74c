"""The encoder registry: candle 0.11.0's embedding-model modules (bert.rs and its kin), and the
transformers checkpoints people load into each.

Kept beside the decoder registry (`portkit.families`), not in it: the decoder rules, fixtures
and the families differential iterate `portkit.families.BY_NAME` as "the decoders", and none of
their facts (rope, KV caches, lm_head, chat paths) is about an encoder. Data only, like the
decoders' table: nothing here imports torch or the native wheel.
"""

from __future__ import annotations

from dataclasses import dataclass

from portkit.candle_release import NATIVE as CANDLE_VERSION  # how messages name an encoder's release

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


@dataclass(frozen=True, slots=True)
class Encoder:
    """One candle encoder module and the checkpoints that load into it."""

    name: str  # candle_transformers::models::{name}
    model_types: tuple[str, ...]  # config.json `model_type` values it serves
    architectures: tuple[
        str, ...
    ]  # config.json `architectures[0]` values (they decide before model_type: jina_bert's checkpoints say "bert")
    source: str  # candle-transformers-0.11.0/src/models/{source}
    model: str  # the struct candle's example builds
    #: how its forward takes the padding mask: "attend" (1 = a token, transformers' own), "masked"
    #: (1 = a pad), None (its forward takes none)
    mask: str | None
    mask_source: str  # where, in candle's source
    transformers_class: str | None  # transformers 5's own class for it (None: remote code only, never run)
    #: a decoder's base model used for its hidden states (`DECODER_EMBEDDERS`): causal attention, so
    #: a right-padded batch pooled at each row's last token is a correct program
    decoder: bool = False
    #: where the module keeps a KV cache across forwards with no public reset (PK622); "" where it keeps none
    kept_cache: str = ""

    @property
    def module(self) -> str:
        return f"candle_transformers::models::{self.name}"

    @property
    def who(self) -> str:
        return f"candle {CANDLE_VERSION}'s `{self.name}`"


ENCODERS: tuple[Encoder, ...] = (
    Encoder(
        "bert",
        ("bert",),
        ("BertModel", "BertForMaskedLM"),
        "bert.rs",
        "BertModel",
        "attend",
        "bert.rs:495-528 `forward(input_ids, token_type_ids, attention_mask: Option<&Tensor>)`",
        "BertModel",
    ),
    Encoder(
        "distilbert",
        ("distilbert",),
        ("DistilBertModel", "DistilBertForMaskedLM"),
        "distilbert.rs",
        "DistilBertModel",
        "masked",
        "distilbert.rs:183-186 `masked_fill(scores, mask, f32::NEG_INFINITY)`: 1 is masked",
        "DistilBertModel",
    ),
    Encoder(
        "xlm_roberta",
        ("xlm-roberta", "roberta", "camembert"),
        ("XLMRobertaModel", "RobertaModel", "CamembertModel"),
        "xlm_roberta.rs",
        "XLMRobertaModel",
        "attend",
        "xlm_roberta.rs:373-390 `prepare_4d_attention_mask(attention_mask, ..)`",
        "XLMRobertaModel",
    ),
    Encoder(
        "modernbert",
        ("modernbert",),
        ("ModernBertModel", "ModernBertForMaskedLM"),
        "modernbert.rs",
        "ModernBert",
        "attend",
        "modernbert.rs:390-393 `prepare_4d_attention_mask(mask, ..)`",
        "ModernBertModel",
    ),
    Encoder(
        "jina_bert",
        (),
        ("JinaBertForMaskedLM", "JinaBertModel"),
        "jina_bert.rs",
        "BertModel",
        None,
        "jina_bert.rs:400 `fn forward(&self, input_ids: &Tensor)`: no mask",
        None,
    ),
    Encoder(
        "nomic_bert",
        ("nomic_bert",),
        ("NomicBertModel",),
        "nomic_bert.rs",
        "NomicBertModel",
        "attend",
        "nomic_bert.rs:442-462 `forward(input_ids, token_type_ids, attention_mask: Option<&Tensor>)`",
        "NomicBertModel",
    ),
)

#: the keys each module's serde `Config` requires (no `#[serde(default)]`, not an `Option`), in the
#: struct's order: serde names the first one missing (bert.rs:57-75, distilbert.rs:58-72,
#: xlm_roberta.rs:8-22, modernbert.rs:21-39, jina_bert.rs:23-36; nomic_bert.rs:21 is
#: `#[serde(default)]` as a whole: it requires none and defaults every key it does not find)
REQUIRED: dict[str, tuple[str, ...]] = {
    "bert": (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
        "layer_norm_eps",
        "pad_token_id",
    ),
    "distilbert": (
        "vocab_size",
        "dim",
        "n_layers",
        "n_heads",
        "hidden_dim",
        "activation",
        "max_position_embeddings",
        "initializer_range",
        "pad_token_id",
    ),
    "xlm_roberta": (
        "hidden_size",
        "layer_norm_eps",
        "attention_probs_dropout_prob",
        "hidden_dropout_prob",
        "num_attention_heads",
        "position_embedding_type",
        "intermediate_size",
        "hidden_act",
        "num_hidden_layers",
        "vocab_size",
        "max_position_embeddings",
        "type_vocab_size",
        "pad_token_id",
    ),
    "modernbert": (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "layer_norm_eps",
        "pad_token_id",
        "global_attn_every_n_layers",
        "global_rope_theta",
        "local_attention",
        "local_rope_theta",
    ),
    "jina_bert": (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
        "layer_norm_eps",
        "pad_token_id",
        "position_embedding_type",
    ),
    "nomic_bert": (),
}
#: where transformers 5 saves what a required key holds, when it saves it under another name
SAVED_AS: dict[tuple[str, str], str] = {
    ("modernbert", "layer_norm_eps"): "norm_eps",
    ("modernbert", "global_rope_theta"): "rope_parameters.full_attention.rope_theta",
    ("modernbert", "local_rope_theta"): "rope_parameters.sliding_attention.rope_theta",
    ("modernbert", "global_attn_every_n_layers"): "layer_types",
}
#: nomic_bert.rs:20-40 reads GPT-2-style keys, each defaulted: transformers' own key -> candle's
NOMIC_KEYS: dict[str, str] = {
    "hidden_size": "n_embd",
    "num_attention_heads": "n_head",
    "num_hidden_layers": "n_layer",
    "intermediate_size": "n_inner",
    "max_position_embeddings": "n_positions",
}
#: nomic_bert.rs:42-62 `Default`: what candle uses for each key it does not find
NOMIC_DEFAULTS: dict[str, object] = {
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_inner": 3072,
    "n_positions": 8192,
    "layer_norm_epsilon": 1e-12,
    "rotary_emb_base": 1000.0,
}


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A value candle reads under one key and transformers 5 under another: when both say
    different things the checkpoint loads and computes another model (PK617)."""

    encoder: str
    candle_key: str
    transformers_path: str  # dotted, inside config.json
    candle_default: object = None  # what candle uses when its key is absent (None: it requires the key, PK612)
    source: str = ""


#: modernbert.rs:21-39 reads `layer_norm_eps` and two rope bases where transformers 5 reads `norm_eps`
#: and `rope_parameters`; nomic_bert.rs:20-62 reads `layer_norm_epsilon` and `rotary_emb_base` (defaulted)
KEY_PAIRS: tuple[KeyPair, ...] = (
    KeyPair("modernbert", "layer_norm_eps", "norm_eps", source="modernbert.rs:28"),
    KeyPair("modernbert", "global_rope_theta", "rope_parameters.full_attention.rope_theta", source="modernbert.rs:31"),
    KeyPair(
        "modernbert", "local_rope_theta", "rope_parameters.sliding_attention.rope_theta", source="modernbert.rs:33"
    ),
    KeyPair("nomic_bert", "layer_norm_epsilon", "layer_norm_eps", 1e-12, "nomic_bert.rs:30, :52"),
    KeyPair("nomic_bert", "rotary_emb_base", "rope_parameters.rope_theta", 1000.0, "nomic_bert.rs:32, :54"),
)


@dataclass(frozen=True, slots=True)
class Activation:
    """How an encoder module reads its MLP activation, and what it computes for each value.

    `computes` maps each value the module's serde accepts to the function it computes, named as
    transformers' ACT2FN names it (activations.py:320-350); `key` is None where the module
    hard-codes the function (`computes` then holds the one function, under ""), and
    `transformers_key` is where transformers 5 reads the activation for the same model."""

    key: str | None
    transformers_key: str
    default: str  # transformers' default for `transformers_key`
    computes: Mapping[str, str]
    source: str  # candle-transformers-0.11.0/src/models/...

    def candle_computes(self, value: Any) -> str | None:
        """What candle computes for the config's value; None where its serde refuses the value."""
        if self.key is None:
            return self.computes[""]
        return self.computes.get(value) if isinstance(value, str) else None


#: candle-nn-0.11.0/src/activation.rs:5-25 (`#[serde(rename_all = "lowercase")]` with three aliases):
#: the string values `candle_nn::Activation` accepts, each by what it computes (activation.rs:29-48)
_CANDLE_NN = {
    "gelu": "gelu",
    "newgelu": "gelu_new",
    "gelu_new": "gelu_new",
    "relu": "relu",
    "relu2": "relu2",
    "relu6": "relu6",
    "silu": "silu",
    "sigmoid": "sigmoid",
    "hardsigmoid": "hardsigmoid",
    "swiglu": "swiglu",
    "swish": "silu",
    "mish": "mish",
    "hardswish": "hardswish",
    "gelupytorchtanh": "gelu_pytorch_tanh",
    "gelu_pytorch_tanh": "gelu_pytorch_tanh",
}
ACTIVATIONS: dict[str, Activation] = {
    # bert.rs:17-45: `gelu` is gelu_erf, `geluapproximate` the tanh form
    "bert": Activation(
        "hidden_act",
        "hidden_act",
        "gelu",
        {"gelu": "gelu", "geluapproximate": "gelu_pytorch_tanh", "relu": "relu"},
        "bert.rs:17-45",
    ),
    # distilbert.rs:20-47: `gelu` is `xs.gelu()`, the tanh approximation; transformers' `gelu` is erf
    "distilbert": Activation(
        "activation", "activation", "gelu", {"gelu": "gelu_pytorch_tanh", "relu": "relu"}, "distilbert.rs:20-47"
    ),
    "xlm_roberta": Activation("hidden_act", "hidden_act", "gelu", _CANDLE_NN, "xlm_roberta.rs:16, :266-275"),
    # modernbert.rs:170-175: GeGLU with gelu_erf, whatever `hidden_activation` says
    "modernbert": Activation(None, "hidden_activation", "gelu", {"": "gelu"}, "modernbert.rs:170-175"),
    # jina_bert.rs:260: GeGLU with `Activation::Gelu`; `hidden_act` is read (serde) and not used
    "jina_bert": Activation(
        "hidden_act", "hidden_act", "gelu", {k: "gelu" for k in _CANDLE_NN}, "jina_bert.rs:29, :260"
    ),
    # nomic_bert.rs:290-296: SwiGLU with silu; its `activation_function` key is read and not used
    "nomic_bert": Activation(None, "hidden_act", "silu", {"": "silu"}, "nomic_bert.rs:290-296"),
}
#: the functions transformers computes the same way under two names (activations.py: `swish` is SiLU,
#: `gelu_new` and `gelu_pytorch_tanh` are both the tanh approximation, up to f32 rounding)
SAME_FUNCTION = {
    "swish": "silu",
    "gelu_new": "gelu_pytorch_tanh",
    "gelu_python": "gelu",
    "gelu_python_tanh": "gelu_pytorch_tanh",
}
#: the names transformers 5's ACT2FN builds (activations.py `ACT2CLS`): another name fails its load
ACT2FN_NAMES = frozenset(
    "gelu gelu_10 gelu_accurate gelu_fast gelu_new gelu_python gelu_python_tanh gelu_pytorch_tanh hardswish laplace "
    "leaky_relu linear mish prelu quick_gelu relu relu2 relu6 sigmoid silu sqrtsoftplus swish tanh xielu".split()
)
#: the enums whose values serde checks besides the activation: (module, key) -> the accepted values
#: (bert.rs:48-53, distilbert.rs:50-55, jina_bert.rs:15-20); xlm_roberta.rs:14 reads a String
ENUM_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("bert", "position_embedding_type"): ("absolute",),
    ("distilbert", "position_embedding_type"): ("absolute",),
    ("jina_bert", "position_embedding_type"): ("absolute", "alibi"),
}


def same_function(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and SAME_FUNCTION.get(a, a) == SAME_FUNCTION.get(b, b)


#: decoder modules whose base model a sentence-transformers pipeline pools (Qwen3-Embedding:
#: Qwen3ForCausalLM weights, last-token pooling). A directory is one only when it holds the
#: pipeline (modules.json); otherwise the same config is a decoder (`portkit.families`).
DECODER_EMBEDDERS: tuple[Encoder, ...] = (
    Encoder(
        "qwen3",
        ("qwen3",),
        ("Qwen3ForCausalLM", "Qwen3Model"),
        "qwen3.rs",
        "Model",
        None,
        "qwen3.rs:468-489 `Model::forward(input, offset)`, causal at qwen3.rs:290-295",
        "Qwen3Model",
        decoder=True,
        kept_cache="qwen3.rs:223 appends every forward to the layer's `ConcatKvCache`; `Model::clear_kv_cache` is "
        "private, qwen3.rs:435",
    ),
)
#: every module verify's embedding run drives: the encoders, then the decoders used as encoders
EMBEDDERS: tuple[Encoder, ...] = ENCODERS + DECODER_EMBEDDERS
BY_NAME: dict[str, Encoder] = {e.name: e for e in EMBEDDERS}

#: the sub-layers each capture copy records (native/copies/<name>.patch), in the layer's order:
#: candle's name (`layers.N.<name>`) and the transformers module whose output it equals (N: the layer)
SUBLAYERS: dict[str, tuple[tuple[str, str], ...]] = {
    "bert": (("attention", "encoder.layer.{i}.attention"), ("intermediate", "encoder.layer.{i}.intermediate")),
    "distilbert": (
        ("attention", "transformer.layer.{i}.attention"),
        ("sa_layer_norm", "transformer.layer.{i}.sa_layer_norm"),
        ("ffn", "transformer.layer.{i}.ffn"),
    ),
    "xlm_roberta": (("attention", "encoder.layer.{i}.attention"), ("intermediate", "encoder.layer.{i}.intermediate")),
    "modernbert": (("attn", "layers.{i}.attn"), ("mlp", "layers.{i}.mlp")),
    "nomic_bert": (
        ("self_attn", "layers.{i}.self_attn"),
        ("post_attention_layernorm", "layers.{i}.post_attention_layernorm"),
        ("mlp", "layers.{i}.mlp"),
    ),
}
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


def detect_decoder_embedder(config: Mapping[str, Any] | Any, has_pipeline: bool) -> Encoder | None:
    """The decoder module a sentence-transformers directory pools (`DECODER_EMBEDDERS`), by
    `model_type`; None without the pipeline (the config is then a decoder's)."""
    if not has_pipeline or not isinstance(config, dict):
        return None
    mt = config.get("model_type")
    return next((e for e in DECODER_EMBEDDERS if mt in e.model_types), None)


__all__ = [
    "ACT2FN_NAMES",
    "ACTIVATIONS",
    "BY_NAME",
    "DECODER_EMBEDDERS",
    "EMBEDDERS",
    "ENCODERS",
    "ENUM_VALUES",
    "KEY_PAIRS",
    "KeyPair",
    "NOMIC_DEFAULTS",
    "NOMIC_KEYS",
    "REQUIRED",
    "SAVED_AS",
    "Activation",
    "Encoder",
    "detect",
    "detect_decoder_embedder",
    "same_function",
]
