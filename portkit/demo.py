"""`make demo`: candle 0.11.0 (portkit_native) next to transformers on generated tiny Llamas.

1. A healthy checkpoint: `portkit verify` agrees (last position, every layer, teacher-forced
   steps, greedy tokens), and the negative control (one reference logit + 1e-3) fails.
2. The same checkpoint as GGUF through candle's `quantized_llama` (f32, Q8_0).
3. The main job: a config saved by transformers 5 (`rope_theta` only inside
   `rope_parameters`). `portkit lint` flags it statically; `portkit verify` confirms it with
   candle's numbers, as written and with the fix.

Run from the repository root (`python -m portkit.demo`): it uses the fixture generator in
`fixtures/`, which is part of the repository, not of the installed package.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.rule import Rule


def main() -> int:
    sys.path.insert(0, str(Path.cwd()))
    # transformers in this process: the demo imports torch once for all its runs.
    os.environ.setdefault("PORTKIT_VERIFY_REFERENCE", "inprocess")
    from fixtures.cache import fixture_dir, gguf_file
    from fixtures.seams import reference_perturbed
    from portkit.verify.pipeline import VerifyOptions, verify
    from portkit.verify.report.text import render_text

    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True)
    t0 = time.perf_counter()
    ok = True

    with err.status("generating the fixtures (transformers, seeded) ..."):
        healthy = fixture_dir("healthy-tied")
        resaved = fixture_dir("rope-theta-in-rope-parameters")
        q8 = gguf_file("healthy-tied", qtype="q8_0")
    cfg = json.loads((healthy / "config.json").read_text())
    out.print(Rule("1. a healthy checkpoint: candle vs transformers"))
    out.print(
        f"[dim]fixture: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, heads "
        f"{cfg['num_attention_heads']}/{cfg['num_key_value_heads']} (GQA), rope_theta {cfg['rope_theta']:g}, tied[/]\n"
        f"[dim]$ portkit verify {healthy}[/]"
    )
    with err.status("verify: transformers and candle on the healthy fixture ..."):
        rep = verify(VerifyOptions(model_dir=healthy))
    render_text(rep, out)
    ok &= rep.exit_code == 0

    with err.status("negative control ..."):
        with reference_perturbed(1e-3):
            bad = verify(VerifyOptions(model_dir=healthy, lint=False))
    last = bad.comparison.last if bad.comparison else None
    out.print(
        "\n[bold]negative control[/] (one reference logit += 1e-3, same comparison path): "
        + (last.line("last pos") if last else "no numbers")
        + f"  -> exit {bad.exit_code}"
    )
    ok &= bad.exit_code == 1

    out.print(Rule("2. the same checkpoint as GGUF: candle's quantized_llama"))
    out.print(f"[dim]$ portkit verify {healthy} --gguf {q8.name}[/]")
    with err.status("verify: the Q8_0 GGUF ..."):
        g = verify(VerifyOptions(model_dir=healthy, gguf=q8))
    gs = g.gguf
    if gs is not None and gs.comparison is not None:
        from portkit.verify.report.text import comparison_lines

        out.print(
            f"tolerance {gs.tolerance.name}: judged by teacher-forced argmax; a flip under a top-2 margin of {gs.tolerance.near_tie:g} is a near tie"
        )
        for ln in comparison_lines(gs.comparison, g.reference.greedy, layers_note=None)[:3]:
            out.print("  " + ln)
    out.print(f"verdict: exit {g.exit_code}")
    ok &= g.exit_code == 0

    out.print(Rule("3. a config saved by transformers 5: lint finds it, verify proves it"))
    out.print(f"[dim]$ portkit lint {resaved}[/]")
    from portkit.cli import main as portkit_main

    sys.stdout.flush()
    lint_code = portkit_main(["lint", str(resaved)])
    sys.stdout.flush()
    ok &= lint_code == 1
    out.print(f"\n[dim]$ portkit verify {resaved}[/]")
    with err.status("verify: the transformers-5 config, as written and with the fix ..."):
        rv = verify(VerifyOptions(model_dir=resaved))
    render_text(rv, out, table=False)
    ok &= rv.exit_code == 1 and any(f.code == "PK101" and f.verdict == "CONFIRMED" for f in rv.findings)

    out.print(Rule())
    took = time.perf_counter() - t0
    out.print(
        f"[green]demo: candle agrees with transformers on the healthy checkpoint, and verify confirmed the "
        f"transformers-5 config's finding with numbers[/] ({took:.1f} s)"
        if ok
        else "[red]demo: something did not go as expected (see above)[/]"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
