"""`portkit compare REF CANDIDATE`: the command line and the report around
`portkit.porting.compare.compare_dumps`, drawn with verify's report pieces. `portkit.cli`
imports this module lazily (add_arguments, run, HELP). Exit 0: the candidate agrees; 1: it
diverges; 2: bad input (one line on stderr, never a traceback)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HELP = "compare a dump of your own candle port with `portkit reference`'s, layer by layer"
SCHEMA_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "reference",
        metavar="REF",
        type=Path,
        help='the reference dump (`portkit reference`, or a JSON dump `{"logits": [...], "greedy": [...]}`)',
    )
    parser.add_argument(
        "candidate", metavar="CANDIDATE", type=Path, help="your port's dump (portkit-dump safetensors, or JSON)"
    )
    parser.add_argument(
        "--dtype",
        default="f32",
        help="what the candidate ran in, for the tolerance: f32, f16, bf16, q8_0 or q4_k (default: f32)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="write the per-layer relative errors as a PNG (needs matplotlib)"
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        metavar="PATH",
        help="tokenizer.json (or its directory) that decodes the ids when the candidate's prompt is not the "
        "reference's (default: the reference's model directory)",
    )


def _verdict(res: Any) -> str:
    if res.exit_code == 0:
        return "the candidate agrees with the reference"
    if res.ids is not None:
        return (
            "MISMATCH: the candidate ran another prompt (its ids part from the reference's at token "
            f"{res.ids.first}); nothing else compared"
        )
    where = res.first_bad
    return "MISMATCH: the candidate diverges from the reference" + (f", starting at {where}" if where else "")


def to_json(res: Any, plot: Path | None) -> dict[str, Any]:
    from portkit.verify.report.json_ import clean, comparison_json, tolerance_json

    return clean(
        {
            "schema_version": SCHEMA_VERSION,
            "reference": {
                "path": str(res.reference.path),
                "format": res.reference.kind,
                "metadata": res.reference.metadata,
                "tensors": res.reference.shapes(),
            },
            "candidate": {
                "path": str(res.candidate.path),
                "format": res.candidate.kind,
                "tensors": res.candidate.shapes(),
                "dtypes": res.candidate.dtypes,
            },
            "tolerance": tolerance_json(res.tolerance),
            "compared": res.compared,
            "notes": res.notes,
            "ids": res.ids.to_json()
            if res.ids is not None
            else {"agree": "ids" in res.candidate.tensors and "ids" in res.reference.tensors},
            "comparison": comparison_json(res.comparison) if res.ids is None else None,
            "first_bad": res.first_bad,
            "plot": str(plot) if plot else None,
            "verdict": "agree" if res.exit_code == 0 else "mismatch",
            "exit_code": res.exit_code,
        }
    )


def render_text(res: Any, plot: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape

    from portkit.porting.dumpfile import describe_names
    from portkit.verify.report.text import comparison_lines, layer_table, tolerance_line

    console = Console(highlight=False, soft_wrap=True)
    p = console.print
    ref, cand = res.reference, res.candidate
    m = ref.metadata
    p(f"[bold]portkit compare[/] {escape(str(ref.path))} {escape(str(cand.path))}")
    if m.get("transformers"):
        p(
            f"  reference: transformers {m['transformers']} (torch {m.get('torch', '?')}, eager f32 cpu) on "
            f"{escape(m.get('model', '?'))} ({m.get('family', '?')}), stored {m.get('dtype', '?')}"
        )
    else:
        p(f"  reference: {ref.kind} dump with {escape(describe_names(ref.names()))}")
    p(f"  candidate: {escape(describe_names(cand.names()))}")
    p(f"  tolerance {res.tolerance.name}: {tolerance_line(res.tolerance, res.comparison.measured)}")
    for note in res.notes:
        p(f"  [yellow]note: {escape(note)}[/]")
    p("")
    if res.ids is not None:
        for line in _ids_lines(res.ids, m):
            p("  " + line)
        p("")
        p(f"[bold red]verdict: {escape(_verdict(res))}[/] (exit {res.exit_code})")
        return
    greedy_ref = [int(t) for t in ref.tensors.get("greedy", [])]
    for line in comparison_lines(
        res.comparison, greedy_ref, layers_note="not compared (the candidate has no hidden states)"
    ):
        p("  " + line)
    if res.comparison.layers is not None:
        p("")
        console.print(layer_table(res.comparison))
    if plot is not None:
        p(f"  per-layer plot: {escape(str(plot))}")
    p("")
    colour = "green" if res.exit_code == 0 else "red"
    p(f"[bold {colour}]verdict: {escape(_verdict(res))}[/] (exit {res.exit_code})")


def _ids_lines(ids: Any, metadata: dict[str, str]) -> list[str]:
    """The two prompts where they part: ids, and the text they decode to (rich markup)."""
    from rich.markup import escape

    def shown(xs: list[int]) -> str:
        w = ids.window(xs)
        return (
            ("..., " if ids.start else "") + ", ".join(map(str, w)) + (", ..." if ids.start + len(w) < len(xs) else "")
        )

    out = [
        f"[red]ids             the candidate's prompt is not the reference's: they part at token {ids.first} "
        f"(reference {len(ids.reference)} tokens, candidate {len(ids.candidate)})  MISMATCH[/]",
        f"  reference     [{shown(ids.reference)}]",
        f"  candidate     [{shown(ids.candidate)}]",
    ]
    if ids.reference_text is not None:
        lead = "..." if ids.start else ""
        out.append(f"  decoded from token {ids.start} by {escape(ids.tokenizer or '?')}:")
        out.append(f"  reference     {escape(lead + repr(ids.reference_text))}")
        out.append(f"  candidate     {escape(lead + repr(ids.candidate_text))}")
    else:
        out.append(f"  [yellow]{escape(ids.note or 'not decoded')}[/]")
    try:
        prompt = json.loads(metadata.get("prompt", "{}"))
    except ValueError:
        prompt = {}
    if isinstance(prompt, dict) and prompt.get("source") == "--chat" and prompt.get("text"):
        out.append(f"  the reference's prompt is transformers' chat template on --chat: {escape(repr(prompt['text']))}")
    out.append(
        "  dump your program on the reference's ids (or render its prompt as the chat template does): logits on "
        "another prompt prove nothing"
    )
    return out


def run(args: argparse.Namespace) -> int:
    from portkit.porting.guard import guarded

    return guarded("compare", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from portkit.porting.compare import compare_dumps, read_candidate, validate_reference
    from portkit.porting.dumpfile import read_dump
    from portkit.verify.report.plot import check_plot_path

    plot = None
    if args.plot is not None:
        check_plot_path(args.plot)
    ref = read_dump(args.reference)
    validate_reference(ref)
    res = compare_dumps(ref, read_candidate(ref, args.candidate), args.dtype, args.tokenizer)
    if args.plot is not None and res.comparison.layers is not None:
        from portkit.verify.report.plot import plot_layers

        plot = plot_layers(
            res.comparison.layers,
            args.plot,
            title=f"{args.candidate.name} vs {args.reference.name}, per layer ({res.tolerance.name})",
            subtitle=res.reference.metadata.get("model", ""),
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(to_json(res, plot), indent=2) + "\n")
    else:
        render_text(res, plot)
    return res.exit_code
