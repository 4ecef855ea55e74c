"""`portkit verify --batch N`: N rows of equal length in one candle forward, as servers and
embedding programs run them.

The rows are the prompt and N - 1 others of its length (`rows_for`). candle runs them in one
`(N, seq_len)` forward through the library's own model (`batch_last_logits`); each row's last
position is compared with transformers on that row alone and with candle on that row alone (the
control: the same row without the batch). A module with a forward that takes a padding mask
(the family trait `PADDING_MASK`: qwen2's `Model::forward(.., Some(attn_mask))`) runs the rows
through it too, with the all-ones mask a tokenizer gives equal-length rows, and every position
is compared with transformers and with candle's causal rows of each row alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from portkit.verify.candle.run import RunOutputs, failure, native_errors, release_memory
from portkit.verify.judge.pathcheck import PathRun


def rows_for(prompt: Sequence[int], n: int) -> list[list[int]]:
    """The prompt, then N - 1 rows of its length: its first id (a BOS) kept, the rest reversed and
    rotated by one more position per row."""
    head, rest = list(prompt[:1]), list(prompt[1:])
    rows = [list(prompt)]
    rev = rest[::-1]
    for r in range(1, n):
        k = (r - 1) % len(rev) if rev else 0
        rows.append(head + rev[k:] + rev[:k])
    return rows


def describe(n: int, length: int, padded: bool = False) -> str:
    how = "through the forward that takes a padding mask (all ones)" if padded else "in one forward"
    return f"{n} rows of {length} tokens {how}"


def _int(cfg: Mapping[str, Any], key: str, default: int) -> int:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def batch_bytes(cfg: Mapping[str, Any], n: int, length: int, padded: bool) -> int:
    """About the memory `--batch n` adds to a verify of one row: candle's activations for n rows
    (hidden states, MLP, attention scores), its logits and control rows, and the reference's
    rows of every position (in the child and back in verify)."""
    hidden, vocab = _int(cfg, "hidden_size", 4096), _int(cfg, "vocab_size", 32000)
    inter, heads = _int(cfg, "intermediate_size", 4 * hidden), _int(cfg, "num_attention_heads", 32)
    act = length * (12 * hidden + 3 * inter) * 4 + 3 * heads * length * length * 4
    candle_logits = 2 * n * vocab * 4 * (length if padded else 1)
    reference = 2 * n * length * vocab * 4
    return n * act + candle_logits + reference


def available_bytes() -> int | None:
    """The memory the OS can hand out now (Linux: MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def run(load: Callable[[], Any], rows: Sequence[Sequence[int]], *, padded: bool, label: str) -> list[PathRun]:
    """The batch (and, with `padded`, the padding-mask forward) through one load of the runner,
    each with its control; reference rows are the caller's."""
    errors = native_errors()
    rows = [list(r) for r in rows]
    n, length = len(rows), len(rows[0])
    batch = PathRun("batch", describe(n, length), "each row alone", RunOutputs(label=label))
    paths = [batch]
    if padded:
        paths.append(
            PathRun(
                "padded-batch",
                describe(n, length, padded=True),
                "each row alone, causally",
                RunOutputs(label=f"{label}, padding mask"),
            )
        )
    t0 = time.perf_counter()
    runner = None
    try:
        runner = load()
    except errors as e:
        for p in paths:
            p.run.failure = failure("config" if type(e).__name__ == "ConfigError" else "load", e)
            p.run.seconds = time.perf_counter() - t0
    try:
        if runner is not None:
            for p in paths:
                t1 = time.perf_counter()
                try:  # the control: each row alone (causally, every position, for the padded run)
                    if p.name == "batch":
                        p.control = np.stack([np.asarray(runner.last_logits(r), dtype=np.float32) for r in rows])
                    else:
                        p.control = np.concatenate(
                            [np.asarray(runner.teacher_forced_logits(r, 1), dtype=np.float32) for r in rows]
                        )
                except errors as e:
                    p.control_failure = failure("forward", e)
                try:
                    if p.name == "batch":
                        p.run.rows = np.asarray(runner.batch_last_logits(rows), dtype=np.float32)
                    else:
                        p.run.rows = np.asarray(runner.padded_batch_logits(rows), dtype=np.float32).reshape(
                            n * length, -1
                        )
                except errors as e:
                    p.run.failure = failure(p.name, e)
                p.run.seconds = time.perf_counter() - t1
    finally:
        runner = None
        release_memory()
    return paths
