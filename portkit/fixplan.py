"""A fix plan for one file: what `portkit fix` would write into it and why (the plan shape that
config.json's fixer, `portkit.fix`, and tokenizer.json's, `portkit.tokenizer_fix`, both return)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.findings import Finding


@dataclass(frozen=True)
class Edit:
    """fix's answer to one finding: the keys it sets (`changes`, safe), or why it sets none
    (`refused`: the finding remains)."""

    finding: Finding
    changes: dict[str, Any] = field(default_factory=dict)
    refused: str | None = None

    @property
    def safe(self) -> bool:
        return self.refused is None


@dataclass
class FixPlan:
    path: Path
    old_text: str
    new_text: str | None = None
    edits: list[Edit] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new_text is not None and self.new_text != self.old_text

    @property
    def changes(self) -> dict[str, Any]:
        """Every safe edit's keys, merged in order: what `new_text` sets."""
        out: dict[str, Any] = {}
        for e in self.edits:
            if e.safe:
                out.update(e.changes)
        return out

    @property
    def fixed(self) -> list[Finding]:
        return [e.finding for e in self.edits if e.safe]

    @property
    def remaining(self) -> list[Edit]:
        return [e for e in self.edits if not e.safe]

    @property
    def refused(self) -> list[Finding]:
        return [e.finding for e in self.remaining]

    def diff(self) -> str:
        if not self.changed:
            return ""
        assert self.new_text is not None
        # git's a/ b/ prefixes on a path relative to the working directory when it is under it,
        # so `git apply` / `patch -p1` take the diff as printed.
        # The directory resolved, not the file: a config.json symlinked into a Hugging Face
        # cache blob is named as its snapshot path, the file fix writes.
        try:
            name = (self.path.parent.resolve() / self.path.name).relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            name = self.path.as_posix().lstrip("/")
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )
