"""What in a chat template's text the Rust chat-template environments render otherwise, or refuse.

A small scanner of the template text, not a jinja engine: it splits the text into literal text
and tags (`{{ }}`, `{% %}`, `{# #}`, string literals inside tags kept apart), then finds each
construct that the two environments portkit's native wheel reproduces (`candle-examples`:
candle's candle-examples-0.11.0/src/chat_template.rs; `mistral.rs`: mistralrs-core's
`apply_chat_template_to`; both on minijinja 2.14.0) render differently from transformers'
jinja2 (utils/chat_template_utils.py `_cached_compile_jinja_template`: `trim_blocks`,
`lstrip_blocks`, `loopcontrols`, `{% generation %}`, its own `tojson` and `strftime_now`).

Each `Construct` says where it is (line and column in the template) and, per environment, what
happens: "refuses" (the environment's error, with the text expected in it) or "differs" (another
text). `portkit verify` renders the template in both environments and through transformers and
confirms each from what they give.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

CANDLE_EXAMPLES = "candle-examples"
MISTRAL_RS = "mistral.rs"
ENVIRONMENTS = (CANDLE_EXAMPLES, MISTRAL_RS)

#: Python methods on str, dict and list that jinja2's sandbox lets a template call (the mutating
#: ones, `append`, `pop`, `update`, ..., it refuses itself: ImmutableSandboxedEnvironment).
PYTHON_METHODS = frozenset(
    "capitalize casefold center count encode endswith expandtabs find format format_map index isalnum isalpha isascii "
    "isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle isupper join ljust lower lstrip "
    "partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split splitlines "
    "startswith strip swapcase title translate upper zfill get items keys values copy".split()
)
#: The methods minijinja-contrib 2.14.0's `pycompat::unknown_method_callback` answers
#: (pycompat.rs: `string_methods`, `map_methods`, `seq_methods`); mistral.rs installs it.
PYCOMPAT_METHODS = frozenset(
    "upper lower islower isupper isspace isdigit isnumeric isalnum isalpha isascii strip lstrip rstrip replace title "
    "split splitlines capitalize count find format rfind startswith endswith join keys values items get".split()
)
#: tojson's keyword arguments as transformers' `tojson` takes them; mistral.rs's reads `indent` only.
TOJSON_IGNORED_BY_MISTRAL_RS = ("sort_keys", "separators", "ensure_ascii")

#: mistral.rs's rewrite of a descending range (chat_template.rs:788-793), applied to the whole text.
MISTRAL_RS_DESCENDING_RANGE = re.compile(r"range\((?P<expr>[^,]+),\s*-1,\s*-1\)")

_OPEN = re.compile(r"\{([{%#])")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_METHOD_CALL = re.compile(r"\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_TOJSON = re.compile(r"\|\s*tojson\b")
_STRFTIME = re.compile(r"(?<![\w.])strftime_now\s*\(")
_REVERSED_THEN_POSTFIX = re.compile(r"\[\s*:\s*:\s*-\s*1\s*\]\s*(?=[\[.])")
_KWARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")


@dataclass(frozen=True, slots=True)
class Tag:
    kind: str  # "{" (print), "%" (statement), "#" (comment)
    start: int  # offset of "{"
    end: int  # offset just past the closing "}"
    left: str  # "-", "+" or "" right after the opening
    right: str  # "-", "+" or "" right before the closing
    statement: str = ""  # a statement tag's first word (`if`, `for`, `generation`, ...)


@dataclass(frozen=True, slots=True)
class Construct:
    """One construct at one place: `effects` maps each environment it breaks to "refuses" or
    "differs", `expect` to the text its refusal carries."""

    kind: str
    line: int
    column: int
    detail: str
    effects: dict[str, str] = field(default_factory=dict)
    expect: dict[str, str] = field(default_factory=dict)
    offset: int = 0


@dataclass(frozen=True, slots=True)
class Scan:
    text: str
    tags: tuple[Tag, ...]
    code: str  # the text with literal text and string literals blanked (newlines kept)
    line_starts: tuple[int, ...]
    error: str | None = None  # an unclosed tag: the scanner stops there

    def rowcol(self, offset: int) -> tuple[int, int]:
        row = bisect_right(self.line_starts, offset)
        return row, offset - self.line_starts[row - 1] + 1


def _rowcol(text: str, offset: int) -> tuple[int, int]:
    row = text.count("\n", 0, offset) + 1
    return row, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _string_end(text: str, i: int) -> int:
    """The offset just past the string literal that opens at `i` (its quote)."""
    quote, n = text[i], len(text)
    i += 1
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i + 1
        i += 1
    return n


def scan(text: str) -> Scan:
    """The template's tags, and its code with everything that is not code blanked."""
    tags: list[Tag] = []
    code = [" " if c != "\n" else "\n" for c in text]
    pos, n, error = 0, len(text), None
    while pos < n:
        m = _OPEN.search(text, pos)
        if m is None:
            break
        kind, start = m.group(1), m.start()
        i = m.end()
        left = text[i] if i < n and text[i] in "-+" else ""
        i += len(left)
        close = "}" if kind == "{" else kind
        end = -1
        if kind == "#":
            j = text.find("#}", i)
            end = j + 2 if j >= 0 else -1
        else:
            j = i
            while j < n:
                c = text[j]
                if c in "'\"":
                    j = _string_end(text, j)
                    continue
                if c == close and text.startswith("}", j + 1):
                    end = j + 2
                    break
                code[j] = c
                j += 1
        if end < 0:
            error = f"unclosed tag at line {_rowcol(text, start)[0]}"
            break
        inner_end = end - 2
        right = text[inner_end - 1] if inner_end - 1 >= i and text[inner_end - 1] in "-+" else ""
        if kind == "%" and right:
            code[inner_end - 1] = " "
        statement = ""
        if kind == "%":
            k = i
            while k < inner_end and text[k].isspace():
                k += 1
            w = _NAME.match(text, k, inner_end)
            statement = w.group(0) if w else ""
        tags.append(Tag(kind, start, end, left, right, statement))
        pos = end
        if kind == "%" and statement == "raw":  # literal up to {% endraw %}
            e = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}").search(text, pos)
            if e is None:
                break
            for k in range(pos, e.start()):
                code[k] = " " if text[k] != "\n" else "\n"
            pos = e.start()
    starts = [0]
    i = text.find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = text.find("\n", i + 1)
    return Scan(text, tuple(tags), "".join(code), tuple(starts), error)


# --------------------------------------------------------------------------- constructs


def _args_span(code: str, open_paren: int) -> tuple[int, int]:
    """(start, end) of a call's arguments: from just past `(` to its matching `)`."""
    depth, i, n = 0, open_paren, len(code)
    while i < n:
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return open_paren + 1, i
        i += 1
    return open_paren + 1, n


def _top_level_commas(code: str, a: int, b: int) -> int:
    depth, commas = 0, 0
    for c in code[a:b]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
    return commas


def python_methods(s: Scan) -> Iterator[Construct]:
    """`.strip()`, `.items()`, ...: minijinja has no Python methods of its own; pycompat answers some."""
    for m in _METHOD_CALL.finditer(s.code):
        name = m.group(1)
        if name not in PYTHON_METHODS:
            continue
        row, col = s.rowcol(m.start(1))
        effects = {CANDLE_EXAMPLES: "refuses"}
        expect = {CANDLE_EXAMPLES: f"has no method named {name}"}
        detail = name
        if name not in PYCOMPAT_METHODS:
            effects[MISTRAL_RS] = "refuses"
            expect[MISTRAL_RS] = f"has no method named {name}"
        elif name == "get":
            a, b = _args_span(s.code, m.end() - 1)
            if s.code[a:b].strip() and _top_level_commas(s.code, a, b) >= 1:
                # pycompat 2.14.0's `get` takes the key alone (a default came in 2.15.0, #852)
                effects[MISTRAL_RS] = "refuses"
                expect[MISTRAL_RS] = "too many arguments"
                detail = "get(key, default)"
        yield Construct("python-method", row, col, detail, effects, expect, m.start(1))


def generation_tags(s: Scan) -> Iterator[Construct]:
    """`{% generation %}`: transformers' AssistantTracker tag; mistral.rs deletes it (chat_template.rs:800-801)."""
    for t in s.tags:
        if t.kind == "%" and t.statement in ("generation", "endgeneration"):
            row, col = s.rowcol(t.start)
            yield Construct(
                "generation",
                row,
                col,
                t.statement,
                {CANDLE_EXAMPLES: "refuses"},
                {CANDLE_EXAMPLES: f"unknown statement {t.statement}"},
                t.start,
            )


def loop_controls(s: Scan) -> Iterator[Construct]:
    """`{% break %}`, `{% continue %}`: jinja2's loopcontrols; minijinja only with its `loop_controls` feature."""
    for t in s.tags:
        if t.kind == "%" and t.statement in ("break", "continue"):
            row, col = s.rowcol(t.start)
            expect = f"unknown statement {t.statement}"
            yield Construct(
                "loop-control",
                row,
                col,
                t.statement,
                dict.fromkeys(ENVIRONMENTS, "refuses"),
                dict.fromkeys(ENVIRONMENTS, expect),
            )


def negative_steps(s: Scan) -> Iterator[Construct]:
    """mistral.rs's rewrites of `range(n, -1, -1)` (to `range(n)|reverse`: one item fewer) and of
    `[::-1]` (to `|reverse`: a syntax error when a subscript or attribute follows)."""
    for m in MISTRAL_RS_DESCENDING_RANGE.finditer(s.text):
        row, col = s.rowcol(m.start())
        yield Construct("negative-step", row, col, m.group(0), {MISTRAL_RS: "differs"})
    for m in _REVERSED_THEN_POSTFIX.finditer(s.code):
        row, col = s.rowcol(m.start())
        yield Construct(
            "negative-step",
            row,
            col,
            "[::-1]" + s.code[m.end()],
            {MISTRAL_RS: "refuses"},
            {MISTRAL_RS: "syntax error: unexpected"},
        )


def tojson_arguments(s: Scan, m: re.Match[str]) -> list[str]:
    """The keyword arguments of the `tojson` filter matched at `m`."""
    i = m.end()
    while i < len(s.code) and s.code[i] == " ":
        i += 1
    if i >= len(s.code) or s.code[i] != "(":
        return []
    a, b = _args_span(s.code, i)
    return _KWARG.findall(s.code, a, b)


def tojson_filters(s: Scan) -> Iterator[Construct]:
    """`tojson`: candle-examples' minijinja has no `json` feature; mistral.rs's reads `indent` alone."""
    for m in _TOJSON.finditer(s.code):
        row, col = s.rowcol(m.start())
        args = tojson_arguments(s, m)
        effects = {CANDLE_EXAMPLES: "refuses"}
        expect = {CANDLE_EXAMPLES: "filter tojson is unknown"}
        ignored = [a for a in args if a in TOJSON_IGNORED_BY_MISTRAL_RS]
        if ignored:
            effects[MISTRAL_RS] = "differs"
        detail = f"tojson({', '.join(a + '=' for a in args)})" if args else "tojson"
        yield Construct("tojson", row, col, detail, effects, expect, m.start())


def strftime_calls(s: Scan) -> Iterator[Construct]:
    """`strftime_now(...)`: transformers' global (local time); candle-examples defines none."""
    for m in _STRFTIME.finditer(s.code):
        row, col = s.rowcol(m.start())
        yield Construct(
            "strftime",
            row,
            col,
            "strftime_now",
            {CANDLE_EXAMPLES: "refuses"},
            {CANDLE_EXAMPLES: "strftime_now is unknown"},
            m.start(),
        )


_BLANKS = " \t"


def _lstripped(text: str, at_template_start: bool) -> str | None:
    """What lstrip_blocks removes before a block tag that follows `text`: the blanks after the
    last newline (or from the template's start), when nothing else is on that line."""
    nl = text.rfind("\n")
    tail = text[nl + 1 :] if nl >= 0 else (text if at_template_start else None)
    if tail and tail.strip(_BLANKS) == "":
        return tail
    return None


def block_whitespace(s: Scan) -> Iterator[Construct]:
    """Whitespace that trim_blocks or lstrip_blocks removes in transformers (and mistral.rs), and
    candle-examples keeps: the newline right after a `{% %}` or `{# #}` tag, the blanks before one
    at the start of a line; and the start of the render, which candle-examples `trim_start()`s."""
    tags = s.tags
    bounds: list[tuple[Tag | None, Tag | None, int, int]] = [
        (None, tags[0] if tags else None, 0, tags[0].start if tags else len(s.text))
    ]
    for k, t in enumerate(tags):
        nxt = tags[k + 1] if k + 1 < len(tags) else None
        bounds.append((t, nxt, t.end, nxt.start if nxt else len(s.text)))
    for prev, nxt, a, b in bounds:
        text = s.text[a:b]
        if nxt is None and text.endswith("\n"):  # keep_trailing_newline is off everywhere
            text = text[:-1]
        if not text:
            continue
        stripped_right = nxt is not None and nxt.left == "-"
        stripped_left = prev is not None and prev.right == "-"
        if (stripped_right and not text.rstrip()) or (stripped_left and not text.lstrip()):
            continue  # the whole segment goes in every environment
        block_before = prev is not None and prev.kind in "%#" and prev.right == ""
        block_after = nxt is not None and nxt.kind in "%#" and nxt.left == ""
        if prev is not None and block_before and not stripped_left and text.startswith(("\n", "\r\n")):
            row, col = s.rowcol(prev.start)
            yield Construct(
                "whitespace", row, col, "newline after a block tag (trim_blocks)", {CANDLE_EXAMPLES: "differs"}
            )
        elif nxt is not None and block_after and not stripped_right and _lstripped(text, prev is None):
            row, col = s.rowcol(nxt.start)
            yield Construct(
                "whitespace", row, col, "blanks before a block tag (lstrip_blocks)", {CANDLE_EXAMPLES: "differs"}
            )
        if prev is None and text[:1].isspace() and not (block_after and _lstripped(text, True) == text):
            yield Construct(
                "whitespace", 1, 1, "whitespace at the start of the render (trim_start)", {CANDLE_EXAMPLES: "differs"}
            )


SCANNERS = {
    "python-method": python_methods,
    "generation": generation_tags,
    "loop-control": loop_controls,
    "negative-step": negative_steps,
    "tojson": tojson_filters,
    "strftime": strftime_calls,
    "whitespace": block_whitespace,
}


# What candle-examples never passes: no `tools`, and messages with `role` and `content` alone.
_TOOL_VALUE = (
    r"\(?\s*(?:tools|xml_tools|builtin_tools|[A-Za-z_][A-Za-z0-9_]*(?:\.tool_calls|\[\s*['\"]tool_calls['\"]\s*\]))\b"
)
_TOOL_CONDITION = re.compile(_TOOL_VALUE + r"(?!\s*is\s+(?:not|none|undefined|false)\b)(?!\s*(?:==|!=))")
_TOOL_LOOP = re.compile(r"[^=]*?\bin\s+" + _TOOL_VALUE)


def tool_branches(s: Scan) -> list[tuple[int, int]]:
    """The spans of the template that run only when tools or a message's `tool_calls` are given:
    the body of `{% if tools %}` (up to its `elif`/`else`) and of `{% for t in tools %}`
    (or `... in message.tool_calls`). candle-examples never reaches them: its context has no
    `tools` and its `Message` no `tool_calls` (chat_template.rs:41-44, 342-350)."""
    spans: list[tuple[int, int]] = []
    stack: list[list[Any]] = []  # [statement, in a tool branch, branch start]
    for t in s.tags:
        if t.kind != "%":
            continue
        code = s.code[t.start + 2 + len(t.left) : t.end - 2].strip().lstrip("-+").strip()
        rest = code[len(t.statement) :].strip()
        if t.statement == "if":
            stack.append(["if", bool(_TOOL_CONDITION.match(rest)), t.end])
        elif t.statement == "for":
            stack.append(["for", bool(_TOOL_LOOP.match(rest)), t.end])
        elif t.statement in ("elif", "else") and stack:
            top = stack[-1]
            if top[1]:
                spans.append((top[2], t.start))
            top[1] = t.statement == "elif" and bool(_TOOL_CONDITION.match(rest))
            top[2] = t.end
        elif t.statement in ("endif", "endfor") and stack:
            top = stack.pop()
            if top[1]:
                spans.append((top[2], t.start))
    return spans


def constructs(s: Scan, kind: str) -> list[Construct]:
    """The constructs of `kind`, each with the environments it breaks; a place candle-examples
    never reaches (a tool branch) does not count against it."""
    found = list(SCANNERS[kind](s))
    if not any(CANDLE_EXAMPLES in c.effects for c in found) or kind == "whitespace":
        return found
    spans = tool_branches(s)
    out = []
    for c in found:
        if (
            CANDLE_EXAMPLES in c.effects
            and any(a <= c.offset < b for a, b in spans)
            and kind not in ("generation", "loop-control")
        ):
            effects = {e: w for e, w in c.effects.items() if e != CANDLE_EXAMPLES}
            expect = {e: w for e, w in c.expect.items() if e != CANDLE_EXAMPLES}
            if not effects:
                continue
            c = Construct(c.kind, c.line, c.column, c.detail, effects, expect, c.offset)
        out.append(c)
    return out


def without_tojson_arguments(text: str, names: tuple[str, ...] = TOJSON_IGNORED_BY_MISTRAL_RS) -> str:
    """The template with the keyword arguments `names` dropped from each `tojson(...)` (what
    mistral.rs's `tojson` makes of them): verify renders it through transformers to show that the
    ignored arguments are what changes the text."""
    s = scan(text)
    cuts: list[tuple[int, int, str]] = []
    for m in _TOJSON.finditer(s.code):
        i = m.end()
        while i < len(s.code) and s.code[i] == " ":
            i += 1
        if i >= len(s.code) or s.code[i] != "(":
            continue
        a, b = _args_span(s.code, i)
        parts, depth, start = [], 0, a
        for j in range(a, b + 1):
            c = s.code[j] if j < b else ","
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append((start, j))
                start = j + 1
        kept = [(x, y) for x, y in parts if not any(re.match(rf"\s*{n}\s*=", s.code[x:y]) for n in names)]
        new = ", ".join(text[x:y].strip() for x, y in kept)
        cuts.append((i, b + 1, "(" + new + ")" if new else ""))
    out, last = [], 0
    for a, b, new in cuts:
        out.append(text[last:a])
        out.append(new)
        last = b
    out.append(text[last:])
    return "".join(out)
