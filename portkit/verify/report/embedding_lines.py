"""The text report of verify on an embedding model (rich markup lines): the pipeline, each text
alone, the padded batch, the counterfactual programs, the findings, the verdict."""

from __future__ import annotations

import math

from rich.markup import escape

from portkit.verify.embedding.judge import RowCheck
from portkit.verify.embedding.report import HALF_COSINE, EmbeddingReport
from portkit.verify.report.section_lines import VERDICT_STYLE


def _cos(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.6f}"


def _row(r: RowCheck, half: bool, ok: bool) -> str:
    mark = "[green]ok[/]" if ok else "[red]DIFFERS[/]"
    text = r.text if len(r.text) <= 40 else r.text[:37] + "..."
    if r.failure is not None:
        return f"  [red]{escape(text)!s:42}[/] candle failed: {escape(r.failure)}"
    judged = f"cosine bound {HALF_COSINE}" if half or r.embedding is None else r.embedding.phrase()
    where = f"; first layer out of its floor: {r.first_layer_out}" if r.first_layer_out and not ok else ""
    alone = f"; vs alone {r.alone_diff:.1e}" if r.alone_diff is not None else ""
    return (
        f"  {escape(repr(text)):44} {r.tokens:3d} tok  cos {_cos(r.cosine)}  max|diff| {r.max_diff:.1e}{alone}  "
        f"{mark}  ({escape(judged)}{where})"
    )


def _layer_lines(r: RowCheck) -> list[str]:
    """One line per layer of one text (the capture copy's): its sub-layers, then its output, each
    as max|candle - transformers f32| and its distance from the f64 truth in floors."""
    out = [
        f"  layers of {escape(repr(r.text if len(r.text) <= 40 else r.text[:37] + '...'))} ({r.tokens} tok; max|diff|, "
        f"floors from the f64 truth, bound {r.layers[0].floor.factor:g}x)"
    ]
    groups: dict[str, list[str]] = {}
    for row in r.layers:
        layer = ".".join(row.name.split(".")[:2])
        part = row.name.split(".")[2] if row.name.count(".") == 2 else "out"
        mark = "" if row.floor.ok else " [red]OUT[/]"
        groups.setdefault(layer, []).append(f"{part} {row.max_diff:.1e} ({row.floor.ratio:.2g}x){mark}")
    out.extend(f"    {layer:12} " + "  ".join(parts) for layer, parts in groups.items())
    return out


def embedding_lines(rep: EmbeddingReport) -> list[str]:
    ref, o = rep.reference, rep.options
    out = [f"[bold]portkit verify[/] {escape(str(o.model_dir))} (embedding model)"]
    out.append(
        f"  candle {rep.versions.get('candle', '0.11.0')} `{rep.family}` ({o.device}, {o.dtype}) vs "
        "sentence-transformers "
        f"{rep.versions.get('sentence-transformers')} (transformers {rep.versions.get('transformers')}, eager, "
        "f32; truth f64)"
    )
    out.append(f"  pipeline: {escape(ref.pipeline())}" + (f"; prompt {ref.prompt!r}" if ref.prompt else ""))
    out.append("  candle's side: the module's forward, then the pipeline's modules as a candle program applies them")
    fed = rep.tokens
    if fed is not None and fed.failure is None and fed.rows:
        r = max(fed.rows, key=lambda x: len(x.crate) != len(x.reference))
        same = (
            "the same ids"
            if not fed.saved_changes_ids
            else f"{len(r.crate)} ids for {escape(repr(r.text))} where sentence-transformers feeds {len(r.reference)}"
        )
        out.append(
            "  what each side feeds: both run on sentence-transformers' ids; the tokenizers crate, tokenizer.json as "
            f"saved, gives {same}"
        )
    out.append("")
    if rep.load_failure is not None:
        out.append(f"[red]candle cannot load the checkpoint: {escape(rep.load_failure)}[/]")
    else:
        layered = any(r.layers for r in rep.singles)
        out.append(
            "[bold]each text alone[/] (the sentence embedding and the encoder output vs the f64 truth"
            + ("; layers localise)" if layered else ")")
        )
        out.extend(_row(r, rep.half, rep.row_ok(r)) for r in rep.singles)
        if layered:
            out.extend(_layer_lines(max(rep.singles, key=lambda r: r.tokens)))
        if rep.batch is not None:
            out.append("")
            out.append(
                f"[bold]one padded batch[/] ({len(rep.batch.rows)} rows padded to {rep.batch.seq}, {rep.batch_program})"
            )
            out.extend(_row(r, rep.half, rep.row_ok(r)) for r in rep.batch.rows)
        for cf in rep.counterfactuals:
            out.append("")
            state = "[red]differs[/]" if cf.differs else "[green]same vectors[/]"
            out.append(
                f"[bold]counterfactual[/] {escape(cf.what)}: {state}, worst cosine {_cos(cf.worst_cosine)}"
                + (f"; {escape(cf.failure)}" if cf.failure else "")
            )
    out.append("")
    if rep.lint_note is not None:
        out.append(f"[bold]findings[/]: {escape(rep.lint_note)}")
    else:
        out.append(f"[bold]findings[/] (portkit lint: {len(rep.findings)})")
        for c in rep.findings:
            out.append(f"  [{VERDICT_STYLE.get(c.verdict, '')}]{c.verdict}[/] {c.code} {escape(c.message)}")
            out.append(f"      {escape(c.evidence)}")
    out.append("")
    colour = "green" if rep.exit_code == 0 else "red"
    out.append(f"[bold {colour}]verdict: {escape(rep.verdict()[1])}[/] (exit {rep.exit_code})")
    return out
