"""The family registry: which candle 0.11.0 module reads a checkpoint, and how to reach it.

A *family* is one candle-transformers 0.11.0 model module (`models::qwen2`, ...) together with
the transformers `model_type`s and `architectures` whose checkpoints people load into it, its
GGUF loader, its serde `Config` mirror (`portkit.families.<name>`), its native binding
(`portkit_native.candle_config(text, family=name)`, `FamilyRunner(name, ...)`) and whether the
native side has a per-layer capture copy. (Rules are sorted into *groups*, config, weights,
runtime and gguf: a different idea, deliberately under a different word.)

The table is data only, like transformers' `CONFIG_MAPPING_NAMES`: the semantics module of a
family is imported when a config of that family is linted, never before, so `portkit lint`
pays for one family's mirror, not for all of them.

What the shared rules need to know about one family beyond its config mirror (how a message
names the module, which fields it reads as f32, whether a bad layer tensor panics, ...) is data
in that family's module, read through `Family.trait`; `TRAITS` holds the value every other
family has. No rule asks for a family by name.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

from portkit.candle_release import NATIVE, RELEASES, Span
from portkit.families import sublayers as _sublayers

# GGUF `general.architecture` -> candle's loader: GGUF semantics, named here too as the registry's GGUF side
from portkit.semantics.gguf import GGUF_LOADERS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType
    from typing import Any

    from portkit.families.view import FamilyView


#: the key of a config.json patched to run a program other than the family's module (a crash
#: finding's repair in verify, never a checkpoint's own key) and the programs the native wheel
#: has under it (native/src/family.rs `CANDLE_PATCH_KEY`), with the words reports use for each
CANDLE_PATCH_KEY = "portkit_candle_patch"
MIXTRAL_ROUTING_IN_DTYPE = "mixtral-routing-weights-in-dtype"
CANDLE_PROGRAMS = {
    MIXTRAL_ROUTING_IN_DTYPE: "candle's mixtral with its routing weights cast to the activations' dtype (PK308's fix: native/src/mixtral_copy.rs)",
}

# A family module's traits and the value of a module that does not set one.
TRAITS: dict[str, Any] = {
    "CANDLE_NAME": None,  # how messages name the module ({release}, {name} filled in); None: "candle {release}'s `{name}`"
    "F32_FIELDS": frozenset(),  # fields serde reads as f32: transformers' value is compared in f32
    "THETA_KEYS": ("rope_theta",),  # the keys that hold a rope base
    "LOAD_PANICS": None,  # the load function that `.unwrap()`s each block (a bad layer tensor panics)
    "QUERY_PROJ": "q_proj",  # the projection whose rows hold the query heads
    "NAME_SCHEME": "names it reads",  # PK203's words for the tensor names the module looks up
    "KNOWN_TENSOR_NAMES": None,  # (top-level names, layer parts) when the module looks up a fixed list
    "CANDLE_ROPE_SCALING": None,  # the one rope scaling type the module computes as transformers does
    "ROPE_KEYS_SHOWN": None,  # the rope parameters a PK102 message lists; None: all of them
    "UNREAD_TEXTS": {},  # PK202's reasons, where the module's own words differ
    # how the module builds lm_head: "flag" (`lm_head.weight` unless `tie_word_embeddings`),
    # "always-loaded", "always-tied" (`embed_tokens`), "probed" (when the file has one, never the flag)
    "LM_HEAD": "flag",
    # how the module windows attention: None (never), "every-layer" (candle's prefill mask keeps
    # `sliding_window`+1 keys on every layer, decode keeps all), "pattern" (gemma3: its sliding
    # layers, decode through a RotatingKvCache of `sliding_window`), "unsupported" (build fails)
    "SLIDING_WINDOW": None,
    # where the module builds its RoPE cos/sin table in the model dtype (positions, inv_freq and their
    # product rounded to it: PK317), as candle source lines; None: built in f32 and then cast
    "ROPE_TABLE_IN_MODEL_DTYPE": None,
    "ACTIVATION_KEYS": ("hidden_act",),  # the key(s) candle reads the activation from (two: either one)
    "TRANSFORMERS_ACTIVATION_KEY": "hidden_act",  # the one transformers reads
    # where the module breaks on a chat's paths: a frozen record (`portkit.families.traits`) with
    # the kind of break and its candle source, None when it does not break there.
    # a continuation (a later turn fed many tokens at once at an offset on the warm KV cache):
    # `ContinuationMask(kind="prefix-in-model-dtype" | "rotating-window", source)`
    "CONTINUATION_MASK": None,
    # a batch (N > 1 rows in one forward), None when rows are independent:
    # `BatchMask(kind="undersized", source, built="where-read" | "always")`
    "BATCH_MASK": None,
    # the module's public forward that takes a padding mask, None when it has none:
    # `PaddingMask(kind="bidirectional", source)`
    "PADDING_MASK": None,
    # the submodules of transformers' decoder layer the porting kit records, in computation order
    # (`portkit.families.sublayers`): Llama's decoder layer unless the module says otherwise
    "SUBLAYERS": _sublayers.DEFAULT,
}
# a config that names neither `model_type` nor `architectures` is read with this module
DEFAULT_FAMILY = "llama"
_MODULES: dict[str, ModuleType] = {}
_TRAIT_VALUES: dict[tuple[str, str, str], Any] = {}


@dataclass(frozen=True, slots=True)
class Family:
    """One candle module and the checkpoints that load into it."""

    name: str  # the candle module: candle_transformers::models::{name}
    model_types: tuple[str, ...]  # config.json `model_type` values it serves (first match wins)
    architectures: tuple[str, ...]  # config.json `architectures` values, used when model_type is absent
    source: str  # candle-transformers-0.11.0/src/models/{source}
    config_struct: str  # the serde struct candle's example deserializes config.json into
    gguf_loader: str | None  # the quantized_* module for this family's GGUFs
    capture: bool  # the native wheel has a bit-identical per-layer copy of this module's forward
    flash_attn: bool = False  # its native runner (`LlamaRunner`) passes `use_flash_attn` to candle
    #: the releases that have the module (`portkit.candle_release`): before `since`, candle has no such module
    exists: Span = Span()
    #: the release the run speaks about (`Context.family` binds the target's): what messages name
    release: str = NATIVE

    @property
    def module(self) -> str:
        """The Rust path of the module, from its file (`smol/smollm3.rs`: `models::smol::smollm3`)."""
        return "candle_transformers::models::" + self.source.removesuffix(".rs").replace("/", "::")

    @property
    def semantics(self) -> ModuleType:
        """`portkit.families.<name>`: the config mirror, expected tensors and traits."""
        mod = _MODULES.get(self.name)
        if mod is None:
            mod = _MODULES[self.name] = importlib.import_module(f"portkit.families.{self.name}")
        return mod

    def trait(self, name: str) -> Any:
        # the rules ask per tensor: a dict lookup, not an import and a getattr each time
        key = (self.name, name, self.release)
        try:
            return _TRAIT_VALUES[key]
        except KeyError:
            from portkit.families.traits import Changed

            value = getattr(self.semantics, name, TRAITS[name])
            if isinstance(value, Changed):  # a trait a release changed: as the bound release has it
                value = value.at(self.release)
            _TRAIT_VALUES[key] = value
            return value

    @property
    def who(self) -> str:
        """How a message names candle's module: "candle 0.11.0's `qwen2`" (the bound release)."""
        return (self.trait("CANDLE_NAME") or "candle {release}'s `{name}`").format(release=self.release, name=self.name)

    def at(self, release: str) -> Family | None:
        """This family as `release` has it (messages name that release), None where the release has no such module."""
        if not self.exists.holds(release):
            return None
        return self if release == self.release else dataclasses.replace(self, release=release)

    @property
    def fields(self) -> tuple[Any, ...]:
        """The serde fields of the config struct in the bound release (`fields_at` where a release differs)."""
        at = getattr(self.semantics, "fields_at", None)
        return at(self.release) if at is not None else self.semantics.FIELDS

    def has_field(self, key: str) -> bool:
        """Whether candle's config struct has a field `key` (else serde ignores the key)."""
        return any(f.name == key for f in self.fields)

    @property
    def struct(self) -> str:
        """The config struct as a message names it: `LlamaConfig`, `qwen2::Config`."""
        return f"{self.name}::{self.config_struct}" if self.config_struct == "Config" else self.config_struct

    def view(self, config: str | Any) -> FamilyView:
        """candle's effective values for `config` (the JSON text, or parsed JSON)."""
        from portkit.families.view import family_view

        return family_view(self, config)


def added(module: str) -> Span:
    """The releases from the one whose candle-transformers src/models/ first has `module` (portkit.candle_modules)."""
    from portkit.candle_modules import ADDED

    since = ADDED[module]
    return Span() if since == RELEASES[0] else Span(since=since, since_by=f"models/{module}.rs added")


FAMILIES: tuple[Family, ...] = (
    Family(
        "llama", ("llama",), ("LlamaForCausalLM",), "llama.rs", "LlamaConfig", "quantized_llama", True, flash_attn=True
    ),
    Family("mistral", ("mistral",), ("MistralForCausalLM",), "mistral.rs", "Config", "quantized_llama", True),
    Family("mixtral", ("mixtral",), ("MixtralForCausalLM",), "mixtral.rs", "Config", "quantized_llama", False),
    Family("qwen2", ("qwen2",), ("Qwen2ForCausalLM",), "qwen2.rs", "Config", "quantized_qwen2", True),
    Family(
        "qwen3", ("qwen3",), ("Qwen3ForCausalLM",), "qwen3.rs", "Config", "quantized_qwen3", True, exists=added("qwen3")
    ),
    Family(
        "qwen3_moe",
        ("qwen3_moe",),
        ("Qwen3MoeForCausalLM",),
        "qwen3_moe.rs",
        "Config",
        None,
        False,
        exists=added("qwen3_moe"),
    ),
    Family("gemma", ("gemma",), ("GemmaForCausalLM",), "gemma.rs", "Config", None, True),
    Family("gemma2", ("gemma2",), ("Gemma2ForCausalLM",), "gemma2.rs", "Config", None, True),
    Family("gemma3", ("gemma3_text",), ("Gemma3ForCausalLM",), "gemma3.rs", "Config", "quantized_gemma3", True),
    Family("phi3", ("phi3",), ("Phi3ForCausalLM",), "phi3.rs", "Config", "quantized_phi3", True),
    Family("olmo2", ("olmo2",), ("Olmo2ForCausalLM",), "olmo2.rs", "Config", None, True, exists=added("olmo2")),
    Family("granite", ("granite",), ("GraniteForCausalLM",), "granite.rs", "GraniteConfig", None, True),
    Family("starcoder2", ("starcoder2",), ("Starcoder2ForCausalLM",), "starcoder2.rs", "Config", None, False),
    Family("stable_lm", ("stablelm",), ("StableLmForCausalLM",), "stable_lm.rs", "Config", None, False),
    Family("phi", ("phi",), ("PhiForCausalLM",), "phi.rs", "Config", None, False),
    Family("qwen2_moe", ("qwen2_moe",), ("Qwen2MoeForCausalLM",), "qwen2_moe.rs", "Config", None, False),
    Family(
        "smollm3",
        ("smollm3",),
        ("SmolLM3ForCausalLM",),
        "smol/smollm3.rs",
        "Config",
        None,
        False,
        exists=added("smol"),
    ),
    Family(
        "glm4_new",
        ("glm4",),
        ("Glm4ForCausalLM",),
        "glm4_new.rs",
        "Config",
        None,
        False,
        exists=added("glm4_new"),
    ),
)
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}
_BY_MODEL_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.model_types}
_BY_ARCHITECTURE: dict[str, Family] = {a: f for f in FAMILIES for a in f.architectures}


def detect(config: Mapping[str, Any] | Any) -> Family | None:
    """The family of a parsed config.json: by `model_type`, else by `architectures[0]`."""
    if not isinstance(config, dict):
        return None
    mt = config.get("model_type")
    if isinstance(mt, str):
        return _BY_MODEL_TYPE.get(mt)
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return _BY_ARCHITECTURE.get(archs[0])
    return None


def detect_or_default(config: Mapping[str, Any] | Any) -> Family | None:
    """`detect`, and `DEFAULT_FAMILY` for a config that names neither `model_type` nor
    `architectures` (portkit has always read those as llama)."""
    fam = detect(config)
    if fam is None and isinstance(config, dict) and "model_type" not in config and "architectures" not in config:
        return BY_NAME[DEFAULT_FAMILY]
    return fam


def by_name(name: str) -> Family:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown family `{name}` (known: {', '.join(BY_NAME)})") from None


__all__ = [
    "BY_NAME",
    "DEFAULT_FAMILY",
    "FAMILIES",
    "GGUF_LOADERS",
    "TRAITS",
    "Family",
    "by_name",
    "detect",
    "detect_or_default",
]
