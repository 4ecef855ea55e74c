"""Which tokenizer.json components the tokenizers crate 0.22.2 (the one candle 0.11.0 resolves)
deserializes, as its serde code does it, and the message it refuses the others with.

Each of `normalizer`, `pre_tokenizer` and `decoder` is read in two steps
(tokenizers-0.22.2/src/normalizers/mod.rs:41-195, pre_tokenizers/mod.rs, decoders/mod.rs):

1. *tagged*: a `type` that names an `EnumType` variant picks that one struct, and a field it
   lacks is ``missing field `x` `` (pre_tokenizers' `Delimiter` picks `CharDelimiterSplit`,
   which then refuses the tag it was picked by);
2. otherwise *legacy*: every struct is tried in order (`#[serde(untagged)]`), and only when none
   fits is it "data did not match any variant of untagged enum NormalizerUntagged". A struct
   declared with `impl_serde_type!` checks that `type` is its own name; one declared with
   `#[serde(tag = "type")]` ignores `type` altogether ("serde does not validate tags",
   processors/mod.rs:21). So the `BertNormalizer` that transformers writes is no `EnumType`
   (that says `Bert`) and still loads: the legacy step reads its fields.

`post_processor` has only the legacy step (`PostProcessorWrapper` is `#[serde(untagged)]`).
A struct "fits" when the fields it requires are there; what the values must look like is not
modelled. tests/native/test_tokenizer_serde.py checks every entry, and mutations of every
fixture's components, against the crate itself through the native wheel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from portkit.semantics.fancy_regex import refusal as fancy_regex_refusal


@dataclass(frozen=True)
class Struct:
    name: str  # the Rust struct; the `type` a validating struct requires
    required: tuple[str, ...] = ()  # in declaration order: serde names the first one missing
    validates_tag: bool = True  # impl_serde_type! (True) or a bare #[serde(tag = "type")] (False)
    nested: str | None = None  # a Sequence's list of components of the same kind
    untagged: bool = True  # False: the legacy step never reads it (measured, see Precompiled)
    panics: bool = False  # the tagged step `expect`s it: a refusal is a panic, not an error


@dataclass(frozen=True)
class Component:
    key: str  # the key in tokenizer.json
    untagged_enum: str  # the enum serde's "did not match any variant" names
    tagged: Mapping[str, str] | None  # EnumType name -> struct name; None: no tagged step
    structs: tuple[Struct, ...]

    def struct(self, name: str) -> Struct:
        return next(s for s in self.structs if s.name == name)


def _same(*names: str) -> dict[str, str]:
    return {n: n for n in names}


NORMALIZER = Component(
    "normalizer",
    "NormalizerUntagged",
    {
        "Bert": "BertNormalizer",
        **_same(
            "Strip",
            "StripAccents",
            "NFC",
            "NFD",
            "NFKC",
            "NFKD",
            "Sequence",
            "Lowercase",
            "Nmt",
            "Precompiled",
            "Replace",
            "Prepend",
            "ByteLevel",
        ),
    },
    (
        Struct("BertNormalizer", ("clean_text", "handle_chinese_chars", "lowercase"), validates_tag=False),
        Struct("Strip", ("strip_left", "strip_right"), validates_tag=False),
        Struct("StripAccents"),
        Struct("NFC"),
        Struct("NFD"),
        Struct("NFKC"),
        Struct("NFKD"),
        Struct("Sequence", ("normalizers",), validates_tag=False, nested="normalizers"),
        Struct("Lowercase"),
        Struct("Nmt"),
        # its base64 field does not deserialize from serde's buffered content, so the legacy
        # step never reads it; the tagged one re-serializes first (normalizers/mod.rs:138-144)
        Struct("Precompiled", ("precompiled_charsmap",), validates_tag=False, untagged=False, panics=True),
        Struct("Replace", ("pattern", "content"), validates_tag=False),
        Struct("Prepend", ("prepend",), validates_tag=False),
        Struct("ByteLevel"),
    ),
)
PRE_TOKENIZER = Component(
    "pre_tokenizer",
    "PreTokenizerUntagged",
    {
        "Delimiter": "CharDelimiterSplit",
        **_same(
            "BertPreTokenizer",
            "ByteLevel",
            "Metaspace",
            "Whitespace",
            "Sequence",
            "Split",
            "Punctuation",
            "WhitespaceSplit",
            "Digits",
            "UnicodeScripts",
            "FixedLength",
        ),
    },
    (
        Struct("BertPreTokenizer"),
        Struct("ByteLevel", ("add_prefix_space", "trim_offsets")),
        Struct("CharDelimiterSplit", ("delimiter",)),
        Struct("Metaspace", ("replacement",)),
        Struct("Whitespace"),
        Struct("Sequence", ("pretokenizers",), nested="pretokenizers"),
        Struct("Split", ("pattern", "behavior", "invert")),
        Struct("Punctuation"),
        Struct("WhitespaceSplit"),
        Struct("Digits", ("individual_digits",)),
        Struct("UnicodeScripts"),
        Struct("FixedLength"),
    ),
)
DECODER = Component(
    "decoder",
    "DecoderUntagged",
    _same(
        "BPEDecoder",
        "ByteLevel",
        "WordPiece",
        "Metaspace",
        "CTC",
        "Sequence",
        "Replace",
        "Fuse",
        "Strip",
        "ByteFallback",
    ),
    (
        Struct("BPEDecoder", ("suffix",), validates_tag=False),
        Struct("ByteLevel", ("add_prefix_space", "trim_offsets")),
        Struct("WordPiece", ("prefix", "cleanup"), validates_tag=False),
        Struct("Metaspace", ("replacement",)),
        Struct("CTC", ("pad_token", "word_delimiter_token", "cleanup"), validates_tag=False),
        Struct("Sequence", ("decoders",), nested="decoders"),
        Struct("Replace", ("pattern", "content"), validates_tag=False),
        Struct("Fuse"),
        Struct("Strip", ("content", "start", "stop"), validates_tag=False),
        Struct("ByteFallback"),
    ),
)
POST_PROCESSOR = Component(
    "post_processor",
    "PostProcessorWrapper",
    None,
    (
        Struct("RobertaProcessing", ("sep", "cls"), validates_tag=False),
        Struct("BertProcessing", ("sep", "cls"), validates_tag=False),
        Struct("ByteLevel", ("add_prefix_space", "trim_offsets")),
        Struct("TemplateProcessing", ("single", "pair", "special_tokens"), validates_tag=False),
        Struct("Sequence", ("processors",), nested="processors"),
    ),
)
COMPONENTS = (NORMALIZER, PRE_TOKENIZER, POST_PROCESSOR, DECODER)
#: the structs whose `pattern` (`{"Regex": ...}`) the crate compiles as it reads them
_COMPILES_PATTERN = frozenset({"Split", "Replace"})
#: how a refusal that panics the crate begins: a Rust program aborts, with no error to handle
PANIC = "panicked: "


def _fits(component: Component, struct: Struct, value: Mapping[str, Any], fancy_regex: bool) -> str | None:
    """None when `struct` deserializes from `value` (tag aside), else serde's message."""
    missing = [f for f in struct.required if f not in value]
    if missing:
        return f"missing field `{missing[0]}`"
    if struct.nested is not None:
        inner = value[struct.nested]
        if not isinstance(inner, list):
            return f"invalid type: expected a sequence for `{struct.nested}`"
        for item in inner:
            refused = refusal(component, item, fancy_regex=fancy_regex)
            if refused is not None:
                return refused
    pattern = value.get("pattern") if struct.name in _COMPILES_PATTERN else None
    if fancy_regex and isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        return fancy_regex_refusal(pattern["Regex"])  # compiled while deserializing (SysRegex::new)
    return None


def refusal(component: Component, value: Any, *, fancy_regex: bool = False) -> str | None:
    """The crate's message refusing this component (serde's position suffix left off), or None.
    `fancy_regex`: the crate compiles patterns with fancy-regex (candle 0.11.1), not onig."""
    if value is None:
        return None  # every component is an Option
    untagged = f"data did not match any variant of untagged enum {component.untagged_enum}"
    if not isinstance(value, dict):
        return untagged
    tag = value.get("type")
    if component.tagged is not None and isinstance(tag, str) and tag in component.tagged:
        struct = component.struct(component.tagged[tag])
        if struct.validates_tag and tag != struct.name:  # pre_tokenizers' `Delimiter`
            return f"unknown variant `{tag}`, expected `{struct.name}`"
        refused = _fits(component, struct, value, fancy_regex)
        return (
            f"{PANIC}{struct.name}: {refused}"
            if refused is not None and struct.panics and not refused.startswith(PANIC)
            else refused
        )
    for struct in component.structs:
        if not struct.untagged or struct.validates_tag and tag != struct.name:
            continue
        refused = _fits(component, struct, value, fancy_regex)
        if refused is None or refused.startswith(PANIC):  # a panic inside a Sequence ends the search
            return refused
    return untagged
