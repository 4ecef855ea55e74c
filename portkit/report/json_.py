"""JSON: a list of findings, each in ruff's field shape (schemas/lint-report.schema.json)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from portkit.report import Reporter

if TYPE_CHECKING:
    from portkit.lint import Report


class JsonReporter(Reporter):
    name = "json"

    def write(self, report: "Report", out: TextIO) -> None:
        data = [f.to_json() for f in report.findings]
        out.write(json.dumps(data, indent=2, ensure_ascii=False))
        out.write("\n")
