"""portkit: find where candle (0.9.1 to 0.11.1) reads a Hugging Face checkpoint differently from transformers 5.

`import portkit` never imports torch or transformers; only `portkit.verify` does, lazily.

`portkit lint` runs as a pre-commit hook, so its cold start is budgeted (at least
10x faster than `import transformers`). On its path: stdlib dataclasses, not pydantic
(pydantic only generates `schemas/lint-report.schema.json`); rich only for colour; numpy
only for PK410; the GGUF reader only when a .gguf is there; `portkit.findings` with the
first finding; no `importlib.metadata` (the version is `__version__`); and no `typing` at
run time: modules write `TYPE_CHECKING = False` / `if TYPE_CHECKING: from typing import ...`
(type checkers read the block, Python skips it) and `from __future__ import annotations`.
`tests/acceptance/test_cli.py::test_lint_imports_nothing_heavy` holds the heavy ones out.
"""

__version__ = "0.1.0"
