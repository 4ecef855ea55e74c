"""A small mirror of serde_json 1.0.154 + serde 1.0.229 deserialization, as candle's
`LlamaConfig` uses it (derive(Deserialize), no `deny_unknown_fields`).

It works on JSON parsed into `Pairs` (an object keeps its key order and duplicates) with
numbers classified the way serde_json's parser does: u64, i64, or f64 (integers outside
u64/i64 become f64; a float literal that overflows f64 is `OutOfRange`, an error only where
a field reads it, because ignored values are skipped without range checks).

Messages are serde_json's, without the trailing ` at line L column C`.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)


class SerdeError(Exception):
    """serde refused the value; str() is serde_json's message (no position).

    `path` is the key path of the value that failed (empty for a missing field).
    """

    def __init__(self, msg: str, path: list[str] | None = None) -> None:
        super().__init__(msg)
        self.path: list[str] = list(path or [])


class Pairs(list):
    """A JSON object as written: a list of (key, value) pairs, duplicates kept."""


class OutOfRange:
    """A float literal serde_json refuses with `number out of range` when it reads it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"OutOfRange({self.text})"


class BadConstant(Exception):
    pass


def _parse_float(s: str) -> Any:
    v = float(s)
    if math.isinf(v):
        return OutOfRange(s)
    return v


def _parse_int(s: str) -> Any:
    # serde_json reads `-0` as the float -0.0 (its parser has no negative integer zero)
    return -0.0 if s == "-0" else int(s)


def _parse_constant(name: str) -> Any:
    raise BadConstant(name)


def loads(text: str) -> Any:
    """Parse like serde_json's tokenizer; raises SerdeError on text serde_json cannot parse."""
    if text.startswith("\ufeff"):
        raise SerdeError("expected value")
    try:
        return json.loads(
            text,
            object_pairs_hook=Pairs,
            parse_float=_parse_float,
            parse_int=_parse_int,
            parse_constant=_parse_constant,
        )
    except BadConstant:
        raise SerdeError("expected value") from None
    except RecursionError:
        raise SerdeError("recursion limit exceeded") from None
    except json.JSONDecodeError as e:
        raise SerdeError(_json_error(e)) from None
    except ValueError as e:  # int too long to convert, etc.
        raise SerdeError(str(e)) from None


def _json_error(e: json.JSONDecodeError) -> str:
    """Python's JSONDecodeError as serde_json words the same syntax error."""
    doc, pos, msg = e.doc, e.pos, e.msg
    before = doc[:pos].rstrip()
    at = doc[pos : pos + 1]
    if before.endswith(",") and at in ("}", "]"):
        return "trailing comma"
    if msg.startswith("Extra data"):
        return "trailing characters"
    if msg.startswith("Invalid control character"):
        return "control character (\\u0000-\\u001F) found while parsing a string"
    if msg.startswith("Unterminated string"):
        return "EOF while parsing a string"
    if pos >= len(doc.rstrip()):
        if msg.startswith("Expecting ',' delimiter"):
            return "EOF while parsing an object" if _innermost(doc) == "{" else "EOF while parsing a list"
        if msg.startswith("Expecting ':' delimiter"):
            return "EOF while parsing an object"
        return "EOF while parsing a value"
    if msg.startswith("Expecting value"):
        return "expected value"
    if msg.startswith("Expecting ',' delimiter"):
        return "expected `,` or `}`" if _innermost(doc[:pos]) == "{" else "expected `,` or `]`"
    if msg.startswith("Expecting ':' delimiter"):
        return "expected `:`"
    if msg.startswith("Expecting property name"):
        return "key must be a string"
    if msg.startswith("Invalid \\escape") or msg.startswith("Invalid \\uXXXX"):
        return "invalid escape"
    return msg


def _innermost(text: str) -> str:
    """The innermost open bracket at the end of `text` (strings skipped)."""
    stack: list[str] = []
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def to_pairs(v: Any) -> Any:
    """Plain dicts (already parsed JSON) to Pairs, recursively."""
    if isinstance(v, Pairs):
        return v
    if isinstance(v, dict):
        return Pairs((k, to_pairs(x)) for k, x in v.items())
    if isinstance(v, list):
        return [to_pairs(x) for x in v]
    if isinstance(v, float) and math.isinf(v):
        return OutOfRange(repr(v))
    return v


def number(v: Any) -> Any:
    """Reclassify an int the way serde_json's parser would (u64 / i64 / else f64)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v > U64_MAX or v < I64_MIN:
            try:
                return float(v)
            except OverflowError:
                return OutOfRange(str(v)[:40])
    return v


def rust_float(x: float) -> str:
    """serde_json's `floating point `{}`` rendering (zmij: fixed for exponents -5..=15)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    from decimal import Decimal  # error messages only: not worth importing on every lint

    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, t.digits))
    e = len(digits) + int(t.exponent) - 1
    digits = digits.rstrip("0") or "0"
    if -5 <= e <= 15:
        if len(digits) - 1 <= e:
            body = digits + "0" * (e - len(digits) + 1) + ".0"
        elif e >= 0:
            body = digits[: e + 1] + "." + digits[e + 1 :]
        else:
            body = "0." + "0" * (-e - 1) + digits
    else:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        body = f"{mant}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def rust_debug_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def unexpected(v: Any) -> str:
    v = number(v)
    if isinstance(v, OutOfRange):
        return "number out of range"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean `{'true' if v else 'false'}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{rust_float(v)}`"
    if isinstance(v, str):
        return f"string {rust_debug_str(v)}"
    if isinstance(v, (Pairs, dict)):
        return "map"
    if isinstance(v, list):
        return "sequence"
    raise TypeError(type(v))


def invalid_type(v: Any, expected: str) -> SerdeError:
    return SerdeError(f"invalid type: {unexpected(v)}, expected {expected}")


def _check_range(v: Any) -> None:
    if isinstance(v, OutOfRange):
        raise SerdeError("number out of range")


def de_uint(v: Any, ty: str, maxv: int) -> int:
    _check_range(v)
    v = number(v)
    _check_range(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise invalid_type(v, ty)
    if v < 0 or v > maxv:
        raise SerdeError(f"invalid value: integer `{v}`, expected {ty}")
    return v


def de_usize(v: Any) -> int:
    return de_uint(v, "usize", U64_MAX)


def de_u32(v: Any) -> int:
    return de_uint(v, "u32", U32_MAX)


def _f32(x: float) -> float:
    import struct

    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        # `as f32` rounds to nearest: anything past f32::MAX (+ half an ulp) becomes infinity
        fmax = 3.4028234663852886e38
        half_ulp = 2.0 ** (127 - 24)
        if abs(x) < fmax + half_ulp:
            return math.copysign(fmax, x)
        return math.copysign(math.inf, x)


def de_float(v: Any, ty: str) -> float:
    _check_range(v)
    v = number(v)
    _check_range(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid_type(v, ty)
    x = float(v)
    return _f32(x) if ty == "f32" else x


def de_f32(v: Any) -> float:
    return de_float(v, "f32")


def de_f64(v: Any) -> float:
    return de_float(v, "f64")


def de_bool(v: Any) -> bool:
    _check_range(v)
    if not isinstance(v, bool):
        raise invalid_type(v, "a boolean")
    return v


def de_string(v: Any) -> str:
    _check_range(v)
    if not isinstance(v, str):
        raise invalid_type(v, "a string")
    return v


def de_json(v: Any) -> Any:
    """`serde_json::Value`: any JSON (an object's repeated key: the last one, as its map keeps it);
    only a number out of f64's range is refused."""
    if isinstance(v, Pairs):
        return {k: de_json(x) for k, x in v}
    if isinstance(v, list):
        return [de_json(x) for x in v]
    v = number(v)
    _check_range(v)
    return v


def de_option(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def f(v: Any) -> Any:
        return None if v is None else inner(v)

    return f


def de_enum(variants: tuple[str, ...]) -> Callable[[Any], str]:
    expected = (
        " or ".join(f"`{x}`" for x in variants)
        if len(variants) <= 2
        else "one of " + ", ".join(f"`{x}`" for x in variants)
    )

    def variant(name: str) -> str:
        if name not in variants:
            raise SerdeError(f"unknown variant `{name}`, expected {expected}")
        return name

    def f(v: Any) -> str:
        if isinstance(v, str):
            return variant(v)
        if isinstance(v, Pairs):
            if not v:
                raise SerdeError("expected value")
            name, val = v[0]
            variant(name)
            if val is not None:
                _check_range(val)
                raise invalid_type(val, "unit")
            if len(v) > 1:
                raise SerdeError("expected value")
            return name
        raise SerdeError("expected value")

    return f


def de_vec(inner: Callable[[Any], Any]) -> Callable[[Any], list]:
    def f(v: Any) -> list:
        _check_range(v)
        if not isinstance(v, list):
            raise invalid_type(v, "a sequence")
        return [inner(x) for x in v]

    return f


def de_untagged(name: str, *variants: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def f(v: Any) -> Any:
        # serde buffers the value first (deserialize_any): a number serde_json cannot parse
        # fails there, before any variant is tried.
        if _has_out_of_range(v):
            raise SerdeError("number out of range")
        for var in variants:
            try:
                return var(v)
            except SerdeError:
                continue
        raise SerdeError(f"data did not match any variant of untagged enum {name}")

    return f


def _has_out_of_range(v: Any) -> bool:
    if isinstance(v, OutOfRange):
        return True
    if isinstance(v, Pairs):
        return any(_has_out_of_range(x) for _, x in v)
    if isinstance(v, list):
        return any(_has_out_of_range(x) for x in v)
    return False


def _at(key: str, de: Callable[[Any], Any], v: Any) -> Any:
    try:
        return de(v)
    except SerdeError as e:
        e.path.insert(0, key)
        raise


MISSING = object()


class Field:
    __slots__ = ("name", "de", "default", "aliases")

    def __init__(
        self, name: str, de: Callable[[Any], Any], default: Any = MISSING, aliases: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.de = de
        self.default = default  # MISSING: required; a callable or value otherwise
        self.aliases = aliases  # `#[serde(alias = "...")]`: other keys that fill the field


def de_struct(name: str, fields: tuple[Field, ...]) -> Callable[[Any], dict]:
    """derive(Deserialize) for a struct: map (document order, first error wins, duplicate
    known fields refused, unknown keys ignored) or sequence (positional)."""
    by_name = {f.name: f for f in fields}
    by_name.update({a: f for f in fields for a in f.aliases})

    def finish(found: dict) -> dict:
        out = {}
        for f in fields:
            if f.name in found:
                out[f.name] = found[f.name]
            elif f.default is MISSING:
                raise SerdeError(f"missing field `{f.name}`")
            else:
                out[f.name] = f.default() if callable(f.default) else f.default
        return out

    def de(v: Any) -> dict:
        _check_range(v)
        if isinstance(v, Pairs):
            found: dict = {}
            for k, x in v:
                f = by_name.get(k)
                if f is None:
                    continue  # unknown key: serde ignores it (IgnoredAny, no range checks)
                if f.name in found:  # an alias and the name, or one key twice: serde names the field
                    raise SerdeError(f"duplicate field `{f.name}`", [k])
                found[f.name] = _at(k, f.de, x)
            return finish(found)
        if isinstance(v, list):
            found = {}
            for i, f in enumerate(fields):
                if i >= len(v):
                    raise SerdeError(f"invalid length {i}, expected struct {name} with {len(fields)} elements")
                found[f.name] = _at(f.name, f.de, v[i])
            if len(v) > len(fields):
                raise SerdeError("trailing characters")
            return finish(found)
        raise invalid_type(v, f"struct {name}")

    return de
