"""Human output, grouped by file, in ruff's shape:

    PK101 [*] transformers uses `rope_theta`=100000 from `rope_parameters`; candle 0.11.0 ...
     --> m/config.json:25:5
       |
    25 |     "rope_theta": 100000.0,
       |     ^
       |
    help: Write the `rope_theta` transformers uses at the top level of config.json

Colour only when asked for (`--color`, or a terminal): then rich renders the lines. Without
colour (pre-commit, pipes, files) the same lines are written directly and rich is never
imported: it costs more than the whole lint of a small model. The plain lines are exactly
what rich printed with colour off (`soft_wrap`: no wrapping or cropping; its control-code
stripping and tab expansion reproduced by `_plain`).
"""

from __future__ import annotations

from itertools import groupby

from portkit.candle_release import said
from portkit.report import Reporter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from portkit.lint import Report


_SEV_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}
# rich.control.STRIP_CONTROL_CODES: bell, backspace, vertical tab, form feed, carriage return
_STRIP = str.maketrans({c: None for c in (7, 8, 11, 12, 13)})
TAB_SIZE = 8  # rich's default

# One printed line: its style, and its (text, style) pieces (rich: `Text(style=...)` + `append`).
Line = tuple["str | None", list[tuple[str, "str | None"]]]
BLANK: Line = (None, [])


def _line_of(filename: str, row: int, cache: dict[str, list[str]]) -> str:
    if filename not in cache:
        try:
            with open(filename, encoding="utf-8", errors="replace") as f:
                cache[filename] = f.read(16 * 1024 * 1024).splitlines()
        except OSError:
            cache[filename] = []
    lines = cache[filename]
    return lines[row - 1] if 0 < row <= len(lines) else ""


#: the most characters of a source line a code frame shows: a minified tokenizer.json is one
#: line of megabytes, so a longer line is cut to a window around the column, ruff-style
FRAME_WIDTH = 120
ELLIPSIS = "…"


def _window(src: str, column: int) -> tuple[str, int]:
    """The part of `src` a frame shows and the 0-based offset of `column` (1-based) in it."""
    if len(src) <= FRAME_WIDTH:
        return src, column - 1
    start = min(max(0, column - 1 - FRAME_WIDTH // 2), len(src) - FRAME_WIDTH)
    end = start + FRAME_WIDTH
    head = ELLIPSIS if start > 0 else ""
    tail = ELLIPSIS if end < len(src) else ""
    return head + src[start:end] + tail, column - 1 - start + len(head)


def _cells(s: str) -> int:
    if s.isascii() and s.isprintable():
        return len(s)
    from rich.cells import cell_len  # wide or control characters before a tab: rich's own widths

    return cell_len(s)


def _expand_tabs(line: str) -> str:
    """rich's `Text.expand_tabs`: each tab becomes a space, then spaces up to the next stop."""
    out: list[str] = []
    col = 0
    parts = line.split("\t")
    for part in parts[:-1]:
        part += " "
        col += _cells(part)
        pad = (TAB_SIZE - col % TAB_SIZE) % TAB_SIZE
        out.append(part + " " * pad)
        col += pad
    out.append(parts[-1])
    return "".join(out)


def _plain(text: str) -> str:
    """What rich writes for `text` with colour off and soft wrap on."""
    text = text.translate(_STRIP)
    if "\t" in text:
        text = "\n".join(_expand_tabs(ln) for ln in text.split("\n"))
    return text


def _lines(report: Report, display_path: Callable[[str], str]) -> list[Line]:
    out: list[Line] = []
    lines: dict[str, list[str]] = {}
    for filename, group in groupby(report.findings, key=lambda f: f.filename):
        shown = display_path(filename)
        out.append(("bold underline", [(f"{shown}:", None)]))
        for f in group:
            sev = _SEV_STYLE.get(f.severity, "bold")
            head: list[tuple[str, str | None]] = [(f.code, sev)]
            if f.fix is not None:
                head.append((" [*]", "cyan"))
            head.append((" " + f.message, None))
            out.append((None, head))
            loc = f" --> {shown}"
            if f.location is not None:
                loc += f":{f.location.row}:{f.location.column}"
            out.append(("blue", [(loc, None)]))
            if f.location is not None:
                src = _line_of(filename, f.location.row, lines)
                if src:
                    num = str(f.location.row)
                    pad = " " * len(num)
                    out.append(("blue", [(f"{pad} |", None)]))
                    shown_src, caret = _window(src, f.location.column)
                    out.append(("blue", [(f"{num} | ", None), (shown_src, None)]))
                    out.append(("blue", [(f"{pad} | ", None), (" " * caret + "^", sev)]))
                    out.append(("blue", [(f"{pad} |", None)]))
            if f.help:
                out.append(("bold cyan", [("help", None), (f": {f.help}", None)]))
            out.append(BLANK)
    n = len(report.findings)
    fixable = sum(1 for f in report.findings if f.fix is not None)
    if n:
        tail = f" ({fixable} fixable with `portkit fix --write`)" if fixable else ""
        out.append((None, [(f"Found {n} finding{'s' if n != 1 else ''}{tail}.", None)]))
    elif not report.errors:
        out.append(("bold green", [("All checks passed!", None)]))
    # the release every line speaks about, above them (nothing on stdout when a path was only bad input)
    return [("dim", [(said(report.candle_version, report.candle_from), None)]), *out] if out else out


class TextReporter(Reporter):
    name = "text"

    def write(self, report: Report, out: TextIO) -> None:
        lines = _lines(report, self.display_path)
        if self.color:
            _write_rich(lines, out)
        else:
            out.write("".join(_plain("".join(t for t, _ in pieces)) + "\n" for _, pieces in lines))


def _write_rich(lines: list[Line], out: TextIO) -> None:
    from rich.console import Console
    from rich.text import Text

    con = Console(
        file=out,
        force_terminal=True,
        no_color=False,
        color_system="standard",
        highlight=False,
        soft_wrap=True,
        emoji=False,
        markup=False,
    )
    for style, pieces in lines:
        if not pieces:
            con.print()
            continue
        text = Text(style=style or "")
        for piece, piece_style in pieces:
            text.append(piece, style=piece_style)
        con.print(text)
