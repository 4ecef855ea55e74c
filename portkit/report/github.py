"""GitHub Actions workflow commands (`::error file=...,line=...::message`), one per finding."""

from __future__ import annotations

from portkit.report import Reporter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import TextIO

    from portkit.lint import Report


_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(s: str) -> str:
    return _data(s).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    name = "github"

    def write(self, report: Report, out: TextIO) -> None:
        for f in report.findings:
            path = self.display_path(f.filename)
            props = [f"title={_prop(f'portkit ({f.code})')}", f"file={_prop(path)}"]
            where = path
            if f.location is not None:
                r, c = f.location.row, f.location.column
                props += [f"line={r}", f"col={c}", f"endLine={r}", f"endColumn={c}"]
                where += f":{r}:{c}"
            out.write(f"::{_LEVEL[f.severity]} {','.join(props)}::{_data(f'{where}: {f.code} {f.message}')}\n")
