"""SARIF 2.1.0 (validated in tests against the OASIS schema in schemas/sarif-schema-2.1.0.json).

`tool.driver.rules[]` carries every rule with its full documentation, so code-scanning UIs
can show it; each result points at the rule by id and index.
"""

from __future__ import annotations

import json
from pathlib import Path

from portkit import __version__
from portkit.report import Reporter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, TextIO

    from portkit.lint import Report


_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def sarif_rules() -> list[dict[str, Any]]:
    from portkit.rules import CODES, RULES
    from portkit.rules.base import DOCS_URL

    out = []
    for code, rule in RULES.items():
        doc = rule.doc()
        out.append(
            {
                "id": code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary()},
                "fullDescription": {"text": doc},
                "help": {"text": doc, "markdown": doc},
                "helpUri": DOCS_URL.format(code=code),
                "defaultConfiguration": {"level": _LEVEL[rule.severity]},
                "properties": {
                    "group": rule.group,
                    "status": CODES[code][1],
                    "fixAvailability": rule.fix_availability,
                    "effect": rule.effect,
                    "probe": rule.probe_kind,
                },
            }
        )
    return out


class SarifReporter(Reporter):
    name = "sarif"

    def write(self, report: Report, out: TextIO) -> None:
        rules = sarif_rules()
        index = {r["id"]: i for i, r in enumerate(rules)}
        results = []
        for f in report.findings:
            uri = Path(self.display_path(f.filename)).as_posix()
            phys: dict[str, Any] = {"artifactLocation": {"uri": uri}}
            if f.location is not None:
                phys["region"] = {"startLine": f.location.row, "startColumn": f.location.column}
            res: dict[str, Any] = {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": _LEVEL[f.severity],
                "message": {"text": f.message},
                "locations": [{"physicalLocation": phys}],
                "properties": {
                    "name": f.name,
                    "transformersValue": f.transformers_value,
                    "candleValue": f.candle_value,
                    "fixable": f.fix is not None,
                },
            }
            if f.probe is not None:
                res["properties"]["probe"] = f.probe.to_json()
            results.append(res)
        log = {
            "$schema": SARIF_SCHEMA_URI,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "portkit",
                            "version": __version__,
                            "semanticVersion": __version__,
                            "informationUri": "https://github.com/portkit/portkit",
                            "rules": rules,
                        }
                    },
                    "results": results,
                    "columnKind": "unicodeCodePoints",
                }
            ],
        }
        out.write(json.dumps(log, indent=2, ensure_ascii=False))
        out.write("\n")
