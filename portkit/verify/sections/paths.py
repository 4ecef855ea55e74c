"""verify's runs beyond the prompt: `--turns` (a second turn on the warm KV cache,
`portkit.verify.sections.turns`) and `--batch N` (rows in one forward, `portkit.verify.sections.batch`).

The plan is made before anything loads (bad input is one line and exit 2: `--batch 0`, a second
turn past `max_position_embeddings`, a batch whose activations cannot fit in memory). The
reference computes the paths' rows in the same request as the prompt's (`portkit.verify.reference.extra`). After the
prompt's run (and the GGUF's), each subject, candle on the checkpoint and the GGUF in candle,
runs the paths, and the lint findings whose probe needs a path (`Rule.probe_run`) are judged on
them (`portkit.verify.judge.pathcheck`). With `--turns 1 --batch 1` (the defaults) nothing here runs
and the report is the plain one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from portkit.findings import Finding
from portkit.verify.candle.run import RunOutputs
from portkit.verify.errors import BadInput
from portkit.verify.judge.checks import Tolerance
from portkit.verify.judge.pathcheck import PathCheck, PathSection, confirm_on_paths
from portkit.verify.model_dir import ModelDir
from portkit.verify.reference import extra as refextra
from portkit.verify.reference.result import Reference
from portkit.verify.sections import batch as batch_path
from portkit.verify.sections import turns as turns_path

Progress = Callable[[str], None]

#: verify measures one continuation: a second turn
MAX_TURNS = 2
#: past this a batch is no test of candle's batching but of the machine
MAX_BATCH = 4096


def check_options(turns: int, batch: int) -> None:
    """The values alone (before the model directory is read)."""
    if not isinstance(turns, int) or turns < 1:
        raise BadInput(f"--turns must be at least 1, got {turns}")
    if turns > MAX_TURNS:
        raise BadInput(
            f"--turns {turns}: verify measures one continuation, a second turn (--turns 2, or --turns alone)"
        )
    if not isinstance(batch, int) or batch < 1:
        raise BadInput(f"--batch must be at least 1, got {batch}")
    if batch > MAX_BATCH:
        raise BadInput(f"--batch {batch} is more rows than verify runs in one forward (at most {MAX_BATCH})")


@dataclass(frozen=True)
class PathPlan:
    """What the paths feed: the second turn's ids and the batch's rows."""

    turns: int = 1
    batch: int = 1
    segment: tuple[int, ...] = ()
    rows: tuple[tuple[int, ...], ...] = ()

    @property
    def empty(self) -> bool:
        return self.turns == 1 and self.batch == 1

    def reference_request(
        self, fed: Sequence[int] | None, sampling: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The reference request's `extra` (None for the defaults: the request is the plain one);
        `sampling`: generate()'s distributions too (`portkit.verify.sections.sampling.request`)."""
        return refextra.request(fed, self.segment or None, [list(r) for r in self.rows] or None, sampling)

    def lint_target(self, target: dict[str, Any]) -> dict[str, Any]:
        """lint's target for verify's runs with the paths' dimensions: the second turn adds its
        tokens to the sequence and is a forward of its own length."""
        if self.empty:
            return target
        out = {**target, "turns": self.turns, "batch": self.batch}
        if self.segment:
            out["max_tokens"] = target["max_tokens"] + len(self.segment)
            out["max_prompt_tokens"] = max(target["max_prompt_tokens"], len(self.segment))
        return out


def plan(turns: int, batch: int, model: ModelDir, prompt: Sequence[int], tokens: int, *, padded: bool) -> PathPlan:
    """The paths' inputs, or BadInput (before any model is loaded); `padded`: the module has a
    forward that takes a padding mask (it runs the batch through it too)."""
    check_options(turns, batch)
    segment: list[int] = []
    if turns > 1:
        segment = turns_path.segment_for(prompt)
        end = len(prompt) + tokens + len(segment)
        mp = model.config.get("max_position_embeddings")
        if isinstance(mp, int) and not isinstance(mp, bool) and end > mp:
            raise BadInput(
                f"--turns: the second turn ends at position {end} ({len(prompt)} prompt + {tokens} generated + "
                f"{len(segment)} tokens), "
                f"past max_position_embeddings={mp}, the rows of candle's cos/sin table; use a shorter prompt or fewer "
                "--tokens"
            )
    rows: list[list[int]] = []
    if batch > 1:
        need = batch_path.batch_bytes(model.config, batch, len(prompt), padded)
        have = batch_path.available_bytes()
        if have is not None and need > have:
            raise BadInput(
                f"--batch {batch}: {batch} rows of {len(prompt)} tokens need about {_size(need)} for candle's "
                f"activations and both sides' logits, more than the {_size(have)} available; use a smaller --batch"
            )
        rows = batch_path.rows_for(prompt, batch)
    return PathPlan(turns=turns, batch=batch, segment=tuple(segment), rows=tuple(tuple(r) for r in rows))


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@dataclass
class PathSubject:
    """What runs the paths: candle on the checkpoint, or the GGUF in candle."""

    name: str
    load: Callable[[], Any]
    tolerance: Tolerance
    padded: bool  # the module has a forward that takes a padding mask
    findings: list[Finding]


@dataclass
class PathsReport:
    plan: PathPlan
    fed: list[int] | None  # the first answer the second turn follows (candle's greedy tokens)
    sections: list[PathSection] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sections)

    @property
    def findings(self) -> list[Any]:
        return [f for s in self.sections for f in s.findings]

    @property
    def runs(self) -> list[RunOutputs]:
        return [c.path.run for s in self.sections for c in s.checks]

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.plan.turns,
            "batch": self.plan.batch,
            "segment": list(self.plan.segment) or None,
            "fed": self.fed if self.plan.segment else None,
            "rows": [list(r) for r in self.plan.rows] or None,
            "sections": [s.to_json() for s in self.sections],
            "ok": self.ok,
        }


def verify_paths(
    plan: PathPlan, subjects: Sequence[PathSubject], reference: Reference, progress: Progress
) -> PathsReport:
    fed = list(reference.forced) if reference.forced is not None else None
    out = PathsReport(plan=plan, fed=fed)
    for s in subjects:
        sec = PathSection(subject=s.name, tolerance=s.tolerance)
        if plan.segment:
            turn = reference.turn_rows()
            if fed is None or turn is None:
                sec.not_run["turns"] = (
                    "candle gave no greedy tokens on the prompt: there is no first answer for a second turn to follow"
                )
            else:
                progress(f"{s.name}: {turns_path.describe(len(reference.prompt), len(fed), len(plan.segment))}")
                p = turns_path.run(s.load, reference.prompt, fed, plan.segment, label="second turn")
                p.reference = turn
                sec.checks.append(PathCheck.judge(p, s.tolerance))
        if plan.rows:
            progress(f"{s.name}: {batch_path.describe(len(plan.rows), len(plan.rows[0]))}")
            ref = reference.batch_rows()
            for p in batch_path.run(s.load, plan.rows, padded=s.padded, label=f"batch of {len(plan.rows)}"):
                if ref is not None:
                    p.reference = ref[:, -1, :] if p.name == "batch" else ref.reshape(-1, ref.shape[-1])
                sec.checks.append(PathCheck.judge(p, s.tolerance))
            if not s.padded:
                sec.not_run["padded-batch"] = f"{s.name}'s module has no forward that takes a padding mask"
        sec.findings = confirm_on_paths(s.findings, sec)
        out.sections.append(sec)
    return out


#: how the text report names each path run
TITLES = {"turns": "second turn", "batch": "batch", "padded-batch": "batch with a padding mask"}
