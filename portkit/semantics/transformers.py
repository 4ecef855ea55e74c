"""What transformers 5 (checked against 5.24.0) makes of a Llama config.json, without importing it.

Sources, in `transformers/`:
- `models/llama/configuration_llama.py:63-99`: `@strict` LlamaConfig fields, defaults,
  `head_dim` and `num_key_value_heads` derivation, hidden % heads check.
- `configuration_utils.py:428-512`: `__post_init__` pops legacy `rope_scaling`/`rope_theta`
  kwargs into `rope_parameters`; unknown keys become attributes.
- `modeling_rope_utils.py:775-865`: `convert_rope_params_to_dict` / `standardize_rope_params`:
  `rope_scaling` (if truthy) replaces `rope_parameters`; `rope_theta` priority is
  rope dict > top-level key > 10000; `rope_type` defaults to the legacy `type`, then
  "default"; llama3/yarn/longrope get `original_max_position_embeddings` =
  `max_position_embeddings` when missing. `:868-1158`: required keys per rope type.
- `cache_utils.py:1959-1997`: a config with `sliding_window` gets sliding-window KV cache
  layers in `generate()`, whatever the model type.
- `models/llama/modeling_llama.py:73-106`: the default rope uses the whole head_dim
  (ignores `partial_rotary_factor`); other rope types use `int(head_dim * factor)`.
  `:205-229`: q/k/v/o biases follow `attention_bias`; `:156-161`: MLP bias, `hidden_act`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, Literal

DEFAULT_THETA = 10000.0

# LlamaConfig's dataclass fields, their strict types and defaults (configuration_llama.py:63-83)
INT, FLOAT, BOOL, STR = "int", "float", "bool", "str"
LLAMA_FIELDS: dict[str, tuple[tuple[str, ...], Any]] = {
    "vocab_size": ((INT,), 32000),
    "hidden_size": ((INT,), 4096),
    "intermediate_size": ((INT,), 11008),
    "num_hidden_layers": ((INT,), 32),
    "num_attention_heads": ((INT,), 32),
    "num_key_value_heads": ((INT, "none"), None),
    "hidden_act": ((STR,), "silu"),
    "max_position_embeddings": ((INT,), 2048),
    "initializer_range": ((FLOAT,), 0.02),
    "rms_norm_eps": ((FLOAT,), 1e-6),
    "use_cache": ((BOOL,), True),
    "pad_token_id": ((INT, "none"), None),
    "bos_token_id": ((INT, "none"), 1),
    "eos_token_id": ((INT, "list[int]", "none"), 2),
    "pretraining_tp": ((INT, "none"), 1),
    "tie_word_embeddings": ((BOOL,), False),
    "rope_parameters": (("dict", "none"), None),
    "attention_bias": ((BOOL,), False),
    "attention_dropout": ((INT, FLOAT, "none"), 0.0),
    "mlp_bias": ((BOOL,), False),
    "head_dim": ((INT, "none"), None),
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
# model types whose transformers modeling applies these when set (portkit's model of them)
SLIDING_WINDOW_TYPES = {"mistral", "mixtral", "starcoder2", "phi3"}
SLIDING_WINDOW_OPT_IN = {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"}  # need `use_sliding_window: true`
PARTIAL_ROTARY_TYPES = {"phi", "phi3", "stablelm", "gpt_neox", "persimmon", "glm", "glm4", "nemotron"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformersView:
    """transformers 5's effective values for a config.json, as `LlamaConfig` + `LlamaForCausalLM` use them.

    `refused` says why transformers would not build this model (strict type validation,
    architecture or rope validation); the other fields are then best effort.
    """

    refused: str | None = None
    model_type: str | None = None
    architectures: list[str] | None = None
    hidden_size: int = 4096
    intermediate_size: int = 11008
    vocab_size: int = 32000
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 32
    head_dim: int = 128
    head_dim_source: Literal["head_dim", "derived"] = "derived"
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    rope_theta: float | None = DEFAULT_THETA
    rope_theta_source: Literal["rope_parameters", "rope_scaling", "top-level", "default"] = "default"
    rope_type: str = "default"
    rope_source: Literal["rope_parameters", "rope_scaling"] | None = None
    rope_parameters: dict[str, Any] = field(default_factory=dict)
    partial_rotary_factor: float | None = None
    rotary_dim: int = 128
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    generation_eos_token_id: int | list[int] | None = 2
    generation_eos_source: Literal["generation_config.json", "config.json"] = "config.json"
    sliding_window: int | None = None
    sliding_window_applied: bool = False  # the model's forward masks outside the window
    sliding_window_in_cache: bool = False  # generate()'s DynamicCache keeps only the window
    dtype: str | None = None
    attn_implementation: str | None = None
    defaulted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.refused is None

    @property
    def rope_scaled(self) -> bool:
        return self.rope_type not in ("default",)


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


def transformers_view(config: Mapping[str, Any], generation_config: Mapping[str, Any] | None = None) -> TransformersView:
    """Effective values transformers 5 uses for `config` (parsed config.json)."""
    try:
        return _transformers_view(config, generation_config)
    except (OverflowError, ValueError, TypeError, ZeroDivisionError) as e:
        # transformers itself would raise on these values (e.g. int(inf) for a rotary dim)
        return TransformersView(refused=f"values transformers cannot compute with: {e}")


def _transformers_view(config: Mapping[str, Any], generation_config: Mapping[str, Any] | None) -> TransformersView:
    if not isinstance(config, Mapping):
        return TransformersView(refused="config.json is not a JSON object")
    c = dict(config)
    refused: str | None = None

    def refuse(msg: str) -> None:
        nonlocal refused
        if refused is None:
            refused = msg

    vals: dict[str, Any] = {}
    defaulted = []
    for name, (kinds, default) in LLAMA_FIELDS.items():
        if name in c:
            v = c[name]
            if not _type_ok(v, kinds):
                shown = repr(v) if len(repr(v)) < 60 else repr(v)[:57] + "..."
                refuse(f"`{name}` expected {' | '.join(kinds)}, got {_py_type(v)} ({shown})")
                v = default
            vals[name] = v
        else:
            vals[name] = default
            defaulted.append(name)
    if isinstance(vals["initializer_range"], float) and not 0.0 <= vals["initializer_range"] <= 1.0:
        refuse(f"`initializer_range` must be within [0, 1], got {vals['initializer_range']}")

    hidden, heads = vals["hidden_size"], vals["num_attention_heads"]
    if heads == 0:
        refuse("`num_attention_heads` is 0 (transformers divides by it)")
        derived = 0
    else:
        derived = hidden // heads
        if hidden % heads:
            refuse(f"hidden size {hidden} is not a multiple of the number of attention heads {heads}")
    head_dim = vals["head_dim"] if vals["head_dim"] is not None else derived
    kv = vals["num_key_value_heads"] if vals["num_key_value_heads"] is not None else heads

    # --- rope (modeling_rope_utils.py:775-865) ---
    rope_scaling = c.get("rope_scaling")
    rp = vals["rope_parameters"]
    if rope_scaling:
        rope_dict, rope_source = rope_scaling, "rope_scaling"
    elif rp is not None:
        rope_dict, rope_source = rp, "rope_parameters"
    else:
        rope_dict, rope_source = {}, None
    if not isinstance(rope_dict, dict):
        refuse(f"`rope_scaling` must be an object, got {_py_type(rope_dict)}")
        rope_dict, rope_source = {}, None
    rope = dict(rope_dict)
    if "rope_theta" in rope:
        theta_source = rope_source
    elif "rope_theta" in c:
        theta_source = "top-level"
    else:
        theta_source = "default"
    rope.setdefault("rope_theta", c["rope_theta"] if "rope_theta" in c else DEFAULT_THETA)
    prf_written = c.get("partial_rotary_factor")
    if prf_written is not None:
        rope.setdefault("partial_rotary_factor", prf_written)
    rope.setdefault("rope_type", rope.get("type", "default"))
    rope_type = rope["rope_type"]
    if rope_type in ("llama3", "yarn", "longrope"):
        rope.setdefault("original_max_position_embeddings", vals["max_position_embeddings"])
    if not isinstance(rope_type, str):
        refuse(f"rope_type {rope_type!r:.40} has no rope init function in transformers (ROPE_INIT_FUNCTIONS)")
        rope_type = "default"
    elif rope_type not in ROPE_REQUIRED:
        refuse(f"rope_type {rope_type!r} has no rope init function in transformers (ROPE_INIT_FUNCTIONS)")
    else:
        missing = ROPE_REQUIRED[rope_type] - set(rope)
        if missing:
            refuse(f"missing required keys in `rope_parameters` for rope_type {rope_type!r}: {sorted(missing)}")
    theta = rope.get("rope_theta")
    if isinstance(theta, bool) or not isinstance(theta, (int, float)):
        refuse(f"`rope_theta` must be a number, got {_py_type(theta)} ({theta!r:.40})")
        theta_f = None
    else:
        try:
            theta_f = float(theta)
        except OverflowError:
            refuse("`rope_theta` is out of range for a double")
            theta_f = None
    prf = rope.get("partial_rotary_factor")
    if prf is not None and (isinstance(prf, bool) or not isinstance(prf, (int, float))):
        refuse(f"`partial_rotary_factor` must be a number, got {_py_type(prf)}")
        prf = None
    model_type = c.get("model_type") if isinstance(c.get("model_type"), str) else None
    if rope_type == "default" and model_type not in PARTIAL_ROTARY_TYPES:
        rotary_dim = head_dim  # LlamaRotaryEmbedding.compute_default_rope_parameters ignores the factor
    else:
        rotary_dim = int(head_dim * (prf if prf is not None else 1.0))
    if (
        head_dim is not None
        and head_dim > 4
        and head_dim % 2
        and int(head_dim * (prf if prf is not None else 1.0)) == head_dim
    ):
        refuse(f"RoPE requires an even rotary dimension, got head_dim={head_dim}")

    # --- sliding window ---
    sw = c.get("sliding_window")
    sw_int = sw if isinstance(sw, int) and not isinstance(sw, bool) and sw > 0 else None
    layer_types = c.get("layer_types")
    opted_out = model_type in SLIDING_WINDOW_OPT_IN and c.get("use_sliding_window") is not True
    applied = sw_int is not None and not opted_out and (
        model_type in SLIDING_WINDOW_TYPES
        or model_type in SLIDING_WINDOW_OPT_IN
        or (isinstance(layer_types, list) and "sliding_attention" in layer_types)
    )
    # cache_utils.py get_layer_types_and_kwargs: any config with `sliding_window` set gets
    # DynamicSlidingWindowLayer caches, so cached generation attends within the window even
    # for Llama, whose forward never reads the key.
    in_cache = sw_int is not None and not opted_out

    # --- generation EOS: generate() uses generation_config.json when it has the key ---
    gen_eos, gen_src = vals["eos_token_id"], "config.json"
    if isinstance(generation_config, Mapping) and "eos_token_id" in generation_config:
        gen_eos, gen_src = generation_config["eos_token_id"], "generation_config.json"
        if not _type_ok(gen_eos, (INT, "list[int]", "none")):
            gen_eos = eos_ids(gen_eos) or None

    dtype = c.get("dtype") if isinstance(c.get("dtype"), str) else c.get("torch_dtype")
    attn = c.get("attn_implementation", c.get("_attn_implementation"))
    archs = c.get("architectures")
    return TransformersView(
        refused=refused,
        model_type=model_type,
        architectures=[a for a in archs if isinstance(a, str)] if isinstance(archs, list) else None,
        hidden_size=hidden,
        intermediate_size=vals["intermediate_size"],
        vocab_size=vals["vocab_size"],
        num_hidden_layers=vals["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        head_dim_source="head_dim" if vals["head_dim"] is not None else "derived",
        hidden_act=vals["hidden_act"],
        rms_norm_eps=vals["rms_norm_eps"],
        max_position_embeddings=vals["max_position_embeddings"],
        rope_theta=theta_f,
        rope_theta_source=theta_source,
        rope_type=rope_type,
        rope_source=rope_source,
        rope_parameters=rope,
        partial_rotary_factor=float(prf) if prf is not None else None,
        rotary_dim=rotary_dim,
        attention_bias=vals["attention_bias"],
        mlp_bias=vals["mlp_bias"],
        tie_word_embeddings=vals["tie_word_embeddings"],
        bos_token_id=vals["bos_token_id"],
        eos_token_id=vals["eos_token_id"],
        generation_eos_token_id=gen_eos,
        generation_eos_source=gen_src,
        sliding_window=sw_int,
        sliding_window_applied=applied,
        sliding_window_in_cache=in_cache,
        dtype=dtype if isinstance(dtype, str) else None,
        attn_implementation=attn if isinstance(attn, str) else None,
        defaulted=defaulted,
    )


def llama3_inv_freq_factors(view: TransformersView) -> list[float] | None:
    """The per-frequency divisors llama3 scaling applies (what llama.cpp stores in
    `rope_freqs.weight`): inv_freq_default / inv_freq_llama3, from
    `_compute_llama3_parameters` (modeling_rope_utils.py:581-666). None unless llama3."""
    if view.rope_type != "llama3" or view.rope_theta is None:
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
        f = 1.0 / (view.rope_theta ** (i / dim))
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            s = (old / wl - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return out


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
    # llama: LlamaConfig's own fields (LLAMA_FIELDS above); num_key_value_heads and head_dim
    # derive from the heads when absent, so they have no class default to list
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048, "rms_norm_eps": 1e-06,
              "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "attention_bias": False,
              "mlp_bias": False},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
                "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "sliding_window": 4096,
                "tie_word_embeddings": False},
    "mixtral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
                "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "sliding_window": None,
                "num_experts_per_tok": 2, "num_local_experts": 8, "tie_word_embeddings": False},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
              "sliding_window": 4096, "max_window_layers": 28, "tie_word_embeddings": False, "rms_norm_eps": 1e-06,
              "use_sliding_window": False, "hidden_act": "silu"},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "head_dim": 128, "attention_bias": False, "num_key_value_heads": 32,
              "max_position_embeddings": 32768, "sliding_window": 4096, "max_window_layers": 28,
              "tie_word_embeddings": False, "rms_norm_eps": 1e-06, "use_sliding_window": False, "hidden_act": "silu"},
    "qwen3_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
                  "num_attention_heads": 32, "attention_bias": False, "num_key_value_heads": 4,
                  "max_position_embeddings": 32768, "sliding_window": 4096, "tie_word_embeddings": False,
                  "rms_norm_eps": 1e-06, "use_sliding_window": False, "hidden_act": "silu", "decoder_sparse_step": 1,
                  "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128, "norm_topk_prob": False},
    "gemma": {"attention_bias": False, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 3072,
              "intermediate_size": 24576, "num_attention_heads": 16, "num_hidden_layers": 28,
              "num_key_value_heads": 16, "rms_norm_eps": 1e-06, "vocab_size": 256000,
              "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "gemma2": {"attention_bias": False, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
               "intermediate_size": 9216, "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
               "rms_norm_eps": 1e-06, "vocab_size": 256000, "final_logit_softcapping": 30.0,
               "attn_logit_softcapping": 50.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "gemma3": {"attention_bias": False, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
               "intermediate_size": 9216, "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
               "rms_norm_eps": 1e-06, "vocab_size": 262208, "final_logit_softcapping": None,
               "attn_logit_softcapping": None, "query_pre_attn_scalar": 256, "sliding_window": 4096,
               "use_bidirectional_attention": False,
               "max_position_embeddings": 131072, "tie_word_embeddings": True},
    "phi3": {"vocab_size": 32064, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
             "max_position_embeddings": 4096, "sliding_window": None, "tie_word_embeddings": False},
    "olmo2": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "attention_bias": False,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
              "hidden_act": "silu", "max_position_embeddings": 2048, "tie_word_embeddings": False},
    "granite": {"hidden_size": 4096, "intermediate_size": 11008, "vocab_size": 32000, "num_hidden_layers": 32,
                "num_attention_heads": 32, "rms_norm_eps": 1e-06, "max_position_embeddings": 2048,
                "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
                "embedding_multiplier": 1.0, "attention_multiplier": 1.0, "residual_multiplier": 1.0,
                "logits_scaling": 1.0},
    "starcoder2": {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
                   "num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh",
                   "max_position_embeddings": 4096, "norm_epsilon": 1e-05, "use_bias": True, "sliding_window": None,
                   "tie_word_embeddings": True},
    "stable_lm": {"vocab_size": 50304, "intermediate_size": 6912, "hidden_size": 2560, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu",
                  "max_position_embeddings": 4096, "layer_norm_eps": 1e-05, "use_cache": True, "use_qkv_bias": False,
                  "tie_word_embeddings": False},
}  # fmt: skip
FAMILY_DEFAULT_THETA = {"mixtral": 1e6, "gemma3": 1e6}  # class `default_theta`; 1e4 elsewhere
GEMMA3_DEFAULT_LOCAL_THETA = 10000.0
STABLELM_DEFAULT_PARTIAL_ROTARY = 0.25
# partial_rotary_factor: stable_lm (default 0.25) and phi3 rotate part of the head whatever the
# rope type; llama's default rope ignores the factor and only its scaled rope types honour it
# (modeling_llama.py:73-106, `compute_default_rope_parameters`)
_PARTIAL_ROTARY_ALWAYS = {"stable_lm": STABLELM_DEFAULT_PARTIAL_ROTARY, "phi3": None}
_PARTIAL_ROTARY_SCALED_ONLY = ("llama",)
# families whose transformers modeling masks every layer to `sliding_window` when it is set
_SLIDES_EVERY_LAYER = ("mistral", "mixtral", "starcoder2", "phi3")
_SLIDES_FROM_MAX_WINDOW_LAYERS = ("qwen2", "qwen3", "qwen3_moe")


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyTransformersView:
    """transformers 5.24's effective values for a config of one candle family, under the names
    candle's `Config` gives them (`values`), with where each came from (`sources`: the config.json
    key path, () for a class default). torch-free, like `transformers_view`."""

    family: str
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rope_type: str = "default"  # of the global (gemma3: full-attention) layers
    rope_parameters: dict[str, Any] = field(default_factory=dict)
    rope_source: str | None = None  # the key transformers read the rope dict from (rope_scaling wins when truthy)
    local_rope_type: str | None = None  # gemma3's sliding-attention layers
    local_rope_parameters: dict[str, Any] = field(default_factory=dict)
    sliding_layers: tuple[bool, ...] = ()  # per layer: transformers masks it to `sliding_window`
    multipliers: dict[str, float] = field(default_factory=dict)  # granite

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def sliding_window(self) -> int | None:
        sw = self.values.get("sliding_window")
        return sw if any(self.sliding_layers) and isinstance(sw, int) and not isinstance(sw, bool) else None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def family_transformers_view(family: str, config: Mapping[str, Any]) -> FamilyTransformersView:
    """What transformers 5.24 computes with for `config` of `family` (a `portkit.families` name).
    Best effort on odd values: a rule compares only what both sides define."""
    c = dict(config) if isinstance(config, Mapping) else {}
    defaults = FAMILY_DEFAULTS.get(family, {})
    values: dict[str, Any] = {}
    sources: dict[str, tuple[str, ...]] = {}

    def take(key: str, *alias: str) -> None:
        for k in (key, *alias):
            if k in c:
                values[key], sources[key] = c[k], (k,)
                return
        if key in defaults:
            values[key], sources[key] = defaults[key], ()

    for key in defaults:
        take(key)
    if family == "qwen3_moe":
        take("num_experts", "num_local_experts")
    for key in ("head_dim", "attention_bias", "mlp_bias", "tie_word_embeddings", "use_sliding_window"):
        if key in c and key not in values:
            take(key)

    # rope: rope_scaling (if truthy) replaces rope_parameters; theta from the dict, else top level, else default
    rope_key = "rope_scaling" if c.get("rope_scaling") else "rope_parameters"
    rope = c.get(rope_key) if isinstance(c.get(rope_key), dict) else {}
    local: dict[str, Any] = {}
    local_type = None
    if family == "gemma3":
        nested = isinstance(rope.get("full_attention"), dict) or isinstance(rope.get("sliding_attention"), dict)
        # a legacy `rope_scaling` updates {"rope_type": "default"}: spelled with `type` only, it
        # keeps the default rope (configuration_gemma3.py `convert_rope_params_to_dict`)
        full = dict(rope.get("full_attention") or {}) if nested else ({"rope_type": "default", **rope} if rope_key == "rope_scaling" else {})
        local = dict(rope.get("sliding_attention") or {}) if nested else {}
        full_path = (rope_key, "full_attention") if nested else (rope_key,)
        _theta(values, sources, "rope_theta", full, full_path, c, "rope_theta", FAMILY_DEFAULT_THETA["gemma3"])
        _theta(values, sources, "rope_local_base_freq", local, (rope_key, "sliding_attention"), c,
               "rope_local_base_freq", GEMMA3_DEFAULT_LOCAL_THETA)
        full.setdefault("rope_type", full.get("type", "default"))
        local.setdefault("rope_type", local.get("type", "default"))
        local_type = local["rope_type"] if isinstance(local["rope_type"], str) else "default"
        rope = full
    else:
        rope = dict(rope)
        _theta(values, sources, "rope_theta", rope, (rope_key,), c, "rope_theta", FAMILY_DEFAULT_THETA.get(family, DEFAULT_THETA))
        rope.setdefault("rope_type", rope.get("type", "default"))
    rope_type = rope["rope_type"] if isinstance(rope.get("rope_type"), str) else "default"
    if rope_type in ("llama3", "yarn", "longrope"):  # modeling_rope_utils.py standardize_rope_params
        rope.setdefault("original_max_position_embeddings", values.get("max_position_embeddings"))
    reads_prf = family in _PARTIAL_ROTARY_ALWAYS or (family in _PARTIAL_ROTARY_SCALED_ONLY and rope_type != "default")
    if reads_prf:
        default_prf = _PARTIAL_ROTARY_ALWAYS.get(family)
        if _number(rope.get("partial_rotary_factor")):
            values["partial_rotary_factor"] = float(rope["partial_rotary_factor"])
            sources["partial_rotary_factor"] = (rope_key, "partial_rotary_factor")
        elif _number(c.get("partial_rotary_factor")):
            values["partial_rotary_factor"] = float(c["partial_rotary_factor"])
            sources["partial_rotary_factor"] = ("partial_rotary_factor",)
        elif default_prf is not None:
            values["partial_rotary_factor"], sources["partial_rotary_factor"] = default_prf, ()

    # activation: gemma reads `hidden_act` and rewrites the legacy "gelu" to the tanh GELU
    if family == "gemma" and values.get("hidden_act") == "gelu":
        values["hidden_act"] = "gelu_pytorch_tanh"

    # sliding window: which layers transformers masks
    n = c.get("num_hidden_layers", defaults.get("num_hidden_layers", 0))
    n = n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 100_000 else 0
    sw = values.get("sliding_window")
    has_sw = _number(sw) and sw > 0
    layer_types = c.get("layer_types") if isinstance(c.get("layer_types"), list) else None
    if family in _SLIDES_EVERY_LAYER:
        sliding = tuple(has_sw for _ in range(n))
    elif family in _SLIDES_FROM_MAX_WINDOW_LAYERS:
        on = has_sw and values.get("use_sliding_window") is True
        if not on:
            values["sliding_window"] = None  # configuration_qwen2.py:83
        mwl = values.get("max_window_layers", n)
        mwl = mwl if isinstance(mwl, int) else n
        if layer_types is not None and len(layer_types) == n:
            sliding = tuple(on and t == "sliding_attention" for t in layer_types)
        else:
            sliding = tuple(on and i >= mwl for i in range(n))
    elif family in ("gemma2", "gemma3"):
        pattern = 2
        if family == "gemma3":
            p = c.get("sliding_window_pattern", c.get("_sliding_window_pattern", 6))
            pattern = p if isinstance(p, int) and not isinstance(p, bool) and p > 0 else 6
            values["sliding_window_pattern"] = pattern
            sources["sliding_window_pattern"] = (
                ("sliding_window_pattern",) if "sliding_window_pattern" in c
                else ("_sliding_window_pattern",) if "_sliding_window_pattern" in c else ()
            )
        if layer_types is not None and len(layer_types) == n:
            sliding = tuple(has_sw and t == "sliding_attention" for t in layer_types)
        else:
            sliding = tuple(has_sw and bool((i + 1) % pattern) for i in range(n))
    else:
        sliding = tuple(False for _ in range(n))

    multipliers = {}
    if family == "granite":
        multipliers = {k: values[k] for k in ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")}
    return FamilyTransformersView(
        family=family,
        values=values,
        sources=sources,
        rope_type=rope_type,
        rope_parameters=rope,
        rope_source=rope_key if rope_key == "rope_scaling" or isinstance(c.get("rope_parameters"), dict) else None,
        local_rope_type=local_type,
        local_rope_parameters=local,
        sliding_layers=sliding,
        multipliers=multipliers,
    )


def _theta(values: dict[str, Any], sources: dict[str, tuple[str, ...]], name: str, rope: dict[str, Any],
           rope_path: tuple[str, ...], c: dict[str, Any], top_key: str, default: float) -> None:
    if _number(rope.get("rope_theta")):
        values[name], sources[name] = float(rope["rope_theta"]), (*rope_path, "rope_theta")
    elif _number(c.get(top_key)):
        values[name], sources[name] = float(c[top_key]), (top_key,)
    else:
        values[name], sources[name] = float(default), ()
    rope.setdefault("rope_theta", values[name])
