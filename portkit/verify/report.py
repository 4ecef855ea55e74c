"""A `VerifyReport` as text (rich, results on stdout) or JSON (`schemas/verify-report.schema.json`)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from portkit.verify.compare import GreedyCheck, LayerCheck, LogitsCheck, StepCheck, Tolerance, is_sublayer
from portkit.verify import confirm as C
from portkit.verify.engine import VerifyReport
from portkit.verify.gguf_section import GgufSection
from portkit.verify.runs import Comparison, RunOutputs, fmt_tol

SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- JSON


def _num(x: float | None) -> float | str | None:
    """JSON has no NaN/inf: they become strings."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _tol_json(t: Tolerance) -> dict[str, Any]:
    return {"name": t.name, "logits_atol": t.logits_atol, "layer_rtol": t.layer_rtol, "near_tie": t.near_tie, "reason": t.reason}


def _last_json(c: LogitsCheck) -> dict[str, Any]:
    return {
        "n": c.n,
        "max_abs_diff": _num(c.max_abs_diff),
        "max_abs_ref": _num(c.max_abs_ref),
        "worst_index": c.worst_index,
        "tolerance": c.tolerance,
        "ok": c.ok,
    }


def _steps_json(c: StepCheck) -> dict[str, Any]:
    return {
        "steps": c.steps,
        "argmax_agree": c.agree,
        "max_abs_diff": _num(c.max_abs_diff),
        "median_abs_diff": _num(c.median_abs_diff),
        "max_abs_ref": _num(c.max_abs_ref),
        "near_tie": c.near_tie,
        "tolerance": c.atol,
        "nonfinite_steps": list(c.nonfinite_steps),
        "disagreements": [
            {"step": d.step, "ref_token": d.ref_token, "got_token": d.got_token, "ref_margin": _num(d.ref_margin), "near_tie": d.near_tie}
            for d in c.disagreements
        ],
        "ok": c.ok,
    }


def _greedy_json(c: GreedyCheck) -> dict[str, Any]:
    return {
        "reference": c.ref,
        "candle": c.got,
        "first_divergence": c.first_divergence,
        "ref_margin": _num(c.ref_margin),
        "at_near_tie": c.at_near_tie,
        "ok": c.ok,
    }


def _layers_json(c: LayerCheck, judged: bool) -> dict[str, Any]:
    return {
        "rtol": c.rtol if judged else None,
        "judged": judged,
        "first_over": c.first_over if judged else None,
        "max_rel": _num(c.max_rel),
        "rows": [
            {"name": r.name, "max_abs_ref": _num(r.max_abs_ref), "max_abs_diff": _num(r.max_abs_diff), "rel": _num(r.rel), "over": r.over and judged, "nonfinite": r.nonfinite}
            for r in c.rows
        ],
        "ok": c.ok or not judged,
    }


def _cmp_json(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "ok": c.ok,
        "summary": c.headline(),
        "problem": c.problem,
        "last_position": _last_json(c.last) if c.last else None,
        "teacher_forced": _steps_json(c.steps) if c.steps else None,
        "greedy": _greedy_json(c.greedy) if c.greedy else None,
        "layers": _layers_json(c.layers, c.layers_judged) if c.layers else None,
        "localisation": c.localisation.to_json() if c.localisation else None,
    }


def _run_json(r: RunOutputs) -> dict[str, Any]:
    return {
        "status": "ok" if r.failure is None else "failed",
        "failure": r.failure.to_json() if r.failure else None,
        "seconds": round(r.seconds, 4),
        "source": r.source,
    }


def _gguf_json(g: GgufSection) -> dict[str, Any]:
    return {
        "path": str(g.path),
        "loader": g.loader,
        "weight_types": g.weight_types,
        "tolerance": _tol_json(g.tolerance),
        "run": _run_json(g.run),
        "comparison": _cmp_json(g.comparison),
        "findings": [f.to_json() for f in g.findings],
        "diagnosis": g.diagnosis,
        "explanation": g.explanation.to_json() if g.explanation is not None else None,
        "ok": g.ok,
    }


def _clean(v: Any) -> Any:
    """Strict JSON: non-finite floats become strings, numpy scalars plain numbers."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float) or hasattr(v, "__float__"):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        if hasattr(v, "dtype") and getattr(v.dtype, "kind", "f") in "iu":
            return int(v)
        return _num(f)
    return str(v)


def _prompt_json(prompt: Any) -> dict[str, Any]:
    out = {"ids": list(prompt.ids), "source": prompt.source, "text": prompt.text}
    if prompt.candle_ids is not None:  # a text prompt: the tokenizers crate's own ids beside transformers'
        out["candle_ids"] = list(prompt.candle_ids)
    return out


def to_json(rep: VerifyReport) -> dict[str, Any]:
    if not isinstance(rep, VerifyReport):  # tokenizer files only: portkit.verify.tokens.TokenizerReport
        return _clean(rep.to_json())
    return _clean(_to_json(rep))


def _to_json(rep: VerifyReport) -> dict[str, Any]:
    o = rep.options
    return {
        "schema_version": SCHEMA_VERSION,
        "model_dir": str(rep.model.root),
        "family": rep.family,
        "device": o.device,
        "dtype": o.dtype,
        "versions": rep.versions,
        "reference": {
            "runtime": "transformers",
            "attn_implementation": "eager",
            "dtype": "f32",
            "device": "cpu",
            "mode": rep.reference.mode,
            "source": rep.reference.source,
            "forced": rep.reference.forced,
        },
        "prompt": _prompt_json(rep.prompt),
        "tokenizer": rep.tokenizer.to_json() if rep.tokenizer is not None else None,
        "greedy_stop": rep.greedy_stop,
        "tokens": o.tokens,
        "tolerance": _tol_json(rep.tolerance),
        "candle": _run_json(rep.run),
        "comparison": _cmp_json(rep.comparison),
        "lint": {"ran": rep.lint_note is None, "note": rep.lint_note,
                 "findings": len(rep.findings) + (len(rep.gguf.findings) if rep.gguf else 0) + (len(rep.paths.findings) if rep.paths else 0)},
        "findings": [f.to_json() for f in rep.findings],
        "explanation": rep.explanation.to_json() if rep.explanation is not None else None,
        "gguf": _gguf_json(rep.gguf) if rep.gguf else None,
        "plot": str(rep.plot) if rep.plot else None,
        "nonfinite": rep.nonfinite.to_json() if rep.nonfinite is not None else None,
        "verdict": _verdict(rep)[0],
        "exit_code": rep.exit_code,
        "seconds": round(rep.seconds, 3),
        "timings": rep.timings,
        "candle_runs": rep.candle_runs,
        "run_plan": rep.run_plan,
        "reference_runs": rep.reference_runs,
        # only with --turns or --batch: the plain report keeps its keys
        **({"paths": rep.paths.to_json()} if rep.paths is not None else {}),
    }


def _why(explanation: Any) -> str:
    """": explained by PK413 (...)" / ": unexplained: first bad layer.3 at layer.3.mlp (...)"."""
    return f": {explanation.summary}" if explanation is not None else ""


def _verdict(rep: VerifyReport) -> tuple[str, str]:
    """(machine word, human line)."""
    confirmed = rep.confirmed
    if rep.nonfinite is not None:
        return "non-finite", "NON-FINITE: " + rep.nonfinite.line() + " (not a candle-vs-transformers difference)"
    if rep.exit_code == 0:
        return "agree", "candle agrees with transformers" + (" (the HF checkpoint and the GGUF)" if rep.gguf else "") + C.both_alike(confirmed)
    bits = []
    if rep.tokenizer is not None and not rep.tokenizer.ok:
        t = rep.tokenizer
        if t.crate_error:
            bits.append("the tokenizers crate cannot load tokenizer.json")
        elif t.differing:
            bits.append(f"candle's tokenizer differs ({len(t.differing)} of {len(t.encodes)} encodes)")
        elif t.decode_differs:
            bits.append(f"candle's tokenizer decodes differently ({len(t.decode_differs)} of {t.decodes} texts)")
        if t.templates is not None and not t.templates.ok:
            bits.append("the chat template renders otherwise in " + ", ".join(e for e in t.templates.environments if t.templates.differing(e)))
    if rep.run.failure is not None:
        bits.append("candle failed" + _why(rep.explanation))
    elif not rep.candle_ok:
        bits.append("candle differs from transformers" + _why(rep.explanation))
    if rep.gguf is not None and not rep.gguf.ok:
        bits.append(("the GGUF differs from transformers" if rep.gguf.run.failure is None else "the GGUF failed in candle") + _why(rep.gguf.explanation))
    if rep.paths is not None:
        from portkit.verify.paths import TITLES

        bits += [f"the {TITLES[c.path.name]} {'failed in' if c.path.run.failure else 'differs from transformers in'} {s.subject}" for s in rep.paths.sections for c in s.checks if not c.ok]
    if confirmed:
        bits.append(f"{len(confirmed)} finding{'s' if len(confirmed) != 1 else ''} confirmed")
    return "mismatch", "MISMATCH: " + "; ".join(bits)


# --------------------------------------------------------------------------- text


def _tol_line(t: Tolerance) -> str:
    if t.logits_atol is not None:
        s = f"logits {fmt_tol(t.logits_atol)} absolute"
        if t.layer_rtol is not None:
            s += f", layers {fmt_tol(t.layer_rtol)} relative"
        return s + f", near tie under {_g(t.near_tie)}"
    return f"judged by per-step argmax; a flip is a near tie when the reference's top-2 margin is under {_g(t.near_tie)}"


def _g(x: float) -> str:
    return fmt_tol(x) if x < 0.01 else f"{x:g}"


def _comparison_lines(c: Comparison, greedy_ref: list[int], layers_note: str | None = "not compared (--no-layers)") -> list[str]:
    out = []
    if c.problem:
        out.append(f"[red]{escape(c.problem)}[/]")
    if c.last is not None:
        verdict = "" if c.last.tolerance is None else ("  [green]OK[/]" if c.last.ok else "  [red]MISMATCH[/]")
        if math.isnan(c.last.max_abs_diff):
            verdict = "  [red]NON-FINITE[/]"
        tol = "reported" if c.last.tolerance is None else f"tol={fmt_tol(c.last.tolerance)}"
        out.append(
            f"last position   n={c.last.n}  max|diff|={c.last.max_abs_diff:.2e}  max|ref|={c.last.max_abs_ref:.3g}  {tol}{verdict}"
        )
    if c.steps is not None:
        s = c.steps
        mark = "[green]OK[/]" if s.ok else ("[red]NON-FINITE[/]" if s.nonfinite_steps else "[red]MISMATCH[/]")
        line = f"teacher-forced  {s.steps} steps  argmax {s.agree}/{s.steps}  max|diff|={s.max_abs_diff:.2e}  median={s.median_abs_diff:.2e}  {mark}"
        out.append(line)
        if s.nonfinite_steps:
            out.append(f"    [red]non-finite (NaN/inf) at steps {s.nonfinite_steps}[/]: no argmax to compare there")
        if s.disagreements:
            shown = s.disagreements[:12]
            flips = "  ".join(
                f"{d.step}:{d.ref_token}->{d.got_token} (margin {d.ref_margin:.2g}{', near tie' if d.near_tie else ''})" for d in shown
            )
            more = f"  ... {len(s.disagreements) - len(shown)} more" if len(s.disagreements) > len(shown) else ""
            out.append(f"    differing steps: {flips}{more}")
    if c.greedy is not None:
        g = c.greedy
        d = g.first_divergence
        if d is None and len(g.ref) < len(g.got):
            what = f"[yellow]identical as far as the reference decides ({len(g.ref)} of {len(g.got)} tokens)[/]"
        elif d is None:
            what = "[green]identical[/]"
        else:
            margin = f", reference margin {g.ref_margin:.2g}" if g.ref_margin is not None else ""
            what = ("[yellow]" if g.at_near_tie else "[red]") + f"first divergence at token {d}{margin}" + (" (near tie)" if g.at_near_tie else "") + "[/]"
        out.append(f"greedy          {max(len(g.ref), len(g.got))} tokens  {what}")
        if d is not None:
            out.append(f"    transformers {g.ref}")
            out.append(f"    candle       {g.got}")
        elif g.ref:
            out.append(f"    tokens {g.ref}")
    if c.layers is None and c.last is not None and layers_note:
        out.append(f"layers          {layers_note}")
    if c.layers is not None:
        L = c.layers
        if L.first_nonfinite:
            out.append(f"layers          [red]non-finite from {L.first_nonfinite}[/] (max rel {L.max_rel:.2e} over the finite ones)")
        elif not c.layers_judged:
            out.append(f"layers          max rel {L.max_rel:.2e} (reported; not judged below f32)")
        elif L.first_over:
            row = L.row(L.first_over)
            assert row is not None
            # the named row's own number, not the table's largest (a later row's, usually logits)
            out.append(f"layers          [red]first layer over {fmt_tol(L.rtol)}: {L.first_over}[/] (rel {row.rel:.2e})")
            out += _localisation_lines(c)
        else:
            worst = max(L.layer_rows, key=lambda r: r.rel).name if L.layer_rows else "-"
            out.append(f"layers          max rel {L.max_rel:.2e} at {worst}; none over {fmt_tol(L.rtol)}  [green]OK[/]")
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
        out.append(f"    first bad sub-layer: [red]{loc.name}[/] (rel {loc.rel:.2e})")
    if loc.per_position:
        out.append(f"    {loc.name} per position: {loc.position_line()}")
    out.append(f"    diagnosis: {escape(loc.diagnosis)}")
    return out


def _explanation_line(e: Any) -> str:
    colour = "green" if e.explained else "red"
    return f"[{colour}]explanation[/]: {escape(e.summary)}"


def _layer_table(c: Comparison) -> Table:
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


_VERDICT_STYLE = {"CONFIRMED": "bold red", "CRASH-CONFIRMED": "bold red", "NOT-REPRODUCED": "yellow", "NOT-REACHED": "dim", "NOT-PROBED": "dim"}


def _finding_lines(findings: list) -> list[str]:
    out = []
    for f in findings:
        style = _VERDICT_STYLE[f.verdict]
        out.append(f"  [bold]{f.code}[/] {f.name}  [{style}]{f.verdict}[/]  [dim]({f.probe_kind})[/]")
        out.append(f"      {escape(f.message)}")
        out.append(f"      evidence: {escape(f.evidence)}")
    return out


def _plan_line(plan: dict[str, Any]) -> str:
    t = plan["threads"]
    torch = f", {t['transformers']} thread{'s' if t['transformers'] != 1 else ''}" if t.get("transformers") else ""
    line = f"run plan: candle {t['candle']} thread{'s' if t['candle'] != 1 else ''}; transformers in {plan['transformers']}{torch}"
    return line + (f"; {plan['overlap']}" if plan.get("overlap") not in (None, "none") else "")


def render_text(rep: VerifyReport, console: Console, *, table: bool = True) -> None:
    if not isinstance(rep, VerifyReport):  # tokenizer files only: portkit.verify.tokens.TokenizerReport
        _render_tokenizer_report(rep, console)
        return
    o = rep.options
    v = rep.versions
    p = console.print
    p(f"[bold]portkit verify[/] {escape(str(rep.model.root))}")
    p(
        f"  candle {v.get('candle')} `{rep.family}` (portkit_native, {o.device}, {o.dtype}{', from the cache' if rep.run.source == 'cache' else ''}) "
        f"vs transformers {v.get('transformers')} "
        f"(eager, f32, cpu, {rep.reference.mode}{', from the cache' if rep.reference.source == 'cache' else ''}; torch {v.get('torch')})"
    )
    if rep.run_plan is not None:
        p(f"  {escape(_plan_line(rep.run_plan))}")
    p(f"  prompt: {escape(rep.prompt.describe())}")
    cids = rep.prompt.candle_ids
    if cids is not None and tuple(cids) != tuple(rep.prompt.ids):
        head = " ".join(str(i) for i in cids[:12]) + (" ..." if len(cids) > 12 else "")
        p(f"  [yellow]candle's own ids for this text differ ({len(cids)} ids): {head}; both sides run transformers' ids above[/]")
    p(f"  tolerance {rep.tolerance.name}: {_tol_line(rep.tolerance)}")
    runs = rep.candle_runs
    if runs["cached"]:
        p(
            f"  candle: {runs['cached']} of {runs['total']} run{'s' if runs['total'] != 1 else ''} read from the cache "
            "(an identical earlier run: same wheel build, machine, checkpoint and inputs; --no-cache runs candle again)"
        )
    if rep.tokenizer is not None:
        from portkit.verify.tokens import text_lines

        p("")
        for ln in text_lines(rep.tokenizer):
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
        for ln in _comparison_lines(rep.comparison, rep.reference.greedy, layers_note=rep.layers_note):
            p("  " + ln)
        if table and rep.comparison.layers is not None:
            p("")
            console.print(_layer_table(rep.comparison), style=None)
    if rep.explanation is not None:
        p(f"  {_explanation_line(rep.explanation)}")
    gs = rep.greedy_stop
    if gs is not None and gs.get("stopped_at") is not None:
        p(f"  greedy stops at token {gs['stopped_at']} ({gs['token']}): `generate()` stops on {gs['eos_token_ids']} ({gs['source']}); compared up to there")
    if rep.plot is not None:
        p(f"  per-layer plot: {escape(str(rep.plot))}")
    p("")
    n = len(rep.findings)
    head = "[bold]findings[/]"
    if rep.lint_note:
        p(f"{head}  [yellow]{escape(rep.lint_note)}[/]")
    else:
        tok = len(rep.tokenizer.findings) if rep.tokenizer is not None else 0
        p(f"{head} (portkit lint: {n}" + (f"; {tok} tokenizer findings judged in the tokens section above)" if tok else ")"))
        if not rep.findings:
            p("  none")
    for ln in _finding_lines(rep.findings):
        p(ln)
    if rep.gguf is not None:
        _render_gguf(rep.gguf, rep, console)
    if rep.paths is not None:
        from portkit.verify.paths import text_lines as path_lines

        for ln in path_lines(rep.paths):
            p(ln)
    if rep.nonfinite is not None:
        p("")
        p(f"[bold red]non-finite[/]: {escape(rep.nonfinite.line())}")
    p("")
    word, line = _verdict(rep)
    colour = "green" if rep.exit_code == 0 else "red"
    p(f"[bold {colour}]verdict: {escape(line)}[/] (exit {rep.exit_code})")


def _render_gguf(g: GgufSection, rep: VerifyReport, console: Console) -> None:
    p = console.print
    p("")
    types = ", ".join(f"{k} x{n}" for k, n in sorted(g.weight_types.items()))
    p(f"[bold]GGUF vs transformers[/] {escape(str(g.path))} (candle {g.loader}{', from the cache' if g.run.source == 'cache' else ''}; weights {types})")
    p(f"  tolerance {g.tolerance.name}: {_tol_line(g.tolerance)}")
    if g.run.failure is not None:
        p(f"  [red]{escape(g.run.failure.line())}[/]")
    if g.comparison is not None:
        for ln in _comparison_lines(g.comparison, rep.reference.greedy, layers_note=None):
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
    from portkit.verify.tokens import text_lines

    p = console.print
    p(f"[bold]portkit verify[/] {escape(str(rep.options.model_dir))}")
    p(f"  tokenizers crate 0.22.2 (portkit_native) vs transformers {rep.versions.get('transformers')}")
    p("")
    for ln in text_lines(rep.section):
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
