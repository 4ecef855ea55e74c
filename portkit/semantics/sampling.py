"""What `generate()` samples with and what a candle program's sampler does, as settings (PK510).

No torch and no logits here: the settings side by side, the candle call closest to `generate()`,
and each difference with the change that removes it. The distributions themselves come from the
two libraries' own code: candle's `LogitsProcessor` through `portkit_native.sampling_weights`,
transformers' `LogitsProcessorList` in the reference's process (`portkit.verify.reference.sampling`).

Sources (transformers 5.24, candle-transformers 0.11.0, candle-examples 0.11.0):
- generate()'s defaults, filled into every generation config that does not set them:
  transformers generation/configuration_utils.py:602-640 (`top_k`: 50); the sampling warpers it
  applies when `do_sample`: generation/utils.py:1603-1650 (temperature, top-k, top-p, min-p, ...);
  `RepetitionPenaltyLogitsProcessor` over every token of the sequence, the prompt's included
  (generation/utils.py:1472-1480), sampled or greedy.
- `LogitsProcessor::new(seed, temperature, top_p)`: ArgMax, All or TopP, never a top-k
  (candle-transformers generation/mod.rs:31-42); `Sampling::TopKThenTopP` keeps the top k without
  renormalising them before its top-p (generation/mod.rs:96-113).
- `apply_repeat_penalty(&logits, penalty, &tokens[start_at..])` over the last `repeat_last_n`
  tokens: 1.1 over 64 in candle-examples' qwen, mistral, gemma and phi (qwen/main.rs:220-225,
  :109-110), 1.1 over 128 at temperature 0.8 in llama (llama/main.rs:68, :117-122, :226-238).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial

from portkit.sampler import CandleSampler, SamplerError, number, parse

__all__ = [  # with the stated sampler's names its callers compare it by (portkit.sampler)
    "CandleSampler",
    "SamplerError",
    "parse",
    "Difference",
    "Generate",
    "advice",
    "advised",
    "differences",
    "plain_call",
]

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: generate()'s values for the settings portkit compares when generation_config.json does not set them
GENERATE_DEFAULTS: dict[str, Any] = {
    "do_sample": False,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
}

#: settings `generate()` applies that candle's LogitsProcessor has no equivalent for, with the value
#: that turns each off (generation/configuration_utils.py's defaults); the first group only when sampling
NO_EQUIVALENT_WHEN_SAMPLING: dict[str, Any] = {
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "top_h": None,
}
NO_EQUIVALENT_ALWAYS: dict[str, Any] = {
    "no_repeat_ngram_size": 0,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "bad_words_ids": None,
    "sequence_bias": None,
}


@dataclass(frozen=True, slots=True)
class Generate:
    """What `generate()` samples with: generation_config.json over generate()'s defaults."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    #: settings with no candle equivalent, set to something that is not their off value
    no_equivalent: dict[str, Any] = field(default_factory=dict)
    #: which of temperature/top_k/top_p/repetition_penalty generation_config.json sets itself
    stated: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, doc: Mapping[str, Any] | None) -> Generate:
        g = dict(doc or {})
        vals: dict[str, Any] = {}
        for key, default in GENERATE_DEFAULTS.items():
            v = g.get(key)
            vals[key] = default if v is None or isinstance(v, bool) != isinstance(default, bool) else v
        for key in ("temperature", "top_p", "repetition_penalty"):
            if not isinstance(vals[key], (int, float)):
                vals[key] = GENERATE_DEFAULTS[key]
            vals[key] = float(vals[key])
        if not isinstance(vals["top_k"], int):
            vals["top_k"] = GENERATE_DEFAULTS["top_k"]
        off = dict(NO_EQUIVALENT_ALWAYS, **(NO_EQUIVALENT_WHEN_SAMPLING if vals["do_sample"] else {}))
        # in the file's order
        others = {k: v for k, v in g.items() if k in off and v is not None and v != off[k] and not _is_off(k, v)}
        stated = frozenset(k for k in ("temperature", "top_k", "top_p", "repetition_penalty") if g.get(k) is not None)
        return cls(
            do_sample=bool(vals["do_sample"]),
            temperature=vals["temperature"],
            top_k=vals["top_k"],
            top_p=vals["top_p"],
            repetition_penalty=vals["repetition_penalty"],
            no_equivalent=others,
            stated=stated,
        )

    @property
    def samples(self) -> bool:
        return self.do_sample

    @property
    def applies_top_k(self) -> bool:
        return self.do_sample and self.top_k > 0

    @property
    def applies_top_p(self) -> bool:
        return self.do_sample and self.top_p < 1.0

    def describe(self) -> str:
        if not self.do_sample:
            bits = ["greedy"]
        else:
            bits = [f"temperature={number(self.temperature)}"]
            if self.applies_top_k:
                bits.append(f"top_k={self.top_k}" + ("" if "top_k" in self.stated else " (generate()'s default)"))
            if self.applies_top_p:
                bits.append(f"top_p={number(self.top_p)}")
        if self.repetition_penalty != 1.0:
            bits.append(f"repetition_penalty={number(self.repetition_penalty)} over the whole sequence")
        bits += [f"{k}={v}" for k, v in self.no_equivalent.items()]
        return ", ".join(bits)


def _is_off(key: str, v: Any) -> bool:
    """epsilon/eta cutoffs act only strictly inside (0, 1) (generation/utils.py:1639-1650)."""
    if key in ("epsilon_cutoff", "eta_cutoff"):
        return not (isinstance(v, (int, float)) and 0.0 < v < 1.0)
    if key == "typical_p":
        return not (isinstance(v, (int, float)) and v < 1.0)
    if key == "no_repeat_ngram_size":
        return not (isinstance(v, int) and v > 0)
    return False


def plain_call(gen: Generate) -> CandleSampler:
    """The call generation_config.json's own values suggest when passed as they read:
    `LogitsProcessor::new(seed, temperature, top_p)` (a `top_k` in the file: candle-examples'
    `Sampling::TopK`/`TopKThenTopP`), and candle-examples' window of 64 for a repetition penalty."""
    call = partial(CandleSampler, repeat_penalty=gen.repetition_penalty, repeat_last_n=64)
    if not gen.do_sample:
        return call("new")
    p = gen.top_p if gen.applies_top_p else None
    if "top_k" in gen.stated and gen.top_k > 0:
        return call(
            "TopKThenTopP" if p is not None else "TopK",
            temperature=gen.temperature,
            top_k=gen.top_k,
            top_p=p,
        )
    return call("new", temperature=gen.temperature, top_p=p)


def advised(gen: Generate) -> CandleSampler:
    """The candle call closest to `generate()`: its temperature, its top-k (implicit 50 included),
    renormalised before its top-p as transformers' softmax between the warpers does, its
    repetition penalty over the whole sequence. What stays different: `gen.no_equivalent`."""
    call = partial(CandleSampler, repeat_penalty=gen.repetition_penalty, repeat_last_n=None)
    if not gen.do_sample:
        return call("ArgMax")
    t, k, p = gen.temperature, gen.top_k if gen.applies_top_k else None, gen.top_p if gen.applies_top_p else None
    if k is not None and p is not None:
        return call("TopP", temperature=t, top_p=p, top_k_renormalised=k)
    if k is not None:
        return call("TopK", temperature=t, top_k=k)
    if p is not None:
        return call("TopP", temperature=t, top_p=p)
    return call("All", temperature=t)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the candle program's sampler is not `generate()`'s, and what removes it: a changed
    candle call (`fixed`), or, for a setting candle has no equivalent for, transformers without it
    (`reference_without`: the generation_config key set to its off value)."""

    key: str  # stable: greedy | temperature | top_k | renormalisation | top_p | repetition_penalty | window | <setting>
    message: str
    fixed: CandleSampler | None = None
    reference_without: str | None = None


def differences(gen: Generate, s: CandleSampler) -> list[Difference]:
    """Every difference between `generate()` with `gen` and the candle program `s`: whether each samples,
    then (when both sample) each warper in the order generate() applies them, the repetition penalty, and
    the keys candle has no equivalent for."""
    out: list[Difference] = []
    call = f"`{s.processor()}`"
    if gen.do_sample != s.samples:
        out.append(_greedy_or_sampled(gen, s, call))
    elif gen.do_sample:
        for found in (_temperature(gen, s, call), _top_k(gen, s, call), _renormalisation(s), _top_p(gen, s, call)):
            if found is not None:
                out.append(found)
    penalty = _repetition(gen, s)
    if penalty is not None:
        out.append(penalty)
    out += [
        Difference(
            key,
            f"generation_config.json sets `{key}`={v}: candle's LogitsProcessor has no "
            "equivalent (generation/mod.rs: ArgMax, All, TopK, TopP, TopKThenTopP, GumbelSoftmax)",
            reference_without=key,
        )
        for key, v in gen.no_equivalent.items()
    ]
    return out


def _greedy_or_sampled(gen: Generate, s: CandleSampler, call: str) -> Difference:
    if gen.do_sample:
        msg = f"generation_config.json samples ({gen.describe()}); {call} decodes greedily"
    else:
        msg = f"generation_config.json decodes greedily (`do_sample` false); {call} samples"
    program = dataclasses.replace(advised(gen), repeat_penalty=s.repeat_penalty, repeat_last_n=s.repeat_last_n)
    return Difference("greedy", msg, program)


def _temperature(gen: Generate, s: CandleSampler, call: str) -> Difference | None:
    _, t, _, _ = s.effective()
    if t is None or abs(t - gen.temperature) <= 1e-12:
        return None
    return Difference(
        "temperature",
        f"generate() samples at temperature {number(gen.temperature)}; {call} at {number(t)}",
        dataclasses.replace(s, temperature=gen.temperature),
    )


def _top_k(gen: Generate, s: CandleSampler, call: str) -> Difference | None:
    _, _, _, p = s.effective()
    kept = s.keeps_top_k
    if gen.applies_top_k and kept is None:
        why = (
            (
                "transformers fills `top_k`=50 into every generation config that does not set it "
                "(generation/configuration_utils.py:618) "
                "and applies TopKLogitsWarper whenever it samples (generation/utils.py:1622)"
            )
            if "top_k" not in gen.stated
            else f"generation_config.json sets `top_k`={gen.top_k}"
        )
        return Difference("top_k", f"{why}; {call} applies no top-k", _with_top_k(s, gen.top_k))
    if gen.applies_top_k and kept != gen.top_k:
        return Difference(
            "top_k",
            f"generate() keeps the top {gen.top_k} tokens; {call} keeps the top {kept}",
            _with_top_k(s, gen.top_k),
        )
    if not gen.applies_top_k and kept is not None:
        return Difference(
            "top_k",
            f"generate() applies no top-k (`top_k`=0); {call} keeps the top {kept}",
            dataclasses.replace(s, sampling="TopP" if p is not None else "All", top_k=None, top_k_renormalised=None),
        )
    return None


def _renormalisation(s: CandleSampler) -> Difference | None:
    kind, _, k, p = s.effective()
    if kind != "TopKThenTopP" or s.top_k_renormalised:
        return None
    return Difference(
        "renormalisation",
        f"`Sampling::TopKThenTopP` applies its top-p {number(p)} to the top {k} probabilities as they are, "
        "without renormalising them "
        "(candle-transformers generation/mod.rs:96-113); transformers renormalises after top-k (its "
        "softmax between the warpers), "
        f"so candle keeps more tokens: all {k} whenever their mass is below {number(p)}",
        dataclasses.replace(s, sampling="TopP", top_k=None, top_k_renormalised=k),
    )


def _top_p(gen: Generate, s: CandleSampler, call: str) -> Difference | None:
    _, _, _, p = s.effective()
    if gen.applies_top_p and p is None:
        return Difference(
            "top_p", f"generate() applies top-p {number(gen.top_p)}; {call} applies none", _with_top_p(s, gen.top_p)
        )
    if gen.applies_top_p and p is not None and abs(p - gen.top_p) > 1e-12:
        return Difference(
            "top_p",
            f"generate() applies top-p {number(gen.top_p)}; {call} applies {number(p)}",
            _with_top_p(s, gen.top_p),
        )
    if not gen.applies_top_p and p is not None:
        return Difference("top_p", f"generate() applies no top-p; {call} applies {number(p)}", _with_top_p(s, None))
    return None


def _repetition(gen: Generate, s: CandleSampler) -> Difference | None:
    """The penalty itself, else (the same penalty) the window candle applies it over."""
    if abs(s.repeat_penalty - gen.repetition_penalty) > 1e-12:
        theirs = f"`repetition_penalty` {number(gen.repetition_penalty)}" + (
            " (generate()'s default: no penalty)" if gen.repetition_penalty == 1.0 else ""
        )
        if s.repeat_penalty == 1.0:
            mine = "no `apply_repeat_penalty`"
        elif s.repeat_last_n is not None:
            mine = f"`apply_repeat_penalty` {number(s.repeat_penalty)} over the last {s.repeat_last_n} tokens"
        else:
            mine = f"`apply_repeat_penalty` {number(s.repeat_penalty)}"
        return Difference(
            "repetition_penalty",
            f"generate() applies {theirs}; the candle program applies {mine}",
            dataclasses.replace(s, repeat_penalty=gen.repetition_penalty, repeat_last_n=None),
        )
    if s.repeat_penalty != 1.0 and s.repeat_last_n is not None:
        return Difference(
            "window",
            f"the candle program penalises only the last {s.repeat_last_n} tokens (`repeat_last_n`); transformers' "
            "RepetitionPenaltyLogitsProcessor penalises every token of the sequence, the prompt's included "
            "(generation/utils.py:1472-1480)",
            dataclasses.replace(s, repeat_last_n=None),
        )
    return None


def _with_top_k(s: CandleSampler, k: int) -> CandleSampler:
    kind, t, _, p = s.effective()
    if p is not None:
        return dataclasses.replace(s, sampling="TopP", temperature=t, top_p=p, top_k=None, top_k_renormalised=k)
    return dataclasses.replace(s, sampling="TopK", temperature=t, top_k=k, top_p=None, top_k_renormalised=None)


def _with_top_p(s: CandleSampler, p: float | None) -> CandleSampler:
    kind, t, _, _ = s.effective()
    k = s.keeps_top_k
    if p is None:
        return dataclasses.replace(
            s, sampling="TopK" if k is not None and not s.top_k_renormalised else "All", temperature=t, top_p=None
        )
    if k is not None:
        return dataclasses.replace(s, sampling="TopP", temperature=t, top_p=p, top_k=None, top_k_renormalised=k)
    return dataclasses.replace(s, sampling="TopP", temperature=t, top_p=p)


def advice(gen: Generate) -> str:
    """The help line: the closest candle call, and what stays different."""
    a = advised(gen)
    stays = (
        f"; stays different: {', '.join(f'`{k}`' for k in gen.no_equivalent)} (no equivalent in candle)"
        if gen.no_equivalent
        else ""
    )
    return f"closest candle call: `{a.call()}`{stays}"
