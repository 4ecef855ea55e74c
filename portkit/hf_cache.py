"""`portkit lint --hf-cache`: every model revision in the local Hugging Face cache, linted.

huggingface_hub's own cache API scans the cache (`scan_cache_dir`, repo by repo), offline,
through `portkit.hub`; each snapshot is linted as a directory. This module sits above
`portkit.lint` (it lints), `portkit.hub` below it (it resolves names and lists the cached revisions, `cached_models`,
which `portkit verify --hf-cache` reads too).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from portkit.errors import InputError
from portkit.hub import CachedModel, cache_dir, cached_models

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TextIO

    from portkit.settings import Settings

SEVERITIES = ("error", "warning", "info")


@dataclass(slots=True)
class CacheRow:
    """One linted revision: the summary table's row and `--format json`'s object."""

    model: CachedModel
    family: str | None = None
    status: str = "linted"  # linted | skipped | unreadable
    message: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    codes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        m = self.model
        return {
            "repo": m.repo_id,
            "revision": m.revision,
            "commit": m.commit or None,
            "refs": list(m.refs),
            "path": str(m.path),
            "family": self.family,
            "status": self.status,
            "message": self.message,
            "findings": dict(self.counts),
            "codes": self.codes,
        }


def _family(config: object) -> str | None:
    """The family the registry finds for this config, else config.json's `model_type`."""
    if not isinstance(config, dict):
        return None
    from portkit.families import detect

    fam = detect(config)
    if fam is not None:
        return fam.name
    mt = config.get("model_type")
    return mt if isinstance(mt, str) else None


def lint_cached(model: CachedModel, settings: Settings) -> CacheRow:
    """Lint one cached revision as a directory (everything in its snapshot)."""
    from portkit.errors import NoModelHere
    from portkit.lint import lint_model
    from portkit.model import load_model
    from portkit.settings import for_dir

    row = CacheRow(model=model)
    if model.problem is not None:
        row.status, row.message = "unreadable", model.problem
        return row
    try:
        facts = load_model(model.path)
        row.family = _family(facts.config.value) if facts.config is not None else None
        if row.family is None and facts.ggufs:
            arch = facts.ggufs[0].metadata.get("general.architecture")
            row.family = f"gguf:{arch.value}" if arch is not None and isinstance(arch.value, str) else "gguf"
        if row.family is None and facts.tokenizer is not None:
            row.family = "tokenizer"  # a tokenizer-only repository: the tokenizer rules alone
        found = lint_model(facts, for_dir(settings, model.path))
    except NoModelHere as e:
        row.status, row.message = "skipped", e.what
        return row
    except InputError as e:
        row.status, row.message = "unreadable", f"{e.path}: {e.what}"
        return row
    for f in found:
        row.counts[f.severity] = row.counts.get(f.severity, 0) + 1
    row.codes = sorted({f.code for f in found})
    return row


def lint_cache(settings: Settings, *, all_revisions: bool, progress: bool) -> tuple[list[CacheRow], list[str]]:
    models, notes = cached_models(all_revisions)
    if not progress or not models:
        return [lint_cached(m, settings) for m in models], notes
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    rows: list[CacheRow] = []
    columns = (
        TextColumn("portkit lint --hf-cache"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=len(models))
        for m in models:
            bar.update(task, description=m.spec)
            rows.append(lint_cached(m, settings))
            bar.advance(task)
    return rows, notes


def exit_code(rows: Iterable[CacheRow]) -> int:
    """2 when a cached model could not be read, else 1 when any finding is an error, else 0."""
    rows = list(rows)
    if any(r.status == "unreadable" for r in rows):
        return 2
    return 1 if any(r.counts.get("error", 0) for r in rows) else 0


HEADER = ("repo", "revision", "family", *SEVERITIES)


def _cells(r: CacheRow) -> tuple[str, ...]:
    rev = r.model.revision if r.model.revision != r.model.commit else r.model.commit[:12]
    if r.status != "linted":
        return (r.model.repo_id, rev, r.family or "-", r.status, "-", "-")
    return (r.model.repo_id, rev, r.family or "-", *(str(r.counts.get(s, 0)) for s in SEVERITIES))


def _summary(rows: list[CacheRow]) -> str:
    linted = [r for r in rows if r.status == "linted"]
    with_findings = sum(1 for r in linted if any(r.counts.values()))
    total = {s: sum(r.counts.get(s, 0) for r in linted) for s in SEVERITIES}
    parts = ", ".join(f"{n} {s}{'' if n == 1 else 's'}" for s, n in total.items() if n)
    skipped = len(rows) - len(linted)
    tail = f"; {skipped} not linted" if skipped else ""
    n = len(rows)
    head = f"{n} cached model revision{'' if n == 1 else 's'}: {with_findings} with findings"
    return f"{head} ({parts}){tail}." if parts else f"{head}{tail}."


def write_table(rows: list[CacheRow], out: TextIO, *, color: bool) -> None:
    """The summary table: plain aligned columns, or a rich table on a colour terminal."""
    if color:
        from rich.console import Console
        from rich.table import Table

        table = Table(*HEADER, title="portkit lint --hf-cache")
        for c in HEADER[3:]:
            table.columns[HEADER.index(c)].justify = "right"
        for r in rows:
            cells = list(_cells(r))
            if r.counts.get("error"):
                cells[3] = f"[bold red]{cells[3]}[/]"
            table.add_row(*cells)
        con = Console(file=out, force_terminal=True, highlight=False)
        con.print(table)
        con.print(_summary(rows))
        return
    lines = [HEADER, *(_cells(r) for r in rows)]
    widths = [max(len(row[i]) for row in lines) for i in range(len(HEADER))]
    for row in lines:
        left = "  ".join(c.ljust(w) for c, w in zip(row[:3], widths[:3], strict=False))
        right = "  ".join(c.rjust(w) for c, w in zip(row[3:], widths[3:], strict=False))
        out.write(f"{left}  {right}".rstrip() + "\n")
    out.write(_summary(rows) + "\n")


def write_json(rows: list[CacheRow], out: TextIO, candle: str) -> None:
    """`candle`: the release lint spoke of (`Target.candle`)."""
    import json

    from portkit import __version__

    data = {
        "portkit_version": __version__,
        "candle_version": candle,
        "cache_dir": str(cache_dir()),
        "models": [r.to_json() for r in rows],
    }
    out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def progress_wanted() -> bool:
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR")
