"""The margins of verify's measured floor on real weights (docs/measurements.md, "Floors").

    python bench/floor_margins.py [--threads 1,2,4] [--tokens 20] [--prompts N] [--markdown]

For every prompt of tests/real/corpus.py, on the fixed SmolLM2-135M-Instruct (fixtures.real),
at each thread count (RAYON_NUM_THREADS = OMP_NUM_THREADS, one process each, an empty
`$PORTKIT_CACHE` of its own so nothing computed at another count is reused):

- healthy: candle's distance from transformers in f64 in floors (the f32 reference's own
  distance) at the last position, the teacher-forced steps and the worst layer or sub-layer, and
  what the former constants (1e-4 logits, 1e-5 layers) would have said;
- planted: one reference logit + 1e-3 (the negative control), and one weight of layer 3 scaled by
  1 + 1e-3 on candle's side only (`model.layers.3.mlp.down_proj.weight`, the whole tensor): the
  ratio each reaches and the first bad layer/sub-layer.

Prints one line per prompt and a summary: the worst healthy ratio against the weakest planted one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCALED = "model.layers.3.mlp.down_proj.weight"


def _one_count(prompts: list[str], tokens: int, planted: int) -> list[dict]:
    """In this process (its thread count fixed by the environment): every prompt, healthy and planted."""
    sys.path.insert(0, str(ROOT))
    os.environ["PORTKIT_VERIFY_REFERENCE"] = "inprocess"
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from fixtures.real import smollm2
    from fixtures.seams import reference_perturbed
    from portkit.verify.candle import native as candle_native
    from portkit.verify.judge.floor import FACTOR
    from portkit.verify.pipeline import VerifyOptions, verify

    real = smollm2()
    scaled_dir = Path(tempfile.mkdtemp(prefix="portkit-scaled-"))
    tensors = load_file(str(real.fixed / "model.safetensors"))
    tensors[SCALED] = (tensors[SCALED].astype(np.float64) * (1 + 1e-3)).astype(np.float32)
    save_file(tensors, str(scaled_dir / "model.safetensors"), metadata={"format": "pt"})
    del tensors
    load_runner = candle_native.load_runner

    def scaled_runner(family, files, *a, **kw):  # candle's side only reads the scaled copy
        return load_runner(family, [scaled_dir / "model.safetensors"], *a, **kw)

    def summary(rep) -> dict:
        c = rep.comparison
        if c is None:
            return {"ok": False, "why": rep.run.failure.line() if rep.run.failure else "no comparison"}
        L = c.layers
        worst = (
            max((r for r in L.layer_rows if r.floor is not None), key=lambda r: r.floor.ratio, default=None)
            if L
            else None
        )
        worst_sub = (
            max((r.floor.ratio for r in L.rows if r.floor is not None and r not in L.layer_rows), default=None)
            if L
            else None
        )
        old_ok = (
            c.last.max_abs_diff <= 1e-4
            and c.steps.max_abs_diff <= 1e-4
            and (L is None or all(r.rel <= 1e-5 for r in L.layer_rows))
        )
        loc = c.localisation
        return {
            "ok": c.ok,
            "old_ok": bool(old_ok),
            "last": c.last.floor.ratio if c.last.floor else None,
            "steps": c.steps.floor.ratio if c.steps.floor else None,
            "layer": worst.floor.ratio if worst else None,
            "layer_at": worst.name if worst else None,
            "sublayer": worst_sub,
            "last_abs": c.last.max_abs_diff,
            "steps_abs": c.steps.max_abs_diff,
            "max_rel": L.max_rel if L else None,
            "first_bad": (loc.name if loc else None),
        }

    rows = []
    for i, p in enumerate(prompts):
        with tempfile.TemporaryDirectory(prefix="portkit-floor-") as cache:
            os.environ["PORTKIT_CACHE"] = cache
            opts = dict(model_dir=real.fixed, text=p, tokens=tokens, lint=False)
            healthy = summary(verify(VerifyOptions(**opts)))
            with reference_perturbed(1e-3):
                perturbed = summary(verify(VerifyOptions(**opts)))
            scaled = None
            if i < planted:  # a run of its own, uncached: the first `planted` prompts
                candle_native.load_runner = scaled_runner
                try:
                    scaled = summary(
                        verify(VerifyOptions(**{**opts, "cache": False}))
                    )  # candle's run cache keys on the files it was told
                finally:
                    candle_native.load_runner = load_runner
        rows.append({"prompt": p, "healthy": healthy, "perturbed": perturbed, "scaled": scaled, "factor": FACTOR})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def summarise(n: int, rows: list[dict]) -> str:
    """One thread count's line: the healthy runs' worst ratios against the planted faults' weakest."""

    def worst(key: str, which: str = "healthy") -> float:
        return max((r[which][key] or 0.0) for r in rows)

    planted = [r["scaled"] for r in rows if r["scaled"] is not None]
    pert = min(max(r["perturbed"]["last"] or 0, r["perturbed"]["steps"] or 0) for r in rows)
    scaled = min((max(s["last"] or 0, s["steps"] or 0, s["layer"] or 0) for s in planted), default=0.0)
    where = sorted({str(s["first_bad"]) for s in planted})
    return (
        f"threads {n}: {len(rows)} prompts, healthy MISMATCH {sum(not r['healthy']['ok'] for r in rows)} "
        f"(the former constants: {sum(not r['healthy']['old_ok'] for r in rows)}); worst healthy ratio: last position "
        f"{worst('last'):.2f}, steps {worst('steps'):.2f}, a layer {worst('layer'):.2f}, a sub-layer (reported only) "
        f"{worst('sublayer'):.2f}; +1e-3 logit caught {sum(not r['perturbed']['ok'] for r in rows)}/{len(rows)}, "
        f"weakest {pert:.1f}; {SCALED} x(1+1e-3) caught {sum(not s['ok'] for s in planted)}/{len(planted)}, weakest "
        f"{scaled:.1f}, first bad {', '.join(where)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=0, help="the first N prompts only (0: all)")
    ap.add_argument(
        "--planted",
        type=int,
        default=8,
        help="the weight-scale fault on the first N prompts (a full uncached run each)",
    )
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--summarise",
        nargs="+",
        metavar="FILE",
        help="summarise saved child outputs (NAME-THREADS.jsonl) instead of running",
    )
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.real.corpus import CORPUS

    prompts = CORPUS[: a.prompts] if a.prompts else CORPUS
    if a._child:
        _one_count(prompts, a.tokens, a.planted)
        return 0
    if a.summarise:
        table = {int(Path(f).stem.rsplit("-", 1)[-1]): _read(Path(f)) for f in a.summarise}
    else:
        table = {}
        for n in [int(x) for x in a.threads.split(",")]:
            env = dict(os.environ, RAYON_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n))
            cmd = [
                sys.executable,
                __file__,
                "--_child",
                "--tokens",
                str(a.tokens),
                "--prompts",
                str(a.prompts),
                "--planted",
                str(a.planted),
            ]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            table[n] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for n, rows in sorted(table.items()):
        print(("- " if a.markdown else "") + summarise(n, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
