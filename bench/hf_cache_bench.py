#!/usr/bin/env python3
"""How fast is `portkit lint --hf-cache`? Ratios measured in one run, on this machine, as a table.

A generated Hugging Face cache (`fixtures.hf_cache`: blobs, refs/main, snapshots of relative
symlinks, the layout huggingface_hub writes) holds N model repos, each a small skeleton
(config.json, generation_config.json, model.safetensors; one in four saved the transformers-5
way, so findings are counted too). Timed:

1. in process, `portkit.hf_cache.lint_cache` (scan_cache_dir, then each `main` snapshot linted),
   against two baselines from the same run: `huggingface_hub.scan_cache_dir` alone (the floor
   of finding the repos through the hub's API) and `lint_paths` over the same N snapshot
   directories (plain lint, no cache machinery);
2. one `portkit lint --hf-cache` process (what a user runs; median of a few), against one
   `portkit lint SNAPSHOT...` process given the same N directories.

Target: >= 200 dirs/s, lint's own throughput target (bench/lint_bench.py). Nothing here is
asserted by the tests (`tests/precommit/test_hf_cache_bench_smoke.py` runs `--quick` only).

    .venv/bin/python bench/hf_cache_bench.py            # 1,000 repos
    .venv/bin/python bench/hf_cache_bench.py --quick    # 50 repos
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures import hf_cache, skeleton  # noqa: E402  (torch-free writers, shared with the tests)

BIN = Path(sys.executable).parent
TARGET_DIRS_PER_S = 200.0


def write_cache(cache: Path, n: int) -> list[Path]:
    """N model repos, `main` each; returns their snapshot directories."""
    src = cache.parent / "src"
    snaps = []
    for i in range(n):
        style = "tf5" if i % 4 == 3 else "tf4"
        cfg = skeleton.config(style, num_hidden_layers=2 + i % 3)
        d = skeleton.write_model(src / f"m{i:04d}", cfg, generation_config={"bos_token_id": 1, "eos_token_id": 2})
        snaps.append(hf_cache.add_revision(cache, f"bench-org/model-{i:04d}", hf_cache.model_files(d)))
    return snaps


def env_for(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(NO_COLOR="1", HF_HUB_CACHE=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the discarded first run writes bytecode, as pip would have
    return env


def timed_process(argv: Sequence[str], env: dict[str, str], runs: int, cwd: Path | None = None) -> list[float]:
    out = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise RuntimeError(
                f"{' '.join(argv[:4])} ... exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
            )
        if i:  # the first run is discarded (page cache, bytecode)
            out.append(dt)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 repos, one CLI run each (smoke test)")
    ap.add_argument("--repos", type=int, help="cached model repos (default 1000, quick 50)")
    ap.add_argument("--cli-runs", type=int, help="timed CLI runs of each command (default 3, quick 1)")
    ap.add_argument("--workdir", type=Path, help="write the cache here and keep it (default: a temp dir, removed)")
    args = ap.parse_args(argv)
    n = args.repos or (50 if args.quick else 1000)
    cli_runs = args.cli_runs or (1 if args.quick else 3)
    portkit_exe = BIN / "portkit"
    if not portkit_exe.exists():
        print(f"no portkit console script next to {sys.executable}; run `pip install -e .`", file=sys.stderr)
        return 2

    with contextlib.ExitStack() as stack:
        work = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="portkit-hf-cache-bench-")))
        cache = work / "hub"
        cache.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        snaps = write_cache(cache, n)
        t_write = time.perf_counter() - t0

        # huggingface_hub reads HF_HUB_CACHE once, at import: set it before anything imports it
        os.environ.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
        import huggingface_hub

        from portkit import hf_cache
        from portkit.lint import lint_paths
        from portkit.settings import Settings

        settings = Settings()
        hf_cache.lint_cache(settings, all_revisions=False, progress=False)  # warm: page cache, imports
        t0 = time.perf_counter()
        rows, _ = hf_cache.lint_cache(settings, all_revisions=False, progress=False)
        t_hub = time.perf_counter() - t0
        t0 = time.perf_counter()
        info = huggingface_hub.scan_cache_dir(cache)
        t_scan = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = lint_paths([str(s) for s in snaps], settings)
        t_plain = time.perf_counter() - t0
        assert len(rows) == len(info.repos) == n and not report.errors, (len(rows), len(info.repos), report.errors[:1])
        n_findings = sum(sum(r.counts.values()) for r in rows)
        assert n_findings == len(report.findings), (n_findings, len(report.findings))

        env = env_for(cache)
        t_cli = timed_process(
            [str(portkit_exe), "lint", "--hf-cache", "--format", "json", "--output", os.devnull], env, cli_runs
        )
        rel = [str(s.relative_to(cache)) for s in snaps]  # short argv: relative to the cache
        t_cli_plain = timed_process(
            [str(portkit_exe), "lint", "--format", "json", "--output", os.devnull, *rel], env, cli_runs, cwd=cache
        )

    def rate(s: float) -> float:
        return n / s if s > 0 else float("inf")

    med_cli, med_cli_plain = statistics.median(t_cli), statistics.median(t_cli_plain)
    rows_out = [
        (
            f"in-process lint_cache, {n} repos",
            f"{rate(t_hub):,.0f} dirs/s ({t_hub:.2f} s)",
            f"scan_cache_dir alone {rate(t_scan):,.0f} dirs/s; lint_paths of the snapshots {rate(t_plain):,.0f} dirs/s",
            f"scan {t_scan / t_hub:.0%} of it; vs plain lint {t_hub / t_plain:.2f}x",
            f">= {TARGET_DIRS_PER_S:.0f} dirs/s",
            rate(t_hub) >= TARGET_DIRS_PER_S,
        ),
        (
            f"`portkit lint --hf-cache` one process (median of {cli_runs})",
            f"{rate(med_cli):,.0f} dirs/s ({med_cli:.2f} s)",
            f"`portkit lint SNAPSHOT x{n}` {rate(med_cli_plain):,.0f} dirs/s ({med_cli_plain:.2f} s)",
            f"--hf-cache/plain {med_cli / med_cli_plain:.2f}x",
            f">= {TARGET_DIRS_PER_S:.0f} dirs/s",
            rate(med_cli) >= TARGET_DIRS_PER_S,
        ),
    ]
    print("portkit lint --hf-cache benchmark" + (" (--quick)" if args.quick else ""))
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; portkit "
        f"{metadata.version('portkit')}, "
        f"huggingface_hub {huggingface_hub.__version__}; cache of {n} model repos written in {t_write:.1f} s; "
        f"{n_findings} findings"
    )
    print()
    headers = ("check", "measured", "baseline (same run)", "ratio", "target", "met")
    table = [headers] + [(a, b, c, d, e, "yes" if f else "NO") for a, b, c, d, e, f in rows_out]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for i, r in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
