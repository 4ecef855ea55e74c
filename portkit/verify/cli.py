"""`portkit verify MODEL_DIR ...`: the command line around `portkit.verify.pipeline.verify`.

`portkit.cli` imports this module lazily and calls `add_arguments(subparser)` and
`run(args) -> int`; `python -m portkit.verify` runs it alone. Results go to stdout, progress
and errors to stderr. Exit 0: candle agrees; 1: a mismatch or a confirmed finding; 2: bad
input (one line, never a traceback); 3: non-finite values (NaN/inf) on either side or in the
checkpoint, named, never counted as a mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HELP = "run candle (the native wheel) next to transformers and confirm each lint finding with numbers"
DESCRIPTION = (
    "Compare the ids candle's tokenizer (the tokenizers crate on tokenizer.json) and transformers' give a built-in "
    "corpus, then run candle (the target release: the wheel's 0.11.1, or another built on first use) and "
    "transformers (eager, f32, cpu) on the same prompt, compare "
    "last-position logits, every layer, teacher-forced steps and greedy tokens, then confirm each "
    "`portkit lint` finding: CONFIRMED (measured), CRASH-CONFIRMED (candle's own error), NOT-REPRODUCED (the check ran "
    "and showed no effect), NOT-REACHED (candle stopped before the check could run) or NOT-PROBED (nothing to run, "
    "with why). An embedding model (bert, distilbert, xlm_roberta, modernbert, jina_bert, nomic_bert) is run against "
    "sentence-transformers instead, text by text and as one padded batch (docs/embeddings.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        nargs="*",
        help="directory with config.json and safetensors weights, or ORG/NAME[@REV] from the Hugging Face cache; "
        "several: each verified in turn with one transformers process, then a summary table",
    )
    parser.add_argument(
        "--hf-cache",
        action="store_true",
        help="also verify every model in the local Hugging Face cache that lint maps to a candle module",
    )
    parser.add_argument("--device", default="cpu", help="candle device: cpu, metal or cuda (default: cpu)")
    parser.add_argument("--dtype", default="f32", help="candle dtype: f32, bf16 or f16 (default: f32)")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--ids", metavar="1,2,3", help="prompt token ids, comma separated")
    prompt.add_argument(
        "--text",
        metavar="TEXT",
        help="prompt text, tokenized on both sides (the tokenizers crate on tokenizer.json, transformers' tokenizer); "
        "the forward runs on transformers' ids",
    )
    prompt.add_argument(
        "--chat",
        metavar="MESSAGE",
        help="one user message, rendered with the model's chat template by transformers and tokenized on both sides as "
        "--text",
    )
    parser.add_argument(
        "--tokens", type=int, default=8, metavar="N", help="greedy tokens to generate and teacher-force (default: 8)"
    )
    parser.add_argument(
        "--gguf",
        action="append",
        metavar="FILE",
        help="also verify this GGUF against MODEL_DIR (candle's quantized loader its architecture selects); repeat it, "
        "or give a directory or a glob, for a quant ladder: one reference and one run of MODEL_DIR for all",
    )
    parser.add_argument(
        "--turns",
        type=int,
        nargs="?",
        const=2,
        default=1,
        metavar="N",
        help="also run a second turn, as chat programs do: after the generated tokens, 8 more at once at the offset on "
        "candle's "
        "warm KV cache, each position against transformers on the whole sequence (--turns alone: 2; default: 1)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        metavar="N",
        help="also run N rows of the prompt's length in one candle forward, each against the same row alone and "
        "against transformers (default: 1)",
    )
    from portkit.sampler import SAMPLER_HELP

    parser.add_argument(
        "--sampler", metavar="SPEC", help=SAMPLER_HELP + "; a stated sampler that differs makes verify exit 1"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument(
        "--plot", type=Path, metavar="FILE.png", help="write the per-layer relative errors as a PNG (needs matplotlib)"
    )
    # Same spelling as `portkit lint --use-flash-attn` (candle's field); --flash-attn kept as an alias.
    parser.add_argument(
        "--use-flash-attn",
        "--flash-attn",
        dest="use_flash_attn",
        action="store_true",
        help="load candle with use_flash_attn=true, as `into_config(true)` does",
    )
    parser.add_argument(
        "--no-layers",
        dest="layers",
        action="store_false",
        help="skip the per-layer comparison (one more forward of the prompt, through candle's copy of the model)",
    )
    parser.add_argument(
        "--reference",
        dest="reference_mode",
        choices=("streamed", "whole"),
        default="streamed",
        help="transformers one decoder layer at a time (streamed, default) or the whole f32 model (whole)",
    )
    parser.add_argument(
        "--no-cache",
        dest="cache",
        action="store_false",
        help="run transformers and candle even if $PORTKIT_CACHE holds their outputs for this checkpoint, prompt and "
        "build",
    )
    parser.add_argument("--no-lint", dest="lint", action="store_false", help=argparse.SUPPRESS)
    from portkit.candle_release import add_arguments

    add_arguments(parser)


def check_release(args: argparse.Namespace, model_dirs: list[Path]) -> None:
    """Make `portkit_native` the runner of the release the user runs (--candle, [tool.portkit], the Cargo.lock
    above): the wheel's own (NATIVE), another runnable release's built on first use, else BadInput. verify runs
    that release's own code, never an imitation of another."""
    from portkit.candle_release import NATIVE, RUNNABLE, from_args, said
    from portkit.errors import PortkitError
    from portkit.settings import Settings, for_dir
    from portkit.target import Target
    from portkit.verify.errors import BadInput

    try:
        chosen = from_args(args)
        releases = {(chosen.release, chosen.source)}
        if getattr(args, "candle", None) is None:  # a model's own [tool.portkit] names its release above a lock's
            base = Settings(target=Target(candle=chosen.release, candle_from=chosen.source))
            releases = {(t.candle, t.candle_from) for t in (for_dir(base, d).target for d in model_dirs)}
    except PortkitError as e:
        raise BadInput(str(e)) from None
    for release, source in sorted(releases):
        if release not in RUNNABLE:
            raise BadInput(
                f"{said(release, source)}: verify runs candle {', '.join(RUNNABLE)}, each release's own code; "
                f"`portkit lint --candle {release}` speaks of {release}"
            )
    if len({r for r, _ in releases}) > 1:
        raise BadInput(
            f"the model directories name candle {' and '.join(sorted({r for r, _ in releases}))}: verify runs one "
            "release at a time"
        )
    (release, _), *_ = releases
    for d in model_dirs:
        absent = absent_module(d, release)
        if absent is not None:
            raise BadInput(absent)
    if release != NATIVE:
        from portkit.verify.candle import release_build

        release_build.activate(
            release_build.ensure(release, lambda line: print(f"portkit: {line}", file=sys.stderr, flush=True))
        )


def absent_module(model_dir: Path, release: str) -> str | None:
    """The line that refuses a checkpoint whose candle module `release` does not have yet (qwen3 on 0.9.1,
    nomic_bert before 0.10.0; lint's PK114), before a runner is built: verify runs that release's own code,
    and there is none to run. None when it has the module, or when config.json is for the pipeline to report."""
    from portkit.candle_modules import ADDED
    from portkit.candle_release import key
    from portkit.encoders import detect as detect_encoder
    from portkit.families import detect
    from portkit.verify.errors import BadInput
    from portkit.verify.model_dir import read_json

    try:
        _, config = read_json(Path(model_dir) / "config.json", "config.json")
    except (BadInput, OSError):
        return None
    family = detect(config)
    if family is not None:
        if family.exists.holds(release):
            return None
        module, since = family.name, family.exists.since
    else:
        encoder = detect_encoder(config) if isinstance(config, dict) else None
        if encoder is None or key(ADDED[encoder.name]) <= key(release):
            return None
        module, since = encoder.name, ADDED[encoder.name]
    return (
        f"{model_dir}: candle {release} has no `{module}` module, it arrived in {since} (PK114): verify runs "
        f"{release}'s own code, so there is nothing to run; verify it with `--candle {since}` or later"
    )


def expand_ggufs(values: list[str]) -> list[Path]:
    """Each --gguf as the files it names: a file, a directory's *.gguf, or a glob's matches
    (sorted); repeated files once. BadInput for one that names nothing."""
    import glob

    from portkit.verify.errors import BadInput

    out: list[Path] = []
    for v in values:
        p = Path(v).expanduser()
        if p.is_dir():
            found = sorted(p.glob("*.gguf"))
            if not found:
                raise BadInput(f"--gguf {v}: a directory with no .gguf file")
        elif any(ch in v for ch in "*?["):
            found = sorted(Path(m) for m in glob.glob(str(p)) if Path(m).is_file())
            if not found:
                raise BadInput(f"--gguf {v}: the pattern matches no file")
        else:
            found = [p]
        out += [f for f in found if f not in out]
    return out


def _guarded(run: Any) -> tuple[Any, int | None]:
    """(`run()`, None), or (None, the exit status of its failure): bad input and a bug of ours are
    one line and 2 (the traceback with PORTKIT_DEBUG=1), an interrupt 130."""
    from portkit.verify.errors import BadInput

    try:
        return run(), None
    except BadInput as e:
        return None, _error(str(e))
    except KeyboardInterrupt:
        print("portkit verify: interrupted", file=sys.stderr)
        return None, 130
    except Exception as e:  # a bug of ours: one line, the traceback on request
        if os.environ.get("PORTKIT_DEBUG"):
            raise
        return None, _error(f"internal error: {type(e).__name__}: {e} (set PORTKIT_DEBUG=1 for the traceback)")


def _error(msg: str) -> int:
    print(f"portkit: error: {' '.join(msg.split())}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from portkit.verify.errors import BadInput

    specs = [args.model_dir] if isinstance(args.model_dir, (str, Path)) else list(args.model_dir)
    many = len(specs) > 1 or getattr(args, "hf_cache", False)
    if not specs and not many:
        return _error("give MODEL_DIR (one or more), or --hf-cache")
    try:
        targets = _targets(args, specs, many)
        opts = _options(args, targets[0][1])
    except BadInput as e:
        return _error(str(e))
    err = Console(stderr=True)
    if many:
        return _run_many(args, opts, targets, err)
    report, failed = _guarded(lambda: _verify_one(args, opts, err))
    if failed is not None:
        return failed
    prompt = getattr(report, "prompt", None)  # none when only tokenizer files were compared
    warning = prompt.short_warning() if prompt is not None else None
    if warning:
        print(f"portkit: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        from portkit.verify.report.json_ import to_json

        sys.stdout.write(json.dumps(to_json(report), indent=2) + "\n")
    else:
        from portkit.verify.report.text import render_text

        render_text(report, Console(highlight=False, soft_wrap=True))
    return report.exit_code


def _targets(args: argparse.Namespace, specs: list[Any], many: bool) -> list[tuple[str, Path]]:
    """(as given, directory) for every model the run verifies, the release chosen and checked for them
    (BadInput: one line)."""
    from portkit.verify.errors import BadInput
    from portkit.verify.model_dir import model_dir_arg

    targets = [(str(s), model_dir_arg(s)) for s in specs]
    if getattr(args, "hf_cache", False):
        from portkit.verify.targets import hf_cache_targets

        cached, notes = hf_cache_targets()
        for note in notes:
            print(f"portkit: note: {note}", file=sys.stderr)
        targets += [t for t in cached if t[1] not in {p for _, p in targets}]
        if not targets:
            raise BadInput("--hf-cache: no model in the Hugging Face cache that lint maps to a candle module")
    if many and args.plot is not None:
        raise BadInput("--plot draws one model's layers: give one MODEL_DIR")
    check_release(args, [p for _, p in targets])
    return targets


def _options(args: argparse.Namespace, model_dir: Path) -> Any:
    """The run's `VerifyOptions` from the command line (BadInput: a --gguf that is not one)."""
    from portkit.verify.pipeline import VerifyOptions

    return VerifyOptions(
        model_dir=model_dir,
        device=args.device,
        dtype=args.dtype,
        ids=args.ids,
        text=args.text,
        chat=getattr(args, "chat", None),
        tokens=args.tokens,
        ggufs=tuple(expand_ggufs(args.gguf or [])),
        use_flash_attn=args.use_flash_attn,
        layers=getattr(args, "layers", True),
        lint=getattr(args, "lint", True),
        reference_mode=getattr(args, "reference_mode", "streamed"),
        cache=getattr(args, "cache", True),
        turns=getattr(args, "turns", 1),
        batch=getattr(args, "batch", 1),
        sampler=getattr(args, "sampler", None),
    )


def _verify_one(args: argparse.Namespace, opts: Any, err: Any) -> Any:
    """One model's report, with a spinner on a terminal and the --plot drawn (its path checked first)."""
    from portkit.verify.pipeline import VerifyReport, verify

    if args.plot is not None:  # checked before anything runs, after the run's own options
        from portkit.verify.pipeline import validate
        from portkit.verify.report.plot import check_plot_path

        validate(opts)
        check_plot_path(Path(args.plot), layers=opts.layers)
    if err.is_terminal:
        with err.status("portkit verify: starting", spinner="dots") as status:
            report = verify(opts, progress=lambda s: status.update(f"portkit verify: {s}"))
    else:
        report = verify(opts)
    if args.plot is not None and isinstance(report, VerifyReport):
        from portkit.verify.report.plot import plot_report

        report.plot = plot_report(report, Path(args.plot))
    return report


def _run_many(args: argparse.Namespace, opts: Any, targets: list[tuple[str, Path]], err: Any) -> int:
    """Several models, one transformers process (`portkit.verify.targets`): each report as it is
    done, then the summary (JSON: one object with every report and the summary)."""
    from rich.console import Console
    from rich.markup import escape

    from portkit.verify.errors import BadInput
    from portkit.verify.pipeline import validate
    from portkit.verify.targets import summary_lines, verify_each, worst

    try:
        validate(opts)
    except BadInput as e:
        return _error(str(e))
    out = Console(highlight=False, soft_wrap=True)
    docs: list[dict[str, Any]] = []

    def emit(label: str, report: Any) -> None:
        if args.format == "json":
            from portkit.verify.report.json_ import to_json

            docs.append({"target": label, "report": to_json(report)})
            return
        from portkit.verify.report.text import render_text

        out.print(f"[bold]==> {escape(label)} <==[/]")
        render_text(report, out)
        out.print("")

    def error(label: str, line: str) -> None:
        print(f"portkit: error: {label}: {' '.join(line.split())}", file=sys.stderr)

    def each() -> Any:
        if err.is_terminal:  # a status line per model on long runs, only on a terminal
            with err.status("portkit verify: starting", spinner="dots") as status:
                return verify_each(
                    opts, targets, lambda prefix, s: status.update(f"portkit verify {prefix}: {s}"), emit, error
                )
        return verify_each(opts, targets, lambda _p, _s: None, emit, error)

    outcomes, failed = _guarded(each)
    if failed is not None:
        return failed
    code = worst([o.exit_code for o in outcomes])
    if args.format == "json":
        doc = {"targets": docs, "summary": [o.to_json() for o in outcomes], "exit_code": code}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        for ln in summary_lines(outcomes):
            out.print(escape(ln))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="portkit verify", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
