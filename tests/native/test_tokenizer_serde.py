"""portkit/semantics/tokenizer_serde.py against the tokenizers crate itself (through the wheel's
`Tokenizer.from_str`): every struct of every component, and mutations of each (its `type` renamed
to every name the crate knows and to one it does not, `type` dropped, each field dropped, the same
inside a Sequence), from hand-written examples and from every fixture's tokenizer.json. The
prediction must be the crate's verdict, FN 0 / FP 0, with the crate's message.

`make test` runs the systematic mutations and a few hundred random compound ones; `make fuzz`
runs many more (PORTKIT_TOKENIZER_FUZZ=N)."""

from __future__ import annotations

import copy
import json
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import portkit_native as pn
from fixtures.tokenizer_shapes import SHAPES, write_tokenizer
from portkit.model.tokenizer_files import parse_tokenizer_json
from portkit.semantics import tokenizer as S
from portkit.semantics import tokenizer_serde as T

_SPACE = {"String": " "}
_META = {"replacement": "▁", "prepend_scheme": "always", "split": True}
_BYTELEVEL = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
#: one example of each struct, as the `tokenizers` library serializes it
EXAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "normalizer": {
        "BertNormalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "Strip": {"type": "Strip", "strip_left": True, "strip_right": False},
        **{n: {"type": n} for n in ("StripAccents", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Nmt", "ByteLevel")},
        "Sequence": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
        "Precompiled": {"type": "Precompiled", "precompiled_charsmap": "AAAAAA=="},  # an empty trie: 4 zero bytes
        "Replace": {"type": "Replace", "pattern": _SPACE, "content": "▁"},
        "Prepend": {"type": "Prepend", "prepend": "▁"},
    },
    "pre_tokenizer": {
        **{n: {"type": n} for n in ("BertPreTokenizer", "Whitespace", "WhitespaceSplit", "UnicodeScripts")},
        "ByteLevel": {"type": "ByteLevel", **_BYTELEVEL},
        "CharDelimiterSplit": {"type": "CharDelimiterSplit", "delimiter": " "},
        "Metaspace": {"type": "Metaspace", **_META},
        "Sequence": {
            "type": "Sequence",
            "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True}],
        },
        "Split": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False},
        "Punctuation": {"type": "Punctuation", "behavior": "Isolated"},
        "Digits": {"type": "Digits", "individual_digits": False},
        "FixedLength": {"type": "FixedLength", "length": 5},
    },
    "post_processor": {
        "RobertaProcessing": {
            "type": "RobertaProcessing",
            "sep": ["</s>", 2],
            "cls": ["<s>", 0],
            "trim_offsets": True,
            "add_prefix_space": True,
        },
        "BertProcessing": {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]},
        "ByteLevel": {"type": "ByteLevel", **_BYTELEVEL},
        "TemplateProcessing": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]}},
        },
        "Sequence": {
            "type": "Sequence",
            "processors": [
                {"type": "ByteLevel", **_BYTELEVEL},
                {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]},
            ],
        },
    },
    "decoder": {
        "BPEDecoder": {"type": "BPEDecoder", "suffix": "</w>"},
        "ByteLevel": {"type": "ByteLevel", **_BYTELEVEL},
        "WordPiece": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "Metaspace": {"type": "Metaspace", **_META},
        "CTC": {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
        "Sequence": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
        "Replace": {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        "Fuse": {"type": "Fuse"},
        "Strip": {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        "ByteFallback": {"type": "ByteFallback"},
    },
}
#: the smallest tokenizer.json the crate loads: each case sets one component on it
_BASE = {
    "version": "1.0",
    "added_tokens": [],
    "model": {"type": "WordLevel", "vocab": {"[CLS]": 0, "[SEP]": 1, "<unk>": 2}, "unk_token": "<unk>"},
}
_COMPONENT = {c.key: c for c in T.COMPONENTS}
_POSITION = re.compile(r" at line \d+ column \d+$")


def _names(component: T.Component) -> list[str]:
    """Every `type` the crate knows for this component, and one it does not."""
    return sorted({*(component.tagged or {}), *(s.name for s in component.structs)}) + ["Bogus"]


def _mutations(component: T.Component, value: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One change at a time: `type` renamed or dropped, a field dropped; the same on a Sequence's first item."""
    for name in _names(component):
        if name != value.get("type"):
            yield f"type={name}", {**value, "type": name}
    for field in value:
        yield f"-{field}", {k: v for k, v in value.items() if k != field}
    struct = next((s for s in component.structs if s.name == value.get("type") and s.nested), None)
    inner = value.get(struct.nested) if struct else None
    if struct and isinstance(inner, list) and inner and isinstance(inner[0], dict):
        for what, changed in _mutations(component, inner[0]):
            yield f"{struct.nested}[0]{what}", {**value, struct.nested: [changed, *inner[1:]]}


def _crate_verdict(text: str) -> str | None:
    """None when the crate loads `text`, else its message (serde's position left off)."""
    try:
        pn.Tokenizer.from_str(text)
    except pn.TokenizerError as e:
        return _POSITION.sub("", str(e))
    except BaseException as e:  # a pyo3 PanicException: the crate `expect`s (Precompiled's tagged step)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return f"panic: {e}"
    return None


def _check(key: str, value: Any, what: str) -> str | None:
    """A line describing the disagreement between portkit and the crate, or None."""
    text = json.dumps({**_BASE, key: value}, ensure_ascii=False)
    crate = _crate_verdict(text)
    predicted = S.crate_refusal(parse_tokenizer_json(Path("tokenizer.json"), text))
    if (crate is None) != (predicted is None):
        kind = "FN" if predicted is None else "FP"
        return f"{kind} {key} {what}: crate {crate!r}, portkit {predicted!r}: {json.dumps(value)[:200]}"
    panic = predicted is not None and predicted.startswith(T.PANIC)
    if (
        crate is not None
        and predicted is not None
        and not (
            crate == predicted
            if not panic
            else crate.startswith("panic: ") and predicted.removeprefix(T.PANIC).split(": ", 1)[1] in crate
        )
    ):
        return f"message {key} {what}: crate {crate!r}, portkit {predicted!r}"
    return None


def _fixture_components(tmp: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(source, key, component) for every component of every fixture tokenizer.json."""
    from fixtures.embedding_models import _tokenizer as bert_tokenizer

    files = [write_tokenizer(tmp / f"{s}-{v}", s, v) / "tokenizer.json" for s in SHAPES for v in ("trigger", "clean")]  # type: ignore[arg-type]
    (tmp / "bert").mkdir()
    bert_tokenizer(tmp / "bert")
    files.append(tmp / "bert" / "tokenizer.json")
    seen: set[str] = set()
    for f in files:
        doc = json.loads(f.read_text(encoding="utf-8"))
        for key in _COMPONENT:
            value = doc.get(key)
            sig = json.dumps([key, value], sort_keys=True)
            if isinstance(value, dict) and sig not in seen:
                seen.add(sig)
                yield f.parent.name, key, value


def test_the_examples_cover_every_struct_and_load() -> None:
    for key, component in _COMPONENT.items():
        assert set(EXAMPLES[key]) == {s.name for s in component.structs}, key
        for name, value in EXAMPLES[key].items():
            assert _check(key, value, name) is None
            assert _crate_verdict(json.dumps({**_BASE, key: value})) is None, (key, name)


def test_every_single_mutation_is_predicted(tmp_path: Path) -> None:
    cases = [(f"example {n}", k, v) for k, examples in EXAMPLES.items() for n, v in examples.items()]
    cases += list(_fixture_components(tmp_path))
    assert {key for src, key, _ in cases if not src.startswith("example")} == set(
        _COMPONENT
    )  # the fixtures have all four
    wrong, count = [], 0
    for source, key, value in cases:
        for what, changed in _mutations(_COMPONENT[key], value):
            count += 1
            line = _check(key, changed, f"{source} {what}")
            if line is not None:
                wrong.append(line)
    assert count > 1000
    assert not wrong, f"{len(wrong)} of {count} mutations mispredicted:\n" + "\n".join(wrong[:30])


def _random_component(rng: random.Random, component: T.Component, depth: int = 0) -> Any:
    """An example with several changes at once: fields dropped, a random `type`, nested Sequences."""
    value = copy.deepcopy(rng.choice(list(EXAMPLES[component.key].values())))
    if value.get("type") == "Sequence" and depth < 2:
        nested = next(s.nested for s in component.structs if s.name == "Sequence")
        value[nested] = [_random_component(rng, component, depth + 1) for _ in range(rng.randint(0, 3))]
    for field in list(value):
        if rng.random() < 0.2:
            del value[field]
    if rng.random() < 0.4:
        value["type"] = rng.choice(_names(component))
    return value


def test_random_compound_mutations_are_predicted() -> None:
    cases = int(os.environ.get("PORTKIT_TOKENIZER_FUZZ", "400"))
    rng = random.Random(20261203)
    wrong = []
    for i in range(cases):
        component = rng.choice(T.COMPONENTS)
        line = _check(component.key, _random_component(rng, component), f"random #{i}")
        if line is not None:
            wrong.append(line)
    assert not wrong, f"{len(wrong)} of {cases} random components mispredicted:\n" + "\n".join(wrong[:30])


@pytest.mark.parametrize("value", [[], "NFC", 3])
def test_a_component_that_is_not_an_object_is_refused(value: Any) -> None:
    for key in _COMPONENT:
        assert _check(key, value, repr(value)) is None
