#!/usr/bin/env python3
"""What a reference-side counterfactual (transformers run as candle computes, `Probe.as_candle`)
costs verify: its seconds next to the reference's own, measured in one verify run.

Two checkpoints, each with one finding whose probe is a reference-side run (PK107: `hidden_act`
"gelu" beside candle's SiLU, a config edit, so the weights are the checkpoint's own):

- the tiny generated llama fixture (`fixtures.variants` `hidden-act-gelu`);
- a SmolLM2-135M-shaped checkpoint with random f32 weights (bench/verify_bench.py's, generated
  once into `$PORTKIT_CACHE/bench/`), its config.json given `hidden_act: gelu` in a directory
  beside it whose weight file is a symlink to it.

Per checkpoint and per repeat (--repeats, alternating nothing: one verify each): `portkit verify
--format json` in a fresh process with an empty `$PORTKIT_CACHE/reference` and
`$PORTKIT_CACHE/candle` (so both sides and the counterfactual are computed; the child process
imports torch, as users run it), then the same again on the filled cache (the counterfactual
read from it). Prints, from the report's own numbers: `timings.reference` (the reference's
streamed forward, in its child), each `reference_runs` entry's seconds (the counterfactual,
its own child), their ratio, and verify's wall time. Medians of the repeats.

    .venv/bin/python bench/counterfactual_bench.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _gelu_copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    cfg["hidden_act"] = "gelu"
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    for p in src.iterdir():
        if p.name != "config.json" and not (dst / p.name).exists():
            (dst / p.name).symlink_to(p.resolve())
    return dst


def _verify(model_dir: Path, cache: Path) -> dict:
    env = dict(os.environ, PORTKIT_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("PORTKIT_VERIFY_REFERENCE", None)  # the child process, as users run it
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "portkit", "verify", str(model_dir), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"verify failed ({p.returncode}): {p.stderr[-400:]}")
    doc = json.loads(p.stdout)
    runs = doc["reference_runs"]["runs"]
    verdicts = {f["code"]: f["verdict"] for f in doc["findings"]}
    return {
        "wall": wall,
        "reference": doc["timings"]["reference"],
        "as_candle": sum(r["seconds"] for r in runs),
        "sources": [r["source"] for r in runs],
        "verdicts": verdicts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from bench.verify_bench import ensure_fixture
    from fixtures.cache import fixture_dir

    work = Path(tempfile.mkdtemp(prefix="portkit-cf-bench-"))
    try:
        cases = {
            "tiny llama fixture (hidden-act-gelu)": fixture_dir("hidden-act-gelu"),
            "SmolLM2-135M shape, f32 random weights, hidden_act gelu": _gelu_copy(ensure_fixture(), work / "135m-gelu"),
        }
        print(f"load average {os.getloadavg()[0]:.1f} at the start; {os.cpu_count()} cores; medians of {a.repeats}")
        print(
            "| checkpoint | run | reference (s) | as candle computes (s) | as candle / reference | verify wall (s) | "
            "PK107 |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, d in cases.items():
            first, again = [], []
            for _ in range(a.repeats):
                cache = work / "cache"
                shutil.rmtree(cache, ignore_errors=True)
                first.append(_verify(d, cache))
                again.append(_verify(d, cache))
            for label, rs in (("first (empty cache)", first), ("repeat (cached)", again)):
                ref = statistics.median(r["reference"] for r in rs)
                cf = statistics.median(r["as_candle"] for r in rs)
                wall = statistics.median(r["wall"] for r in rs)
                ratio = f"{cf / ref:.2f}" if ref > 0.05 else f"{cf:.3f} s vs cached"
                print(
                    f"| {name} | {label} | {ref:.2f} | {cf:.2f} ({', '.join(rs[0]['sources'])}) | {ratio} | {wall:.2f} "
                    f"| {rs[0]['verdicts'].get('PK107')} |"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
