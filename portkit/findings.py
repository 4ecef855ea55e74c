"""A lint finding, in the shape users of ruff's JSON output already parse.

`code, name, message, fix, filename, location{row,column}, severity, url`, plus what portkit
knows that ruff does not: the effective value on each side (`transformers_value`,
`candle_value`) and the `probe` that `portkit verify` runs to confirm the finding on candle
itself (a numeric counterfactual, an expected crash, or nothing: static-only).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["error", "warning", "info"]
ProbeKind = Literal["numeric", "crash", "static-only"]


class Location(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    row: int
    column: int


class Fix(BaseModel):
    """`portkit fix` can rewrite config.json so candle reads it as transformers does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    applicability: Literal["safe"] = "safe"
    message: str
    edits: dict[str, Any] = {}  # top-level config.json keys `portkit fix` writes


class Probe(BaseModel):
    """How `portkit verify` confirms a finding on the real runtimes.

    numeric: run candle on the config as written and on `patch` applied (the counterfactual),
    both against transformers; the finding is confirmed when only the patched run agrees.
    crash: candle must fail (load error or panic) with `expect` in its message.
    static-only: nothing to run (a fact about the files, not about computed numbers).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ProbeKind
    id: str
    patch: dict[str, Any] | None = None
    expect: str | None = None


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    name: str
    message: str
    fix: Fix | None = None
    help: str | None = None  # the rule's fix title, shown as `help:` even when no automatic fix exists
    filename: str
    location: Location | None = None
    severity: Severity
    url: str | None = None
    transformers_value: Any = None
    candle_value: Any = None
    probe: Probe | None = None

    def fingerprint(self, relative_to: str | None = None) -> str:
        """Stable across machines: code, path relative to the baseline, message."""
        import os

        fn = self.filename
        if relative_to is not None:
            try:
                fn = os.path.relpath(fn, relative_to)
            except ValueError:
                pass
        h = hashlib.sha256(f"{self.code}\0{fn}\0{self.message}".encode()).hexdigest()[:16]
        return h
