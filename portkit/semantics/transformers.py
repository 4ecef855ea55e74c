"""What transformers 5 (checked against 5.24.0) computes with for a config.json of each candle
family, without importing it: one view per family (`family_transformers_view`), under the names
candle's `Config` gives the values, with transformers' own validation of the config (`refused`).

Sources, in `transformers/`:
- `models/<model_type>/configuration_<model_type>.py`: each class's `@strict` fields and defaults
  (`FAMILY_DEFAULTS` below, held to `AutoConfig.for_model` by tests/unit/test_family_semantics.py);
  `models/llama/configuration_llama.py:63-99`: `num_key_value_heads` and `head_dim` derive from
  the heads when None, hidden % heads check.
- `configuration_utils.py:428-512`: `__post_init__` pops legacy `rope_scaling`/`rope_theta`
  kwargs into `rope_parameters`; unknown keys become attributes.
- `modeling_rope_utils.py:775-865`: `convert_rope_params_to_dict` / `standardize_rope_params`:
  `rope_scaling` (if truthy) replaces `rope_parameters`; `rope_theta` priority is
  rope dict > top-level key > the class's `default_theta`; a top-level `partial_rotary_factor`
  joins the dict; `rope_type` defaults to the legacy `type`, then "default"; llama3/yarn/longrope
  get `original_max_position_embeddings` = `max_position_embeddings` when missing.
  `:868-1158`: required keys per rope type.
- `cache_utils.py:1959-1997`: a config with `sliding_window` gets sliding-window KV cache
  layers in `generate()`, whatever the model type.
- `models/llama/modeling_llama.py:73-106`: the default rope uses the whole head_dim
  (ignores `partial_rotary_factor`); other rope types use `int(head_dim * factor)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_THETA = 10000.0

# transformers' strict validation: the types its `@strict` config classes declare (huggingface_hub's
# dataclass validators refuse any other at construction). lint holds every family's config to
# LlamaConfig's (configuration_llama.py:63-83); the other classes declare the same types for the
# keys they share, except that some narrow `num_key_value_heads` or `head_dim` to `int` or have no
# such key (transformers then keeps any value as a plain attribute).
INT, FLOAT, BOOL, STR = "int", "float", "bool", "str"
STRICT_TYPES: dict[str, tuple[str, ...]] = {
    "vocab_size": (INT,),
    "hidden_size": (INT,),
    "intermediate_size": (INT,),
    "num_hidden_layers": (INT,),
    "num_attention_heads": (INT,),
    "num_key_value_heads": (INT, "none"),
    "hidden_act": (STR,),
    "max_position_embeddings": (INT,),
    "initializer_range": (FLOAT,),
    "rms_norm_eps": (FLOAT,),
    "use_cache": (BOOL,),
    "pad_token_id": (INT, "none"),
    "bos_token_id": (INT, "none"),
    "eos_token_id": (INT, "list[int]", "none"),
    "pretraining_tp": (INT, "none"),
    "tie_word_embeddings": (BOOL,),
    "rope_parameters": ("dict", "none"),
    "attention_bias": (BOOL,),
    "attention_dropout": (INT, FLOAT, "none"),
    "mlp_bias": (BOOL,),
    "head_dim": (INT, "none"),
}
ROPE_REQUIRED = {
    "default": set(),
    "linear": {"factor"},
    "dynamic": {"factor"},
    "yarn": {"factor", "original_max_position_embeddings"},
    "longrope": {"short_factor", "long_factor", "original_max_position_embeddings"},
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor", "rope_theta"},
    "proportional": {"rope_theta"},
}
SILU_NAMES = ("silu", "swish")  # activations.py:343,345: both are SiLU


def _type_ok(v: Any, kinds: tuple[str, ...]) -> bool:
    for k in kinds:
        if k == "none" and v is None:
            return True
        if k == INT and isinstance(v, int) and not isinstance(v, bool):
            return True
        if k == FLOAT and isinstance(v, float):
            return True
        if k == BOOL and isinstance(v, bool):
            return True
        if k == STR and isinstance(v, str):
            return True
        if k == "dict" and isinstance(v, dict):
            return True
        if k == "list[int]" and isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return True
    return False


def _py_type(v: Any) -> str:
    return {type(None): "NoneType"}.get(type(v), type(v).__name__)


def eos_ids(v: Any) -> list[int]:
    if v is None:
        return []
    if isinstance(v, list):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    return []


# --- every candle family: what transformers 5.24 computes for the keys candle's module reads ---
#
# Sources, in `transformers/models/<model_type>/configuration_<model_type>.py` unless said:
# class defaults (held to `AutoConfig.for_model` by tests/unit/test_family_semantics.py);
# `modeling_rope_utils.py:775-865` (rope dict > top-level key > the class's `default_theta`:
# mixtral 1e6, gemma3 {global 1e6, local 1e4} read per layer type, else 1e4);
# `configuration_gemma.py:89-94` (`hidden_act: "gelu"` is read as "gelu_pytorch_tanh");
# `configuration_qwen2.py:83-91` (`sliding_window` only with `use_sliding_window`, layers from
# `max_window_layers` on); `configuration_gemma2.py:94-97` (every other layer slides);
# `configuration_gemma3.py:105-111` (`sliding_window_pattern`, default 6);
# `configuration_qwen3_moe.py:50-52` (`num_local_experts` is `num_experts`).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    # llama: LlamaConfig's fields candle reads; None where the class derives the value from the
    # heads (`_DERIVED_FROM_HEADS`)
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "head_dim": None,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-06,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
    },
    "mistral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": None,
        "hidden_act": "silu",
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-06,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
    },
    "mixtral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_act": "silu",
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-05,
        "sliding_window": None,
        "num_experts_per_tok": 2,
        "num_local_experts": 8,
        "tie_word_embeddings": False,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
        "max_window_layers": 28,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-06,
        "use_sliding_window": False,
        "hidden_act": "silu",
    },
    "qwen3": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "head_dim": 128,
        "attention_bias": False,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
        "max_window_layers": 28,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-06,
        "use_sliding_window": False,
        "hidden_act": "silu",
    },
    "qwen3_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "attention_bias": False,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-06,
        "use_sliding_window": False,
        "hidden_act": "silu",
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 768,
        "num_experts_per_tok": 8,
        "num_experts": 128,
        "norm_topk_prob": False,
    },
    "gemma": {
        "attention_bias": False,
        "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_attention_heads": 16,
        "num_hidden_layers": 28,
        "num_key_value_heads": 16,
        "rms_norm_eps": 1e-06,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "gemma2": {
        "attention_bias": False,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_attention_heads": 8,
        "num_hidden_layers": 26,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "vocab_size": 256000,
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    "gemma3": {
        "attention_bias": False,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_attention_heads": 8,
        "num_hidden_layers": 26,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "vocab_size": 262208,
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "use_bidirectional_attention": False,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
    },
    "phi3": {
        "vocab_size": 32064,
        "hidden_act": "silu",
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "rms_norm_eps": 1e-05,
        "max_position_embeddings": 4096,
        "sliding_window": None,
        "tie_word_embeddings": False,
    },
    "olmo2": {
        "vocab_size": 50304,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "attention_bias": False,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "granite": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "vocab_size": 32000,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "rms_norm_eps": 1e-06,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "hidden_act": "silu",
        "embedding_multiplier": 1.0,
        "attention_multiplier": 1.0,
        "residual_multiplier": 1.0,
        "logits_scaling": 1.0,
    },
    "starcoder2": {
        "vocab_size": 49152,
        "hidden_size": 3072,
        "intermediate_size": 12288,
        "num_hidden_layers": 30,
        "num_attention_heads": 24,
        "num_key_value_heads": 2,
        "hidden_act": "gelu_pytorch_tanh",
        "max_position_embeddings": 4096,
        "norm_epsilon": 1e-05,
        "use_bias": True,
        "sliding_window": None,
        "tie_word_embeddings": True,
    },
    "stable_lm": {
        "vocab_size": 50304,
        "intermediate_size": 6912,
        "hidden_size": 2560,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "layer_norm_eps": 1e-05,
        "use_cache": True,
        "use_qkv_bias": False,
        "tie_word_embeddings": False,
    },
    "qwen2_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "sliding_window": 4096,
        "max_window_layers": 28,
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts_per_tok": 4,
        "num_experts": 60,
        "norm_topk_prob": False,
    },
    "smollm3": {
        "vocab_size": 128256,
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "no_rope_layer_interval": 4,
    },
    "phi": {
        "vocab_size": 51200,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "hidden_act": "gelu_new",
        "max_position_embeddings": 2048,
        "layer_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "qk_layernorm": False,
    },
    # configuration_glm4.py: `head_dim` 128 and `attention_bias` true whatever the sizes
    "glm4_new": {
        "vocab_size": 151552,
        "hidden_size": 4096,
        "intermediate_size": 13696,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1.5625e-07,
        "tie_word_embeddings": False,
        "attention_bias": True,
    },
    # configuration_gemma4.py:147-178 (Gemma4TextConfig's fields; `global_head_dim` is a kwarg, 512, kept in
    # `per_layer_config`: `gemma4_per_layer` below)
    "gemma4": {
        "vocab_size": 262144,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 30,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "sliding_window": 512,
        "final_logit_softcapping": None,
        "use_bidirectional_attention": None,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "attention_k_eq_v": False,
        "num_kv_shared_layers": 0,
        "enable_moe_block": False,
        "use_double_wide_mlp": False,
        "num_experts": None,
        "top_k_experts": None,
        "moe_intermediate_size": None,
    },
}
# configuration_gemma4.py:198-203: the rope parameters of a Gemma4TextConfig whose config.json has none
GEMMA4_DEFAULT_ROPE: dict[str, dict[str, Any]] = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
}
GEMMA4_DEFAULT_GLOBAL_HEAD_DIM = 512  # configuration_gemma4.py:205 `kwargs.pop("global_head_dim", 512)`
FAMILY_DEFAULT_THETA = {"mixtral": 1e6, "gemma3": 1e6, "smollm3": 2e6}  # class `default_theta`; 1e4 elsewhere
GEMMA3_DEFAULT_LOCAL_THETA = 10000.0
PHI3_ORIGINAL_MAX_POSITIONS = 4096  # configuration_phi3.py:71
# the rope types computed from the pretraining length: standardize_rope_params gives them one
_SCALED_FROM_PRETRAINING = ("llama3", "yarn", "longrope")
STABLELM_DEFAULT_PARTIAL_ROTARY = 0.25
PHI_DEFAULT_PARTIAL_ROTARY = 0.5  # configuration_phi.py:87 `kwargs.setdefault("partial_rotary_factor", 0.5)`
# configuration_glm4.py `__post_init__`: `kwargs.setdefault("partial_rotary_factor", 0.5)`
GLM4_DEFAULT_PARTIAL_ROTARY = 0.5
# partial_rotary_factor: stable_lm (default 0.25), phi and glm4 (0.5) and phi3 rotate part of the head whatever the
# rope type; llama's default rope ignores the factor and only its scaled rope types honour it
# (modeling_llama.py:73-106, `compute_default_rope_parameters`)
_PARTIAL_ROTARY_ALWAYS = {
    "stable_lm": STABLELM_DEFAULT_PARTIAL_ROTARY,
    "phi": PHI_DEFAULT_PARTIAL_ROTARY,
    "glm4_new": GLM4_DEFAULT_PARTIAL_ROTARY,
    "phi3": None,
}
_PARTIAL_ROTARY_SCALED_ONLY = ("llama",)
# the classes whose `__post_init__` turns a None into the heads' value: `num_key_value_heads` =
# `num_attention_heads` (configuration_llama.py:88-89, configuration_qwen2.py:84-85, ...), `head_dim` =
# `hidden_size // num_attention_heads` (configuration_llama.py:86-87, configuration_mistral.py:83)
_DERIVED_FROM_HEADS = {
    "num_key_value_heads": ("llama", "qwen2", "qwen3", "phi3", "olmo2", "granite", "phi", "smollm3"),
    "head_dim": ("llama", "mistral"),
}
# the classes whose `validate_architecture` refuses a hidden size the heads do not divide
# (configuration_llama.py:93-98, configuration_gemma2.py:101-106, configuration_gemma3.py:115-120)
_VALIDATES_HEAD_SPLIT = ("llama", "gemma2", "gemma3")
# keys transformers keeps when config.json writes them, for a family whose class has no default for them
_TAKEN_WHEN_WRITTEN = (
    "head_dim",
    "attention_bias",
    "mlp_bias",
    "tie_word_embeddings",
    "use_sliding_window",
    "sliding_window",
)


def _smollm3_rope_layers(written: Any, interval: Any, n: int) -> list[int] | None:
    """SmolLM3's `no_rope_layers` (1: the layer rotates): as written, else every `interval`-th
    layer without (configuration_smollm3.py `__post_init__`); None where neither is usable."""
    if isinstance(written, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in written):
        return list(written)
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0:
        return [int((i + 1) % interval != 0) for i in range(n)]
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyTransformersView:
    """transformers 5.24's effective values for a config of one candle family, under the names
    candle's `Config` gives them (`values`), with where each came from (`sources`: the config.json
    key path, () for a class default). torch-free.

    `refused` says why transformers would not build this model (strict type validation,
    architecture or rope validation); the other fields are then best effort. `family` None: a
    model type portkit has no family for, read without class defaults (what config.json writes)."""

    family: str | None
    refused: str | None = None
    model_type: str | None = None  # as config.json writes it
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rope_type: str = "default"  # of the global (gemma3: full-attention) layers
    rope_parameters: dict[str, Any] = field(default_factory=dict)
    rope_source: str | None = None  # the key transformers read the rope dict from (rope_scaling wins when truthy)
    local_rope_type: str | None = None  # gemma3's sliding-attention layers
    local_rope_parameters: dict[str, Any] = field(default_factory=dict)
    rotary_dim: int | None = None  # the head dimensions the global rope rotates
    sliding_layers: tuple[bool, ...] = ()  # per layer: transformers masks it to `sliding_window`
    sliding_window_applied: bool = False  # the forward masks some layer to the window (its class, or `layer_types`)
    sliding_window_in_cache: bool = False  # generate()'s DynamicCache keeps only the window
    generation_eos_token_id: int | list[int] | None = None  # what generate() stops on
    generation_eos_source: str = "config.json"  # or "generation_config.json", when it has the key
    multipliers: dict[str, float] = field(default_factory=dict)  # granite

    @property
    def ok(self) -> bool:
        return self.refused is None

    @property
    def rope_scaled(self) -> bool:
        return self.rope_type != "default"

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def sliding_window(self) -> int | None:
        sw = self.values.get("sliding_window")
        return sw if any(self.sliding_layers) and isinstance(sw, int) and not isinstance(sw, bool) else None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    """A number as transformers computes with it, None for what is not one (an int past a double)."""
    if not _number(v):
        return None
    try:
        return float(v)
    except OverflowError:
        return None


def family_transformers_view(
    family: str | None, config: Mapping[str, Any], generation_config: Mapping[str, Any] | None = None
) -> FamilyTransformersView:
    """What transformers 5.24 computes with for `config` of `family` (a `portkit.families` name,
    None for a model type portkit has no family for), and whether it accepts the config at all."""
    if not isinstance(config, Mapping):
        return FamilyTransformersView(family=family, refused="config.json is not a JSON object")
    try:
        return _family_transformers_view(family, dict(config), generation_config)
    except (OverflowError, ValueError, TypeError, ZeroDivisionError) as e:
        # transformers itself would raise on these values (e.g. int(inf) for a rotary dim)
        return FamilyTransformersView(family=family, refused=f"values transformers cannot compute with: {e}")


@dataclass(slots=True)
class _Reading:
    """One config.json being read the way one family's configuration class reads it: what the
    phases below share. `refusals` in the order transformers validates (the first is what it raises)."""

    family: str | None
    c: dict[str, Any]
    defaults: Mapping[str, Any]
    rules: _FamilyRules
    mistyped: set[str] = field(default_factory=set)
    refusals: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def refuse(self, why: str) -> None:
        self.refusals.append(why)

    def take(self, key: str, *alias: str) -> None:
        """`key` as config.json writes it (or an alias), else the class default; a mistyped value reads as absent."""
        for k in (key, *alias):
            if k in self.c and k not in self.mistyped:
                self.values[key], self.sources[key] = self.c[k], (k,)
                return
        if key in self.defaults:
            self.values[key], self.sources[key] = self.defaults[key], ()


@dataclass(frozen=True, slots=True)
class _Rope:
    """The rope dict of the global layers as transformers standardizes it, and the sliding layers' (gemma3/4)."""

    key: str  # the config.json key it came from
    written: dict[str, Any]  # that key's dict as config.json writes it ({} when not one)
    params: dict[str, Any]
    local: dict[str, Any] = field(default_factory=dict)
    local_type: str | None = None


@dataclass(frozen=True, slots=True)
class _Window:
    """What every family's sliding-window reading starts from."""

    n: int  # layers
    has_sw: bool  # `sliding_window` is a positive number
    opted_out: bool  # the class drops the window without `use_sliding_window`
    in_cache: bool  # generate()'s cache keeps only the window (cache_utils.py:1959-1997)
    layer_types: list[Any] | None


def _family_transformers_view(
    family: str | None, c: dict[str, Any], generation_config: Mapping[str, Any] | None
) -> FamilyTransformersView:
    rules = _FAMILY_RULES.get(family or "", _LLAMA_LIKE)
    r = _Reading(family, c, FAMILY_DEFAULTS.get(family, {}) if family is not None else {}, rules)
    _strict_types(r)
    # a model type portkit has no family for: the keys the classes share, as config.json writes them
    for key in r.defaults if family is not None else STRICT_TYPES:
        r.take(key)
    for key, alias in rules.aliases.items():
        r.take(key, *alias)
    for key in _TAKEN_WHEN_WRITTEN:
        if key in c and key not in r.values:
            r.take(key)
    head_dim, derived = _heads(r)
    rope = rules.rope(r, *_written_rope(r))
    rope_type = _standardize_rope(r, rope.params)
    rotary_dim = _rotary_dim(r, rope, rope_type, head_dim, derived)
    act = r.values.get("hidden_act")
    if isinstance(act, str) and act in rules.renamed_activations:
        r.values["hidden_act"] = rules.renamed_activations[act]
    window = _window(r, rules.window_needs_opt_in)
    sliding = rules.sliding(r, window)
    typed = window.layer_types is not None and "sliding_attention" in window.layer_types
    applied = any(sliding) or (window.in_cache and typed)
    gen_eos, gen_src = _generation_eos(r, generation_config)
    mt = c.get("model_type")
    return FamilyTransformersView(
        family=family,
        refused=r.refusals[0] if r.refusals else None,
        model_type=mt if isinstance(mt, str) else None,
        values=r.values,
        sources=r.sources,
        rope_type=rope_type,
        rope_parameters=rope.params,
        rope_source=rope.key if rope.key == "rope_scaling" or isinstance(c.get("rope_parameters"), dict) else None,
        local_rope_type=rope.local_type,
        local_rope_parameters=rope.local,
        rotary_dim=rotary_dim,
        sliding_layers=sliding,
        sliding_window_applied=applied,
        sliding_window_in_cache=window.in_cache,
        generation_eos_token_id=gen_eos,
        generation_eos_source=gen_src,
        multipliers={k: r.values[k] for k in rules.multipliers},
    )


def _strict_types(r: _Reading) -> None:
    """huggingface_hub's strict validation, in the class's field order; a refused value reads as the default."""
    for name, kinds in STRICT_TYPES.items():
        if name in r.c and not _type_ok(r.c[name], kinds):
            v = r.c[name]
            shown = repr(v) if len(repr(v)) < 60 else repr(v)[:57] + "..."
            r.refuse(f"`{name}` expected {' | '.join(kinds)}, got {_py_type(v)} ({shown})")
            r.mistyped.add(name)
    ir = r.c.get("initializer_range")
    if "initializer_range" not in r.mistyped and isinstance(ir, float) and not 0.0 <= ir <= 1.0:
        r.refuse(f"`initializer_range` must be within [0, 1], got {ir}")


def _heads(r: _Reading) -> tuple[int | None, int | None]:
    """The config's `head_dim` (what rope validation checks) and hidden // heads. Some classes derive
    a None count of KV heads or head_dim from the heads, some refuse a hidden size they do not divide."""
    hidden, heads = _int(r.values.get("hidden_size")), _int(r.values.get("num_attention_heads"))
    derived = None
    if heads == 0:
        r.refuse("`num_attention_heads` is 0 (transformers divides by it)")
        derived = 0
    elif hidden is not None and heads is not None:
        derived = hidden // heads
        if hidden % heads and r.family in _VALIDATES_HEAD_SPLIT:
            r.refuse(f"hidden size {hidden} is not a multiple of the number of attention heads {heads}")
    for key, value in (("num_key_value_heads", heads), ("head_dim", derived)):
        if key in r.values and r.values[key] is None and r.family in _DERIVED_FROM_HEADS[key]:
            r.values[key] = value
    return _int(r.values.get("head_dim")), derived


def _written_rope(r: _Reading) -> tuple[str, dict[str, Any]]:
    """rope_scaling (if truthy) replaces rope_parameters (modeling_rope_utils.py `convert_rope_params_to_dict`)."""
    rope_key = "rope_scaling" if r.c.get("rope_scaling") else "rope_parameters"
    written = r.c.get(rope_key) if rope_key not in r.mistyped else None
    if rope_key == "rope_scaling" and not isinstance(written, dict):
        r.refuse(f"`rope_scaling` must be an object, got {_py_type(written)}")
    return rope_key, written if isinstance(written, dict) else {}


def _one_rope(r: _Reading, rope_key: str, written: dict[str, Any]) -> _Rope:
    """One rope for every layer: theta from the dict, else the top level, else the class default."""
    rope = dict(written)
    default = FAMILY_DEFAULT_THETA.get(r.family or "", DEFAULT_THETA)
    _theta(r, "rope_theta", rope, (rope_key,), "rope_theta", default)
    if r.c.get("partial_rotary_factor") is not None:
        rope.setdefault("partial_rotary_factor", r.c["partial_rotary_factor"])
    rope.setdefault("rope_type", rope.get("type", "default"))
    # modeling_rope_utils.py:853-860: a class with an `original_max_position_embeddings` field (phi3's)
    # replaces the rope dict's with it for the types that scale from it; a key config.json writes for
    # another class is set as an attribute only after this runs, and changes nothing
    own = r.rules.original_max_position_embeddings
    if rope["rope_type"] in _SCALED_FROM_PRETRAINING and own is not None:
        rope["original_max_position_embeddings"] = r.c.get("original_max_position_embeddings", own)
    return _Rope(rope_key, written, rope)


def _gemma3_rope(r: _Reading, rope_key: str, written: dict[str, Any]) -> _Rope:
    """One dict per layer type, or a legacy single dict for the full layers and `rope_local_base_freq`."""
    nested = isinstance(written.get("full_attention"), dict) or isinstance(written.get("sliding_attention"), dict)
    # a legacy `rope_scaling` updates {"rope_type": "default"}: spelled with `type` only, it
    # keeps the default rope (configuration_gemma3.py `convert_rope_params_to_dict`)
    if nested:
        full = dict(written.get("full_attention") or {})
    else:
        full = {"rope_type": "default", **written} if rope_key == "rope_scaling" else {}
    local = dict(written.get("sliding_attention") or {}) if nested else {}
    full_path = (rope_key, "full_attention") if nested else (rope_key,)
    _theta(r, "rope_theta", full, full_path, "rope_theta", FAMILY_DEFAULT_THETA["gemma3"])
    local_path = (rope_key, "sliding_attention")
    _theta(r, "rope_local_base_freq", local, local_path, "rope_local_base_freq", GEMMA3_DEFAULT_LOCAL_THETA)
    full.setdefault("rope_type", full.get("type", "default"))
    local.setdefault("rope_type", local.get("type", "default"))
    local_type = local["rope_type"] if isinstance(local["rope_type"], str) else "default"
    return _Rope(rope_key, written, full, local, local_type)


def _gemma4_rope(r: _Reading, rope_key: str, written: dict[str, Any]) -> _Rope:
    """configuration_gemma4.py:198-203, :259-261: one dict per layer type, the class's when config.json
    has none; a top-level `rope_theta` is kept as an attribute and never read."""
    given = bool(written)
    defaults = GEMMA4_DEFAULT_ROPE
    full = dict(written.get("full_attention") or {}) if given else dict(defaults["full_attention"])
    local = dict(written.get("sliding_attention") or {}) if given else dict(defaults["sliding_attention"])
    for name, sub, key in (
        ("rope_theta", full, "full_attention"),
        ("rope_local_base_freq", local, "sliding_attention"),
    ):
        if _float(sub.get("rope_theta")) is not None:
            r.values[name] = float(sub["rope_theta"])
            r.sources[name] = (rope_key, key, "rope_theta") if given else ()
    if _number(full.get("partial_rotary_factor")):
        r.values["partial_rotary_factor"] = float(full["partial_rotary_factor"])
        r.sources["partial_rotary_factor"] = (rope_key, "full_attention", "partial_rotary_factor") if given else ()
    full.setdefault("rope_type", "default")
    local.setdefault("rope_type", "default")
    local_type = local["rope_type"] if isinstance(local["rope_type"], str) else "default"
    if "rope_theta" not in r.values:  # no base for the full layers: transformers' rope init fails
        r.refuse("`rope_parameters.full_attention` has no `rope_theta`")
        full["rope_theta"] = None
    return _Rope(rope_key, written, full, local, local_type)


def _standardize_rope(r: _Reading, rope: dict[str, Any]) -> str:
    """modeling_rope_utils.py `standardize_rope_params` and the rope validation; returns the rope type."""
    rope_type = rope["rope_type"] if isinstance(rope.get("rope_type"), str) else "default"
    if rope_type in _SCALED_FROM_PRETRAINING:
        rope.setdefault("original_max_position_embeddings", r.values.get("max_position_embeddings"))
    if not isinstance(rope.get("rope_type"), str):
        r.refuse(
            f"rope_type {rope.get('rope_type')!r:.40} has no rope init function in transformers (ROPE_INIT_FUNCTIONS)"
        )
    elif rope_type not in ROPE_REQUIRED:
        r.refuse(f"rope_type {rope_type!r} has no rope init function in transformers (ROPE_INIT_FUNCTIONS)")
    elif missing := ROPE_REQUIRED[rope_type] - set(rope):
        r.refuse(f"missing required keys in `rope_parameters` for rope_type {rope_type!r}: {sorted(missing)}")
    theta = rope.get("rope_theta")
    if not _number(theta):
        r.refuse(f"`rope_theta` must be a number, got {_py_type(theta)} ({theta!r:.40})")
    elif _float(theta) is None:
        r.refuse("`rope_theta` is out of range for a double")
    return rope_type


def _rotary_dim(r: _Reading, rope: _Rope, rope_type: str, head_dim: int | None, derived: int | None) -> int | None:
    """The head dimensions the global rope rotates. A scaled rope rotates `partial_rotary_factor` of the
    head in every class (modeling_rope_utils.py `_compute_default_rope_parameters`); the default rope
    only in those that rotate part of it."""
    family, params, written = r.family or "", rope.params, rope.written
    prf = params.get("partial_rotary_factor")
    if prf is not None and not _number(prf):
        r.refuse(f"`partial_rotary_factor` must be a number, got {_py_type(prf)}")
        prf = None
    if family in _PARTIAL_ROTARY_ALWAYS or (family in _PARTIAL_ROTARY_SCALED_ONLY and rope_type != "default"):
        default_prf = _PARTIAL_ROTARY_ALWAYS.get(family)
        if _number(written.get("partial_rotary_factor")):
            r.values["partial_rotary_factor"] = float(written["partial_rotary_factor"])
            r.sources["partial_rotary_factor"] = (rope.key, "partial_rotary_factor")
        elif _number(r.c.get("partial_rotary_factor")):
            r.values["partial_rotary_factor"] = float(r.c["partial_rotary_factor"])
            r.sources["partial_rotary_factor"] = ("partial_rotary_factor",)
        elif default_prf is not None:
            r.values["partial_rotary_factor"], r.sources["partial_rotary_factor"] = default_prf, ()
        if default_prf is not None:
            # the class's `__post_init__` sets it in its rope parameters (`kwargs.setdefault`): a top-level
            # key that restates it changes nothing
            params.setdefault("partial_rotary_factor", r.values["partial_rotary_factor"])
    attn_head = head_dim if head_dim is not None else derived  # the attention's own fallback
    rotary_dim = None
    if attn_head is not None:
        factor = prf if prf is not None else r.values.get("partial_rotary_factor")
        rotary = rope_type != "default" or family in _PARTIAL_ROTARY_ALWAYS
        rotary_dim = int(attn_head * factor) if rotary and factor is not None else attn_head
    if (
        head_dim is not None
        and head_dim > 4
        and head_dim % 2
        and int(head_dim * (1.0 if prf is None else prf)) == head_dim
    ):
        r.refuse(f"RoPE requires an even rotary dimension, got head_dim={head_dim}")
    return rotary_dim


def _window(r: _Reading, needs_opt_in: bool) -> _Window:
    n = r.c.get("num_hidden_layers", r.defaults.get("num_hidden_layers", 0))
    n = n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 100_000 else 0
    sw = r.values.get("sliding_window")
    layer_types = r.c.get("layer_types") if isinstance(r.c.get("layer_types"), list) else None
    # configuration_qwen2.py:83 (and qwen2_moe's): no window at all without `use_sliding_window`
    opted_out = needs_opt_in and r.values.get("use_sliding_window") is not True
    sw_int = _int(sw)
    in_cache = sw_int is not None and sw_int > 0 and not opted_out
    return _Window(n, bool(_number(sw) and sw is not None and sw > 0), opted_out, in_cache, layer_types)


def _typed_layers(w: _Window, on: bool) -> tuple[bool, ...] | None:
    """The layers `layer_types` names sliding (when it lists every layer), with the window on."""
    if w.layer_types is not None and len(w.layer_types) == w.n:
        return tuple(on and t == "sliding_attention" for t in w.layer_types)
    return None


def _no_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    return tuple(False for _ in range(w.n))


def _every_layer(r: _Reading, w: _Window) -> tuple[bool, ...]:
    """mistral, mixtral, starcoder2, phi3: every layer masks to `sliding_window` when it is set."""
    return tuple(w.has_sw for _ in range(w.n))


def _from_max_window_layers(r: _Reading, w: _Window) -> tuple[bool, ...]:
    """qwen2, qwen3, qwen3_moe: the layers from `max_window_layers` on, or as `layer_types` says."""
    on = w.has_sw and not w.opted_out
    if not on:
        r.values["sliding_window"] = None  # configuration_qwen2.py:83
    mwl = r.values.get("max_window_layers", w.n)
    mwl = mwl if isinstance(mwl, int) else w.n
    return _typed_layers(w, on) or tuple(on and i >= mwl for i in range(w.n))


def _smollm3_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    """configuration_smollm3.py `__post_init__`: the NoPE layers from the interval when config.json
    lists none; with `use_sliding_window`, a window on the NoPE layers."""
    nope = _smollm3_rope_layers(r.c.get("no_rope_layers"), r.values.get("no_rope_layer_interval"), w.n)
    if nope is not None:
        r.values["no_rope_layers"] = nope
        r.sources["no_rope_layers"] = ("no_rope_layers",) if "no_rope_layers" in r.c else ()
    on = r.values.get("use_sliding_window") is True and w.has_sw
    return _typed_layers(w, on) or tuple(on and nope is not None and not nope[i] for i in range(w.n))


def _qwen2_moe_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    """configuration_qwen2_moe.py `__post_init__`: a window of 0 without `use_sliding_window`, and with it
    every other layer below `max_window_layers` slides."""
    if w.opted_out:
        r.values["sliding_window"] = 0
    mwl = r.values.get("max_window_layers", w.n)
    mwl = mwl if isinstance(mwl, int) else w.n
    on = w.has_sw and not w.opted_out
    return _typed_layers(w, on) or tuple(on and bool((i + 1) % 2) and i < mwl for i in range(w.n))


def _every_nth_full(w: _Window, pattern: int) -> tuple[bool, ...]:
    """Every `pattern`-th layer full attention, the others sliding; or as `layer_types` says."""
    return _typed_layers(w, w.has_sw) or tuple(w.has_sw and bool((i + 1) % pattern) for i in range(w.n))


def _gemma2_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    return _every_nth_full(w, 2)


def _gemma3_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    """`sliding_window_pattern` (or the older `_sliding_window_pattern`), 6 by default."""
    p = r.c.get("sliding_window_pattern", r.c.get("_sliding_window_pattern", 6))
    pattern = p if isinstance(p, int) and not isinstance(p, bool) and p > 0 else 6
    r.values["sliding_window_pattern"] = pattern
    written = [k for k in ("sliding_window_pattern", "_sliding_window_pattern") if k in r.c]
    r.sources["sliding_window_pattern"] = tuple(written[:1])
    return _every_nth_full(w, pattern)


def _gemma4_window(r: _Reading, w: _Window) -> tuple[bool, ...]:
    return _gemma4_layers(r.c, r.values, r.sources, w.n, w.has_sw)


def _generation_eos(r: _Reading, generation_config: Mapping[str, Any] | None) -> tuple[Any, str]:
    """What generate() stops on: generation_config.json's `eos_token_id` when it has the key."""
    if isinstance(generation_config, Mapping) and "eos_token_id" in generation_config:
        eos = generation_config["eos_token_id"]
        return (eos if _type_ok(eos, (INT, "list[int]", "none")) else eos_ids(eos) or None), "generation_config.json"
    return (r.values["eos_token_id"] if "eos_token_id" in r.values else r.c.get("eos_token_id")), "config.json"


def _gemma4_layers(
    c: dict[str, Any], values: dict[str, Any], sources: dict[str, tuple[str, ...]], n: int, has_sw: bool
) -> tuple[bool, ...]:
    """Gemma4TextConfig's `layer_types` and what its full-attention layers take from `per_layer_config`
    (configuration_gemma4.py:185-218): `layer_types` as written, else every sixth layer full; the last
    layer always full; `global_head_dim` (512 unless the kwarg says otherwise) and, with
    `attention_k_eq_v`, `num_global_key_value_heads` for each full layer, as written to config.json in
    `per_layer_config` (entries equal to the global value are left out: the layer then has `head_dim`)."""
    types = c.get("layer_types")
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        types = list(types)
        sources["layer_types"] = ("layer_types",)
    else:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        sources["layer_types"] = ()
    if types:
        types[-1] = "full_attention"  # configuration_gemma4.py:192-196, with a warning
    values["layer_types"] = types
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    plc = c.get("per_layer_config")
    hd, kv = values.get("head_dim"), values.get("num_key_value_heads")
    if isinstance(plc, dict):
        by_layer = {int(k): v for k, v in plc.items() if isinstance(k, str) and k.isdigit() and isinstance(v, dict)}
        heads = [by_layer.get(i, {}).get("head_dim", hd) for i in full]
        kvs = [by_layer.get(i, {}).get("num_key_value_heads", kv) for i in full]
        src: tuple[str, ...] = ("per_layer_config",)
    else:
        g = c.get("global_head_dim", GEMMA4_DEFAULT_GLOBAL_HEAD_DIM)
        gkv = c.get("num_global_key_value_heads") if c.get("attention_k_eq_v") is True else None
        heads, kvs = [g for _ in full], [kv if gkv is None else gkv for _ in full]
        src = ("global_head_dim",) if "global_head_dim" in c else ()
    # one value for the full layers, as candle has one (the first full layer's: candle fails there first)
    values["global_head_dim"] = heads[0] if heads else GEMMA4_DEFAULT_GLOBAL_HEAD_DIM
    values["num_global_key_value_heads"] = kvs[0] if kvs else kv
    values["full_head_dims"] = heads
    sources["global_head_dim"] = src
    return tuple(has_sw and t == "sliding_attention" for t in types[:n])


def _theta(
    r: _Reading, name: str, rope: dict[str, Any], rope_path: tuple[str, ...], top_key: str, default: float
) -> None:
    """A rope base from the rope dict, else the top-level key, else the class default."""
    if _float(rope.get("rope_theta")) is not None:
        r.values[name], r.sources[name] = float(rope["rope_theta"]), (*rope_path, "rope_theta")
    elif _float(r.c.get(top_key)) is not None:
        r.values[name], r.sources[name] = float(r.c[top_key]), (top_key,)
    else:
        r.values[name], r.sources[name] = float(default), ()
    # the dict takes the top-level key as written (transformers validates it there), else the default
    rope.setdefault("rope_theta", r.c[top_key] if top_key in r.c else r.values[name])


@dataclass(frozen=True, slots=True)
class _FamilyRules:
    """Where one family's configuration class reads config.json differently from LlamaConfig."""

    rope: Callable[[_Reading, str, dict[str, Any]], _Rope] = _one_rope
    sliding: Callable[[_Reading, _Window], tuple[bool, ...]] = _no_window
    window_needs_opt_in: bool = False  # configuration_qwen2.py:83: no window without `use_sliding_window`
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # other keys the class reads a value from
    renamed_activations: Mapping[str, str] = field(default_factory=dict)
    multipliers: tuple[str, ...] = ()
    original_max_position_embeddings: int | None = None  # a class field (configuration_phi3.py:71)


_LLAMA_LIKE = _FamilyRules()
_QWEN_WINDOW = _FamilyRules(sliding=_from_max_window_layers, window_needs_opt_in=True)
_FAMILY_RULES: dict[str, _FamilyRules] = {
    **{f: _FamilyRules(sliding=_every_layer) for f in ("mistral", "mixtral", "starcoder2")},
    "phi3": _FamilyRules(sliding=_every_layer, original_max_position_embeddings=PHI3_ORIGINAL_MAX_POSITIONS),
    "qwen2": _QWEN_WINDOW,
    "qwen3": _QWEN_WINDOW,
    "qwen3_moe": replace(_QWEN_WINDOW, aliases={"num_experts": ("num_local_experts",)}),
    "qwen2_moe": _FamilyRules(sliding=_qwen2_moe_window, window_needs_opt_in=True),
    "smollm3": _FamilyRules(sliding=_smollm3_window),
    # gemma reads `hidden_act` and rewrites the legacy "gelu" to the tanh GELU
    "gemma": _FamilyRules(renamed_activations={"gelu": "gelu_pytorch_tanh"}),
    "gemma2": _FamilyRules(sliding=_gemma2_window),
    "gemma3": _FamilyRules(rope=_gemma3_rope, sliding=_gemma3_window),
    "gemma4": _FamilyRules(rope=_gemma4_rope, sliding=_gemma4_window),
    "granite": _FamilyRules(
        multipliers=("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")
    ),
}


def llama3_inv_freq_factors(view: FamilyTransformersView) -> list[float] | None:
    """The per-frequency divisors llama3 scaling applies (what llama.cpp stores in
    `rope_freqs.weight`): inv_freq_default / inv_freq_llama3, from
    `_compute_llama3_parameters` (modeling_rope_utils.py:581-666). None unless llama3."""
    theta = view.get("rope_theta")
    if view.rope_type != "llama3" or not _number(theta) or view.rotary_dim is None:
        return None
    p = view.rope_parameters
    try:
        factor = float(p["factor"])
        low = float(p["low_freq_factor"])
        high = float(p["high_freq_factor"])
        old = float(p["original_max_position_embeddings"])
    except (KeyError, TypeError, ValueError):
        return None
    dim = view.rotary_dim
    low_wl, high_wl = old / low, old / high
    out = []
    for i in range(0, dim, 2):
        f = 1.0 / (theta ** (i / dim))
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            s = (old / wl - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return out
