"""One run of each side, captured as plain data, and its comparison against the reference.

A run never raises for candle's own failures: a config refusal, a load error, a caught panic
or a forward error becomes a `Failure` carrying candle's text (backtrace frames dropped, the
cargo registry prefix shortened), because verify quotes it as evidence.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from portkit.verify.compare import (
    GreedyCheck,
    LayerCheck,
    LogitsCheck,
    ShapeMismatch,
    StepCheck,
    Tolerance,
    compare_greedy,
    compare_layers,
    compare_logits,
    compare_steps,
    is_sublayer,
)
from portkit.verify.localise import Localisation, localise
from portkit.verify.runcache import RunCache

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
    source: str = "computed"  # computed | cache (an identical earlier run: `portkit.verify.runcache`)

    @property
    def ok(self) -> bool:
        return self.failure is None


def _native_errors() -> tuple[type[BaseException], ...]:
    from portkit.verify.candle import native

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
    errors = _native_errors()
    out = RunOutputs(label=label)
    t0 = time.perf_counter()
    stage = "load"

    def step(name: str) -> None:
        nonlocal stage
        stage = name
        if on_stage:
            on_stage(name)

    runner = None
    try:
        step("load")
        runner = load()
        if ref_tokens is None:
            # teacher forcing on candle's own greedy tokens runs the very forwards generation
            # ran: one pass gives both
            step("generate")
            greedy, rows = runner.generate(list(prompt), tokens)
            out.greedy = [int(t) for t in greedy]
            out.rows = np.asarray(rows, dtype=np.float32)
        else:
            fed = list(ref_tokens[: max(tokens - 1, 0)])
            both = _forced_and_greedy(runner, prompt, fed, tokens)
            own = None if both is not None else _generate(runner, prompt, tokens)
            if both is not None:
                out.greedy, out.rows = both
            elif own is not None and own[0][: len(fed)] == fed and (not tokens or len(fed) == tokens - 1):
                # candle's own tokens are the reference's: its generation fed the very tokens
                # teacher forcing feeds, through the same forwards in the same order
                out.greedy, out.rows = own
            else:
                step("forward")
                out.rows = np.asarray(runner.teacher_forced_logits(list(prompt) + fed, len(prompt)), dtype=np.float32)
                step("generate")
                if own is not None:  # greedy decoding is generate's pass, rows dropped
                    out.greedy = own[0]
                else:
                    out.greedy = [int(t) for t in runner.greedy(list(prompt), tokens)] if tokens else []
        out.last = out.rows[0]
        if capture:
            step("capture")
            layers = runner.capture(list(prompt))
            out.layers = {k: np.asarray(v, dtype=np.float32) for k, v in layers.items()}
        if cache is not None:
            cache.put(out.greedy, out.rows, out.layers)
    except errors as e:
        kind = type(e).__name__
        out.failure = failure("config" if kind == "ConfigError" else stage, e)
    finally:
        # candle's weights leave the process before the reference (or the next run) loads
        runner = None
        _release_memory()
        out.seconds = time.perf_counter() - t0
    return out


def _forced_and_greedy(runner: Any, prompt: Sequence[int], fed: list[int], tokens: int) -> tuple[list[int], np.ndarray] | None:
    """(greedy tokens, teacher-forced rows) from a runner that computes both in one call, sharing
    the forwards up to where they fork (`GgufRunner.forced_and_greedy`); None as `_generate`."""
    if not hasattr(runner, "forced_and_greedy"):
        return None
    try:
        greedy, rows = runner.forced_and_greedy(list(prompt) + fed, len(prompt), tokens)
    except _native_errors():
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
    except _native_errors():
        return None
    return [int(t) for t in greedy] if tokens else [], np.asarray(rows, dtype=np.float32)


def from_cache(cache: RunCache | None, label: str) -> RunOutputs | None:
    """An identical earlier run's outputs, or None."""
    t0 = time.perf_counter()
    hit = cache.get() if cache is not None else None
    if hit is None:
        return None
    out = RunOutputs(label=label, greedy=hit.greedy, rows=hit.rows, layers=hit.layers, source="cache")
    out.last = out.rows[0]
    out.seconds = time.perf_counter() - t0
    return out


def _release_memory() -> None:
    try:
        from portkit_native import release_memory
    except ImportError:  # a run without the wheel never loaded weights
        return
    release_memory()


def patched_config(config_text: str, patch: dict[str, Any]) -> str:
    """config.json with top-level keys set (a None value removes the key)."""
    cfg = json.loads(config_text)
    for k, v in patch.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return json.dumps(cfg, indent=2)


def edited_config(config_text: str, edits: Mapping[str, Any]) -> str:
    """config.json with `Probe.as_candle`'s config edits: a dotted key reaches into nested
    objects (made when missing), None removes the key, and keys apply shortest first, so a
    finding can replace `rope_parameters` while another sets a key inside it."""
    cfg = json.loads(config_text)
    for key in sorted(edits, key=lambda k: k.count(".")):
        *path, last = key.split(".")
        node = cfg
        for part in path:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        if edits[key] is None:
            node.pop(last, None)
        else:
            node[last] = edits[key]
    return json.dumps(cfg, indent=2)


def describe_patch(patch: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        if isinstance(v, dict):
            kind = v.get("rope_type") or v.get("type")
            return f"{{{kind} ...}}" if kind else json.dumps(v)
        return json.dumps(v)

    def one(k: str, v: Any) -> str:
        if k == "permute_qk":
            return "the Q/K rows permuted as llama.cpp's converter does"
        return f"{k}={fmt(v)}" if v is not None else f"{k} removed"

    return ", ".join(one(k, v) for k, v in patch.items())


# --------------------------------------------------------------------------- comparison


@dataclass
class Comparison:
    """One side (candle or a GGUF) judged against the reference, with every number."""

    tolerance: Tolerance
    last: LogitsCheck | None = None
    steps: StepCheck | None = None
    greedy: GreedyCheck | None = None
    layers: LayerCheck | None = None
    layers_judged: bool = True
    problem: str | None = None  # a shape mismatch: a failure of its own
    #: inside the first bad layer: the first bad sub-layer, its error per position, a diagnosis
    localisation: Localisation | None = None

    def judge_layers(
        self, ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], *, available: Sequence[str] = (), no_sublayers_hint: str
    ) -> None:
        """Every captured value's relative error; judged (and the first bad layer localised) only
        where the tolerance has a per-layer line (f32), reported below it. `available` and
        `no_sublayers_hint`: `localise`'s."""
        rtol = self.tolerance.layer_rtol
        self.layers_judged = rtol is not None
        self.layers = compare_layers(ref, got, rtol if rtol is not None else math.inf)
        if self.layers_judged:
            self.localisation = localise(self.layers, ref, got, available=available, no_sublayers_hint=no_sublayers_hint)

    @property
    def ok(self) -> bool:
        if self.problem is not None:
            return False
        parts = [c.ok for c in (self.last, self.steps, self.greedy) if c is not None]
        if self.layers is not None and self.layers_judged:
            parts.append(self.layers.ok)
        return all(parts) and bool(parts)

    def headline(self) -> str:
        """`logits differ 4.94 (tol 1e-4)`-style summary of the worst evidence."""
        if self.problem:
            return self.problem
        bits = []
        if self.last is not None:
            tol = self.tolerance.logits_atol
            bits.append(
                f"logits differ {fmt_num(self.last.max_abs_diff)}"
                + (f" (tol {fmt_tol(tol)})" if tol is not None else f" (max|ref| {self.last.max_abs_ref:.3g})")
            )
        if self.steps is not None and (self.steps.agree != self.steps.steps or self.tolerance.logits_atol is None):
            real = len(self.steps.real_flips)
            near = len(self.steps.disagreements) - real
            extra = []
            if real:
                extra.append(f"{real} real flip{'s' if real != 1 else ''}")
            if near:
                extra.append(f"{near} at near ties")
            bits.append(f"argmax {self.steps.agree}/{self.steps.steps}" + (f" ({', '.join(extra)})" if extra else ""))
        if self.steps is not None and self.steps.nonfinite_steps:
            bits.append(f"non-finite (NaN/inf) at {len(self.steps.nonfinite_steps)} of {self.steps.steps} steps")
        if self.greedy is not None and self.greedy.first_divergence is not None:
            bits.append(
                f"greedy diverges at token {self.greedy.first_divergence}"
                + (" (near tie)" if self.greedy.at_near_tie else "")
            )
        return ", ".join(bits)

    def distance(self) -> float:
        """max|diff| over the last position and every teacher-forced step (NaN: infinite)."""
        vals = [c.max_abs_diff for c in (self.last, self.steps) if c is not None]
        vals = [math.inf if math.isnan(v) else v for v in vals]
        return max(vals, default=0.0)


def fmt_num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if x == 0:
        return "0"
    if 1e-2 <= abs(x) < 1e3:
        return f"{x:.3g}"
    return f"{x:.2e}"


def fmt_tol(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-").replace("e+0", "e+")


@dataclass
class Reference:
    """The reference's numbers (transformers eager f32 CPU), computed once per verify run."""

    prompt: list[int]
    greedy: list[int]
    rows: np.ndarray  # [max(len(greedy), 1), vocab]: row k decided greedy token k
    layers: dict[str, np.ndarray] = field(default_factory=dict)  # per layer, over the prompt
    #: The tokens fed after the prompt (candle's greedy tokens; None: the reference's own). Row k
    #: is the reference's logits after prompt + forced[:k]; `greedy` is then the reference's own
    #: choice up to and including its first fork from `forced`.
    forced: list[int] | None = None
    nonfinite_weights: list[str] = field(default_factory=list)  # checkpoint tensors with NaN/inf
    mode: str = "streamed"  # streamed | whole
    source: str = "computed"  # computed | cache
    use_cache: bool = True  # further reference-side runs (counterfactuals) may use the cache
    #: the weight files' `cachefiles.fingerprints`, taken for the cache key (None: not taken):
    #: the counterfactuals' keys reuse them rather than read the checkpoint again
    fingerprints: list[dict[str, object]] | None = None
    #: the transformers process that computed it (`portkit.verify.refsession`), for the
    #: reference-side counterfactuals (None: they start their own)
    session: Any = field(default=None, repr=False, compare=False)
    #: a continuation's and a batch's rows, when verify asked for them (`portkit.verify.refextra`):
    #: "turn" [len(segment), vocab], "batch" [N, L, vocab]
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def last(self) -> np.ndarray:
        return self.rows[0]

    @property
    def inputs(self) -> list[int]:
        """What every candle run is teacher-forced on after the prompt."""
        return list(self.forced) if self.forced is not None else list(self.greedy)

    @property
    def greedy_complete(self) -> bool:
        return self.forced is None or len(self.greedy) >= len(self.forced)


def compare_run(ref: Reference, got: RunOutputs, tol: Tolerance) -> Comparison:
    """verify's comparisons: last position, teacher-forced steps with margins, greedy fork
    with the margin where it forks, per-layer relative error (judged in f32 only)."""
    cmp = Comparison(tolerance=tol)
    try:
        if got.last is not None:
            cmp.last = compare_logits(ref.last, got.last, tol.logits_atol)
        if got.rows is not None:
            cmp.steps = compare_steps(ref.rows, got.rows, near_tie=tol.near_tie, atol=tol.logits_atol)
        if got.greedy is not None:
            cmp.greedy = compare_greedy(ref.greedy, got.greedy, step_rows=ref.rows, near_tie=tol.near_tie, ref_complete=ref.greedy_complete)
        if got.layers is not None and ref.layers:
            # sub-layers where both sides have them (a family's capture may record none)
            ref_layers = {k: v for k, v in ref.layers.items() if not is_sublayer(k) or k in got.layers}
            got_layers = {k: v for k, v in got.layers.items() if not is_sublayer(k) or k in ref.layers}
            cmp.judge_layers(ref_layers, got_layers, no_sublayers_hint="this capture records no sub-layers")
    except ShapeMismatch as e:
        cmp.problem = str(e)
    return cmp


class PatchedRuns:
    """Patched candle runs, memoised by the patch (one load each, never two held at once)."""

    def __init__(self, fn: Callable[[dict[str, Any]], tuple[RunOutputs, Comparison | None]]) -> None:
        self.fn = fn
        self.cache: dict[str, tuple[RunOutputs, Comparison | None]] = {}

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        key = json.dumps(patch, sort_keys=True, default=str)
        if key not in self.cache:
            self.cache[key] = self.fn(patch)
        return self.cache[key]

    def runs(self) -> list[RunOutputs]:
        return [r for r, _ in self.cache.values()]
