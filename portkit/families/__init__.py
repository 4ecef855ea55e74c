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
in that family's module, read through `Family.traits` (`portkit.families.traits.Traits`, whose
defaults are the value every other family has). No rule asks for a family by name.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

from portkit.candle_release import NATIVE, RELEASES, Span

# GGUF `general.architecture` -> candle's loader: GGUF semantics, named here too as the registry's GGUF side
from portkit.semantics.gguf import GGUF_LOADERS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType
    from typing import Any

    from portkit.families.traits import Traits
    from portkit.families.view import FamilyView


#: the key of a config.json patched to run a program other than the family's module (a crash
#: finding's repair in verify, never a checkpoint's own key) and the programs the native wheel
#: has under it (native/src/family.rs `CANDLE_PATCH_KEY`), with the words reports use for each
CANDLE_PATCH_KEY = "portkit_candle_patch"
MIXTRAL_ROUTING_IN_DTYPE = "mixtral-routing-weights-in-dtype"
CANDLE_PROGRAMS = {
    MIXTRAL_ROUTING_IN_DTYPE: "candle's mixtral with its routing weights cast to the activations' dtype (PK308's fix: "
    "native/src/mixtral_copy.rs)",
}

# a config that names neither `model_type` nor `architectures` is read with this module
DEFAULT_FAMILY = "llama"
_MODULES: dict[str, ModuleType] = {}
_TRAITS: dict[tuple[str, str], Traits] = {}


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

    @property
    def traits(self) -> Traits:
        """What the shared rules need to know about the module (`portkit.families.traits.Traits`),
        as the bound release has it."""
        # the rules ask per tensor: a dict lookup, not an import and a getattr each time
        key = (self.name, self.release)
        value = _TRAITS.get(key)
        if value is None:
            from portkit.families.traits import Traits

            value = _TRAITS[key] = Traits.of(self.semantics, self.release)
        return value

    @property
    def who(self) -> str:
        """How a message names candle's module: "candle 0.11.0's `qwen2`" (the bound release)."""
        return (self.traits.candle_name or "candle {release}'s `{name}`").format(release=self.release, name=self.name)

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


def added(module: str, path: str | None = None) -> Span:
    """The releases from the one whose candle-transformers src/models/ first has `module` (portkit.candle_modules);
    `path`: the module's file or directory, where it is not `{module}.rs`."""
    from portkit.candle_modules import ADDED

    since = ADDED[module]
    return Span() if since == RELEASES[0] else Span(since=since, since_by=f"models/{path or module + '.rs'} added")


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
    Family("phi", ("phi",), ("PhiForCausalLM",), "phi.rs", "Config", "quantized_phi", True),
    Family("qwen2_moe", ("qwen2_moe",), ("Qwen2MoeForCausalLM",), "qwen2_moe.rs", "Config", None, True),
    Family(
        "smollm3",
        ("smollm3",),
        ("SmolLM3ForCausalLM",),
        "smol/smollm3.rs",
        "Config",
        "quantized_smollm3",
        True,
        exists=added("smol"),
    ),
    Family(
        "glm4_new",
        ("glm4",),
        ("Glm4ForCausalLM",),
        "glm4_new.rs",
        "Config",
        "quantized_glm4",
        True,
        exists=added("glm4_new"),
    ),
    # Gemma 4's text decoder: `gemma4::text::TextModel` reading `gemma4::config::Gemma4TextConfig`
    Family(
        "gemma4",
        ("gemma4_text",),
        ("Gemma4ForCausalLM",),
        "gemma4/text.rs",
        "Gemma4TextConfig",
        None,
        True,
        exists=added("gemma4", "gemma4/"),
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
    "Family",
    "by_name",
    "detect",
    "detect_or_default",
]
