"""Reporters: a name -> class table that drives `portkit lint --format`.

Each reporter writes one `Report` to a text stream. Results go to stdout (or `--output`);
errors and hints go to stderr, never through a reporter.
"""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import ClassVar, TextIO

    from portkit.lint import Report


class Reporter:
    name: ClassVar[str]

    def __init__(self, *, color: bool = False, cwd: Path | None = None) -> None:
        self.color = color
        self.cwd = cwd or Path.cwd()

    def display_path(self, filename: str) -> str:
        try:
            rel = os.path.relpath(filename, self.cwd)
        except ValueError:
            return filename
        return filename if rel.startswith("..") else rel

    def write(self, report: Report, out: TextIO) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


# `--format` name -> (module, class); a run imports only the reporter it uses.
REPORTERS = {
    "text": ("portkit.report.text", "TextReporter"),
    "json": ("portkit.report.json_", "JsonReporter"),
    "sarif": ("portkit.report.sarif", "SarifReporter"),
    "github": ("portkit.report.github", "GithubReporter"),
}
FORMATS = tuple(REPORTERS)


def reporter_class(name: str) -> type[Reporter]:
    import importlib

    module, cls = REPORTERS[name]
    return getattr(importlib.import_module(module), cls)


def reporters() -> dict[str, type[Reporter]]:
    return {name: reporter_class(name) for name in REPORTERS}
