"""`make demo`: candle 0.11.0 (portkit_native) next to transformers on a generated tiny Llama.

Run from the repository root (`python -m portkit.demo`): it uses the fixture generator in
`fixtures/`, which is part of the repository, not of the installed package.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from portkit.verify.candle import load_gguf, load_llama
from portkit.verify.compare import TOLERANCES, compare_greedy, compare_layers, compare_logits, compare_steps
from portkit.verify.reference import ReferenceModel

GREEDY_TOKENS = 8


def _best_of(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    sys.path.insert(0, str(Path.cwd()))
    from fixtures.cache import fixture_dir, gguf_file

    out = Console()
    f32 = TOLERANCES["f32"]
    with out.status("generating the fixture (transformers, seeded)..."):
        d = fixture_dir("healthy-tied")
        cfg = json.loads((d / "config.json").read_text())
        ids = json.loads((d / "prompt.json").read_text())["ids"]
    out.print(f"[bold]fixture[/] {d}")
    out.print(
        f"  {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, heads {cfg['num_attention_heads']}/"
        f"{cfg['num_key_value_heads']} (GQA), rope_theta {cfg['rope_theta']:g}, tied; prompt {len(ids)} ids"
    )
    with out.status("loading transformers (eager, f32, cpu) and candle (portkit_native, cpu, f32)..."):
        ref = ReferenceModel.load(d)
        cand = load_llama([d / "model.safetensors"], (d / "config.json").read_text())

    ok = True
    last = compare_logits(ref.last_logits(ids), cand.last_logits(ids), f32.logits_atol)
    steps = compare_steps(ref.all_logits(ids), cand.teacher_forced_logits(ids), near_tie=f32.near_tie, atol=f32.logits_atol)
    greedy = compare_greedy(ref.greedy(ids, GREEDY_TOKENS), cand.greedy(ids, GREEDY_TOKENS))
    layers = compare_layers(ref.capture(ids), cand.capture(ids), f32.layer_rtol)
    out.print("\n[bold]candle vs transformers[/] (f32 tolerance: logits 1e-4 absolute, layers 1e-5 relative)")
    out.print("  " + last.line("last pos"))
    out.print("  teacher-forced " + steps.line())
    out.print("  " + greedy.line() + f"  {greedy.ref}")
    table = Table("layer", "max|ref|", "max|diff|", "rel", "verdict", box=None, padding=(0, 2))
    for r in layers.rows:
        table.add_row(r.name, f"{r.max_abs_ref:.4g}", f"{r.max_abs_diff:.3e}", f"{r.rel:.2e}", "[red]over" if r.over else "ok")
    out.print(table)
    ok &= last.ok and steps.ok and greedy.ok and layers.ok

    perturbed = ref.last_logits(ids).copy()
    perturbed[0] += 1e-3
    control = compare_logits(perturbed, cand.last_logits(ids), f32.logits_atol)
    out.print("\n[bold]negative control[/] (reference logit 0 += 1e-3): " + control.line("logits"))
    ok &= not control.ok

    out.print("\n[bold]GGUF through candle's quantized_llama[/] (Q/K rows permuted as llama.cpp does)")
    ref_rows = ref.all_logits(ids)
    for qtype in ("f32", "q8_0"):
        with out.status(f"writing the {qtype} GGUF..."):
            g = load_gguf(gguf_file("healthy-tied", qtype=qtype))
        tol = TOLERANCES[qtype]
        last_g = compare_logits(ref_rows[-1], g.last_logits(ids), tol.logits_atol)
        steps_g = compare_steps(ref_rows, g.teacher_forced_logits(ids), near_tie=tol.near_tie, atol=tol.logits_atol)
        out.print(f"  {qtype:<5} " + last_g.line("last pos"))
        out.print(f"  {qtype:<5} teacher-forced " + steps_g.line())
        ok &= steps_g.ok and last_g.ok

    t_candle = _best_of(lambda: cand.last_logits(ids))
    t_ref = _best_of(lambda: ref.last_logits(ids))
    out.print(
        f"\n[bold]one last-position forward[/] ({len(ids)} ids, best of 5): candle {t_candle * 1e3:.2f} ms, "
        f"transformers {t_ref * 1e3:.2f} ms"
    )
    out.print("[green]demo: candle agrees with transformers[/]" if ok else "[red]demo: MISMATCH[/]")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
