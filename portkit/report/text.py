"""Human output, grouped by file, in ruff's shape:

    PK101 [*] transformers uses `rope_theta`=100000 from `rope_parameters`; candle 0.11.0 ...
     --> m/config.json:25:5
       |
    25 |     "rope_theta": 100000.0,
       |     ^
       |
    help: Write the `rope_theta` transformers uses at the top level of config.json

Colour only when writing to a terminal (rich decides nothing on its own here).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, TextIO

from portkit.report import Reporter

if TYPE_CHECKING:
    from portkit.lint import Report

_SEV_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}


def _line_of(filename: str, row: int, cache: dict[str, list[str]]) -> str:
    if filename not in cache:
        try:
            with open(filename, encoding="utf-8", errors="replace") as f:
                cache[filename] = f.read(16 * 1024 * 1024).splitlines()
        except OSError:
            cache[filename] = []
    lines = cache[filename]
    return lines[row - 1] if 0 < row <= len(lines) else ""


class TextReporter(Reporter):
    name = "text"

    def write(self, report: "Report", out: TextIO) -> None:
        from rich.console import Console
        from rich.text import Text

        con = Console(
            file=out,
            force_terminal=self.color,
            no_color=not self.color,
            color_system="standard" if self.color else None,
            highlight=False,
            soft_wrap=True,
            emoji=False,
            markup=False,
        )
        lines: dict[str, list[str]] = {}
        for filename, group in groupby(report.findings, key=lambda f: f.filename):
            shown = self.display_path(filename)
            con.print(Text(f"{shown}:", style="bold underline"))
            for f in group:
                head = Text()
                head.append(f.code, style=_SEV_STYLE.get(f.severity, "bold"))
                if f.fix is not None:
                    head.append(" [*]", style="cyan")
                head.append(" " + f.message)
                con.print(head)
                loc = f" --> {shown}"
                if f.location is not None:
                    loc += f":{f.location.row}:{f.location.column}"
                con.print(Text(loc, style="blue"))
                if f.location is not None:
                    src = _line_of(filename, f.location.row, lines)
                    if src:
                        num = str(f.location.row)
                        pad = " " * len(num)
                        con.print(Text(f"{pad} |", style="blue"))
                        row = Text(f"{num} | ", style="blue")
                        row.append(src)
                        con.print(row)
                        caret = Text(f"{pad} | ", style="blue")
                        caret.append(" " * (f.location.column - 1) + "^", style=_SEV_STYLE.get(f.severity, "bold"))
                        con.print(caret)
                        con.print(Text(f"{pad} |", style="blue"))
                if f.help:
                    h = Text("help", style="bold cyan")
                    h.append(f": {f.help}")
                    con.print(h)
                con.print()
        n = len(report.findings)
        fixable = sum(1 for f in report.findings if f.fix is not None)
        if n:
            tail = f" ({fixable} fixable with `portkit fix --write`)" if fixable else ""
            con.print(Text(f"Found {n} finding{'s' if n != 1 else ''}{tail}."))
        elif not report.errors:
            con.print(Text("All checks passed!", style="bold green"))
