#!/usr/bin/env python3
"""How fast is `portkit lint`? Ratios measured in one run, on this machine, printed as a table.

1. In-process lint of a sharded Llama-3.1-8B-shape sparse skeleton (32 layers, hidden 4096,
   intermediate 14336, 32 q / 8 kv heads, vocab 128256, 4 shards + model.safetensors.index.json,
   bf16; real headers, the data region a hole): median of N runs. Target < 20 ms. Baseline in
   the same run: the bare header read (config.json, index, four 8-byte lengths and header
   JSONs through `json.loads`), the floor any reader pays.
2. `portkit lint` cold CLI start (a fresh interpreter per run) against
   `python -c "import transformers"` from the same interpreter. Target: lint >= 10x faster.
   One discarded run of each first, so both see a warm page cache and compiled bytecode.
3. The tokenizer rules (PK5xx) on an 11 MB tokenizer.json (a synthetic one in Qwen3's shape:
   151,643 byte-level tokens, 151,387 merges saved as pairs, ByteLevel pipeline,
   `Qwen2Tokenizer`, generation_config.json): cold `portkit lint` of the 8B skeleton with these
   files beside it, against the same skeleton without them, in the same run. Target: the
   difference of the medians at most 150 ms.
4. Throughput over 1,000 small skeleton directories (config.json, generation_config.json,
   model.safetensors; one in four saved the transformers-5 way, so findings get reported
   too): one in-process call over all of them, and one CLI process given all of them (what
   the pre-commit hook does). Target >= 200 dirs/s (a 1,000-model repository linted in
   5 s). Baseline: the bare header read over the same directories.

Nothing here is asserted by the test suite (tests never assert wall-clock times):
`tests/precommit/test_bench_smoke.py` only checks that `--quick` runs and prints the table.

    .venv/bin/python bench/lint_bench.py            # full: 50 in-process runs, 5 CLI runs, 1,000 dirs
    .venv/bin/python bench/lint_bench.py --quick    # seconds: 5 / 2 / 50
    .venv/bin/python bench/lint_bench.py --against main   # before/after: REV's tree against this one

`--against REV` checks REV out in a temporary git worktree and times the same lint of the same
skeletons (and of the 8B skeleton with a small tokenizer and a 4 KB chat template: what the
chat-template rules cost; target at most +10 ms cold) with each tree's `portkit` (one subprocess per measurement,
PYTHONPATH set to that tree),
alternating the two so that both see the same load; it prints each median and after/before.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures import skeleton  # noqa: E402  (torch-free writers, shared with the lint tests)

BIN = Path(sys.executable).parent
TARGET_8B_MS = 20.0
TARGET_SPEEDUP = 10.0
TARGET_DIRS_PER_S = 200.0
TARGET_TOKENIZER_MS = 150.0

# Llama-3.1-8B as published (rope_theta 500000, llama3 scaling, bf16, untied), in the
# transformers 4.x layout candle reads right.
LLAMA31_EOS = [128001, 128008, 128009]


def llama31_8b_config() -> dict[str, Any]:
    return skeleton.config(
        "tf4",
        rope_theta=500000.0,
        scaling=skeleton.LLAMA3_SCALING,
        **skeleton.SHAPE_8B,
        bos_token_id=128000,
        eos_token_id=LLAMA31_EOS,
        torch_dtype="bfloat16",
        tie_word_embeddings=False,
    )


def write_8b(root: Path) -> Path:
    gen = {"bos_token_id": 128000, "eos_token_id": LLAMA31_EOS, "do_sample": True, "temperature": 0.6, "top_p": 0.9}
    return skeleton.write_model(root, llama31_8b_config(), shards=4, dtype="BF16", generation_config=gen)


def write_small_dirs(parent: Path, n: int) -> list[Path]:
    dirs = []
    for i in range(n):
        d = parent / f"m{i:04d}"
        style = "tf5" if i % 4 == 3 else "tf4"
        # vary the shape a little so no two headers are byte-identical
        cfg = skeleton.config(style, num_hidden_layers=2 + i % 3)
        skeleton.write_model(d, cfg, generation_config={"bos_token_id": 1, "eos_token_id": 2})
        dirs.append(d)
    return dirs


def write_qwen3_size_tokenizer(d: Path, seed: int = 0) -> int:
    """An 11 MB tokenizer.json in the shape of Qwen3's (vocab, merges as pairs, indent 2, as the
    `tokenizers` library writes it), tokenizer_config.json and generation_config.json; returns
    the tokenizer.json size in bytes. Tokens are drawn from letters, digits, punctuation (quotes
    and backslashes included, escaped in the JSON) and the byte-level space `Ġ`."""
    import random

    rng = random.Random(seed)
    alphabet = (
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" * 4 + "Ġ" * 40 + "{}[]:,.\"'\\-_=+()<>/|!?#"
    )
    vocab: dict[str, int] = {}
    while len(vocab) < 151_643:
        vocab.setdefault("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))), len(vocab))
    keys = list(vocab)
    merges = [[rng.choice(keys), rng.choice(keys)] for _ in range(151_387)]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(23)]
    added = [
        {
            "id": 151_643 + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(specials)
    ]
    split = {
        "type": "Split",
        "pattern": {
            "Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
            "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
        },
        "behavior": "Isolated",
        "invert": False,
    }
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
        "post_processor": byte_level,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    (d / "tokenizer.json").write_text(text, encoding="utf-8")
    tc = {
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "chat_template": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
        "'<|im_end|>\\n' }}{% endfor %}",
    }
    (d / "tokenizer_config.json").write_text(json.dumps(tc, indent=2), encoding="utf-8")
    return len(text.encode("utf-8"))


def qwen3_size_chat_template() -> str:
    """A chat template of the size and kind published instruct models ship (about 4 KB, in the
    shape of Qwen3's: a tools branch with `tojson`, a reversed walk for the last user turn,
    `.startswith`/`.split`/`.strip` on the content, reasoning in `<think>`, the generation prompt)."""
    return """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""


def write_chat_model(root: Path, d8: Path) -> Path:
    """The 8B skeleton (shards hard-linked) with a small tokenizer.json, tokenizer_config.json and
    the template above as chat_template.jinja: lint's cost of a chat template, apart from the
    cost of a large vocabulary (section 3)."""
    import shutil

    shutil.copytree(
        d8,
        root,
        copy_function=lambda src, dst: os.link(src, dst) if src.endswith(".safetensors") else shutil.copy2(src, dst),
    )
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    added = [
        {
            "id": 26 + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(specials)
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [["a", "b"]],
        },
    }
    (root / "tokenizer.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    tc = {
        "tokenizer_class": "TokenizersBackend",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
    }
    (root / "tokenizer_config.json").write_text(json.dumps(tc, indent=2), encoding="utf-8")
    (root / "chat_template.jinja").write_text(qwen3_size_chat_template(), encoding="utf-8")
    return root


def disk_usage(root: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of the files under root."""
    apparent = allocated = 0
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def model_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and (p.suffix in (".json", ".safetensors", ".gguf")))


# ---------------------------------------------------------------- what is timed


def header_floor(d: Path) -> int:
    """The bare read: every JSON file parsed, every safetensors header length + JSON parsed."""
    n = 0
    for p in model_files(d):
        if p.suffix == ".json":
            json.loads(p.read_text())
        else:
            with open(p, "rb") as f:
                (hlen,) = struct.unpack("<Q", f.read(8))
                json.loads(f.read(hlen))
        n += 1
    return n


def in_process_linter() -> tuple[str, Callable[[Sequence[Path]], int]]:
    """(description, lint(paths) -> number of findings) through lint's own Python API.

    Falls back to the CLI's `main(argv)` in this process (report rendered to a buffer).
    """
    try:
        from portkit.lint import lint_paths  # type: ignore[attr-defined]
    except ImportError:
        lint_paths = None
    if lint_paths is not None:

        def run(paths: Sequence[Path]) -> int:
            result = lint_paths([str(p) for p in paths])
            findings = getattr(result, "findings", result)
            return len(findings)

        return "portkit.lint.lint_paths", run

    from portkit.cli import main

    def run_cli(paths: Sequence[Path]) -> int:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            try:
                rc = main(["lint", "--format", "json", *map(str, paths)])
            except SystemExit as e:  # argparse/click style mains
                rc = e.code
        if rc not in (0, 1, None):
            raise RuntimeError(f"portkit lint exited {rc}")
        try:
            return len(json.loads(buf.getvalue() or "[]"))
        except ValueError:
            return -1

    return "portkit.cli.main(['lint', ...]) in-process", run_cli


def time_calls(fn: Callable[[], Any], runs: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_env() -> dict[str, str]:
    """The environment the timed commands run in. PYTHONDONTWRITEBYTECODE is dropped, not set to
    "0" (any non-empty value disables writing .pyc files): the discarded first run writes the
    bytecode an installed package has (pip compiles it at install), so no timed run compiles
    portkit's or transformers' sources again."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_subprocess(argv: Sequence[str], runs: int, ok: tuple[int, ...] = (0,)) -> list[float]:
    env = bench_env()

    def once() -> None:
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        if p.returncode not in ok:
            raise RuntimeError(
                f"{' '.join(argv[:3])} ... exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
            )

    return time_calls(once, runs, warmup=1)


def install_kind() -> str:
    """ "editable" (`pip install -e`: setuptools' finder runs at every interpreter start) or
    "regular" (what pre-commit's hook environment has)."""
    import site

    dirs = site.getsitepackages() + [site.getusersitepackages()]
    return (
        "editable" if any(any(Path(d).glob("__editable__*portkit*")) for d in dirs if Path(d).is_dir()) else "regular"
    )


def ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


# ---------------------------------------------------------------- the run


_SIDE = r"""
import json, statistics, sys, time
from pathlib import Path
root, d8, dchat, many, runs = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:-1], int(sys.argv[-1])
t0 = time.perf_counter()
import portkit.lint
t_import = time.perf_counter() - t0
assert Path(portkit.lint.__file__).resolve().is_relative_to(root), (portkit.lint.__file__, root)
from portkit.lint import lint_paths
lint_paths([d8]); lint_paths(many[:4])
one = []
for _ in range(runs):
    t0 = time.perf_counter(); lint_paths([d8]); one.append(time.perf_counter() - t0)
t0 = time.perf_counter(); lint_paths(many); t_many = time.perf_counter() - t0
lint_paths([dchat])
chat = []
for _ in range(runs):
    t0 = time.perf_counter(); lint_paths([dchat]); chat.append(time.perf_counter() - t0)
print(
    json.dumps(
        {"import": t_import, "lint_8b": statistics.median(one), "many": t_many, "lint_chat": statistics.median(chat)}
    )
)
"""


def compare_against(rev: str, rounds: int, runs: int, ndirs: int) -> int:
    """Lint timed with REV's tree and with this one, alternating, in one run (see the module doc)."""
    with tempfile.TemporaryDirectory(prefix="portkit-bench-against-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(base), rev], check=True)
        try:
            work = Path(tmp) / "models"
            d8 = write_8b(work / "llama-3.1-8b-skeleton")
            dirs = write_small_dirs(work / "many", ndirs)
            dchat = write_chat_model(work / "llama-3.1-8b-skeleton-with-chat-template", d8)
            env = bench_env()
            sides = {"before": base, "after": ROOT}
            got: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
            cli: dict[str, list[float]] = {k: [] for k in sides}
            cli_chat: dict[str, list[float]] = {k: [] for k in sides}
            for r in range(rounds + 1):  # round 0 warms the page cache and writes bytecode
                for name, tree in sides.items() if r % 2 else reversed(list(sides.items())):
                    e = dict(env, PYTHONPATH=str(tree))
                    # cwd is the tree too: `python -c` and `-m` put the working directory first on sys.path
                    out = subprocess.run(
                        [sys.executable, "-c", _SIDE, str(tree), str(d8), str(dchat), *map(str, dirs), str(runs)],
                        env=e,
                        cwd=tree,
                        capture_output=True,
                        text=True,
                    )
                    if out.returncode:
                        raise RuntimeError(f"{name} ({tree}): {out.stderr[-2000:]}")
                    t0 = time.perf_counter()
                    p = subprocess.run(
                        [sys.executable, "-m", "portkit", "lint", str(d8)], env=e, cwd=tree, capture_output=True
                    )
                    t_cli = time.perf_counter() - t0
                    if p.returncode not in (0, 1):
                        raise RuntimeError(
                            f"{name}: portkit lint exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
                        )
                    t0 = time.perf_counter()
                    p = subprocess.run(
                        [sys.executable, "-m", "portkit", "lint", str(dchat)], env=e, cwd=tree, capture_output=True
                    )
                    t_cli_chat = time.perf_counter() - t0
                    if p.returncode not in (0, 1):
                        raise RuntimeError(
                            f"{name}: portkit lint exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
                        )
                    if r:
                        got[name].append(json.loads(out.stdout))
                        cli[name].append(t_cli)
                        cli_chat[name].append(t_cli_chat)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"portkit lint: {rev} (before) against the working tree at {head} (after), {rounds} alternating rounds")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    rows = [("measure (median of the rounds)", "before", "after", "after/before")]
    for key, what in (
        ("lint_8b", f"in-process lint, 8B sharded skeleton (median of {runs} per round)"),
        ("lint_chat", f"in-process lint, 8B skeleton + tokenizer + 4 KB chat template (median of {runs})"),
        ("many", f"in-process lint of {ndirs} small dirs"),
        ("import", "`import portkit.lint`"),
    ):
        b, a = statistics.median(x[key] for x in got["before"]), statistics.median(x[key] for x in got["after"])
        rows.append((what, ms(b), ms(a), f"{a / b:.2f}"))
    b, a = statistics.median(cli["before"]), statistics.median(cli["after"])
    rows.append(("`python -m portkit lint` cold CLI, 8B skeleton", ms(b), ms(a), f"{a / b:.2f}"))
    b, a = statistics.median(cli_chat["before"]), statistics.median(cli_chat["after"])
    rows.append(("`python -m portkit lint` cold CLI, with the chat template", ms(b), ms(a), f"{a / b:.2f}"))
    chat_added = (a - b) * 1e3
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print(f"cold CLI with the chat template, after - before: {chat_added:+.1f} ms (target: at most +10 ms)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few runs and 50 directories (smoke test, seconds)")
    ap.add_argument("--runs", type=int, help="in-process runs of the 8B lint (default 50, quick 5)")
    ap.add_argument("--cli-runs", type=int, help="cold CLI runs of each command (default 5, quick 2)")
    ap.add_argument("--dirs", type=int, help="skeleton directories for throughput (default 1000, quick 50)")
    ap.add_argument(
        "--workdir", type=Path, help="write the skeletons here and keep them (default: a temp dir, removed)"
    )
    ap.add_argument("--against", metavar="REV", help="time REV's tree against this one, alternating, in one run")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds for --against (default 7)")
    args = ap.parse_args(argv)
    if args.against:
        return compare_against(
            args.against, args.rounds, args.runs or (5 if args.quick else 20), args.dirs or (50 if args.quick else 300)
        )
    runs = args.runs or (5 if args.quick else 50)
    cli_runs = args.cli_runs or (2 if args.quick else 5)
    ndirs = args.dirs or (50 if args.quick else 1000)

    portkit_exe = BIN / "portkit"
    if not portkit_exe.exists():
        print(f"no portkit console script next to {sys.executable}; run `pip install -e .`", file=sys.stderr)
        return 2

    with contextlib.ExitStack() as stack:
        if args.workdir:
            work = args.workdir
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="portkit-bench-")))

        # ---- 1. in-process, 8B sharded skeleton
        d8 = write_8b(work / "llama-3.1-8b-skeleton")
        apparent, allocated = disk_usage(d8)
        n_files_8b = len(model_files(d8))
        how, lint = in_process_linter()
        n_findings_8b = lint([d8])
        t_lint8 = time_calls(lambda: lint([d8]), runs)
        t_floor8 = time_calls(lambda: header_floor(d8), runs)
        med_lint8, med_floor8 = statistics.median(t_lint8), statistics.median(t_floor8)

        # ---- 2. cold CLI vs import transformers
        t_cli = time_subprocess([str(portkit_exe), "lint", str(d8)], cli_runs, ok=(0, 1))
        t_pass = time_subprocess([sys.executable, "-c", "pass"], cli_runs)
        t_import = time_subprocess([sys.executable, "-c", "import portkit.lint"], cli_runs)
        try:
            tf_version = metadata.version("transformers")
            t_tf: list[float] | None = time_subprocess([sys.executable, "-c", "import transformers"], cli_runs)
        except metadata.PackageNotFoundError:
            tf_version, t_tf = "not installed", None
        med_cli, med_pass = statistics.median(t_cli), statistics.median(t_pass)
        med_tf = statistics.median(t_tf) if t_tf else float("nan")

        # ---- 3. tokenizer rules on an 11 MB tokenizer.json, against the same model without one
        import shutil

        dtok = work / "llama-3.1-8b-skeleton-with-tokenizer"
        # the shards hard-linked: they are sparse (16 GB apparent) and a copy writes them out in
        # full; the small files copied, since the tokenizer writer may rewrite them
        shutil.copytree(
            d8,
            dtok,
            copy_function=lambda src, dst: (
                os.link(src, dst) if src.endswith(".safetensors") else shutil.copy2(src, dst)
            ),
        )
        tok_bytes = write_qwen3_size_tokenizer(dtok)
        n_findings_tok = lint([dtok])
        t_tok_cli = time_subprocess([str(portkit_exe), "lint", str(dtok)], cli_runs, ok=(0, 1))
        t_base_cli = time_subprocess([str(portkit_exe), "lint", str(d8)], cli_runs, ok=(0, 1))
        med_tok_cli, med_base_cli = statistics.median(t_tok_cli), statistics.median(t_base_cli)
        t_tok_in = time_calls(lambda: lint([dtok]), max(3, runs // 5))
        t_base_in = time_calls(lambda: lint([d8]), max(3, runs // 5))
        med_tok_in, med_base_in = statistics.median(t_tok_in), statistics.median(t_base_in)
        added_ms = (med_tok_cli - med_base_cli) * 1e3

        # ---- 4. throughput
        dirs = write_small_dirs(work / "many", ndirs)
        nfiles = sum(len(model_files(d)) for d in dirs)
        lint(dirs[:4])  # warm
        t0 = time.perf_counter()
        lint(dirs)
        t_inproc = time.perf_counter() - t0
        t0 = time.perf_counter()
        for d in dirs:
            header_floor(d)
        t_floor_many = time.perf_counter() - t0
        # one CLI process, every directory on argv: what pre-commit does (paths are short,
        # relative to `work`, so 1,000 fit any argv limit)
        rel = [str(d.relative_to(work)) for d in dirs]
        env = bench_env()
        subprocess.run(
            [str(portkit_exe), "lint", *rel[:4]],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        t0 = time.perf_counter()
        p = subprocess.run(
            [str(portkit_exe), "lint", *rel], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
        t_cli_many = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise RuntimeError(
                f"portkit lint over {ndirs} dirs exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}"
            )

    # ---- report
    def rate(n: int, s: float) -> float:
        return n / s if s > 0 else float("inf")

    dps_in, fps_in = rate(ndirs, t_inproc), rate(nfiles, t_inproc)
    dps_cli, fps_cli = rate(ndirs, t_cli_many), rate(nfiles, t_cli_many)
    dps_floor = rate(ndirs, t_floor_many)
    speedup = med_tf / med_cli if t_tf else float("nan")

    rows = [
        (
            f"in-process lint, 8B sharded skeleton (median of {runs})",
            ms(med_lint8),
            f"bare header read {ms(med_floor8)}",
            f"lint/floor {med_lint8 / med_floor8:.1f}x",
            f"< {TARGET_8B_MS:.0f} ms",
            med_lint8 * 1e3 < TARGET_8B_MS,
        ),
        (
            f"`portkit lint` cold CLI, 8B skeleton (median of {cli_runs})",
            ms(med_cli),
            f"`import transformers` {ms(med_tf) if t_tf else 'n/a'}",
            f"lint {speedup:.1f}x faster" if t_tf else "n/a",
            f">= {TARGET_SPEEDUP:.0f}x faster",
            (speedup >= TARGET_SPEEDUP) if t_tf else None,
        ),
        (
            f"tokenizer rules, {tok_bytes / 1e6:.1f} MB tokenizer.json, cold CLI (median of {cli_runs})",
            f"+{added_ms:.0f} ms ({ms(med_tok_cli)})",
            f"same model, no tokenizer {ms(med_base_cli)}",
            f"in-process +{(med_tok_in - med_base_in) * 1e3:.0f} ms",
            f"<= +{TARGET_TOKENIZER_MS:.0f} ms",
            added_ms <= TARGET_TOKENIZER_MS,
        ),
        (
            f"throughput in-process, {ndirs} dirs / {nfiles} files",
            f"{dps_in:,.0f} dirs/s, {fps_in:,.0f} files/s",
            f"bare header read {dps_floor:,.0f} dirs/s",
            f"lint/floor {dps_floor / dps_in:.1f}x",
            f">= {TARGET_DIRS_PER_S:.0f} dirs/s",
            dps_in >= TARGET_DIRS_PER_S,
        ),
        (
            f"throughput one CLI process, {ndirs} dirs / {nfiles} files",
            f"{dps_cli:,.0f} dirs/s, {fps_cli:,.0f} files/s",
            f"in-process {dps_in:,.0f} dirs/s",
            f"CLI/in-process {dps_in / dps_cli:.1f}x",
            f">= {TARGET_DIRS_PER_S:.0f} dirs/s",
            dps_cli >= TARGET_DIRS_PER_S,
        ),
    ]

    print("portkit lint benchmark" + (" (--quick)" if args.quick else ""))
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus; "
        f"portkit {metadata.version('portkit')} ({install_kind()} install), transformers {tf_version}; in-process API: "
        f"{how}"
    )
    print(
        f"8B skeleton: {n_files_8b} files, {apparent / 2**30:.1f} GiB apparent, "
        f"{allocated / 2**10:.0f} KiB on disk; {n_findings_8b} findings; "
        f"`portkit lint` min {ms(min(t_cli))}; with the tokenizer: {n_findings_tok} findings"
    )
    print(
        f"cold CLI breakdown (medians): `python -c pass` {ms(med_pass)}, "
        f"`python -c 'import portkit.lint'` {ms(statistics.median(t_import))}, in-process lint {ms(med_lint8)}"
    )
    print()
    headers = ("check", "measured", "baseline (same run)", "ratio", "target", "met")
    table = [headers] + [(a, b, c, d, e, "-" if f is None else ("yes" if f else "NO")) for a, b, c, d, e, f in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for i, r in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
