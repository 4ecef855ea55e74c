"""`portkit verify --turns`: a second turn on candle's warm KV cache, as chat programs feed it.

candle prefills the prompt, feeds its answer (its own greedy tokens, the ones the reference is
teacher-forced on) one token at a time, then feeds a second segment of `SEGMENT_LEN` tokens at
once at the offset, through the library's own `forward(x, offset)` (`portkit_native`'s
`continuation`). Row k - 1 is what a program reads when that turn ends after k of its tokens;
each is compared with transformers on the concatenated sequence (teacher-forced, `portkit.verify.reference.extra`)
and with candle's own logits at the same positions fed one token at a time (the control: the
same sequence without a multi-token forward at an offset, so an error of the first turn is not
counted here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from portkit.verify.candle.run import RunOutputs, failure, native_errors, release_memory
from portkit.verify.judge.pathcheck import PathRun

#: Tokens of the second turn (at least 8: a mask error at an offset needs several positions).
SEGMENT_LEN = 8


def segment_for(prompt: Sequence[int]) -> list[int]:
    """The second turn's ids: the prompt's after its first (a BOS), reversed and repeated to
    `SEGMENT_LEN`: the same vocabulary as the prompt, in another order."""
    rest = list(prompt[1:]) if len(prompt) > 1 else list(prompt)
    return [int(rest[-1 - (i % len(rest))]) for i in range(SEGMENT_LEN)]


def describe(prompt_len: int, fed: int, segment: int) -> str:
    return (
        f"a second turn of {segment} tokens at offset {prompt_len + fed}, after the {prompt_len}-token prompt and "
        f"{fed} generated"
    )


def run(
    load: Callable[[], Any], prompt: Sequence[int], fed: Sequence[int], segment: Sequence[int], *, label: str
) -> PathRun:
    """The continuation through `load()`'s runner, and its control on the same load (reference
    rows are the caller's: `PathRun.reference`)."""
    errors = native_errors()
    out = RunOutputs(label=label)
    path = PathRun(
        "turns", describe(len(prompt), len(fed), len(segment)), "the same positions fed one token at a time", out
    )
    t0 = time.perf_counter()
    stage = "load"
    runner = None
    try:
        runner = load()
        ids = list(prompt) + list(fed) + list(segment)
        try:  # the control: the same positions, one token at a time
            path.control = np.asarray(runner.teacher_forced_logits(ids, len(prompt)), dtype=np.float32)[len(fed) + 1 :]
        except errors as e:
            path.control_failure = failure("forward", e)
        stage = "continuation"
        out.rows = np.asarray(runner.continuation(list(prompt), list(fed), list(segment)), dtype=np.float32)
    except errors as e:
        out.failure = failure("config" if type(e).__name__ == "ConfigError" else stage, e)
    finally:
        runner = None
        release_memory()
        out.seconds = time.perf_counter() - t0
    return path
