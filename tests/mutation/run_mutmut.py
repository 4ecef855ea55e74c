"""`make mutation`: mutmut over the modules whose mistakes would let a broken model pass.

Each module is mutated on its own, against only the tests that target it (the table below),
in a scratch copy of the tree under $PORTKIT_CACHE/mutation/<module>/, so a run takes
minutes and the checkout is never touched. mutmut itself then runs, for each mutant, only
the selected tests that call the mutated function.

    python tests/mutation/run_mutmut.py [--root DIR] [--only confirm] [--max-children 2] [--survivors FILE]

`--root` mutates another checkout (how docs/mutation.md's "before" scores were measured).
Prints one line per module: killed / survived / no tests / timeout / total and the score
(killed + timeout) / (total - skipped), as mutmut's own badge computes it. Not part of CI:
it is far too slow for that.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: module -> the test files that target it (missing files are skipped: older checkouts lack some)
TARGETS: dict[str, list[str]] = {
    "portkit/verify/judge/confirm.py": ["tests/unit/test_confirm_verdicts.py"],
    "portkit/verify/judge/checks.py": ["tests/unit/test_compare.py", "tests/native/test_verify_parts.py"],
    "portkit/fix.py": ["tests/unit/test_fix_edits.py", "tests/acceptance/test_cli.py"],
    "portkit/model/gguf_header.py": [
        "tests/unit/test_model_reader.py",
        "tests/unit/test_bounds.py",
        "tests/unit/test_gguf_header.py",
    ],
    "portkit/model/safetensors_header.py": [
        "tests/unit/test_model_reader.py",
        "tests/unit/test_bounds.py",
        "tests/unit/test_safetensors_header.py",
    ],
    "portkit/verify/cachefiles.py": [
        "tests/unit/test_cachefiles.py",
        "tests/unit/test_refcache_entries.py",
        "tests/unit/test_runcache.py",
        "tests/unit/test_cache_tampering.py",
    ],
    "portkit/verify/candle/cache.py": [
        "tests/unit/test_runcache.py",
        "tests/native/test_candle_run_cache.py",
        "tests/unit/test_cache_tampering.py",
    ],
    "portkit/atomicfile.py": ["tests/unit/test_atomicfile.py"],
    "portkit/hub.py": [
        "tests/unit/test_hub.py",
        "tests/acceptance/test_hf_cache_hostile.py",
        "tests/acceptance/test_hf_cache.py",
    ],
    "portkit/tokenizer_fix.py": ["tests/unit/test_tokenizer_fix.py", "tests/acceptance/test_verify_tokens.py"],
}
#: the family semantics (portkit/families/, one module per candle model module): each with the family tests
FAMILY_GLOB = ("portkit/families", "*.py")
# (the native oracles, tests/native/test_family_*_oracle.py, hold these modules to candle too,
# but need the native wheel of the same commit: add them here once it is built by default)
FAMILY_TESTS = [
    "tests/unit/test_family_semantics.py",
    "tests/unit/test_family_weights.py",
    "tests/unit/test_family_detect.py",
    "tests/unit/test_family_views.py",
]

STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
    37: "killed",
}


def targets(root: Path) -> dict[str, list[str]]:
    out = dict(TARGETS)
    fam_dir = root / FAMILY_GLOB[0]
    if fam_dir.is_dir():
        for p in sorted(fam_dir.glob(FAMILY_GLOB[1])):
            out[p.relative_to(root).as_posix()] = list(FAMILY_TESTS)
    return out


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(root: Path, module: str, tests: list[str], work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in ("portkit", "fixtures", "tests", "schemas", "docs"):  # docs: the rule pages test_rules compares
        src = root / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("README.md", ".pre-commit-hooks.yaml"):
        if (root / name).is_file():
            shutil.copy2(root / name, work / name)
    config = (root / "pyproject.toml").read_text()
    # the tests' own pytest settings stay; mutmut's section is this module's alone
    config += (
        "\n[tool.mutmut]\n"
        'source_paths = ["portkit"]\n'
        f"only_mutate = {_toml_list([module])}\n"
        'also_copy = ["fixtures", "schemas", "docs", "README.md", ".pre-commit-hooks.yaml"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        "use_git_change_detection = false\n"
        # torch and the native wheel are not fork-safe once loaded: fork from a clean server
        'process_isolation = "forkserver"\n'
    )
    (work / "pyproject.toml").write_text(config)


def score(work: Path, module: str) -> dict[str, object]:
    meta = json.loads((work / "mutants" / (module + ".meta")).read_text())
    counts: dict[str, int] = {}
    survivors = []
    for key, code in meta["exit_code_by_key"].items():
        status = STATUS.get(code, "not checked" if code is None else "suspicious")
        counts[status] = counts.get(status, 0) + 1
        if status in ("survived", "no tests", "suspicious", "not checked"):
            survivors.append((key, status))
    total = sum(counts.values())
    tested = total - counts.get("skipped", 0)
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    return {
        "counts": counts,
        "total": total,
        "score": 100.0 * killed / tested if tested else 0.0,
        "survivors": survivors,
    }


def survivor_diffs(work: Path, module: str, keys: list[str]) -> dict[str, str]:
    """Each mutant's diff against the original function, read from mutmut's mutated file
    (the same text `mutmut show` prints, without starting mutmut once per mutant)."""
    import ast
    import difflib

    src = (work / "mutants" / module).read_text()
    lines = src.splitlines()
    # by line numbers: ast.get_source_segment splits the whole (large) file once per call
    funcs = {
        n.name: "\n".join(lines[n.lineno - 1 : n.end_lineno])
        for n in ast.walk(ast.parse(src))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno is not None
    }
    out = {}
    for key in keys:
        name = key.rsplit(".", 1)[1]
        base = name.rsplit("__mutmut_", 1)[0]
        orig, mutant = (
            funcs.get(base + "__mutmut_orig", ""),
            funcs.get(name, "").replace(name, base + "__mutmut_orig", 1),
        )
        out[key] = "\n".join(
            line
            for line in difflib.unified_diff(orig.splitlines(), mutant.splitlines(), lineterm="", n=1)
            if not line.startswith(("---", "+++"))
        )
    return out


def mutmut(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([str(exe), *args], cwd=work, env=env, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to mutate (default: this one)")
    ap.add_argument("--only", action="append", default=[], help="modules whose path contains this (repeatable)")
    ap.add_argument("--max-children", default=str(min(2, os.cpu_count() or 1)))
    ap.add_argument(
        "--work", type=Path, default=Path(os.environ.get("PORTKIT_CACHE", Path.home() / ".cache/portkit")) / "mutation"
    )
    ap.add_argument("--survivors", type=Path, help="write every surviving mutant's diff here")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    rows = []
    diffs = []
    for module, tests in targets(root).items():
        if args.only and not any(o in module for o in args.only):
            continue
        present = [t for t in tests if (root / t).exists()]
        if not present:
            print(f"{module:<40} no targeted tests in this checkout", flush=True)
            continue
        work = args.work / (root.name + "-" + module.replace("/", "_").removesuffix(".py"))
        prepare(root, module, present, work)
        r = mutmut(work, "run", "--max-children", args.max_children)
        (work / "mutmut-run.log").write_text(r.stdout + r.stderr)
        meta = work / "mutants" / (module + ".meta")
        if not meta.exists():
            print(f"{module:<40} mutmut failed (exit {r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}", flush=True)
            continue
        s = score(work, module)
        c = s["counts"]
        assert isinstance(c, dict)
        line = (
            f"{module:<40} score {s['score']:5.1f}%  killed {c.get('killed', 0) + c.get('timeout', 0)}/{s['total']}"
            f"  survived {c.get('survived', 0)}  no tests {c.get('no tests', 0)}  tests: {' '.join(present)}"
        )
        if c.get("not checked") or c.get("suspicious"):
            line += (
                f"\n    {c.get('not checked', 0)} not checked, {c.get('suspicious', 0)} suspicious: see "
                f"{work / 'mutmut-run.log'}"
            )
        print(line, flush=True)
        rows.append(line)
        if args.survivors:
            survivors = dict(s["survivors"])  # type: ignore[arg-type]
            for key, shown in survivor_diffs(work, module, list(survivors)).items():
                diffs.append(f"## {key}: {survivors[key]}\n{shown}\n")
    if args.survivors:
        args.survivors.write_text("\n".join(rows) + "\n\n" + "".join(diffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
