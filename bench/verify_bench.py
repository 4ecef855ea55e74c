"""Benchmark: `portkit verify` vs the seeds' baseline workflow, on a SmolLM2-135M-shaped model.

    python bench/verify_bench.py [--repeats 3] [--tokens 8]

The model: SmolLM2-135M's shape (30 layers, hidden 576, intermediate 1536, 9 query / 3 kv
heads, vocab 49152, tied embeddings, rope_theta 1e5) with random weights from a seeded
transformers init, saved as f32 safetensors into `$PORTKIT_CACHE/bench/` once (generated in a
child process by this script; no download, no `fixtures/` variant).

The two workflows, measured in the same run, each in its own measuring process so that
`getrusage(RUSAGE_CHILDREN).ru_maxrss` (the largest descendant's peak RSS) belongs to one
workflow only:

- baseline (seed 000): `bench/baseline/llm_json.py` (transformers, eager f32 CPU: last-position
  logits + greedy tokens as JSON), the candle program `native/examples/logits_json.rs` (the same
  as JSON), then `bench/baseline/compare.py` (max |diff| per field, tolerance 1e-4). Its wall
  time is the sum of the three; its peak RSS is the largest of the three (they run one after
  another).
- `portkit verify MODEL_DIR --ids ... --tokens N --format json` (lint, reference, candle,
  last position, per-layer, teacher-forced steps, greedy, every finding's probe), and the same
  with `--no-layers` (no per-layer capture, which loads the weights a second time, after the
  runner is dropped).

Printed: wall time and peak RSS of each (best wall of `--repeats`, alternating the order), and
the ratios: verify / baseline wall (target < 1) and verify peak RSS / f32 weight size (target
<= 3). Timings are never asserted in tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=2048,
    rms_norm_eps=1e-5,
    rope_theta=100000.0,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
    hidden_act="silu",
)
SEED = 0
#: 16 ids (SmolLM2's "The capital of France is ..." style ids, all inside the vocabulary).
PROMPT = [1, 504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 10328, 314, 8441, 30, 378]
THREADS = "2"

HELPER = r"""
import json, os, resource, subprocess, sys, time
steps = json.loads(sys.argv[1])
out = []
t_all = time.perf_counter()
for s in steps:
    t0 = time.perf_counter()
    stdout = open(s["stdout"], "wb") if s.get("stdout") else subprocess.DEVNULL
    p = subprocess.run(s["argv"], stdout=stdout, stderr=subprocess.PIPE, env=s["env"], cwd=s.get("cwd"))
    if s.get("stdout"):
        stdout.close()
    before = out[-1]["rss"] if out else 0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out.append({"name": s["name"], "wall": time.perf_counter() - t0, "code": p.returncode, "rss": rss,
                "stderr": p.stderr.decode(errors="replace")[-400:]})
scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
print(json.dumps({"steps": out, "wall": time.perf_counter() - t_all,
                  "peak_rss": max(s["rss"] for s in out) * scale}))
"""


def cache_root() -> Path:
    return Path(os.environ.get("PORTKIT_CACHE") or Path.home() / ".cache" / "portkit")


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def fixture_dir() -> Path:
    key = hashlib.sha256(
        json.dumps([SHAPE, SEED, "top-level rope_theta", _version("torch"), _version("transformers"), _version("safetensors")], sort_keys=True).encode()
    ).hexdigest()[:12]
    return cache_root() / "bench" / f"smollm2-135m-shape-s{SEED}-{key}"


def make_fixture(final: Path) -> None:
    """Run in a child process: seeded transformers init, saved f32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**SHAPE)).to(torch.float32).eval()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-bench-", dir=final.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        # transformers 5 writes rope_theta only inside rope_parameters, which candle 0.11.0 does
        # not read (PK101); the bench measures a healthy checkpoint, so write it where candle looks.
        cfg = json.loads((tmp / "config.json").read_text())
        cfg["rope_theta"] = SHAPE["rope_theta"]
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
        (tmp / "prompt.json").write_text(json.dumps({"ids": PROMPT}))
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def ensure_fixture() -> Path:
    d = fixture_dir()
    if not (d / "config.json").is_file():
        print(f"generating the SmolLM2-135M-shaped fixture into {d} (once) ...", file=sys.stderr)
        subprocess.run([sys.executable, __file__, "--make-fixture", str(d)], check=True)
    return d


def candle_example() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or cache_root() / "target")
    exe = target / "release" / "examples" / "logits_json"
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    print("building native/examples/logits_json.rs (cargo, release) ...", file=sys.stderr)
    subprocess.run(
        ["cargo", "build", "--release", "--example", "logits_json", "--no-default-features", "--quiet"],
        cwd=ROOT / "native",
        env=env,
        check=True,
    )
    return exe


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=THREADS, RAYON_NUM_THREADS=THREADS, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def measure(steps: list[dict]) -> dict:
    p = subprocess.run([sys.executable, "-c", HELPER, json.dumps(steps)], capture_output=True, text=True, check=True)
    res = json.loads(p.stdout)
    for s in res["steps"]:
        if s["code"] not in (0, 1):
            raise SystemExit(f"{s['name']} failed with exit {s['code']}: {s['stderr']}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--make-fixture", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.make_fixture:
        make_fixture(a.make_fixture)
        return 0

    d = ensure_fixture()
    exe = candle_example()
    weights = sum(p.stat().st_size for p in d.glob("*.safetensors"))
    ids = ",".join(map(str, PROMPT))
    work = Path(tempfile.mkdtemp(prefix="portkit-bench-"))
    env = _env()
    py = sys.executable
    baseline = [
        dict(name="transformers script", argv=[py, "-I", str(ROOT / "bench/baseline/llm_json.py"), str(d), ids, str(a.tokens), THREADS], env=env, stdout=str(work / "pt.json")),
        dict(name="candle program", argv=[str(exe), "cpu", str(d), ids, str(a.tokens)], env=env, stdout=str(work / "candle.json")),
        dict(name="compare script", argv=[py, "-I", str(ROOT / "bench/baseline/compare.py"), str(work / "pt.json"), str(work / "candle.json"), "1e-4"], env=env, stdout=str(work / "compare.txt")),
    ]
    verify_argv = [py, "-m", "portkit.cli", "verify", str(d), "--ids", ids, "--tokens", str(a.tokens), "--format", "json"]
    workflows = {
        "baseline": baseline,
        "verify": [dict(name="portkit verify", argv=verify_argv, env=env, stdout=str(work / "verify.json"))],
        # the same without the per-layer capture (a second load of the weights, after the runner is dropped)
        "verify --no-layers": [dict(name="portkit verify --no-layers", argv=verify_argv + ["--no-layers"], env=env, stdout=str(work / "verify-nl.json"))],
    }

    runs: dict[str, list[dict]] = {k: [] for k in workflows}
    for i in range(a.repeats):
        order = list(workflows) if i % 2 == 0 else list(reversed(workflows))
        for name in order:
            res = measure(workflows[name])
            runs[name].append(res)
            print(f"  run {i + 1} {name:<18} wall {res['wall']:6.2f} s  peak RSS {res['peak_rss'] / 2**20:7.1f} MiB", file=sys.stderr)

    best = {k: min(v, key=lambda r: r["wall"]) for k, v in runs.items()}
    peak = {k: max(r["peak_rss"] for r in v) for k, v in runs.items()}
    rep = json.loads((work / "verify.json").read_text())
    cmp_text = (work / "compare.txt").read_text().strip().splitlines()

    mib = 2**20
    print(f"fixture {d.name}: SmolLM2-135M shape, random seeded weights, f32 safetensors {weights / mib:.1f} MiB")
    print(f"prompt {len(PROMPT)} ids, {a.tokens} greedy tokens, {THREADS} threads; best wall of {a.repeats}, alternating order")
    print()
    print(f"{'workflow':<34}{'wall s':>9}{'peak RSS MiB':>15}")
    for s in best["baseline"]["steps"]:
        print(f"  {s['name']:<32}{s['wall']:>9.2f}{'':>15}")
    print(f"{'baseline (3 programs, sequential)':<34}{best['baseline']['wall']:>9.2f}{peak['baseline'] / mib:>15.1f}")
    print(f"{'portkit verify':<34}{best['verify']['wall']:>9.2f}{peak['verify'] / mib:>15.1f}")
    print(f"{'portkit verify --no-layers':<34}{best['verify --no-layers']['wall']:>9.2f}{peak['verify --no-layers'] / mib:>15.1f}")
    print()
    for name in ("verify", "verify --no-layers"):
        ratio = best[name]["wall"] / best["baseline"]["wall"]
        rss_x = peak[name] / weights
        print(f"{name:<19} / baseline wall time:  {ratio:.2f}x  (target < 1: {'met' if ratio < 1 else 'NOT met'})")
        print(f"{name:<19} peak RSS / f32 weights: {rss_x:.2f}x  (target <= 3: {'met' if rss_x <= 3 else 'NOT met'})")
    print(f"{'baseline':<19} peak RSS / f32 weights: {peak['baseline'] / weights:.2f}x")
    print()
    print(f"baseline compare: {cmp_text[-1] if cmp_text else '?'}")
    c = rep.get("comparison") or {}
    lp = c.get("last_position") or {}
    print(
        f"verify: {rep['verdict']} (exit {rep['exit_code']}); last position max|diff| {lp.get('max_abs_diff', float('nan')):.2e}; "
        f"{c.get('summary', '')}; in-process {rep['seconds']:.2f} s"
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
