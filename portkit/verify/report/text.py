"""A verify report as text (rich colour on a terminal, results on stdout); its JSON is
`portkit.verify.report.json_`."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from portkit.verify.embedding.report import EmbeddingReport
from portkit.verify.judge.checks import Tolerance, is_sublayer
from portkit.verify.judge.comparison import Comparison, fmt_tol
from portkit.verify.judge.floor import FACTOR, LAYER_FACTOR, OWN_FACTOR
from portkit.verify.pipeline import VerifyReport
from portkit.verify.report.embedding_lines import embedding_lines
from portkit.verify.report.section_lines import VERDICT_STYLE, paths_lines, tokens_lines
from portkit.verify.sections.gguf import GgufSection
from portkit.verify.sections.sampling import lines as sampling_lines
from portkit.verify.tokenizer_run import TokenizerReport


def tolerance_line(t: Tolerance, measured: bool = False) -> str:
    if t.logits_atol is not None and measured:
        return (
            f"measured in this run: within {FACTOR:g}x of transformers f32's own distance from transformers in f64 (a "
            f"layer {OWN_FACTOR:g}x on the candidate's own input, {LAYER_FACTOR:g}x on the error it adds where not; "
            "fallback: logits "
            f"{fmt_tol(t.logits_atol)}, layers {fmt_tol(t.layer_rtol or 0)} relative), near tie under {_g(t.near_tie)}"
        )
    if t.logits_atol is not None:
        s = f"logits {fmt_tol(t.logits_atol)} absolute"
        if t.layer_rtol is not None:
            s += f", layers {fmt_tol(t.layer_rtol)} relative"
        return s + f", near tie under {_g(t.near_tie)} (the fallback: no floor measured in this run)"
    return (
        f"judged by per-step argmax; a flip is a near tie when the reference's top-2 margin is under {_g(t.near_tie)}"
    )


def _g(x: float) -> str:
    return fmt_tol(x) if x < 0.01 else f"{x:g}"


def comparison_lines(
    c: Comparison, greedy_ref: list[int], layers_note: str | None = "not compared (--no-layers)"
) -> list[str]:
    out = []
    if c.problem:
        out.append(f"[red]{escape(c.problem)}[/]")
    if c.last is not None:
        verdict = "" if c.last.tolerance is None else ("  [green]OK[/]" if c.last.ok else "  [red]MISMATCH[/]")
        if math.isnan(c.last.max_abs_diff):
            verdict = "  [red]NON-FINITE[/]"
        tol = "reported" if c.last.tolerance is None else f"tol={fmt_tol(c.last.tolerance)} (fallback)"
        if c.last.floor is not None:
            tol = c.last.floor.phrase()
        out.append(
            f"last position   n={c.last.n}  max|diff|={c.last.max_abs_diff:.2e}  max|ref|={c.last.max_abs_ref:.3g}  "
            f"{tol}{verdict}"
        )
    out += _steps_lines(c) + _greedy_lines(c) + _layers_lines(c, layers_note)
    return out


def _steps_lines(c: Comparison) -> list[str]:
    """The teacher-forced steps' line and their flips."""
    out: list[str] = []
    if c.steps is not None:
        s = c.steps
        mark = "[green]OK[/]" if s.ok else ("[red]NON-FINITE[/]" if s.nonfinite_steps else "[red]MISMATCH[/]")
        line = (
            f"teacher-forced  {s.steps} steps  argmax {s.agree}/{s.steps}  max|diff|={s.max_abs_diff:.2e}  "
            f"median={s.median_abs_diff:.2e}"
        )
        if s.floor is not None:
            line += f"  {s.floor.phrase()}"
        elif s.atol is not None:
            line += f"  tol={fmt_tol(s.atol)} (fallback)"
        line += f"  {mark}"
        out.append(line)
        if s.nonfinite_steps:
            out.append(f"    [red]non-finite (NaN/inf) at steps {s.nonfinite_steps}[/]: no argmax to compare there")
        if s.disagreements:
            shown = s.disagreements[:12]
            flips = "  ".join(
                f"{d.step}:{d.ref_token}->{d.got_token} (margin {d.ref_margin:.2g}{', near tie' if d.near_tie else ''})"
                for d in shown
            )
            more = f"  ... {len(s.disagreements) - len(shown)} more" if len(s.disagreements) > len(shown) else ""
            out.append(f"    differing steps: {flips}{more}")
    return out


def _greedy_lines(c: Comparison) -> list[str]:
    """The greedy tokens: identical, or where they part."""
    out: list[str] = []
    if c.greedy is not None:
        g = c.greedy
        d = g.first_divergence
        if d is None and len(g.ref) < len(g.got):
            what = f"[yellow]identical as far as the reference decides ({len(g.ref)} of {len(g.got)} tokens)[/]"
        elif d is None:
            what = "[green]identical[/]"
        else:
            margin = f", reference margin {g.ref_margin:.2g}" if g.ref_margin is not None else ""
            what = (
                ("[yellow]" if g.at_near_tie else "[red]")
                + f"first divergence at token {d}{margin}"
                + (" (near tie)" if g.at_near_tie else "")
                + "[/]"
            )
        out.append(f"greedy          {max(len(g.ref), len(g.got))} tokens  {what}")
        if d is not None:
            out.append(f"    transformers {g.ref}")
            out.append(f"    candle       {g.got}")
        elif g.ref:
            out.append(f"    tokens {g.ref}")
    return out


def _layers_lines(c: Comparison, layers_note: str | None) -> list[str]:
    """The per-layer comparison's line, or why there is none."""
    out: list[str] = []
    if c.layers is None and c.last is not None and layers_note:
        out.append(f"layers          {layers_note}")
    if c.layers is not None:
        L = c.layers
        if L.first_nonfinite:
            out.append(
                f"layers          [red]non-finite from {L.first_nonfinite}[/] (max rel {L.max_rel:.2e} over the finite "
                "ones)"
            )
        elif not c.layers_judged:
            out.append(f"layers          max rel {L.max_rel:.2e} (reported; not judged below f32)")
        elif L.first_over:
            row = L.row(L.first_over)
            assert row is not None
            # the named row's own number, not the table's largest (a later row's, usually logits)
            if row.floor is not None:
                out.append(
                    f"layers          [red]first layer out of its floor: {L.first_over}[/] (rel {row.rel:.2e}; "
                    f"{row.floor.phrase()})"
                )
            else:
                out.append(
                    f"layers          [red]first layer over {fmt_tol(L.rtol)} (fallback): {L.first_over}[/] (rel "
                    f"{row.rel:.2e})"
                )
            out += _localisation_lines(c)
        elif L.measured:
            measured = [r for r in L.layer_rows if r.floor is not None and not r.nonfinite]
            top = max(measured, key=lambda r: r.floor.ratio / r.floor.factor if r.floor is not None else 0.0)
            assert top.floor is not None
            out.append(
                f"layers          {len(measured)} values against transformers in f64: nearest its bound "
                f"{top.floor.ratio:.2g}x its floor at {top.name} "
                f"(candle {top.floor.candle:.2e}, transformers f32 {top.floor.reference:.2e}; bound "
                f"{top.floor.factor:g}x)  [green]OK[/]"
            )
        else:
            worst = max(L.layer_rows, key=lambda r: r.rel).name if L.layer_rows else "-"
            out.append(
                f"layers          max rel {L.max_rel:.2e} at {worst}; none over {fmt_tol(L.rtol)} (fallback)  "
                "[green]OK[/]"
            )
            subs = [r for r in L.rows if is_sublayer(r.name) and not r.nonfinite]
            if subs:
                top = max(subs, key=lambda r: r.rel)
                out.append(f"    {len(subs)} sub-layer values: max rel {top.rel:.2e} at {top.name}")
    return out


def _localisation_lines(c: Comparison) -> list[str]:
    loc = c.localisation
    if loc is None:
        return []
    out = []
    if loc.name != loc.layer:
        row = c.layers.row(loc.name) if c.layers is not None else None
        measured = f"; {row.floor.phrase()}" if row is not None and row.floor is not None else ""
        out.append(f"    first bad sub-layer: [red]{loc.name}[/] (rel {loc.rel:.2e}{measured})")
    if loc.per_position:
        out.append(f"    {loc.name} per position: {loc.position_line()}")
    out.append(f"    diagnosis: {escape(loc.diagnosis)}")
    return out


def _explanation_line(e: Any) -> str:
    colour = "green" if e.explained else "red"
    return f"[{colour}]explanation[/]: {escape(e.summary)}"


def layer_table(c: Comparison) -> Table:
    """The values between the layers, and the sub-layers of the layer the localisation names
    (every sub-layer row is in the JSON)."""
    L = c.layers
    assert L is not None
    inside = c.localisation.layer + "." if c.localisation is not None else None
    rows = [r for r in L.rows if not is_sublayer(r.name) or (inside and r.name.startswith(inside))]
    # one space between columns when sub-layer names are shown: the longest
    # (layer.NN.post_feedforward_layernorm) still fits 80 columns with every number
    narrow = any(is_sublayer(r.name) for r in rows)
    t = Table(box=None, padding=(0, 1 if narrow else 2), show_edge=False)
    t.add_column("name", no_wrap=True, min_width=max((len(r.name) for r in rows), default=4))
    for head in ("max|ref|", "max|diff|", "rel", ""):
        t.add_column(head, no_wrap=True)
    for r in rows:
        over = r.over and c.layers_judged
        mark = "[red]over[/]" if over else (f"[red]non-finite ({r.nonfinite})[/]" if r.nonfinite else "")
        t.add_row(r.name, f"{r.max_abs_ref:.4g}", f"{r.max_abs_diff:.3e}", f"{r.rel:.2e}", mark)
    return t


def _finding_lines(findings: list) -> list[str]:
    out = []
    for f in findings:
        style = VERDICT_STYLE[f.verdict]
        out.append(f"  [bold]{f.code}[/] {f.name}  [{style}]{f.verdict}[/]  [dim]({f.probe_kind})[/]")
        out.append(f"      {escape(f.message)}")
        out.append(f"      evidence: {escape(f.evidence)}")
    return out


#: where transformers ran (`ReferenceSession.plan`), as the run-plan line says it
_TRANSFORMERS_RAN = {
    "a child process, started first": "transformers in a child process, started first",
    "this process": "transformers in this process",
    "not run (every answer from the caches)": "transformers not run: every answer came from the caches",
}


def _plan_line(plan: dict[str, Any]) -> str:
    t = plan["threads"]
    torch = f", {t['transformers']} thread{'s' if t['transformers'] != 1 else ''}" if t.get("transformers") else ""
    where = _TRANSFORMERS_RAN.get(plan["transformers"], f"transformers: {plan['transformers']}")
    quantized = t.get("candle_quantized")
    q = f" ({quantized} for quantized matmuls)" if quantized and quantized != t["candle"] else ""
    line = f"run plan: candle {t['candle']} thread{'s' if t['candle'] != 1 else ''}{q}; {where}{torch}"
    return line + (f"; {plan['overlap']}" if plan.get("overlap") not in (None, "none") else "")


def render_text(rep: VerifyReport | TokenizerReport | EmbeddingReport, console: Console, *, table: bool = True) -> None:
    if isinstance(rep, TokenizerReport):  # tokenizer files only
        _render_tokenizer_report(rep, console)
        return
    if isinstance(rep, EmbeddingReport):  # an encoder and its sentence-transformers pipeline
        for ln in embedding_lines(rep):
            console.print(ln)
        return
    p = console.print
    _render_header(rep, p)
    if rep.tokenizer is not None:
        p("")
        for ln in tokens_lines(rep.tokenizer):
            p(ln)
        for ln in _finding_lines(rep.tokenizer.findings):
            p(ln)
    p("")
    p("[bold]candle vs transformers[/]")
    if rep.run.failure is not None:
        f = rep.run.failure
        p(f"  [red]{escape(f.line())}[/]")
        rest = f.message.splitlines()[1:4]
        for ln in rest:
            p(f"    {escape(ln)}")
    if rep.comparison is not None:
        for ln in comparison_lines(rep.comparison, rep.reference.greedy, layers_note=rep.layers_note):
            p("  " + ln)
        if table and rep.comparison.layers is not None:
            p("")
            console.print(layer_table(rep.comparison), style=None)
    if rep.explanation is not None:
        p(f"  {_explanation_line(rep.explanation)}")
    gs = rep.greedy_stop
    if gs is not None and gs.get("stopped_at") is not None:
        p(
            f"  greedy stops at token {gs['stopped_at']} ({gs['token']}): `generate()` stops on {gs['eos_token_ids']} "
            f"({gs['source']}); compared up to there"
        )
    if rep.plot is not None:
        p(f"  per-layer plot: {escape(str(rep.plot))}")
    p("")
    _render_findings(rep, p)
    for g in rep.ggufs:
        _render_gguf(g, rep, console)
    if len(rep.ggufs) > 1:
        _render_gguf_summary(rep, p)
    if rep.paths is not None:
        for ln in paths_lines(rep.paths):
            p(ln)
    if rep.sampling is not None:
        p("")
        for ln in sampling_lines(rep.sampling):
            p(escape(ln))
        for ln in _finding_lines(rep.sampling.findings):
            p(ln)
    if rep.nonfinite is not None:
        p("")
        p(f"[bold red]non-finite[/]: {escape(rep.nonfinite.line())}")
    p("")
    word, line = rep.verdict()
    colour = "green" if rep.exit_code == 0 else "red"
    p(f"[bold {colour}]verdict: {escape(line)}[/] (exit {rep.exit_code})")


def _render_header(rep: VerifyReport, p: Any) -> None:
    """What ran against what, the plan, the prompt and the tolerance."""
    o = rep.options
    v = rep.versions
    p(f"[bold]portkit verify[/] {escape(str(rep.model.root))}")
    p(
        f"  candle {v.get('candle')} `{rep.family}` (portkit_native, {o.device}, "
        f"{o.dtype}{', from the cache' if rep.run.source == 'cache' else ''}) vs transformers {v.get('transformers')} "
        f"(eager, f32, cpu, {rep.reference.mode}{', from the cache' if rep.reference.source == 'cache' else ''}; torch "
        f"{v.get('torch')})"
    )
    if rep.run_plan is not None:
        p(f"  {escape(_plan_line(rep.run_plan))}")
    p(f"  prompt: {escape(rep.prompt.describe())}")
    cids = rep.prompt.candle_ids
    if cids is not None and tuple(cids) != tuple(rep.prompt.ids):
        head = " ".join(str(i) for i in cids[:12]) + (" ..." if len(cids) > 12 else "")
        p(
            f"  [yellow]candle's own ids for this text differ ({len(cids)} ids): {head}; both sides run transformers' "
            "ids above[/]"
        )
    p(
        f"  tolerance {rep.tolerance.name}: "
        f"{tolerance_line(rep.tolerance, rep.comparison is not None and rep.comparison.measured)}"
    )
    runs = rep.candle_runs
    if runs["cached"]:
        p(
            f"  candle: {runs['cached']} of {runs['total']} run{'s' if runs['total'] != 1 else ''} read from the cache "
            "(an identical earlier run: same wheel build, machine, checkpoint and inputs; --no-cache runs candle again)"
        )


def _render_findings(rep: VerifyReport, p: Any) -> None:
    """The checkpoint's findings, with lint's count (the tokens section's are above)."""
    n = len(rep.findings)
    head = "[bold]findings[/]"
    if rep.lint_note:
        p(f"{head}  [yellow]{escape(rep.lint_note)}[/]")
    else:
        tok = len(rep.tokenizer.findings) if rep.tokenizer is not None else 0
        sampled = len(rep.sampling.findings) if rep.sampling is not None else 0
        p(
            f"{head} (portkit lint: {n}"
            + (f"; {tok} tokenizer findings judged in the tokens section above" if tok else "")
            + (
                f"; {sampled} sampling finding{'s' if sampled != 1 else ''} judged in the sampling section below"
                if sampled
                else ""
            )
            + ")"
        )
        if not rep.findings:
            p("  none")
    for ln in _finding_lines(rep.findings):
        p(ln)


def gguf_summary_rows(rep: VerifyReport) -> list[list[str]]:
    """One row per GGUF: file, weight types, last-position distance, teacher-forced argmax, first
    greedy divergence, confirmed findings, verdict."""
    rows = []
    for g in rep.ggufs:
        c = g.comparison
        last = f"{c.last.max_abs_diff:.3g}" if c is not None and c.last is not None else "-"
        steps = f"{c.steps.agree}/{c.steps.steps}" if c is not None and c.steps is not None else "-"
        fork = (
            "-"
            if c is None or c.greedy is None
            else "none"
            if c.greedy.first_divergence is None
            else str(c.greedy.first_divergence)
        )
        confirmed = [f.code for f in g.findings if f.confirmed]
        verdict = "failed" if g.run.failure is not None else "agrees" if g.ok else "differs"
        types = ",".join(sorted(t for t in g.weight_types if t != "F32")) or "F32"
        rows.append([g.path.name, types, last, steps, fork, ", ".join(dict.fromkeys(confirmed)) or "-", verdict])
    return rows


def _render_gguf_summary(rep: VerifyReport, p: Any) -> None:
    head = [
        "file",
        "quant types",
        "last max|diff|",
        "teacher-forced argmax",
        "first greedy divergence",
        "confirmed",
        "verdict",
    ]
    rows = gguf_summary_rows(rep)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    p("")
    p(f"[bold]{len(rows)} GGUFs against the same reference[/]")
    for r in [head, *rows]:
        p("  " + escape("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=False)).rstrip()))


def _render_gguf(g: GgufSection, rep: VerifyReport, console: Console) -> None:
    p = console.print
    p("")
    types = ", ".join(f"{k} x{n}" for k, n in sorted(g.weight_types.items()))
    p(
        f"[bold]GGUF vs transformers[/] {escape(str(g.path))} (candle "
        f"{g.loader}{', from the cache' if g.run.source == 'cache' else ''}; weights {types})"
    )
    p(
        f"  tolerance {g.tolerance.name}: "
        f"{tolerance_line(g.tolerance, g.comparison is not None and g.comparison.measured)}"
    )
    if g.run.failure is not None:
        p(f"  [red]{escape(g.run.failure.line())}[/]")
    if g.comparison is not None:
        for ln in comparison_lines(g.comparison, rep.reference.greedy, layers_note=None):
            p("  " + ln)
    if g.explanation is not None:
        p(f"  {_explanation_line(g.explanation)}")
    for d in g.diagnosis:
        p(f"  diagnosis: {escape(d)}")
    if g.findings:
        p(f"  findings on the GGUF (portkit lint: {len(g.findings)})")
        for ln in _finding_lines(g.findings):
            p("  " + ln)


def _render_tokenizer_report(rep: Any, console: Console) -> None:
    """verify on tokenizer files alone: the tokenizer section, its findings, the verdict."""

    p = console.print
    p(f"[bold]portkit verify[/] {escape(str(rep.options.model_dir))}")
    p(
        f"  tokenizers crate {rep.versions.get('tokenizers crate')} (portkit_native) vs transformers "
        f"{rep.versions.get('transformers')}"
    )
    p("")
    for ln in tokens_lines(rep.section):
        p(ln)
    p("")
    if rep.lint_note is None:
        p(f"[bold]findings[/] (portkit lint: {len(rep.section.findings)})")
        if not rep.section.findings:
            p("  none")
    else:
        p(f"[bold]findings[/]  [yellow]{escape(rep.lint_note)}[/]")
    for ln in _finding_lines(rep.section.findings):
        p(ln)
    p("")
    p("[yellow]forward: skipped (no model to run: tokenizer files only)[/]")
    _word, line = rep.verdict()
    colour = "green" if rep.exit_code == 0 else "red"
    p(f"[bold {colour}]verdict: {escape(line)}[/] (exit {rep.exit_code})")
