"""`bench/hf_cache_bench.py --quick` runs end to end on a generated cache and prints its table.
No timing is asserted (tests never assert wall-clock times); the bench itself checks that
`--hf-cache` found every generated repo and the same findings as plain lint of the snapshots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "hf_cache_bench.py"

pytest.importorskip("huggingface_hub", reason="--hf-cache needs huggingface_hub (the verify extra)")


@pytest.mark.skipif(not (Path(sys.executable).parent / "portkit").exists(), reason="needs the portkit console script")
def test_hf_cache_bench_quick_prints_its_table(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--repos", "12", "--workdir", str(tmp_path)],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    header = next((ln for ln in lines if ln.startswith("check")), None)
    assert header is not None and all(
        c in header for c in ("measured", "baseline (same run)", "ratio", "target", "met")
    ), p.stdout
    assert any(ln.startswith("in-process lint_cache, 12 repos") for ln in lines), p.stdout
    assert any(ln.startswith("`portkit lint --hf-cache` one process") for ln in lines), p.stdout
    assert "dirs/s" in p.stdout and "cache of 12 model repos" in p.stdout
    # the generated cache is one huggingface_hub accepts: 12 repos, each a blobs/refs/snapshots tree
    repos = sorted((tmp_path / "hub").glob("models--bench-org--model-*"))
    assert len(repos) == 12 and all((r / "refs" / "main").is_file() for r in repos)
