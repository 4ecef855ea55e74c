"""`portkit` command line: lint, rules, explain, fix, schema, and verify when it is installed.

Subcommands live in one table (`SUBCOMMANDS`: name -> help, add_arguments, run), so adding one
is adding a row. `verify` is looked up lazily in `portkit.verify.cli`, which provides
`add_arguments(parser)` and `run(args) -> int`; `portkit lint` never imports it.

Exit status: 0 clean, 1 findings (or a diff to apply), 2 usage errors or unreadable input.
Errors are one line on stderr, `portkit: error: <path>: <what>`, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import stat
import sys
from pathlib import Path

from portkit import __version__, candle_release
from portkit.errors import InputError, PortkitError, UsageError
from portkit.target import DEVICES, DTYPES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    AddArgs = Callable[[argparse.ArgumentParser], None]
    Run = Callable[[argparse.Namespace], int]


def _csv(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out


# ------------------------------------------------------------------ lint


def lint_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="model directories (everything in them), files in them (a .gguf: that GGUF; config.json, *.safetensors, "
        "the index: the HF model), or ORG/NAME[@REV] from the local Hugging Face cache",
    )
    p.add_argument(
        "--hf-cache",
        action="store_true",
        help="lint every model repo in the local Hugging Face cache (`main`), then print a summary table",
    )
    p.add_argument(
        "--all-revisions", action="store_true", help="with --hf-cache: every cached revision, not only `main`"
    )
    p.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="rule codes or prefixes to run, comma separated (e.g. PK1,PK205); default: every stable rule",
    )
    p.add_argument("--ignore", action="append", metavar="CODES", help="rule codes or prefixes to skip, comma separated")
    p.add_argument("--preview", action="store_true", default=None, help="also run preview rules")
    p.add_argument(
        "--format", choices=("text", "json", "sarif", "github"), default="text", help="output format (default: text)"
    )
    p.add_argument("--output", "-o", type=Path, metavar="FILE", help="write the results to FILE instead of stdout")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.add_argument("--write-baseline", type=Path, metavar="FILE", help="record today's findings in FILE and exit 0")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="report only findings not recorded in FILE")
    p.add_argument("--no-config", action="store_true", help="ignore [tool.portkit] in pyproject.toml")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour text output (default: on a terminal)",
    )
    candle_release.add_arguments(p)
    g = p.add_argument_group("target (runtime rules PK3xx)")
    g.add_argument("--device", choices=DEVICES, help="candle device (default: cpu)")
    g.add_argument("--dtype", choices=DTYPES, help="candle dtype (default: f32)")
    g.add_argument(
        "--features",
        action="append",
        metavar="FEATS",
        help="candle cargo features, comma separated: accelerate, mkl, flash-attn, cuda, metal",
    )
    g.add_argument(
        "--use-flash-attn", action="store_true", default=None, help="the model is loaded with into_config(true)"
    )
    g.add_argument("--max-tokens", type=int, metavar="N", help="prompt plus generated tokens you will run")
    g.add_argument(
        "--max-prompt-tokens",
        type=int,
        metavar="N",
        help="the longest prompt you feed in one forward (default: --max-tokens)",
    )
    g.add_argument(
        "--turns",
        type=int,
        nargs="?",
        const=2,
        metavar="N",
        help="multi-token segments you feed to one KV cache; --turns alone: 2, a chat's second turn (default: 1)",
    )
    g.add_argument("--batch", type=int, metavar="N", help="rows of equal length you run in one forward (default: 1)")
    from portkit.sampler import SAMPLER_HELP

    g.add_argument("--sampler", metavar="SPEC", help=SAMPLER_HELP)


def _settings(args: argparse.Namespace) -> Any:
    from portkit.rules import is_valid_selector
    from portkit.settings import Settings
    from portkit.target import Target

    select, ignore = _csv(args.select), _csv(args.ignore) or []
    for s in (select or []) + ignore:
        if not is_valid_selector(s):
            raise UsageError(f"unknown rule selector `{s}` (see `portkit rules`)")
    explicit = set()
    tgt: dict[str, Any] = {}
    for name in ("device", "dtype", "max_tokens", "max_prompt_tokens", "use_flash_attn", "turns", "batch", "sampler"):
        v = getattr(args, name)
        if v is not None:
            tgt[name] = v
            explicit.add(name)
    chosen = candle_release.from_args(args)
    tgt["candle"], tgt["candle_from"] = chosen.release, chosen.source
    if args.candle is not None:
        explicit.add("candle")
    feats = _csv(args.features)
    if feats is not None:
        tgt["features"] = frozenset(feats)
        explicit.add("features")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    if args.max_prompt_tokens is not None and args.max_prompt_tokens < 1:
        raise UsageError("--max-prompt-tokens must be at least 1")
    for name in ("turns", "batch"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    try:
        target = Target(**tgt)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if select is not None:
        explicit.add("select")
    if args.preview is not None:
        explicit.add("preview")
    return Settings(
        select=select,
        ignore=ignore,
        preview=bool(args.preview),
        target=target,
        respect_pyproject=not args.no_config,
        explicit=frozenset(explicit),
    )


#: a baseline holds about 150 bytes a finding: this is a million findings
MAX_BASELINE_BYTES = 256 * 2**20


def _baseline_entries(path: Path) -> list[dict[str, Any]]:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # /dev/zero would never end
            raise InputError(path, "not a portkit baseline (not a regular file)")
        if st.st_size > MAX_BASELINE_BYTES:
            raise InputError(path, f"a baseline of {st.st_size} bytes is not one portkit wrote")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "baseline file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(path, f"unreadable baseline: {e}") from None
    if not isinstance(data, dict) or data.get("portkit_baseline") != 1 or not isinstance(data.get("findings"), list):
        raise InputError(path, 'not a portkit baseline (expected {"portkit_baseline": 1, "findings": [...]})')
    return [e for e in data["findings"] if isinstance(e, dict)]


def lint_run(args: argparse.Namespace) -> int:
    from portkit.lint import lint_paths
    from portkit.report import reporter_class

    settings = _settings(args)
    if args.hf_cache or args.all_revisions:
        return _lint_hf_cache(args, settings)
    if not args.paths:
        raise UsageError("lint needs a PATH (or ORG/NAME, or --hf-cache)")
    report = lint_paths(args.paths, settings)
    for e in report.errors:
        print(f"portkit: error: {e.path}: {e.message}", file=sys.stderr)
    for n in report.notes:
        print(f"portkit: note: {n}", file=sys.stderr)
    if args.write_baseline is not None:
        base = args.write_baseline.resolve().parent
        data = {
            "portkit_baseline": 1,
            "findings": [
                {"code": f.code, "filename": os.path.relpath(f.filename, base), "fingerprint": f.fingerprint(str(base))}
                for f in report.findings
            ],
        }
        try:
            args.write_baseline.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        except OSError as e:
            raise InputError(args.write_baseline, e.strerror or str(e)) from None
        written = len(report.findings)
        print(
            f"portkit: wrote {written} finding{'' if written == 1 else 's'} to {args.write_baseline}", file=sys.stderr
        )
        return 2 if report.errors else 0
    if args.baseline is not None:
        base = str(args.baseline.resolve().parent)
        counts: dict[str, int] = {}
        for entry in _baseline_entries(args.baseline):
            fp = entry.get("fingerprint")
            if isinstance(fp, str):
                counts[fp] = counts.get(fp, 0) + 1
        kept = []
        for f in report.findings:
            fp = f.fingerprint(base)
            if counts.get(fp, 0) > 0:
                counts[fp] -= 1
            else:
                kept.append(f)
        report = dataclasses.replace(report, findings=kept)
    color = args.color == "always" or (
        args.color == "auto" and args.output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    reporter = reporter_class(args.format)(color=color and args.format == "text")
    if args.output is not None:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                reporter.write(report, out)
        except OSError as e:
            raise InputError(args.output, e.strerror or str(e)) from None
    else:
        reporter.write(report, sys.stdout)
    if report.errors:
        return 2
    if args.exit_zero:
        return 0
    return 1 if report.findings else 0


def _lint_hf_cache(args: argparse.Namespace, settings: Any) -> int:
    from portkit import hf_cache

    if not args.hf_cache:
        raise UsageError("--all-revisions goes with --hf-cache")
    if args.paths:
        raise UsageError("--hf-cache lints the whole cache: give no PATH (or lint ORG/NAME without --hf-cache)")
    if args.format not in ("text", "json") or args.baseline or args.write_baseline:
        raise UsageError("--hf-cache writes a summary table: --format text or json, no baseline")
    rows, notes = hf_cache.lint_cache(settings, all_revisions=args.all_revisions, progress=hf_cache.progress_wanted())
    for n in notes:
        print(f"portkit: note: {n}", file=sys.stderr)
    for r in rows:
        if r.status == "unreadable":
            print(f"portkit: error: {r.model.spec}: {r.message}", file=sys.stderr)
    color = args.color == "always" or (
        args.color == "auto" and args.output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    )
    try:
        with open(args.output, "w", encoding="utf-8") if args.output is not None else _stdout() as out:
            if args.format == "json":
                hf_cache.write_json(rows, out, settings.target.candle)
            else:
                hf_cache.write_table(rows, out, color=color)
    except OSError as e:
        raise InputError(args.output or "<stdout>", e.strerror or str(e)) from None
    code = hf_cache.exit_code(rows)
    return 0 if args.exit_zero and code == 1 else code


def _stdout() -> Any:
    import contextlib

    return contextlib.nullcontext(sys.stdout)


# ------------------------------------------------------------------ rules / explain


def rules_args(p: argparse.ArgumentParser) -> None:
    from portkit.families import BY_NAME
    from portkit.rule_table import groups

    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--group",
        choices=groups(),
        help="only this rule group (PK1xx config, PK2xx weights, PK3xx runtime, PK4xx gguf, PK5xx tokenizer, PK6xx "
        "embedding)",
    )
    p.add_argument(
        "--family",
        choices=list(BY_NAME),
        metavar="FAMILY",
        help="only the rules that speak about this family: " + ", ".join(BY_NAME),
    )
    p.add_argument("--all", action="store_true", help="also list removed codes (kept so that they are never reused)")
    candle_release.add_arguments(p, lock=False)


def rules_run(args: argparse.Namespace) -> int:
    from portkit.rule_table import render_text, rows

    table = rows(
        args.group, args.family, include_removed=args.all, candle=args.candle and candle_release.from_args(args).release
    )
    if args.format == "json":
        print(json.dumps(table, indent=2))
    else:
        sys.stdout.write(render_text(table))
    return 0


def explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", metavar="CODE", help="a rule code (PK101) or name (rope-theta-in-rope-parameters)")
    candle_release.add_arguments(p, lock=False)


def explain_text(code: str, candle: str | None = None) -> str:
    """The rule's page; with `candle`, whether its fact holds for that release too."""
    from portkit.rules import CODES, by_code_or_name, families_label

    r = by_code_or_name(code)
    if r is None:
        raise UsageError(f"unknown rule `{code}` (see `portkit rules`)")
    head = (
        f"# {r.code} {r.name}\n\nGroup: {r.group} | Severity: {r.severity} | Effect: {r.effect} | "
        f"Fix: {r.fix_availability} | Status: {CODES[r.code][1]} | Verification: {r.probe_kind}\n\n"
        f"Families: {families_label(r)}\n\nReleases: {r.holds.describe()}\n\n"
    )
    if candle is not None:
        holds = "holds" if r.holds.holds(candle) else "does not hold"
        head += (
            f"On candle {candle}: the rule's fact {holds}"
            + ("" if r.holds.holds(candle) else ": lint reports nothing for it")
            + ".\n\n"
        )
    return head + r.doc() + "\n"


def explain_run(args: argparse.Namespace) -> int:
    sys.stdout.write(explain_text(args.code, args.candle and candle_release.from_args(args).release))
    return 0


# ------------------------------------------------------------------ fix


FIX_EPILOG = """\
Applies every safe edit and lists each finding no config edit can fix, with its reason.
exit codes:
  --diff (default)  0: nothing to change and nothing remains; 1: a diff was printed, or
                    findings remain (listed on stderr); 2: bad input or usage
  --write           0: written (or nothing to do) and nothing remains; 1: findings remain
                    after the safe edits were written (listed on stderr); 2: bad input or
                    usage, nothing written
The diff is exactly what --write writes (`git apply` takes it)."""


def fix_args(p: argparse.ArgumentParser) -> None:
    p.epilog = FIX_EPILOG
    p.formatter_class = _EpilogFormatter
    p.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        type=Path,
        help="a model directory, its config.json, or ORG/NAME[@REV] from the Hugging Face cache",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--diff", action="store_true", help="print the safe edits as a unified diff (default)")
    g.add_argument("--write", action="store_true", help="write the safe edits into config.json")


def fix_run(args: argparse.Namespace) -> int:
    from portkit import fix

    d = args.model_dir
    cached = None
    if not os.path.lexists(d):
        from portkit.hub import looks_like_repo_id, resolve

        if looks_like_repo_id(str(d)):
            cached = resolve(str(d))
            d = cached.path
    if not d.is_dir():
        d = d.parent if d.name in ("config.json", "tokenizer.json", "tokenizer_config.json") else d
    from portkit.model import model_dirs

    (d,) = model_dirs([d])
    if args.write:
        fix.sweep(d)
    plans = fix.plans(d)
    changed = [p for p in plans if p.changed]
    if args.write:
        for p in changed:
            fix.write(p)
        if changed:
            fixed = [f for p in changed for f in p.fixed]
            codes = ", ".join(sorted({f.code for f in fixed}))
            where = ", ".join(str(p.path) for p in changed)
            print(
                f"portkit: fixed {len(fixed)} finding{'' if len(fixed) == 1 else 's'} ({codes}) in {where}",
                file=sys.stderr,
            )
            if cached is not None:
                names = " and ".join(p.path.name for p in changed)
                print(
                    f"portkit: note: {cached.describe()}: its {names} {'is' if len(changed) == 1 else 'are'} now "
                    f"{'a file' if len(changed) == 1 else 'files'} of its own; the shared blob, and every other "
                    "revision, are unchanged",
                    file=sys.stderr,
                )
    else:
        if cached is not None and changed:
            print(f"portkit: note: {cached.describe()}", file=sys.stderr)
        for p in changed:
            sys.stdout.write(p.diff())
    remaining = [e for p in plans for e in p.remaining]
    _report_remaining(remaining, written=bool(args.write))
    if not changed and not remaining:
        print("portkit: nothing to fix", file=sys.stderr)
        return 0
    return 1 if remaining or not args.write else 0


def _report_remaining(remaining: list[Any], written: bool) -> None:
    """Each finding fix leaves, with why no edit fixes it (stderr: stdout is the diff)."""
    if not remaining:
        return
    n = len(remaining)
    verb = ("remains" if n == 1 else "remain") if written else "would remain"
    from portkit.rules import RULES

    what = "config edit" if all(RULES[e.finding.code].group == "config" for e in remaining) else "edit"
    print(
        f"portkit: {n} finding{'' if n == 1 else 's'} {verb}, no {what} fixes {'it' if n == 1 else 'them'}:",
        file=sys.stderr,
    )
    for e in remaining:
        f = e.finding
        print(f"{f.code} {f.name}: {f.message}", file=sys.stderr)
        print(f"  reason: {e.refused}", file=sys.stderr)


# ------------------------------------------------------------------ schema


def schema_args(p: argparse.ArgumentParser) -> None:
    from portkit.schemas import SCHEMAS

    p.add_argument("name", choices=sorted(SCHEMAS), help="which JSON Schema to print")


def schema_run(args: argparse.Namespace) -> int:
    from portkit.schemas import dumps

    sys.stdout.write(dumps(args.name))
    return 0


# ------------------------------------------------------------------ table


SUBCOMMANDS: dict[str, tuple[str, AddArgs, Run]] = {
    "lint": (
        f"find where candle {candle_release.DEFAULT} (or --candle X.Y.Z) reads a model differently from transformers 5",
        lint_args,
        lint_run,
    ),
    "rules": ("list the rule catalogue", rules_args, rules_run),
    "explain": ("print one rule's documentation", explain_args, explain_run),
    "fix": ("rewrite config.json and tokenizer.json so candle reads what transformers reads", fix_args, fix_run),
    "schema": ("print a JSON Schema (candle config, GGUF metadata, lint report)", schema_args, schema_run),
}
LAZY_SUBCOMMANDS = {
    "verify": "portkit.verify.cli",
    "reference": "portkit.porting.reference_cli",
    "compare": "portkit.porting.compare_cli",
}


def _lazy(name: str) -> tuple[str, AddArgs, Run] | None:
    import importlib
    import importlib.util

    mod_name = LAZY_SUBCOMMANDS[name]
    try:
        if importlib.util.find_spec(mod_name) is None:
            return None
    except (ImportError, ValueError):
        return None
    mod = importlib.import_module(mod_name)
    return (getattr(mod, "HELP", name), mod.add_arguments, mod.run)


def _columns() -> int:
    """`shutil.get_terminal_size().columns`, without importing shutil."""
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            stdout = sys.__stdout__
            cols = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):
            cols = 0
    return cols or 80


# The families are `portkit.families`' registry; not imported here, `portkit lint` pays for no
# registry it does not need (a test keeps this list equal to the registry).
DESCRIPTION = (
    "Config-regression linter and porting kit for Hugging Face transformers checkpoints in candle "
    f"{candle_release.RELEASES[0]}-{candle_release.RELEASES[-1]}: "
    "llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma, gemma2, gemma3, phi3, olmo2, granite, "
    "starcoder2, stable_lm, phi, qwen2_moe, smollm3, glm4_new, gemma4 (text), and their GGUF files."
)


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, sized as argparse sizes it. argparse builds one for every
    `add_argument` and would import shutil (and its bz2/lzma imports) each `portkit lint`."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)


class _EpilogFormatter(_Formatter):
    """Keeps a subcommand's epilog (a table of exit codes) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="portkit", description=DESCRIPTION, formatter_class=_Formatter)
    parser.add_argument(
        "--version", action="version", version=f"portkit {__version__} (candle {candle_release.NATIVE})"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    table = dict(SUBCOMMANDS)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for name in LAZY_SUBCOMMANDS:
        if wanted == name or wanted is None or wanted not in table:
            entry = _lazy(name)
            if entry is not None:
                table[name] = entry
    for name, (help_, add, run) in table.items():
        sp = sub.add_parser(name, help=help_, description=help_, formatter_class=_Formatter)
        # Only the subcommand being run needs its options (all of them for `--help` or a
        # typo): `portkit lint` in a pre-commit hook pays for no other command's setup.
        if wanted not in table or name == wanted:
            add(sp)
        sp.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        return int(args._run(args))
    except PortkitError as e:
        print(f"portkit: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("portkit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except RecursionError:
        print("portkit: error: input nested too deeply", file=sys.stderr)
        return 2
    except MemoryError:
        print("portkit: error: out of memory", file=sys.stderr)
        return 2
    except Exception as e:  # never a traceback: one line, and ask for a report
        print(
            f"portkit: error: internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]} (please report)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
