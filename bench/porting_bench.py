"""Benchmark: `portkit reference` vs verify's own reference side, on the SmolLM2-135M shape.

    python bench/porting_bench.py [--repeats 3] [--tokens 8] [--streamed]

The model and the measuring harness are verify_bench's (30 layers, hidden 576, vocab 49152,
random seeded f32 weights generated once into `$PORTKIT_CACHE/bench/`; each workflow in its
own measuring process, peak RSS from `getrusage(RUSAGE_CHILDREN)`). On the same 16 ids and N
greedy tokens:

- verify's reference side as `portkit verify` runs it on a cache miss: the child
  `python -m portkit.verify.reference.child --serve` with its request (streamed transformers, one
  forward over the prompt and candle's N - 1 first greedy tokens, which are the reference's
  own here since the model is healthy; every layer of the prefill; arrays to an .npz);
- `portkit reference MODEL_DIR --out ref.safetensors --ids ... --tokens N` (auto: whole, the
  streamed loader's resident mode, since 135M fits: every layer loaded once and kept; prefill
  with every position's logits, N - 1 cached greedy steps on resident weights, safetensors with
  metadata);
- `portkit reference --tokens 1`: the prefill alone (no greedy steps after it), the same work
  as verify's one forward;
- with `--streamed`, also `--reference streamed` (what a model larger than memory gets: each
  greedy step streams every layer again), for information.

Printed: best wall of `--repeats` (alternating order), CPU seconds (user + system, the median
run: steadier than wall on a shared machine) and peak RSS of each, and the ratios against
verify's reference side (target <= 1). Timings are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verify_bench as vb  # noqa: E402  (the fixture and the measuring harness)


def measure_cpu(steps: list[dict]) -> dict:
    """`verify_bench.measure`, plus the CPU seconds of the measuring process and everything it ran."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = vb.measure(steps)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument(
        "--streamed",
        action="store_true",
        help="also time `--reference streamed` (about 2.5x: each greedy step streams every layer)",
    )
    a = ap.parse_args()

    d = vb.ensure_fixture()
    weights = sum(p.stat().st_size for p in d.glob("*.safetensors"))
    ids = ",".join(map(str, vb.PROMPT))
    work = Path(tempfile.mkdtemp(prefix="portkit-porting-bench-"))
    env = vb._env()
    py = sys.executable
    out = work / "ref.safetensors"
    reference = [
        py,
        "-m",
        "portkit.cli",
        "reference",
        str(d),
        "--out",
        str(out),
        "--ids",
        ids,
        "--tokens",
        str(a.tokens),
    ]
    subprocess.run(reference, env=env, check=True, capture_output=True)  # warm-up; its greedy tokens stand for candle's
    from portkit.porting.dumpfile import read_dump

    greedy = read_dump(out).tensors["greedy"].tolist()
    request = work / "request.json"
    request.write_text(
        json.dumps(
            {
                "model_dir": str(d),
                "files": [str(d / "model.safetensors")],
                "mode": "streamed",
                "prompt": vb.PROMPT,
                "forced": greedy,
                "tokens": a.tokens,
                "out": str(work / "verify-ref.npz"),
            }
        )
    )
    serve = f'exec "{py}" -m portkit.verify.reference.child --serve < "{request}"'
    workflows = {
        "verify reference side": [
            dict(name="reference child --serve", argv=["sh", "-c", serve], env=env, stdout=str(work / "refproc.json"))
        ],
        "portkit reference": [dict(name="reference", argv=reference, env=env, stdout=str(work / "reference.txt"))],
        # the prefill alone: what verify's reference side computes, less its forced positions
        "portkit reference --tokens 1": [
            dict(name="tokens 1", argv=reference[:-1] + ["1"], env=env, stdout=str(work / "one.txt"))
        ],
    }
    if a.streamed:
        workflows["reference --reference streamed"] = [
            dict(
                name="streamed",
                argv=reference + ["--reference", "streamed"],
                env=env,
                stdout=str(work / "streamed.txt"),
            )
        ]
    runs: dict[str, list[dict]] = {k: [] for k in workflows}
    for i in range(a.repeats):
        order = list(workflows) if i % 2 == 0 else list(reversed(workflows))
        for name in order:
            res = measure_cpu(workflows[name])
            runs[name].append(res)
            print(
                f"  run {i + 1} {name:<32} wall {res['wall']:6.2f} s  cpu {res['cpu']:6.2f} s  peak RSS "
                f"{res['peak_rss'] / 2**20:7.1f} MiB",
                file=sys.stderr,
            )
    served = json.loads((work / "refproc.json").read_text().strip().splitlines()[-1])
    if not served.get("ok"):
        raise SystemExit(f"refproc failed: {served}")

    best = {k: min(r["wall"] for r in v) for k, v in runs.items()}
    cpu = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_rss"] for r in v) for k, v in runs.items()}
    mib = 2**20
    print(f"fixture {d.name}: SmolLM2-135M shape, random seeded weights, f32 safetensors {weights / mib:.1f} MiB")
    print(
        f"prompt {len(vb.PROMPT)} ids, {a.tokens} greedy tokens, {vb.THREADS} threads; best wall and median CPU of "
        f"{a.repeats}, alternating order"
    )
    print()
    print(f"{'workflow':<34}{'wall s':>9}{'cpu s':>9}{'peak RSS MiB':>15}")
    for name in workflows:
        print(f"{name:<34}{best[name]:>9.2f}{cpu[name]:>9.2f}{peak[name] / mib:>15.1f}")
    print()
    base = "verify reference side"
    for name in [n for n in workflows if n != base]:
        wall, c, rss = best[name] / best[base], cpu[name] / cpu[base], peak[name] / peak[base]
        target = (
            f"  (target <= 1: {'met' if wall <= 1.0 and c <= 1.0 else 'NOT met'})"
            if name == "portkit reference"
            else ""
        )
        print(f"{name} / {base}: wall {wall:.2f}x, cpu {c:.2f}x, peak RSS {rss:.2f}x{target}")
    print(f"portkit reference: {(work / 'reference.txt').read_text().splitlines()[0]}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
