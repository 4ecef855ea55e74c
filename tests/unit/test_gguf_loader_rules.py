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


def test_a_qwen3moe_gguf_is_an_error_off_cuda_only(tmp_path: Path) -> None:
    """quantized_qwen3_moe's fused MoE kernel is CUDA-only (candle-nn moe.rs:339-352): PK407 says its first forward
    fails on the CPU and on Metal, an error; on CUDA it stays the warning that portkit does not check the loader."""
    from tests.unit.rule_cases import gguf_model

    d, _ = gguf_model(arch="qwen3moe", with_config=False)(tmp_path / "m")
    for device, severity, crash in (("cpu", "error", True), ("metal", "error", True), ("cuda", "warning", False)):
        report = lint_paths([d], Settings(target=Target(device=device), respect_pyproject=False))
        (f,) = [f for f in report.findings if f.code == "PK407"]
        assert f.severity == severity and ("moe_gemm_gguf" in f.message) == crash, (device, f.message)
        assert "`quantized_qwen3_moe`, a loader portkit does not check yet" in f.message
