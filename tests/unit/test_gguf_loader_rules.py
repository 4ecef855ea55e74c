"""GGUF rule paths that the rule-case table cannot hold: the native crash oracle runs every case's
`--max-tokens` through candle, and quantized_gemma3's 131072-row table is out of reach there."""

from __future__ import annotations

from pathlib import Path

from portkit.lint import lint_paths
from portkit.settings import Settings
from portkit.target import Target
from tests.unit.rule_cases import loader_gguf


def _pk405(d: Path, max_tokens: int) -> list[str]:
    r = lint_paths([d], Settings(select=["PK405"], respect_pyproject=False, target=Target(max_tokens=max_tokens)))
    assert not r.errors, r.errors
    return [f.message for f in r.findings]


def test_gemma3_table_is_its_fixed_max_seq_len(tmp_path: Path) -> None:
    d, _ = loader_gguf("gemma3", md={"gemma3.context_length": 64})(tmp_path / "m")
    [msg] = _pk405(d, 200_000)
    assert "quantized_gemma3 has 131072 cos/sin rows (its fixed MAX_SEQ_LEN)" in msg
    assert _pk405(d, 131_072) == []  # context_length is never read: 64 does not matter
