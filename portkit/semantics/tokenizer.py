"""Two readings of a model's tokenizer files, as pure functions of their JSON.

- `crate_tokenizer(tj)`: what the Rust `tokenizers` crate (0.22.2, candle-core 0.11.0's
  dependency) reads from tokenizer.json, literally, and whether it refuses the file. A candle
  program reads nothing else: tokenizer_config.json and generation_config.json never reach it.
- `transformers_tokenizer(...)`: what transformers 5 builds with `AutoTokenizer.from_pretrained`:
  the class it picks (tokenizer_config.json's `tokenizer_class`, overridden by config.json's
  `model_type` in the cases `models/auto/tokenization_auto.py` lists), and the pipeline that
  class builds. `TokenizersBackend` (and every class without an `__init__` of its own) loads
  tokenizer.json as is (`tokenization_utils_tokenizers.py:114-121`); the classes mirrored in
  `REBUILDS` take vocab, merges, post-processor and added tokens from the file and build the
  normalizer, pre-tokenizer and decoder in Python (lines 122-199 and each class's `__init__`);
  `GPTNeoXTokenizer` rebuilds the post-processor too.

Line numbers are transformers 5.24.0's. tests/native/test_tokenizer_semantics.py proves every
table and component here against the installed transformers and against the crate.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from portkit.candle_release import DEFAULT as DEFAULT_RELEASE
from portkit.candle_release import FANCY_REGEX, Span
from portkit.model.tokenizer_files import TokenizerJson
from portkit.semantics import tokenizer_serde

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# --------------------------------------------------------------------------- class selection
# models/auto/tokenization_auto.py: TOKENIZER_MAPPING_NAMES for the model types candle 0.11.0
# has a module for, and a few whose checkpoints are often converted to them. A model type absent
# here (llama, falcon: no entry in 5.24) leaves the choice to tokenizer_config.json.
TOKENIZER_MAPPING_NAMES: dict[str, str] = {
    "gemma": "GemmaTokenizer",
    "gemma2": "GemmaTokenizer",
    "gemma3": "GemmaTokenizer",
    "gemma3_text": "GemmaTokenizer",
    "granite": "TokenizersBackend",
    "mistral": "TokenizersBackend",  # MistralCommonBackend when mistral-common is installed
    "mixtral": "TokenizersBackend",  # likewise
    "olmo": "GPTNeoXTokenizer",
    "olmo2": "TokenizersBackend",
    "olmoe": "GPTNeoXTokenizer",
    "phi3": "TokenizersBackend",
    "qwen2": "Qwen2Tokenizer",
    "qwen3": "Qwen2Tokenizer",
    "qwen3_moe": "Qwen2Tokenizer",
    "stablelm": "TokenizersBackend",
    "starcoder2": "GPT2Tokenizer",
    "phi": "GPT2Tokenizer",
    "gpt2": "GPT2Tokenizer",
    "gpt_neox": "GPTNeoXTokenizer",
}
# tokenization_auto.py:392: model types whose hub `tokenizer_class` transformers overrides
MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS = frozenset(
    {"phi3", "phi3_v", "phimoe", "qwen2", "jamba", "nemotron", "internlm2", "internlm3"}
)
_GENERIC = frozenset({"TokenizersBackend", "PythonBackend", "PreTrainedTokenizerFast", "MistralCommonBackend"})

#: The class that loads tokenizer.json as is (tokenization_utils_tokenizers.py:114-121), and the
#: names that resolve to it: its alias PreTrainedTokenizerFast (tokenization_utils_tokenizers.py:1588), the Bloom names
#: (tokenization_auto.py:510) and PythonBackend (:983).
AS_IS = frozenset({"TokenizersBackend"})
_ALIASES = {
    "PreTrainedTokenizerFast": "TokenizersBackend",
    "BloomTokenizer": "TokenizersBackend",
    "PythonBackend": "TokenizersBackend",
}
#: Classes with an `__init__` that rebuilds the pipeline, which portkit does not mirror: lint
#: says nothing about their pipeline (verify measures it). No family portkit covers names them.
REBUILDS_UNMIRRORED = frozenset({"CohereTokenizer", "T5Tokenizer", "BertTokenizer", "RobertaTokenizer"})


@dataclass(frozen=True, slots=True)
class ClassChoice:
    """The class `AutoTokenizer.from_pretrained` instantiates, and why."""

    name: str | None  # None: remote code (`auto_map`), which portkit never runs
    why: str
    source: str | None = None  # the file and key that named it (for a finding's location)

    @property
    def as_is(self) -> bool:
        return self.name in AS_IS

    @property
    def mirrored(self) -> bool:
        return self.name in REBUILDS

    @property
    def known(self) -> bool:
        """Whether portkit knows the pipeline this class builds."""
        return self.as_is or self.mirrored


def _base(name: str) -> str:
    """The v5 class name without `Fast` (`XFast` is an alias of `X`, tokenization_auto.py:555)."""
    if name == "PreTrainedTokenizerFast":
        return name
    return name[:-4] if name.endswith("Fast") else name


def _resolve(name: str) -> str:
    """The name of the class a name instantiates."""
    base = _base(name)
    return _ALIASES.get(base, _ALIASES.get(name, base))


def choose_class(tok_config: Mapping[str, Any], config: Mapping[str, Any] | None, tokenizer_text: str) -> ClassChoice:
    """`AutoTokenizer.from_pretrained`'s choice (tokenization_auto.py:760-1040), assuming no
    mistral-common and no `trust_remote_code`."""
    auto_map = tok_config.get("auto_map")
    if isinstance(auto_map, (list, dict)) and (
        auto_map if isinstance(auto_map, list) else auto_map.get("AutoTokenizer")
    ):
        return ClassChoice(None, "tokenizer_config.json's `auto_map` names remote code")
    model_type = config.get("model_type") if isinstance(config, dict) else None
    model_type = model_type if isinstance(model_type, str) else None
    tc_class = tok_config.get("tokenizer_class") if isinstance(tok_config.get("tokenizer_class"), str) else None
    cfg_class = (
        config.get("tokenizer_class")
        if isinstance(config, dict) and isinstance(config.get("tokenizer_class"), str)
        else None
    )
    hub = tc_class or cfg_class
    hub_src = "tokenizer_config.json" if tc_class else "config.json"
    registered = TOKENIZER_MAPPING_NAMES.get(model_type or "")
    # :846-862: a LlamaTokenizer declared on a byte-level file loads as is
    if (
        hub is not None
        and _base(hub) == "LlamaTokenizer"
        and _base(registered or "") != "MistralCommonBackend"
        and model_type not in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
        and '"ByteLevel"' in tokenizer_text
    ):
        return ClassChoice("TokenizersBackend", f"{hub_src} names `{hub}` but tokenizer.json is ByteLevel", hub_src)
    # :866-910: config.json's model_type registers another class than the hub's
    if hub is not None and model_type and registered is not None and _base(registered) != _base(hub):
        if _base(registered) not in _GENERIC:
            name = _base(registered) if model_type in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS else _base(hub)
            if name not in _GENERIC:
                why = (
                    f"config.json's `model_type` `{model_type}` registers `{name}`"
                    if name != _base(hub)
                    else f"{hub_src} names `{hub}`"
                )
                return ClassChoice(_resolve(name), why, "config.json" if name != _base(hub) else hub_src)
        return ClassChoice(
            "TokenizersBackend",
            f"config.json's `model_type` `{model_type}` overrides `{hub}` with TokenizersBackend",
            "config.json",
        )
    if tc_class is not None:
        return ClassChoice(_resolve(tc_class), f"tokenizer_config.json names `{tc_class}`", "tokenizer_config.json")
    if cfg_class is not None:
        return ClassChoice(_resolve(cfg_class), f"config.json names `{cfg_class}`", "config.json")
    if registered is not None:
        return ClassChoice(
            _resolve(registered), f"config.json's `model_type` `{model_type}` registers `{registered}`", "config.json"
        )
    return ClassChoice("TokenizersBackend", "no class is named anywhere", None)


# --------------------------------------------------------------------------- components
def metaspace(prepend_scheme: str) -> dict[str, Any]:
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend_scheme, "split": False}


def _byte_level(add_prefix_space: bool, use_regex: bool = True) -> dict[str, Any]:
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


BYTE_LEVEL_DECODER = _byte_level(True)
# models/qwen2/tokenization_qwen2.py: PRETOKENIZE_REGEX
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
#: SentencePiece's decoding, as `LlamaTokenizer` and `GemmaTokenizer` build it ("▁" back to a space, bytes fused)
SPM_DECODERS = (
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"},
    {"type": "Fuse"},
)


def replace_space(content: str) -> dict[str, Any]:
    return {"type": "Replace", "pattern": {"String": " "}, "content": content}


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """What a class's `__init__` puts in place of tokenizer.json's pipeline (JSON as the
    `tokenizers` library serialises it)."""

    normalizer: Any
    pre_tokenizer: Any
    decoder: Any
    source: str  # transformers file:line of the class's __init__
    post_processor: Any = None  # None: tokenizer.json's (tokenization_utils_tokenizers.py:151, 466-467)


def _truthy(v: Any, default: bool) -> bool:
    return default if v is None else bool(v)


def _llama(tc: Mapping[str, Any]) -> Rebuilt:
    # models/llama/tokenization_llama.py:116-133; prepend scheme: tokenization_utils_base.py:3770-3777
    add_prefix_space = _truthy(tc.get("add_prefix_space"), True)
    legacy = _truthy(tc.get("legacy"), False)
    scheme = ("always" if legacy else "first") if add_prefix_space else "never"
    decoders = list(SPM_DECODERS)
    if add_prefix_space:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return Rebuilt(
        None,
        metaspace(scheme),
        {"type": "Sequence", "decoders": decoders},
        "models/llama/tokenization_llama.py:116-133",
    )


def _gpt2(tc: Mapping[str, Any]) -> Rebuilt:
    # models/gpt2/tokenization_gpt2.py:109-120
    return Rebuilt(
        None,
        _byte_level(_truthy(tc.get("add_prefix_space"), False)),
        BYTE_LEVEL_DECODER,
        "models/gpt2/tokenization_gpt2.py:109-120",
    )


def _codegen(tc: Mapping[str, Any]) -> Rebuilt:
    return Rebuilt(
        None,
        _byte_level(_truthy(tc.get("add_prefix_space"), False)),
        BYTE_LEVEL_DECODER,
        "models/codegen/tokenization_codegen.py:115-126",
    )


def _qwen2(tc: Mapping[str, Any]) -> Rebuilt:
    # models/qwen2/tokenization_qwen2.py:61-86
    pre = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PRETOKENIZE_REGEX}, "behavior": "Isolated", "invert": False},
            _byte_level(_truthy(tc.get("add_prefix_space"), False), use_regex=False),
        ],
    }
    return Rebuilt({"type": "NFC"}, pre, BYTE_LEVEL_DECODER, "models/qwen2/tokenization_qwen2.py:61-86")


def _gemma(tc: Mapping[str, Any]) -> Rebuilt:
    # models/gemma/tokenization_gemma.py:91-98: the Split runs after the Replace normalizer, which
    # leaves no " " to split on (a no-op, see `pre_tokenizer_steps`)
    pre = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False}
    return Rebuilt(
        replace_space("▁"),
        pre,
        {"type": "Sequence", "decoders": list(SPM_DECODERS)},
        "models/gemma/tokenization_gemma.py:91-98",
    )


def _gpt_neox(tc: Mapping[str, Any]) -> Rebuilt:
    # models/gpt_neox/tokenization_gpt_neox.py:126-130, then :148 `update_post_processor()`
    # (tokenization_utils_tokenizers.py:636-660) with `add_bos_token`/`add_eos_token` false:
    # tokenization_utils_base.py:1818-1820 drops them from tokenizer_config.json when
    # tokenizer.json exists, so the post-processor adds no special token
    pre = {
        **_byte_level(_truthy(tc.get("add_prefix_space"), False)),
        "trim_offsets": _truthy(tc.get("trim_offsets"), True),
    }
    a, b = {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}
    post = {"type": "TemplateProcessing", "single": [a], "pair": [a, b], "special_tokens": {}}
    return Rebuilt({"type": "NFC"}, pre, BYTE_LEVEL_DECODER, "models/gpt_neox/tokenization_gpt_neox.py:126-148", post)


REBUILDS: dict[str, Callable[[Mapping[str, Any]], Rebuilt]] = {
    "LlamaTokenizer": _llama,
    "GPT2Tokenizer": _gpt2,
    "CodeGenTokenizer": _codegen,
    "Qwen2Tokenizer": _qwen2,
    "GemmaTokenizer": _gemma,
    "GPTNeoXTokenizer": _gpt_neox,
}


def canonical(component: Any) -> Any:
    """A normalizer / pre-tokenizer / decoder reduced to what changes ids or text: a Sequence is
    its flattened steps, defaults the crate fills in are filled in, offsets-only options dropped."""
    if component is None:
        return []
    if isinstance(component, list):
        return [x for c in component for x in canonical(c)]
    if not isinstance(component, dict):
        return [component]
    t = component.get("type")
    if t == "Sequence":
        inner = component.get(
            "normalizers", component.get("pretokenizers", component.get("decoders", component.get("processors", [])))
        )
        return canonical(inner if isinstance(inner, list) else [])
    c = {k: v for k, v in component.items() if k not in ("trim_offsets", "str_rep")}
    if t == "Metaspace":
        scheme = c.get("prepend_scheme", "always")
        if c.get("add_prefix_space") is False:
            scheme = "never"
        c = {"type": t, "replacement": c.get("replacement"), "prepend_scheme": scheme, "split": c.get("split", True)}
    elif t == "ByteLevel":
        c = {"type": t, "add_prefix_space": c.get("add_prefix_space", True), "use_regex": c.get("use_regex", True)}
    elif t == "Split":
        c = {
            "type": t,
            "pattern": c.get("pattern"),
            "behavior": str(c.get("behavior", "")).lower(),
            "invert": bool(c.get("invert", False)),
        }
    return [c]


def is_step(step: Any, kind: str) -> bool:
    """Whether a component (or one of `canonical`'s steps) is a `kind` (`"type": kind`)."""
    return isinstance(step, dict) and step.get("type") == kind


def canonical_decoder(component: Any) -> Any:
    """As `canonical`; a ByteLevel decoder only maps bytes back, whatever its options."""
    return [{"type": "ByteLevel"} if is_step(s, "ByteLevel") else s for s in canonical(component)]


def prepend_scheme(normalizer: Any, pre_tokenizer: Any) -> str | None:
    """How a pipeline puts "▁" before each text segment: "always" (every segment, including
    the text right after a special token), "first" (only the start of the input), "never", or
    None (no SentencePiece-style prefix at all). A `Prepend("▁")` normalizer runs on every
    segment the added tokens leave, so it is "always"."""
    for step in canonical(normalizer):
        if is_step(step, "Prepend") and step.get("prepend") == "▁":
            return "always"
    for step in canonical(pre_tokenizer):
        if is_step(step, "Metaspace"):
            return str(step.get("prepend_scheme"))
    return None


def describe(component: Any) -> str:
    """`Prepend("▁") + Replace(" " -> "▁")`, `Metaspace(prepend_scheme=first)`, `none`."""
    steps = canonical(component)
    if not steps:
        return "none"
    out = []
    for s in steps:
        if not isinstance(s, dict):
            out.append(json.dumps(s))
            continue
        t = s.get("type", "?")
        args = {k: v for k, v in s.items() if k != "type"}
        if t == "Prepend":
            out.append(f'Prepend("{args.get("prepend")}")')
        elif t == "Replace":
            pat = args.get("pattern") or {}
            out.append(f'Replace("{pat.get("String", pat.get("Regex", "?"))}" -> "{args.get("content")}")')
        elif t == "Split":
            pat = args.get("pattern") or {}
            what = "regex" if "Regex" in pat else f'"{pat.get("String")}"'
            out.append(f"Split({what}, {args.get('behavior')})")
        elif t in ("ByteFallback", "Fuse", "NFC", "NFD", "NFKC", "NFKD", "Lowercase"):
            out.append(t)
        else:
            shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
            out.append(f"{t}({shown})" if shown else t)
    return " + ".join(out)


# --------------------------------------------------------------------------- the two readings
def _flags(token: Mapping[str, Any]) -> dict[str, Any]:
    return {k: token.get(k) for k in ("single_word", "lstrip", "rstrip", "normalized", "special")}


@dataclass(frozen=True, slots=True)
class CrateTokenizer:
    """tokenizer.json as the crate reads it."""

    normalizer: Any
    pre_tokenizer: Any
    decoder: Any
    post_processor: Any
    padding: Any
    truncation: Any
    added: dict[str, dict[str, Any]]  # content -> flags
    added_ids: dict[str, int]
    refused: str | None  # the crate's message (without serde's " at line L column C"), if it refuses


@dataclass(frozen=True, slots=True)
class TransformersTokenizer:
    """What `AutoTokenizer.from_pretrained` builds, as far as portkit mirrors it."""

    choice: ClassChoice
    rebuilt: Rebuilt | None  # None: the class loads tokenizer.json as is, or is not mirrored
    added: dict[str, dict[str, Any]]  # content -> the flags transformers matches it with
    bos_token: str | None
    eos_token: str | None

    def normalizer(self, crate: CrateTokenizer) -> Any:
        return self.rebuilt.normalizer if self.rebuilt else crate.normalizer

    def pre_tokenizer(self, crate: CrateTokenizer) -> Any:
        return self.rebuilt.pre_tokenizer if self.rebuilt else crate.pre_tokenizer

    def decoder(self, crate: CrateTokenizer) -> Any:
        return self.rebuilt.decoder if self.rebuilt else crate.decoder

    def post_processor(self, crate: CrateTokenizer) -> Any:
        return (
            self.rebuilt.post_processor
            if self.rebuilt and self.rebuilt.post_processor is not None
            else crate.post_processor
        )


def crate_tokenizer(tj: TokenizerJson, release: str = DEFAULT_RELEASE) -> CrateTokenizer:
    """tokenizer.json as the tokenizers crate of candle `release` reads it."""
    v = tj.value
    added: dict[str, dict[str, Any]] = {}
    ids: dict[str, int] = {}
    for a in v.get("added_tokens") or []:
        if isinstance(a, dict) and isinstance(a.get("content"), str):
            added[a["content"]] = _flags(a)
            if isinstance(a.get("id"), int):
                ids[a["content"]] = a["id"]
    return CrateTokenizer(
        normalizer=v.get("normalizer"),
        pre_tokenizer=v.get("pre_tokenizer"),
        decoder=v.get("decoder"),
        post_processor=v.get("post_processor"),
        padding=v.get("padding"),
        truncation=v.get("truncation"),
        added=added,
        added_ids=ids,
        refused=crate_refusal(tj, release),
    )


#: tokenizers 0.23 (candle-core 0.11.1's) decodes an added token the normalizer changes as its normalized form
#: (`simple_id_to_token`, added_vocabulary.rs:233-246, cached at :316-324), and `decode` skips a special
#: token by that string (tokenizer/mod.rs:935-945), which is not the special's content: kept
DECODES_NORMALIZED_FORM = Span(
    since="0.11.1", since_by="tokenizers 0.23.2 added_vocabulary.rs:233-246 (candle-core 0.11.1's crate)"
)


def normalized_form(normalizer: Any, text: str) -> str | None:
    """What tokenizer.json's `normalizer` makes of `text` (an added token's content), for the steps
    mirrored here (tokenizers-0.23.2 src/normalizers/): None when a step is not (`Precompiled`'s
    charsmap, a `Regex` Replace, `BertNormalizer`), so that nothing is claimed about it."""
    import unicodedata

    if normalizer is None:
        return text
    if not isinstance(normalizer, dict):
        return None
    kind = normalizer.get("type")
    if kind == "Sequence":
        out: str | None = text
        for step in normalizer.get("normalizers") or []:
            out = normalized_form(step, out) if out is not None else None
        return out
    if kind == "Prepend" and isinstance(normalizer.get("prepend"), str):
        return normalizer["prepend"] + text if text else text  # prepend.rs:19-21: never to an empty string
    if kind == "Replace":
        pattern, content = normalizer.get("pattern"), normalizer.get("content")
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str) and isinstance(content, str):
            return text.replace(pattern["String"], content) if pattern["String"] else None
        return None
    if kind == "Lowercase":
        return text.lower()
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return unicodedata.normalize(kind, text)
    if kind == "StripAccents":  # strip.rs: drops the combining marks (Mn) left by a decomposition
        return "".join(c for c in text if unicodedata.category(c) != "Mn")
    if kind == "Strip":
        left, right = normalizer.get("strip_left"), normalizer.get("strip_right")
        out = text.lstrip() if left else text
        return out.rstrip() if right else out
    return None


def _token_name(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


#: each mirrored class's default special tokens (its __init__ signature)
_DEFAULT_EOS = {
    "LlamaTokenizer": "</s>",
    "GPT2Tokenizer": "<|endoftext|>",
    "CodeGenTokenizer": "<|endoftext|>",
    "Qwen2Tokenizer": "<|endoftext|>",
    "GemmaTokenizer": "<eos>",
    "GPTNeoXTokenizer": "<|endoftext|>",
}
_DEFAULT_BOS = {
    "LlamaTokenizer": "<s>",
    "GPT2Tokenizer": "<|endoftext|>",
    "CodeGenTokenizer": "<|endoftext|>",
    "GemmaTokenizer": "<bos>",
    "GPTNeoXTokenizer": "<|endoftext|>",
}


def transformers_tokenizer(
    crate: CrateTokenizer,
    tok_config: Mapping[str, Any],
    special_tokens_map: Mapping[str, Any] | None,
    config: Mapping[str, Any] | None,
    tokenizer_text: str,
) -> TransformersTokenizer:
    choice = choose_class(tok_config, config, tokenizer_text)
    rebuilt = REBUILDS[choice.name](tok_config) if choice.name in REBUILDS else None
    # tokenization_utils_base.py:1889-1899: tokenizer_config.json's added_tokens_decoder, when
    # present, gives each token's flags (re-added over the file's, tokenization_utils_tokenizers.py:477-512)
    added = dict(crate.added)
    decoder = tok_config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for tok in decoder.values():
            if isinstance(tok, dict) and isinstance(tok.get("content"), str):
                added[tok["content"]] = {**added.get(tok["content"], {}), **_flags(tok)}
    stm = special_tokens_map or {}

    def special(key: str, defaults: Mapping[str, str]) -> str | None:
        """tokenizer_config.json's token, else special_tokens_map.json's, else the class's default."""
        src = tok_config if key in tok_config else stm if key in stm else None
        return _token_name(src[key]) if src is not None else defaults.get(choice.name or "")

    bos, eos = special("bos_token", _DEFAULT_BOS), special("eos_token", _DEFAULT_EOS)
    return TransformersTokenizer(choice=choice, rebuilt=rebuilt, added=added, bos_token=bos, eos_token=eos)


# --------------------------------------------------------------------------- what the crate refuses
MODEL_TYPES = frozenset({"BPE", "WordPiece", "WordLevel", "Unigram"})
# a merges line in the layout the library writes (one string per line) that is not `a b`
_BAD_MERGE_LINE = re.compile(r'^[ \t]*"(?!(?:[^" \\]|\\.)+ (?:[^" \\]|\\.)+"[ \t]*,?[ \t]*$)', re.M)
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)


def crate_refusal(tj: TokenizerJson, release: str = DEFAULT_RELEASE) -> str | None:
    """The message the crate refuses tokenizer.json with (serde's " at line L column C" left
    off), for the refusals portkit predicts; None when it predicts none. Not predicted (verify
    reports them with the crate's own text): a merge naming a token outside the vocabulary,
    merges saved as pairs that are not pairs, and what a component's field values must be
    (which fields each component needs is predicted: portkit/semantics/tokenizer_serde.py). From candle
    0.11.1 the crate compiles patterns with fancy-regex, which refuses escapes onig reads
    (portkit/semantics/fancy_regex.py)."""
    v = tj.value
    version = v.get("version")
    if "version" in v and version != "1.0":
        return f"Unknown tokenizer version '{version}'" if isinstance(version, str) else None
    for component in tokenizer_serde.COMPONENTS:
        refused = tokenizer_serde.refusal(component, v.get(component.key), fancy_regex=FANCY_REGEX.holds(release))
        if refused is not None:
            return refused
    model = v.get("model")
    if model is None:
        return "Model missing."
    if not isinstance(model, dict):
        return "data did not match any variant of untagged enum ModelUntagged"
    mtype = model.get("type")
    if "type" in model and mtype not in MODEL_TYPES:
        return "data did not match any variant of untagged enum ModelUntagged"
    if mtype == "BPE":
        if "vocab" not in model or "merges" not in model:
            return "Missing vocab/merges"
        line = bad_merge_line(tj)
        if line is not None:
            return f"Merges text file invalid at line {line}"
    return None


def bad_merge_line(tj: TokenizerJson) -> int | None:
    """The 1-based rank of the first "a b" merge string the crate cannot split in two
    (`models/bpe/model.rs:292-297`: exactly one space), None when all split or merges are pairs."""
    text = tj.merges_text()
    if text is None:
        merges = tj.model.get("merges")
        if isinstance(merges, list):
            for rank, m in enumerate(x for x in merges if not (isinstance(x, str) and x.startswith("#version"))):
                if isinstance(m, str) and len(m.split(" ")) != 2:
                    return rank + 1
        return None
    body = text.lstrip()[1:].lstrip()
    if not body.startswith('"'):
        return None  # pairs (or empty): the library wrote them; the crate checks them itself
    if "\n" in text.strip():
        m = _BAD_MERGE_LINE.search(text)
        return None if m is None else text.count("\n", 0, m.start())
    # one line (a compact file): a raw space is a space in a JSON string, so counting them in
    # the escaped text finds the candidates; json.loads decides (a `\u0020` escape is a space too)
    for rank, s in enumerate(_STRING.findall(text)):
        if (s.count(" ") != 1 or "\\u" in s) and len(json.loads(f'"{s}"').split(" ")) != 2:
            return rank + 1
    return None


# --------------------------------------------------------------------------- eos and BOS
def token_id(tj: TokenizerJson, crate: CrateTokenizer, content: str | None) -> int | None:
    """The id the crate gives `content` (an added token first, then the vocabulary)."""
    if content is None:
        return None
    if content in crate.added_ids:
        return crate.added_ids[content]
    vocab = tj.vocab()
    if isinstance(vocab, dict):
        i = vocab.get(content)
        return i if isinstance(i, int) and not isinstance(i, bool) else None
    return None


def special_template(post_processor: Any) -> list[str] | None:
    """The pieces a post-processor makes of one sequence, in order: "$A" for the text, the
    content of each special token it adds (`["<s>", "$A"]`); None for a post-processor portkit
    does not read (Bert/Roberta processing, an unknown type). ByteLevel adds no token."""
    if post_processor is None:
        return ["$A"]
    if not isinstance(post_processor, dict):
        return None
    t = post_processor.get("type")
    if t == "ByteLevel":
        return ["$A"]
    if t == "Sequence":
        # the crate runs each in turn; the template one is where tokens are added
        found = [special_template(p) for p in post_processor.get("processors") or []]
        if any(f is None for f in found):
            return None
        added = [f for f in found if f != ["$A"]]
        return added[0] if len(added) == 1 else ["$A"] if not added else None
    if t != "TemplateProcessing":
        return None
    specials = post_processor.get("special_tokens") or {}
    out: list[str] = []
    for piece in post_processor.get("single") or []:
        if isinstance(piece, dict) and "Sequence" in piece:
            out.append("$" + str((piece["Sequence"] or {}).get("id", "A")))
        elif isinstance(piece, dict) and "SpecialToken" in piece:
            tid = (piece["SpecialToken"] or {}).get("id")
            toks = (specials.get(tid) or {}).get("tokens") or [tid]
            out += [x for x in toks if isinstance(x, str)]
        else:
            return None
    return out


def adds_bos(post_processor: Any) -> str | None:
    """The special token a post-processor puts first in a single sequence, or None."""
    pieces = special_template(post_processor)
    return pieces[0] if pieces and pieces[0] != "$A" else None


def chat_template_source(tok_config: Mapping[str, Any], jinja: str | None) -> str | None:
    """The default chat template transformers uses: chat_template.jinja over
    tokenizer_config.json's `chat_template` (tokenization_utils_base.py:1822-1840)."""
    if jinja is not None:
        return jinja
    t = tok_config.get("chat_template")
    if isinstance(t, str):
        return t
    if isinstance(t, list):
        for entry in t:
            if isinstance(entry, dict) and entry.get("name") == "default" and isinstance(entry.get("template"), str):
                return entry["template"]
    return None


def template_writes_bos(template: str, bos: str | None) -> str | None:
    """How a chat template writes the BOS text itself: `{{ bos_token }}` or the literal token."""
    if re.search(r"\{\{-?\s*bos_token\s*-?\}\}", template):
        return "{{ bos_token }}"
    if bos and bos in template:
        return bos
    return None


@dataclass(frozen=True, slots=True)
class Difference:
    """One part of the pipeline the two sides build differently."""

    part: str  # normalizer | prepend_scheme | pre_tokenizer | decoder
    crate: Any
    transformers: Any
    detail: dict[str, Any] = field(default_factory=dict)


# normalizer steps that never put a " " back once a Replace has taken every one out
_NO_NEW_SPACE = frozenset({"Lowercase", "NFC", "NFD", "Strip", "StripAccents", "ByteLevel"})


def _leaves_no_space(normalizer: Any) -> bool:
    """Whether a normalizer leaves no " " in any text: a `Replace(" " -> x)` (x without a space),
    followed only by steps that cannot make one (NFKC can: U+00A0 becomes " ")."""
    gone = False
    for step in canonical(normalizer):
        if not isinstance(step, dict):
            return False
        t = step.get("type")
        if t == "Replace" and step.get("pattern") == {"String": " "} and " " not in str(step.get("content")):
            gone = True
        elif t == "Replace" and " " in str(step.get("content")) or t == "Prepend" and " " in str(step.get("prepend")):
            gone = False
        elif t not in _NO_NEW_SPACE and t not in ("Replace", "Prepend"):
            gone = False
    return gone


def pre_tokenizer_steps(normalizer: Any, pre_tokenizer: Any) -> list[Any]:
    """The pre-tokenizer's canonical steps, without a `Split` on " " that a normalizer leaving
    no space makes a no-op (`GemmaTokenizer`'s, models/gemma/tokenization_gemma.py:91-98; the
    pre-tokenizer runs on the normalized text, tokenizers-0.22.2 src/tokenizer/mod.rs:724-728)."""
    steps = canonical(pre_tokenizer)
    if not _leaves_no_space(normalizer):
        return steps
    return [
        s for s in steps if not (is_step(s, "Split") and s.get("pattern") == {"String": " "} and not s.get("invert"))
    ]


def differences(crate: CrateTokenizer, tf: TransformersTokenizer) -> list[Difference]:
    """Where transformers' rebuilt pipeline departs from tokenizer.json (empty for a class that
    loads the file as is, or one portkit does not mirror)."""
    if tf.rebuilt is None:
        return []
    out: list[Difference] = []
    rn, tn = crate.normalizer, tf.rebuilt.normalizer
    rp, tp = crate.pre_tokenizer, tf.rebuilt.pre_tokenizer
    if canonical(rn) != canonical(tn):
        out.append(Difference("normalizer", rn, tn))
    r_scheme, t_scheme = prepend_scheme(rn, rp), prepend_scheme(tn, tp)
    if r_scheme is not None and t_scheme is not None and r_scheme != t_scheme:
        out.append(Difference("prepend_scheme", r_scheme, t_scheme))
    r_steps, t_steps = pre_tokenizer_steps(rn, rp), pre_tokenizer_steps(tn, tp)

    # steps whose only difference is the prepend scheme are that finding's, and the Metaspace
    # that replaces a Prepend/Replace normalizer is the normalizer's
    def key(s: Any) -> Any:
        if is_step(s, "Metaspace"):
            return ("Metaspace", s.get("replacement"), s.get("split"))
        return json.dumps(s, sort_keys=True)

    r_keys, t_keys = [key(s) for s in r_steps], [key(s) for s in t_steps]
    dropped = [s for s, k in zip(r_steps, r_keys, strict=False) if k not in t_keys]
    added = [s for s, k in zip(t_steps, t_keys, strict=False) if k not in r_keys]
    if r_scheme == "always" and not any(is_step(s, "Metaspace") for s in r_steps):
        added = [s for s in added if not is_step(s, "Metaspace")]
    if dropped or added:
        out.append(Difference("pre_tokenizer", rp, tp, {"dropped": dropped, "added": added}))
    if canonical_decoder(crate.decoder) != canonical_decoder(tf.rebuilt.decoder):
        out.append(Difference("decoder", crate.decoder, tf.rebuilt.decoder))
    tpp = tf.rebuilt.post_processor
    if tpp is not None:
        r_tpl, t_tpl = special_template(crate.post_processor), special_template(tpp)
        if r_tpl is not None and r_tpl != t_tpl:
            out.append(Difference("post_processor", crate.post_processor, tpp, {"crate": r_tpl, "transformers": t_tpl}))
    return out
