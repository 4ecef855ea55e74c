"""Errors that end a lint run with exit status 2: unreadable input and bad usage.

Every message is one line, printed as `portkit: error: <path>: <what>`; nothing here ever
becomes a traceback.
"""

from __future__ import annotations

from pathlib import Path


class PortkitError(Exception):
    """Base class: anything that makes portkit exit with status 2."""


class InputError(PortkitError):
    """A path portkit cannot read as a model: invalid JSON, hostile header, symlink loop, ..."""

    def __init__(self, path: str | Path, what: str) -> None:
        self.path = str(path)
        self.what = " ".join(str(what).split())  # one line, always
        super().__init__(f"{self.path}: {self.what}")


class NoModelHere(InputError):
    """A directory with neither config.json nor a .gguf file: no model to lint."""


class UsageError(PortkitError):
    """A bad command line or `[tool.portkit]` table."""
