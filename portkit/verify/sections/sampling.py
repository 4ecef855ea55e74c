"""verify's sampling section: which tokens each side can draw at each teacher-forced step, and
with which probability (PK510's probe).

Both distributions are computed on the reference's own logits (transformers eager f32), so the
forward's error plays no part and no random number is drawn: `generate()`'s from transformers'
`LogitsProcessorList` in the reference's process (`portkit.verify.reference.sampling`), the candle
program's from candle-transformers' `LogitsProcessor` in the native wheel (`sampling_weights`).
Per step: the total-variation distance (half the L1 distance of the two distributions), each
support's size, and the tokens only one side can draw.

A PK510 finding names one difference (`portkit.semantics.sampling.differences`). Its probe
isolates it: every other difference is removed from the program first, so the distance left is
this one's alone; the counterfactual then removes it too (a changed candle call, or transformers
without a setting candle has no equivalent for). CONFIRMED when the distance alone is over
`BOUND` and the counterfactual at least halves it; NOT-REPRODUCED when alone it stays within the
bound on these steps (a penalty window longer than the sequence, a top-k wider than every
nucleus), with the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portkit.findings import SamplingDifference
from portkit.semantics import sampling as S
from portkit.verify.errors import BadInput
from portkit.verify.judge.verdicts import Confirmation, Verdict, halved, identity
from portkit.verify.reference.result import Reference

#: Total-variation distance up to which two distributions read the same. Both are f32 softmaxes
#: of the same f32 logits, summed in other orders: the call portkit advises measures 9.3e-7 over
#: SmolLM2-135M's 49152-token vocabulary (docs/verify.md, "Sampling"); one token moved across a
#: nucleus edge moves the distance by that token's probability, far above it.
BOUND = 1e-4
EXAMPLES = 5  # tokens shown per side where only one side can draw them


@dataclass(frozen=True)
class Measure:
    """One candle call against `generate()` over the steps."""

    call: str
    distance: list[float]  # per step
    candle_support: list[int]
    generate_support: list[int]
    only_candle: list[int]  # tokens candle can draw and generate() cannot, per step
    only_generate: list[int]
    #: at the worst step: up to EXAMPLES tokens only each side can draw, with their probability
    examples: dict[str, list[list[float]]] = field(default_factory=dict)

    @property
    def worst(self) -> float:
        return max(self.distance, default=0.0)

    @property
    def worst_step(self) -> int:
        return int(np.argmax(self.distance)) if self.distance else 0

    @property
    def same(self) -> bool:
        return self.worst <= BOUND

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "worst_distance": self.worst,
            "worst_step": self.worst_step,
            "distance": self.distance,
            "candle_support": self.candle_support,
            "generate_support": self.generate_support,
            "only_candle": self.only_candle,
            "only_generate": self.only_generate,
            "examples": self.examples,
        }

    def summary(self) -> str:
        k = self.worst_step
        c, g = self.candle_support[k], self.generate_support[k]
        return (
            f"distance {_g(self.worst)} at step {k} (candle draws from {c} token{'s' if c != 1 else ''}, "
            f"generate() from {g}; {self.only_candle[k]} only candle can draw, {self.only_generate[k]} only generate())"
        )


def _g(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def measure(call: str, candle: np.ndarray, generate: np.ndarray) -> Measure:
    """`candle` (unnormalised weights) against `generate` (probabilities), [steps, vocab] each."""
    c = candle.astype(np.float64)
    c /= np.maximum(c.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    g = generate.astype(np.float64)
    cs, gs = c > 0, g > 0
    dist = (0.5 * np.abs(c - g).sum(axis=1)).tolist()
    k = int(np.argmax(dist)) if dist else 0
    examples: dict[str, list[list[float]]] = {}
    for name, own, p, other in (("only_candle", cs, c, gs), ("only_generate", gs, g, cs)):
        ids = np.flatnonzero(own[k] & ~other[k])
        top = ids[np.argsort(-p[k, ids])][:EXAMPLES]
        examples[name] = [[int(i), float(p[k, i])] for i in top]
    return Measure(
        call=call,
        distance=[float(d) for d in dist],
        candle_support=cs.sum(axis=1).tolist(),
        generate_support=gs.sum(axis=1).tolist(),
        only_candle=(cs & ~gs).sum(axis=1).tolist(),
        only_generate=(gs & ~cs).sum(axis=1).tolist(),
        examples=examples,
    )


@dataclass
class SamplingSection:
    generate: str  # what generate() samples with (`Generate.describe`)
    program: Measure  # the program's call
    advised: Measure  # the call portkit advises (the clean twin)
    stated: str | None  # the sampler as stated (--sampler / [tool.portkit]); None: the plain call
    steps: int
    sequence: int  # tokens before the last step (prompt and fed), what a penalty window covers
    findings: list[Confirmation] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Only a stated program is a mismatch: the plain call is portkit's guess at one."""
        return self.stated is None or self.program.same

    def to_json(self) -> dict[str, Any]:
        return {
            "generate": self.generate,
            "stated": self.stated,
            "bound": BOUND,
            "steps": self.steps,
            "ok": self.ok,
            "program": self.program.to_json(),
            "advised": self.advised.to_json(),
            "seconds": round(self.seconds, 4),
        }


def resolve(stated: str | None, model_dir: Path) -> str | None:
    """The sampler as stated: the command line's, else `[tool.portkit] sampler` (BadInput if unreadable)."""
    from portkit.errors import PortkitError
    from portkit.settings import Settings, for_dir

    try:
        if stated is not None:
            S.parse(stated)
            return stated
        return for_dir(Settings(), Path(model_dir)).target.sampler
    except (S.SamplerError, PortkitError) as e:
        raise BadInput(f"--sampler: {e}" if stated is not None else str(e)) from None


def request(model_dir: Path, stated: str | None) -> dict[str, Any] | None:
    """What the reference computes for the section (None: nothing stated and generate() decodes
    greedily without a penalty, which is what candle's `LogitsProcessor::new(seed, None, None)` does)."""
    gen = _generate(model_dir)
    if stated is None and not (gen.do_sample or gen.repetition_penalty != 1.0 or gen.no_equivalent):
        return None  # greedy on both sides, nothing else applied: argmax against argmax
    return {"without": sorted(gen.no_equivalent)}


def _generate(model_dir: Path) -> S.Generate:
    from portkit.verify.model_dir import json_beside

    return S.Generate.from_config(json_beside(Path(model_dir), "generation_config.json"))


def verify_sampling(
    model_dir: Path, reference: Reference, findings: Sequence[Any], stated: str | None, native: Any
) -> SamplingSection | None:
    """The section and its findings' verdicts (None when the reference computed no distributions)."""
    import time

    generate = reference.sampling_distributions()
    if generate is None:
        return None
    t0 = time.perf_counter()
    gen = _generate(model_dir)
    program = S.parse(stated) if stated else S.plain_call(gen)
    inputs = reference.inputs
    steps = int(reference.rows.shape[0])
    contexts = [list(reference.prompt) + list(inputs[:k]) for k in range(steps)]

    def weights(s: S.CandleSampler) -> np.ndarray:
        return np.asarray(
            native.sampling_weights(
                np.ascontiguousarray(reference.rows, dtype=np.float32), contexts, **s.native_kwargs()
            )
        )

    measured: dict[
        tuple[S.CandleSampler, int], Measure
    ] = {}  # a finding's base is often the program, its fix the advised call

    def against(s: S.CandleSampler, ref: np.ndarray = generate) -> Measure:
        key = (s, id(ref))
        if key not in measured:
            measured[key] = measure(s.call(), weights(s), ref)
        return measured[key]

    section = SamplingSection(
        generate=gen.describe(),
        program=against(program),
        advised=against(S.advised(gen)),
        stated=stated,
        steps=steps,
        sequence=len(contexts[-1]) if contexts else 0,
    )
    section.findings = [_judge(f, gen, program, against, reference, section) for f in findings]
    section.seconds = time.perf_counter() - t0
    return section


def _alone(gen: S.Generate, program: S.CandleSampler, key: str) -> tuple[S.CandleSampler, S.Difference | None]:
    """`program` with every difference but `key` removed (each fix applied in turn), and `key`'s difference then."""
    cur = program
    for _ in range(16):  # each fix removes one difference; a handful at most
        diffs = S.differences(gen, cur)
        fixed = next((d.fixed for d in diffs if d.key != key and d.fixed is not None), None)
        if fixed is None:
            return cur, next((d for d in diffs if d.key == key), None)
        cur = fixed
    return cur, next((d for d in S.differences(gen, cur) if d.key == key), None)


def _judge(
    f: Any, gen: S.Generate, program: S.CandleSampler, against: Any, reference: Reference, section: SamplingSection
) -> Confirmation:
    key = f.probe.key if isinstance(f.probe, SamplingDifference) else ""
    base, diff = _alone(gen, program, key)

    def verdict(v: Verdict, evidence: str, **details: Any) -> Confirmation:
        return Confirmation(
            **identity(f, "sampling"), verdict=v, evidence=evidence, details={"difference": key, **details}
        )

    if diff is None:
        return verdict("NOT-REPRODUCED", f"the program verify ran has no `{key}` difference from generate()'s sampler")
    before = against(base)
    if diff.fixed is not None:
        after, change = against(diff.fixed), f"with `{diff.fixed.call()}`"
    else:
        without = reference.sampling_distributions(without=key)
        if without is None:
            return verdict("NOT-PROBED", f"transformers without `{key}` was not computed")
        after, change = against(base, without), f"against generate() without `{key}`"
    details = {"alone": before.to_json(), "counterfactual": after.to_json()}
    steps = f"{section.steps} step{'s' if section.steps != 1 else ''}"
    if before.same:
        why = ""
        if key == "window" and base.repeat_last_n is not None and section.sequence <= base.repeat_last_n:
            why = f": the sequence is {section.sequence} tokens, within the window of {base.repeat_last_n}"
        return verdict(
            "NOT-REPRODUCED",
            f"alone it changes nothing on these {steps}{why}: distance {_g(before.worst)} (bound {BOUND:g})",
            **details,
        )
    if halved(before.worst, after.worst):
        return verdict(
            "CONFIRMED", f"alone: {before.summary()}; {change}: distance {_g(after.worst)} over {steps}", **details
        )
    return verdict(
        "NOT-REPRODUCED",
        f"alone: distance {_g(before.worst)}; {change} it stays {_g(after.worst)} over {steps}",
        **details,
    )


def lines(section: SamplingSection) -> list[str]:
    """The text report's sampling section."""
    who = (
        f"the program as stated (`{section.stated}`)"
        if section.stated
        else "the program (not stated: generation_config.json's values as candle's call takes them; say it with "
        "--sampler)"
    )
    out = [
        f"sampling: generate() draws with {section.generate}; {section.steps} teacher-forced steps on transformers' "
        f"logits, same below {BOUND:g}"
    ]
    out.append(f"  {who}: {section.program.call}")
    out.append(
        f"    {'step':>4}  {'distance':>9}  {'candle draws from':>17}  {'generate() from':>15}  {'only candle':>11}  "
        f"{'only generate()':>15}"
    )
    m = section.program
    for k in range(section.steps):
        out.append(
            f"    {k:>4}  {_g(m.distance[k]):>9}  {m.candle_support[k]:>17}  {m.generate_support[k]:>15}  "
            f"{m.only_candle[k]:>11}  {m.only_generate[k]:>15}"
        )
    for name, label in (("only_candle", "only candle draws"), ("only_generate", "only generate() draws")):
        shown = m.examples.get(name) or []
        if shown:
            out.append(f"    {label} at step {m.worst_step}: " + ", ".join(f"{int(i)} (p={p:.3g})" for i, p in shown))
    a = section.advised
    out.append(f"  the call portkit advises: {a.call}")
    out.append(
        f"    worst distance {_g(a.worst)} ({'the same distribution' if a.same else 'still differs'}); "
        f"tokens only one side draws: {sum(a.only_candle) + sum(a.only_generate)} over the {section.steps} steps"
    )
    return out
