"""`portkit verify A B ...` (and `--hf-cache`): several models in one run, one transformers process.

Each model is verified as `portkit verify DIR` alone would (the same report, the same caches),
through one `ReferenceSession`: transformers is imported once, and each model's weights are
streamed by it and released before the next, so the peak is the largest model's, not the sum.
The models go in batches (`BATCH`): this process runs each model's candle as written, sends its
f32 reference and runs its first counterfactual on the same tensors (`pipeline.begin`), while
transformers imports torch; then their f64 truths are sent, and each model is finished (judged,
written) once its answers are in. Memory is one model's at a time: candle's runner is loaded one at a time,
transformers' weights one streamed layer at a time, and candle's runs and transformers' models
alternate (`reference.alternation`, through `native.holding_back`): a candle load waits for the
model transformers computes, and transformers' next model waits for candle's run. Each
report is written as soon as it is done, in the order given; a model that is bad input is one
line and the others still run. The exit status is the worst of them (bad input 2, mismatch 1,
non-finite 3, agree 0: `EXIT_ORDER`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portkit.verify.errors import BadInput
from portkit.verify.outcome import BAD_INPUT, EXIT_BAD_INPUT, RunOutcome

#: which exit status wins when several models are verified: the worst
EXIT_ORDER = (0, 1, 3, 2)


@dataclass(frozen=True)
class Outcome:
    """One model of the run: its summary row's values."""

    target: str
    family: str | None
    verdict: str  # agree | mismatch | non-finite | bad input
    exit_code: int
    confirmed: list[str]
    seconds: float
    note: str | None = None  # bad input: the line

    def row(self) -> list[str]:
        return [
            self.target,
            self.family or "-",
            self.verdict,
            str(self.exit_code),
            ", ".join(self.confirmed) or "-",
            f"{self.seconds:.1f}",
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "family": self.family,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "confirmed": self.confirmed,
            "seconds": round(self.seconds, 3),
            "note": self.note,
        }


def worst(codes: list[int]) -> int:
    return max(codes, key=EXIT_ORDER.index, default=0)


def hf_cache_targets() -> tuple[list[tuple[str, Path]], list[str]]:
    """Every cached model's `main` that lint maps to a candle module: (ORG/NAME, snapshot) pairs, and notes."""
    from portkit.errors import PortkitError
    from portkit.hub import cached_models
    from portkit.verify.model_dir import model_family, read_model_dir

    try:
        models, notes = cached_models(False)
    except PortkitError as e:
        raise BadInput(str(e)) from None
    out = []
    for m in models:
        if m.problem:
            notes.append(f"{m.repo_id}: skipped: {m.problem}")
            continue
        try:
            model_family(read_model_dir(m.path))
        except BadInput as e:
            notes.append(f"{m.repo_id}: skipped: {e}")
            continue
        out.append((m.repo_id, Path(m.path)))
    return out, notes


#: Models begun before the first of them is finished: their candle runs fill the time
#: transformers spends importing torch and computing their f32 references. What each holds until
#: it is finished (candle's rows and layers, a few MB) bounds it, and so does the first report's wait.
BATCH = 4


def verify_each(
    opts: Any,
    targets: list[tuple[str, Path]],
    progress: Callable[[str, str], None],
    emit: Callable[[str, Any], None],
    error: Callable[[str, str], None],
) -> list[Outcome]:
    """Each target verified with one transformers process, in batches of `BATCH`: each model of
    a batch begun (candle's runs, its f32 reference sent), then their f64 truths sent, then each
    finished; a candle run while truths are computing waits for them. `emit(label, report)` as
    each is done, `error(label, line)` for a target that is bad input, both in the targets'
    order; `progress(prefix, line)`."""
    from portkit.verify.candle.native import holding_back, native
    from portkit.verify.pipeline import begin
    from portkit.verify.reference.session import ReferenceSession

    session = ReferenceSession(lambda _s: None, start=False)
    out: list[Outcome] = []

    def started(i: int, label: str, path: Path) -> tuple[str, float, Any]:
        prefix = f"[{i}/{len(targets)}] {label}"
        t0 = time.perf_counter()
        try:
            unfinished = begin(
                dataclasses.replace(opts, model_dir=path), progress=functools.partial(progress, prefix), session=session
            )
        except BadInput as e:
            return label, t0, e
        _release()  # candle's runs of this model leave the process before the next model's
        return label, t0, unfinished

    def finished(label: str, t0: float, unfinished: Any) -> None:
        try:
            if isinstance(unfinished, BadInput):
                raise unfinished
            report = unfinished.finish()
        except BadInput as e:
            error(label, str(e))
            out.append(Outcome(label, None, BAD_INPUT, EXIT_BAD_INPUT, [], time.perf_counter() - t0, note=str(e)))
            return
        emit(label, report)
        done: RunOutcome = report
        confirmed = list(dict.fromkeys(f.code for f in done.confirmed))
        out.append(Outcome(label, done.family, done.verdict()[0], done.exit_code, confirmed, done.seconds))
        del report, unfinished  # this model's arrays (candle's, transformers' answers) leave the process now
        _release()

    numbered = list(enumerate(targets, 1))
    alternation = session.alternation
    alternation.on = True
    alternation.trim = native().release_memory
    try:
        with holding_back(alternation.hold, alternation.done):
            for k in range(0, len(numbered), BATCH):
                with session.candle_first():  # the first batch's, while transformers imports
                    batch = deque(started(i, label, path) for i, (label, path) in numbered[k : k + BATCH])
                _send_truths(batch)
                while batch:
                    finished(*batch.popleft())
    finally:
        session.close()
    return out


def _send_truths(batch: Iterable[tuple[str, float, Any]]) -> None:
    # a function of its own: the same loop in verify_each would keep the batch's last model alive
    # in its loop variable after that model is finished
    for _label, _t0, unfinished in batch:
        if not isinstance(unfinished, BadInput):
            unfinished.send_truth()


def _release() -> None:
    import gc

    gc.collect()
    from portkit.verify.candle.run import release_memory

    release_memory()


def summary_lines(outcomes: list[Outcome]) -> list[str]:
    head = ["model", "family", "verdict", "exit", "confirmed", "seconds"]
    rows = [o.row() for o in outcomes]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [f"{len(outcomes)} models, one transformers process"]
    lines += ["  " + "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=False)).rstrip() for r in [head, *rows]]
    return lines
