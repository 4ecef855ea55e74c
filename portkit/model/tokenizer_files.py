"""The tokenizer files of a model directory, read bounded and fast.

tokenizer.json is what a candle program loads (the Rust `tokenizers` crate reads it literally);
tokenizer_config.json, special_tokens_map.json and chat_template.jinja are what transformers 5
adds to it. A Llama 3 or Qwen tokenizer.json is 9-11 MB, nearly all of it `model.vocab` and
`model.merges`, which no lint rule needs as Python objects: the fast path parses the rest of the
file (a "skeleton" with the two values cut out) and keeps the two spans as text, parsed only on
demand (parsing them costs 100-300 ms, the whole budget of a pre-commit hook). A file whose
layout the fast path does not recognise is parsed whole. What hides inside the two spans (a
merge the crate refuses, nesting) is for the rules that look there and for the crate itself.

Bad input (exit 2, one line): a file over 64 MiB, invalid JSON, nesting deeper than 64 levels
(as for every JSON file portkit reads; a tokenizer.json nests 8 at most), text that is not UTF-8.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from portkit.errors import InputError
from portkit.model.jsonfile import JsonDoc, exists, load_json, parse_json_text, read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
CHAT_TEMPLATE = "chat_template.jinja"
#: The files this module reads; any of them makes a directory a tokenizer to lint.
TOKENIZER_FILES = (TOKENIZER_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP, CHAT_TEMPLATE)

MAX_TOKENIZER_BYTES = 64 * 1024 * 1024  # the largest published tokenizer.json files are ~35 MB
MAX_TEMPLATE_BYTES = 1024 * 1024

_MODEL = re.compile(r'"model"\s*:\s*\{')
_VOCAB = re.compile(r'"vocab"\s*:\s*(?=[\[{])')
_WS = " \t\r\n"


@dataclass(frozen=True, slots=True)
class TokenizerJson:
    """tokenizer.json: everything but `model.vocab` / `model.merges` parsed (`value`, with those
    two as empty placeholders when the fast path cut them out), and their text spans."""

    path: Path
    text: str
    value: dict[str, Any]
    vocab_span: tuple[int, int] | None = None  # (start, end) of model.vocab's value in `text`
    merges_span: tuple[int, int] | None = None

    @property
    def model(self) -> dict[str, Any]:
        m = self.value.get("model")
        return m if isinstance(m, dict) else {}

    def vocab(self) -> Any:
        """model.vocab as JSON holds it (parsed now when the fast path cut it out)."""
        if self.vocab_span is None:
            return self.model.get("vocab")
        a, b = self.vocab_span
        return json.loads(self.text[a:b])

    def merges_text(self) -> str | None:
        if self.merges_span is None:
            return None
        a, b = self.merges_span
        return self.text[a:b]

    def merges(self) -> Any:
        if self.merges_span is None:
            return self.model.get("merges")
        return json.loads(self.merges_text() or "[]")

    def position(self, key: str) -> tuple[int, int] | None:
        """Row/column of a top-level key (the first `"key":` in the file: the top-level keys come
        before `model`, whose vocabulary is the only place a key-like string could repeat)."""
        m = re.search(rf'"{re.escape(key)}"\s*:', self.text)
        return _rowcol(self.text, m.start()) if m else None

    def added_token_position(self, content: str, key: str = "normalized") -> tuple[int, int] | None:
        """Row/column of `key` inside the added token whose content is `content`."""
        m = re.search(r'"content"\s*:\s*' + re.escape(json.dumps(content, ensure_ascii=False)), self.text)
        if m is None:
            m = re.search(r'"content"\s*:\s*' + re.escape(json.dumps(content)), self.text)
        if m is None:
            return None
        # the keys of one added token sit within a few hundred characters of its content
        start = self.text.rfind("{", 0, m.start())
        end = self.text.find("}", m.end())
        k = re.compile(rf'"{re.escape(key)}"\s*:').search(self.text, start, end if end > 0 else len(self.text))
        return _rowcol(self.text, (k or m).start())


@dataclass(frozen=True, slots=True)
class TemplateFile:
    path: Path
    text: str


@dataclass(frozen=True, slots=True)
class TokenizerFacts:
    """The tokenizer files found in one directory (each None when absent)."""

    root: Path
    tokenizer: TokenizerJson | None = None
    config: JsonDoc | None = None
    special_tokens_map: JsonDoc | None = None
    chat_template: TemplateFile | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def config_value(self) -> dict[str, Any]:
        v = self.config.value if self.config is not None else None
        return v if isinstance(v, dict) else {}


def _rowcol(text: str, offset: int) -> tuple[int, int]:
    row = text.count("\n", 0, offset) + 1
    return row, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _skip_ws_back(text: str, end: int) -> int:
    """The offset just past the last non-whitespace character before `end`."""
    while end > 0 and text[end - 1] in _WS:
        end -= 1
    return end


def _skip_ws(text: str, start: int) -> int:
    n = len(text)
    while start < n and text[start] in _WS:
        start += 1
    return start


def _merges_key(text: str, start: int) -> tuple[int, int] | None:
    """(end of the vocab value, start of the merges value): the first `"merges"` after `start`
    written as `}` (or `]`) `,` `"merges": [`. Inside the vocab a `}` or `]` only occurs in a
    string, where a quote follows it, never `,`. str.find, not a regex: the vocab is megabytes."""
    i = text.find('"merges"', start)
    while i >= 0:
        j = _skip_ws_back(text, i)
        if j > 0 and text[j - 1] == ",":
            k = _skip_ws_back(text, j - 1)
            c = _skip_ws(text, i + len('"merges"'))
            if k > 0 and text[k - 1] in "}]" and text.startswith(":", c):
                v = _skip_ws(text, c + 1)
                if text.startswith("[", v):
                    return k, v
        i = text.find('"merges"', i + 1)
    return None


def _tail(text: str) -> int | None:
    """The offset just past the `]` that closes merges, when `]`, `}`, `}` end the file."""
    end = _skip_ws_back(text, len(text))
    for c in "}}]":
        if end == 0 or text[end - 1] != c:
            return None
        if c != "]":
            end = _skip_ws_back(text, end - 1)
    return end


def _skeleton(text: str) -> tuple[str, tuple[int, int], tuple[int, int], str] | None:
    """The text with model.vocab and model.merges cut out, and their spans; None when the file
    is not in the layout the `tokenizers` library writes (vocab, then merges, closing the file)."""
    m = _MODEL.search(text)
    if m is None:
        return None
    v = _VOCAB.search(text, m.end())
    if v is None:
        return None
    g = _merges_key(text, v.end())
    t = _tail(text)
    if g is None or t is None or t <= g[1]:
        return None
    vocab_span = (v.end(), g[0])
    merges_span = (g[1], t)
    vopen = text[vocab_span[0]]
    if text[vocab_span[1] - 1] != ("}" if vopen == "{" else "]"):
        return None
    vph = "{}" if vopen == "{" else "[]"
    skel = text[: vocab_span[0]] + vph + text[vocab_span[1] : merges_span[0]] + "[]" + text[merges_span[1] :]
    return skel, vocab_span, merges_span, vph


def parse_tokenizer_json(path: Path, text: str, *, fast: bool = True) -> TokenizerJson:
    """Parse tokenizer.json text (see the module doc); InputError (exit 2) for bad input."""
    cut = _skeleton(text) if fast else None
    vspan: tuple[int, int] | None
    mspan: tuple[int, int] | None
    if cut is not None:
        skel, vspan, mspan, vph = cut
        try:
            value, _dups = parse_json_text(skel)
        except (ValueError, RecursionError):
            cut = None  # the cut was wrong or the file is bad: the whole parse says which
        else:
            model = value.get("model") if isinstance(value, dict) else None
            if not (isinstance(model, dict) and model.get("vocab") == json.loads(vph) and model.get("merges") == []):
                cut = None
    if cut is None:
        try:
            value, _dups = parse_json_text(text)
        except ValueError as e:
            msg = str(e)
            raise InputError(path, msg if msg.startswith("invalid JSON") else f"invalid JSON: {msg}") from None
        vspan = mspan = None
    if not isinstance(value, dict):
        raise InputError(path, "tokenizer.json is not a JSON object")
    return TokenizerJson(path=path, text=text, value=value, vocab_span=vspan, merges_span=mspan)


def read_tokenizer_json(path: Path) -> TokenizerJson:
    return parse_tokenizer_json(path, read_text(path, MAX_TOKENIZER_BYTES))


def _read_template(path: Path) -> TemplateFile:
    return TemplateFile(path=path, text=read_text(path, MAX_TEMPLATE_BYTES))


def has_tokenizer_files(names: Iterable[str]) -> bool:
    return any(n in TOKENIZER_FILES for n in names)


def read_tokenizer_files(root: Path, names: Iterable[str]) -> TokenizerFacts | None:
    """The tokenizer files among `names` (the directory listing), or None when there are none."""
    present = {n for n in names if n in TOKENIZER_FILES and exists(root / n)}
    if not present:
        return None
    tok = read_tokenizer_json(root / TOKENIZER_JSON) if TOKENIZER_JSON in present else None
    cfg = load_json(root / TOKENIZER_CONFIG) if TOKENIZER_CONFIG in present else None
    stm = load_json(root / SPECIAL_TOKENS_MAP, positions=False) if SPECIAL_TOKENS_MAP in present else None
    tpl = _read_template(root / CHAT_TEMPLATE) if CHAT_TEMPLATE in present else None
    for doc in (cfg, stm):
        if doc is not None and not isinstance(doc.value, dict):
            raise InputError(doc.path, f"{doc.path.name} is not a JSON object")
    return TokenizerFacts(root=root, tokenizer=tok, config=cfg, special_tokens_map=stm, chat_template=tpl)
