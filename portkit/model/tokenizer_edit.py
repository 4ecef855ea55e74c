"""Edit tokenizer.json's text in place: replace one top-level value, or one added token's flags,
keeping every other byte (the vocabulary and merges, the key order, the layout).

Each new value is rendered in the file's own layout: pretty with its indent, as serde_json writes
it (`"key": value`, one item a line), or compact, as the `tokenizers` library's `to_str()` does.
Used by `portkit fix` (writing the file) and `portkit verify` (a counterfactual copy the crate
loads from a string).
"""

from __future__ import annotations

import json
import re

from portkit.errors import InputError
from portkit.model.tokenizer_files import TokenizerJson

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

_DECODER = json.JSONDecoder()


def _indent_unit(text: str) -> str | None:
    """The file's indent ("  ", "\t", ...), None for a file on one line."""
    m = re.search(r"\n([ \t]+)\"", text[:4096])
    return m.group(1) if m else None


def render(value: Any, unit: str | None, depth: int) -> str:
    """`value` as the file writes values `depth` levels down: pretty with `unit` (serde's
    layout: `"k": v`, one item a line), or compact as the `tokenizers` library's `to_str()`."""
    if unit is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = json.dumps(value, ensure_ascii=False, indent=unit)
    return text.replace("\n", "\n" + unit * depth)


def _value_span(text: str, start: int) -> tuple[int, int, Any]:
    """(start, end, value) of the JSON value beginning at or after `start`."""
    i = start
    while text[i] in " \t\r\n":
        i += 1
    value, end = _DECODER.raw_decode(text, i)
    return i, end, value


def _top_level_value(tj: TokenizerJson, key: str) -> tuple[int, int]:
    """The span of a top-level key's value: the first `"key":` of the file (the top-level keys
    precede `model`, see TokenizerJson.position), checked against the parsed value."""
    m = re.search(rf'"{re.escape(key)}"\s*:', tj.text)
    if m is None:
        raise InputError(tj.path, f"refusing to fix: no top-level `{key}` to replace")
    a, b, value = _value_span(tj.text, m.end())
    if value != tj.value.get(key):
        raise InputError(
            tj.path,
            f"refusing to fix: `{key}` is not where the fast reader expects it; rewrite the file with the tokenizers "
            "library first",
        )
    return a, b


def _added_token_spans(tj: TokenizerJson) -> list[tuple[int, int, dict[str, Any]]]:
    a, b = _top_level_value(tj, "added_tokens")
    out: list[tuple[int, int, dict[str, Any]]] = []
    text, i = tj.text, a + 1
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        s, e, v = _value_span(text, i)
        out.append((s, e, v))
        i = e


def apply_changes(tj: TokenizerJson, changes: dict[str, Any]) -> str:
    """tokenizer.json's text with `changes` applied: top-level keys (`normalizer`, ...) and
    `added_tokens[CONTENT].normalized`; every other byte kept."""
    unit = _indent_unit(tj.text)
    spans: list[tuple[int, int, str]] = []
    token_flags: dict[str, dict[str, Any]] = {}
    for key, value in changes.items():
        m = re.fullmatch(r"added_tokens\[(.*)\]\.(\w+)", key, re.S)
        if m:
            token_flags.setdefault(m.group(1), {})[m.group(2)] = value
            continue
        if key not in tj.value:
            raise InputError(tj.path, f"refusing to fix: tokenizer.json has no top-level `{key}`")
        a, b = _top_level_value(tj, key)
        spans.append((a, b, render(value, unit, 1)))
    if token_flags:
        for a, b, tok in _added_token_spans(tj):
            flags = token_flags.get(str(tok.get("content")))
            if flags:
                spans.append((a, b, render({**tok, **flags}, unit, 2)))
    text = tj.text
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


def probe_changes(patch: dict[str, Any]) -> dict[str, Any]:
    """A tokenizer finding's probe patch as `apply_changes` keys (`normalized_false` names the
    special tokens whose flag it clears)."""
    out = {k: v for k, v in patch.items() if k != "normalized_false"}
    for content in patch.get("normalized_false", ()):
        out[f"added_tokens[{content}].normalized"] = False
    return out
