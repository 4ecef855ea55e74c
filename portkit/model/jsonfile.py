"""Strict, bounded JSON reading with the source position of every object key.

`config.json` is parsed the way transformers reads it (`json.load`: the last duplicate key
wins) but strictly as RFC 8259 JSON, the way candle's serde_json reads it: `NaN`,
`Infinity` and numbers that overflow a double are refused. Key positions (1-based row and
character column) let findings point at `config.json:12:5`.

The one-line file errors every reader in `portkit.model` shares live here too (`exists`,
`read_text`, `_oserror`): this is the module all of them import.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from portkit.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_JSON_BYTES = 16 * 1024 * 1024  # config files are kilobytes; an index is at most a few MB
MAX_DEPTH = 64

KeyPath = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class JsonDoc:
    """One JSON file as written: value, text, and where each object key starts."""

    path: Path
    value: Any
    text: str
    positions: Mapping[KeyPath, tuple[int, int]] = field(default_factory=dict)
    duplicates: tuple[KeyPath, ...] = ()

    def position(self, *keys: str) -> tuple[int, int] | None:
        """Row/column of the deepest key of `keys` that exists, else None."""
        for n in range(len(keys), 0, -1):
            pos = self.positions.get(tuple(keys[:n]))
            if pos is not None:
                return pos
        return None

    def line(self, row: int) -> str:
        lines = self.text.splitlines()
        return lines[row - 1] if 0 < row <= len(lines) else ""


def _dup_hook(dups: dict[int, list[str]]) -> Any:
    """json.loads' object_pairs_hook: plain dicts (the last value of a repeated key wins, at
    the first key's place, as in a dict), noting the repeated keys of each dict by id."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set[str] = set()
            repeated = []
            for k, _ in pairs:
                if k in seen:
                    repeated.append(k)
                seen.add(k)
            dups[id(d)] = repeated
        return d

    return hook


def _bad_constant(name: str) -> Any:
    raise ValueError(f"`{name}` is not valid JSON")


def _float(s: str) -> float:
    v = float(s)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"number `{s[:40]}` is out of range for a double")
    return v


def _dup_paths(v: Any, path: KeyPath, dups: dict[int, list[str]], out: list[KeyPath]) -> None:
    """The key paths of the repeated keys, in document order (walked only when there are some)."""
    if isinstance(v, dict):
        out.extend(path + (k,) for k in dups.get(id(v), ()))
        for k, x in v.items():
            _dup_paths(x, path + (k,), dups, out)
    elif isinstance(v, list):
        for x in v:
            _dup_paths(x, path, dups, out)


def _odd_backslashes(text: str, i: int) -> bool:
    n = 0
    while i >= 0 and text[i] == "\\":
        n += 1
        i -= 1
    return n % 2 == 1


def parse_json_text(text: str) -> tuple[Any, tuple[KeyPath, ...]]:
    """Parse strictly; returns (value, duplicate key paths). Raises ValueError."""
    _check_depth_fast(text)
    dup_keys: dict[int, list[str]] = {}
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_dup_hook(dup_keys),
            parse_constant=_bad_constant,
            parse_float=_float,
        )
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON: {e.msg} (line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON: nesting too deep") from None
    dups: list[KeyPath] = []
    if dup_keys:
        _dup_paths(raw, (), dup_keys, dups)
    return raw, tuple(dups)


def _check_depth_fast(text: str) -> None:
    # Cheap bound first: a file cannot nest deeper than it has brackets.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth_strings(text)


# A JSON string, escapes honoured; an unterminated one runs to the end (json.loads reports it).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def _check_depth_strings(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, counting brackets outside strings. The regexes
    do the scanning (a sharded 8B index or header has thousands of brackets)."""
    depth = 0
    for c in _BRACKET.findall(_STRING.sub("", text)):
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"invalid JSON: nesting deeper than {MAX_DEPTH} levels")
        else:
            depth -= 1


_TOKEN = re.compile(r'["{}\[\],:\n]')


def key_positions(text: str, max_depth: int = 3) -> dict[KeyPath, tuple[int, int]]:
    """Map each object-key path (up to `max_depth` objects deep) to its 1-based (row, column).

    Keys inside arrays are skipped. Assumes `text` already parsed as JSON.
    """
    out: dict[KeyPath, tuple[int, int]] = {}
    # stack entries: [is_object, expecting_key, current_key]
    stack: list[list[Any]] = []
    keys: list[str | None] = []
    row = 1
    line_start = 0
    i = 0
    n = len(text)
    while i < n:
        m = _TOKEN.search(text, i)
        if m is None:
            break
        c = m.group()
        s = m.start()
        if c == "\n":
            row += 1
            line_start = s + 1
            i = s + 1
            continue
        if c == '"':
            k = s + 1
            while True:
                q = text.find('"', k)
                if q < 0:
                    return out
                if _odd_backslashes(text, q - 1):
                    k = q + 1
                    continue
                break
            if stack and stack[-1][0] and stack[-1][1]:
                key = json.loads(text[s : q + 1])
                stack[-1][2] = key
                depth = len(stack)
                if depth <= max_depth and all(isinstance(x, str) for x in keys[1:]):
                    path = tuple(keys[1:]) + (key,)
                    out.setdefault(path, (row, s - line_start + 1))
            i = q + 1
            continue
        if c in "{[":
            if stack:
                keys.append(stack[-1][2] if stack[-1][0] else None)
            else:
                keys.append("")
            stack.append([c == "{", c == "{", None])
        elif c in "}]":
            if stack:
                stack.pop()
                keys.pop()
        elif c == ":":
            if stack:
                stack[-1][1] = False
        elif c == ",":
            if stack and stack[-1][0]:
                stack[-1][1] = True
        i = s + 1
    return out


def read_text(path: Path, limit: int = MAX_JSON_BYTES) -> str:
    """Read a small text file, bounded, with one-line errors."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(path, _oserror(e)) from None
    if not os.path.isfile(path):
        raise InputError(path, "not a regular file")
    if st.st_size > limit:
        raise InputError(path, f"file is {st.st_size} bytes; portkit reads JSON files up to {limit} bytes")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(path, _oserror(e)) from None
    if len(data) > limit:
        raise InputError(path, f"file is over {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text (byte {e.start})") from None


def exists(p: Path) -> bool:
    """Whether `p` is there; a dangling symlink or a path that cannot be read is an error the user
    should see (one line), not an absent file."""
    try:
        os.stat(p)
        return True
    except FileNotFoundError:
        if os.path.islink(p):
            raise InputError(p, "dangling symlink") from None
        return False
    except OSError as e:
        raise InputError(p, _oserror(e)) from None


def load_json(path: Path, *, positions: bool = True) -> JsonDoc:
    text = read_text(path)
    try:
        value, dups = parse_json_text(text)
    except ValueError as e:
        raise InputError(path, str(e) if str(e).startswith("invalid JSON") else f"invalid JSON: {e}") from None
    pos = key_positions(text) if positions else {}
    return JsonDoc(path=path, value=value, text=text, positions=MappingProxyType(pos), duplicates=dups)


def _oserror(e: OSError) -> str:
    import errno

    if e.errno == errno.ELOOP:
        return "symlink loop (too many levels of symbolic links)"
    if e.errno == errno.ENOENT:
        return "no such file or directory"
    if e.errno == errno.EACCES:
        return "permission denied"
    if e.errno == errno.EISDIR:
        return "is a directory"
    return e.strerror or type(e).__name__
