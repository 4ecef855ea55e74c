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
