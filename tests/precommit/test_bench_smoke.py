"""`bench/lint_bench.py --quick` runs end to end and prints its table. No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "lint_bench.py"


@pytest.mark.skipif(not (Path(sys.executable).parent / "portkit").exists(), reason="needs the portkit console script")
def test_bench_quick_prints_its_table(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--dirs",
            "8",
            "--runs",
            "2",
            "--cli-runs",
            "1",
            "--workdir",
            str(tmp_path),
        ],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    lines = out.splitlines()
    header = next((ln for ln in lines if ln.startswith("check")), None)
    assert header is not None, out
    for col in ("measured", "baseline (same run)", "ratio", "target", "met"):
        assert col in header, header
    for row in (
        "in-process lint, 8B sharded skeleton",
        "`portkit lint` cold CLI",
        "tokenizer rules, 11.",
        "throughput in-process, 8 dirs",
        "throughput one CLI process, 8 dirs",
    ):
        assert any(ln.startswith(row) for ln in lines), f"no {row!r} row in:\n{out}"
    for target in ("< 20 ms", ">= 10x faster", ">= 200 dirs/s", "<= +150 ms"):
        assert target in out, out
    # the 8B skeleton is sparse: ~15 GiB apparent, a few hundred KiB on disk
    assert "GiB apparent" in out and "KiB on disk" in out, out
