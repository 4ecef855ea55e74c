"""What every kind of verify run returns to its caller, defined once.

verify runs three kinds of input: a decoder checkpoint (`pipeline.VerifyReport`), an encoder with its
sentence-transformers pipeline (`embedding.run.EmbeddingReport`) and a directory of tokenizer files
alone (`tokenizer_run.TokenizerReport`). Each report is a `RunOutcome`: the verdict word and line,
the exit code, the confirmed findings, the family, the seconds and the JSON. The words and codes
below are the only spelling of each; the multi-target summary (`targets.py`) reads the reports
through the protocol alone.
"""

from __future__ import annotations

from typing import Any, Protocol

AGREE = "agree"
MISMATCH = "mismatch"
NONFINITE = "non-finite"  # NaN or inf on a side: not a candle-vs-transformers difference
BAD_INPUT = "bad input"

EXIT_AGREE = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_NONFINITE = 3


class RunOutcome(Protocol):
    """What the caller of any verify run reads."""

    seconds: float

    @property
    def family(self) -> str | None: ...

    @property
    def exit_code(self) -> int: ...

    @property
    def confirmed(self) -> list[Any]: ...

    def verdict(self) -> tuple[str, str]:
        """(one of the words above, the human line)."""
        ...

    def to_json(self) -> dict[str, Any]: ...
