"""One candle run, captured as plain data: a config, a checkpoint or a GGUF loaded by candle's
own code, the prompt's logits, the teacher-forced steps, greedy tokens and the per-layer values.

A run never raises for candle's own failures: a config refusal, a load error, a caught panic
or a forward error becomes a `Failure` carrying candle's text (backtrace frames dropped, the
cargo registry prefix shortened), because verify quotes it as evidence. It is judged against
the reference in `portkit.verify.judge.comparison`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.verify.candle.cache import RunCache
from portkit.verify.candle.native import release_memory

_FRAME = re.compile(r"^\s*(\d+: |at )")
_REGISTRY = re.compile(r"\S*/((?:candle|candle-[\w-]+)-\d+\.\d+\.\d+/)")
_PANIC_AT = re.compile(r"panicked at (\S+?\.rs:\d+)")


@dataclass(frozen=True)
class Failure:
    """candle (or the reference) refused: where, as what, and the text it gave."""

    stage: str  # config | load | forward | generate | capture
    kind: str  # ConfigError | CandleError | CandlePanic | ...
    message: str

    @property
    def head(self) -> str:
        return self.message.splitlines()[0] if self.message else ""

    @property
    def location(self) -> str | None:
        m = _PANIC_AT.search(self.message)
        return _REGISTRY.sub(r"\1", m.group(1)) if m else None

    def line(self, who: str = "candle") -> str:
        if self.kind == "ConfigError":
            return f"{who} refused config.json: {self.head}"
        if self.kind == "CandlePanic":
            return f"{who} panicked at {self.stage}: {self.head.removeprefix('panicked at ')}"
        return f"{who} error at {self.stage}: {self.head}"

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "kind": self.kind, "message": self.message, "location": self.location}


def clean_message(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if not _FRAME.match(ln)]
    return _REGISTRY.sub(r"\1", "\n".join(lines).strip())


def failure(stage: str, e: BaseException) -> Failure:
    return Failure(stage=stage, kind=type(e).__name__, message=clean_message(str(e)))


@dataclass
class RunOutputs:
    """What one side computed on the prompt (and on prompt + the reference's greedy tokens)."""

    label: str
    last: np.ndarray | None = None  # [vocab]: the last prompt position (the prefill, row 0)
    rows: np.ndarray | None = None  # [max(tokens, 1), vocab]: teacher-forced steps
    layers: dict[str, np.ndarray] | None = None
    greedy: list[int] | None = None
    failure: Failure | None = None
    seconds: float = 0.0
    source: str = "computed"  # computed | cache (an identical earlier run: `portkit.verify.candle.cache`)

    @property
    def ok(self) -> bool:
        return self.failure is None


def native_errors() -> tuple[type[BaseException], ...]:
    """What candle raises through the wheel (a run catches them into its `Failure`)."""
    from portkit.verify.candle.native import native

    pn = native()
    return (pn.NativeError, ValueError, FileNotFoundError, OSError)


def run_candle(
    load: Callable[[], Any],
    prompt: Sequence[int],
    ref_tokens: Sequence[int] | None,
    tokens: int,
    *,
    label: str,
    capture: bool = False,
    on_stage: Callable[[str], None] | None = None,
    cache: RunCache | None = None,
) -> RunOutputs:
    """Load with `load()` then compute on the prompt; stop at candle's first failure.

    Teacher forcing (docs/verify.md): prefill the prompt, then feed the reference's greedy tokens one
    at a time through the KV cache, so row k holds candle's logits where the reference decided
    its token k, on exactly the reference's inputs. Row 0 is the prefill, i.e. `forward(prompt)`
    as a candle user calls it: the last-position logits. Then candle's own greedy generation,
    then, with `capture`, the per-layer values of the prompt through the runner's copy of the
    forward (built from the tensors the runner loaded: no second load, weights resident once).

    `ref_tokens=None`: candle generates first, keeping each step's logits, which are the
    teacher-forced rows on its own greedy tokens (the streamed reference then runs one forward
    over the same tokens).

    `cache`: an identical earlier run's outputs are returned without loading candle; a
    completed run is stored there.
    """
    hit = from_cache(cache, label)
    if hit is not None:
        if on_stage:
            on_stage("from the cache")
        return hit
    errors = native_errors()
    out = RunOutputs(label=label)
    t0 = time.perf_counter()
    stages = Stages(on_stage)
    runner = None
    try:
        stages.enter("load")
        runner = load()
        _logits(runner, prompt, ref_tokens, tokens, stages, out)
        assert out.rows is not None and out.greedy is not None  # `_logits` sets both or raises
        out.last = out.rows[0]
        if capture:
            stages.enter("capture")
            layers = runner.capture(list(prompt))
            out.layers = {k: np.asarray(v, dtype=np.float32) for k, v in layers.items()}
        if cache is not None:
            cache.put(out.greedy, out.rows, out.layers)
    except errors as e:
        kind = type(e).__name__
        out.failure = failure("config" if kind == "ConfigError" else stages.current, e)
    finally:
        # candle's weights leave the process before the reference (or the next run) loads
        runner = None
        release_memory()
        out.seconds = time.perf_counter() - t0
    return out


class Stages:
    """Where a run is (the stage a failure is reported at), told to `on_stage` as it moves on."""

    def __init__(self, on_stage: Callable[[str], None] | None) -> None:
        self.on_stage, self.current = on_stage, "load"

    def enter(self, name: str) -> None:
        self.current = name
        if self.on_stage:
            self.on_stage(name)


def _logits(
    runner: Any, prompt: Sequence[int], ref_tokens: Sequence[int] | None, tokens: int, stages: Stages, out: RunOutputs
) -> None:
    """candle's greedy tokens and the teacher-forced rows, on the reference's tokens or on its own,
    into `out` as each is known (a failure keeps what came before it)."""
    if ref_tokens is None:
        # teacher forcing on candle's own greedy tokens runs the very forwards generation ran:
        # one pass gives both
        stages.enter("generate")
        greedy, rows = runner.generate(list(prompt), tokens)
        out.greedy, out.rows = [int(t) for t in greedy], np.asarray(rows, dtype=np.float32)
        return
    fed = list(ref_tokens[: max(tokens - 1, 0)])
    both = _forced_and_greedy(runner, prompt, fed, tokens)
    own = None if both is not None else _generate(runner, prompt, tokens)
    if both is not None:
        out.greedy, out.rows = both
    elif own is not None and own[0][: len(fed)] == fed and (not tokens or len(fed) == tokens - 1):
        # candle's own tokens are the reference's: its generation fed the very tokens teacher
        # forcing feeds, through the same forwards in the same order
        out.greedy, out.rows = own
    else:
        stages.enter("forward")
        out.rows = np.asarray(runner.teacher_forced_logits(list(prompt) + fed, len(prompt)), dtype=np.float32)
        stages.enter("generate")
        if own is not None:  # greedy decoding is generate's pass, rows dropped
            out.greedy = own[0]
        else:
            out.greedy = [int(t) for t in runner.greedy(list(prompt), tokens)] if tokens else []


def _forced_and_greedy(
    runner: Any, prompt: Sequence[int], fed: list[int], tokens: int
) -> tuple[list[int], np.ndarray] | None:
    """(greedy tokens, teacher-forced rows) from a runner that computes both in one call, sharing
    the forwards up to where they fork (`GgufRunner.forced_and_greedy`); None as `_generate`."""
    if not hasattr(runner, "forced_and_greedy"):
        return None
    try:
        greedy, rows = runner.forced_and_greedy(list(prompt) + fed, len(prompt), tokens)
    except native_errors():
        return None
    return [int(t) for t in greedy], np.asarray(rows, dtype=np.float32)


def _generate(runner: Any, prompt: Sequence[int], tokens: int) -> tuple[list[int], np.ndarray] | None:
    """(greedy tokens, every step's rows) of one generate pass (`greedy` is that pass without the
    rows), or None when the runner has none or candle fails in it: the caller then runs the
    teacher-forced pass and the greedy pass apart, so that a failure is met at the stage (forward,
    then generate) and with the outputs it is met at without this pass."""
    if not hasattr(runner, "generate"):
        return None
    try:
        greedy, rows = runner.generate(list(prompt), tokens)
    except native_errors():
        return None
    return [int(t) for t in greedy] if tokens else [], np.asarray(rows, dtype=np.float32)


def from_cache(cache: RunCache | None, label: str) -> RunOutputs | None:
    """An identical earlier run's outputs, or None."""
    t0 = time.perf_counter()
    hit = cache.get() if cache is not None else None
    if hit is None:
        return None
    out = RunOutputs(label=label, greedy=hit.greedy, rows=hit.rows, layers=hit.layers, source="cache")
    out.last = hit.rows[0]
    out.seconds = time.perf_counter() - t0
    return out


def patched_config(config_text: str, patch: dict[str, Any]) -> str:
    """config.json with top-level keys set (a None value removes the key)."""
    cfg = json.loads(config_text)
    for k, v in patch.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return json.dumps(cfg, indent=2)


class PatchedRuns:
    """Patched candle runs, memoised by the patch (one load each, never two held at once); `fn`
    gives a patch's run and its judgement (a `portkit.verify.judge.comparison.Comparison`, or
    None for a failed run)."""

    def __init__(self, fn: Callable[[dict[str, Any]], tuple[RunOutputs, Any]]) -> None:
        self.fn = fn
        self.cache: dict[str, tuple[RunOutputs, Any]] = {}

    @staticmethod
    def key(patch: dict[str, Any]) -> str:
        return json.dumps(patch, sort_keys=True, default=str)

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Any]:
        key = self.key(patch)
        if key not in self.cache:
            self.cache[key] = self.fn(patch)
        return self.cache[key]

    def runs(self) -> list[RunOutputs]:
        return [r for r, _ in self.cache.values()]
