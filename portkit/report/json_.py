"""JSON: a list of findings, each in ruff's field shape (schemas/lint-report.schema.json)."""

from __future__ import annotations

import json

from portkit.report import Reporter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import TextIO

    from portkit.lint import Report


class JsonReporter(Reporter):
    name = "json"

    def write(self, report: Report, out: TextIO) -> None:
        data = [f.to_json() for f in report.findings]
        out.write(json.dumps(data, indent=2, ensure_ascii=False))
        out.write("\n")
