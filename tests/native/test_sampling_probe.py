"""PK510's probe on both libraries' own code: candle-transformers' `LogitsProcessor` (the wheel's
generated copy, `sampling_weights`) against transformers' `LogitsProcessorList` as `generate()`
builds it (`portkit.verify.reference.sampling`), on logits made here.

Every assertion is a count of tokens or a distance against `BOUND` (f32 rounding is ~1e-7), never
a float only this CPU computes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from portkit.semantics import sampling as S
from portkit.verify.reference import sampling as R
from portkit.verify.sections.sampling import BOUND, measure

pn = pytest.importorskip("portkit_native")
pytest.importorskip("transformers")

LLAMA3 = {"do_sample": True, "temperature": 0.6, "top_p": 0.9}


def _generate(tmp_path: Path, doc: dict, prompt: list[int], rows: np.ndarray, without: str | None = None) -> np.ndarray:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "generation_config.json").write_text(json.dumps(doc))
    fed = list(range(rows.shape[0]))
    return R.distributions(R.generation_config(d, without), prompt, fed, rows)


def _candle(s: S.CandleSampler, prompt: list[int], rows: np.ndarray) -> np.ndarray:
    contexts = [prompt + list(range(k)) for k in range(rows.shape[0])]
    return pn.sampling_weights(rows, contexts, **s.native_kwargs())


def _nearly_flat(n: int = 100) -> np.ndarray:
    return np.array([[-i * 1e-3 for i in range(n)]], dtype=np.float32)


def test_top_k_then_top_p_keeps_20_where_transformers_keeps_16(tmp_path: Path) -> None:
    doc = {"do_sample": True, "temperature": 1.0, "top_k": 20, "top_p": 0.8}
    ref = _generate(tmp_path, doc, [], _nearly_flat())
    gen = S.Generate.from_config(doc)
    plain, advised = S.plain_call(gen), S.advised(gen)
    assert plain.sampling == "TopKThenTopP"
    assert int((ref > 0).sum()) == 16
    m = measure(plain.call(), _candle(plain, [], _nearly_flat()), ref)
    assert (m.candle_support, m.generate_support, m.only_candle, m.only_generate) == ([20], [16], [4], [0])
    assert not m.same
    a = measure(advised.call(), _candle(advised, [], _nearly_flat()), ref)
    assert a.candle_support == [16] and a.same


@pytest.mark.parametrize(
    "doc",
    [
        LLAMA3,
        {**LLAMA3, "top_k": 20},
        {"do_sample": True, "top_k": 0, "top_p": 0.5},
        {"do_sample": True, "temperature": 1.5, "top_p": 1.0},
        {**LLAMA3, "repetition_penalty": 1.3},
        {"repetition_penalty": 1.3},
        {},
    ],
    ids=["llama3", "top_k_20", "top_p_only", "all", "penalty", "greedy_penalty", "greedy"],
)
def test_the_advised_call_draws_from_generates_distribution(tmp_path: Path, doc: dict) -> None:
    rows = (np.random.default_rng(0).standard_normal((6, 1000)) * 0.5).astype(np.float32)
    prompt = list(range(100, 140))
    ref = _generate(tmp_path, doc, prompt, rows)
    gen = S.Generate.from_config(doc)
    advised = S.advised(gen)
    m = measure(advised.call(), _candle(advised, prompt, rows), ref)
    assert m.same, m.summary()
    assert m.only_candle == [0] * 6 and m.only_generate == [0] * 6


def test_llama3_plain_call_is_another_distribution(tmp_path: Path) -> None:
    """Near-flat logits: top-p 0.9 keeps hundreds of tokens, generate()'s implicit top-k 50 cuts them."""
    rows = (np.random.default_rng(1).standard_normal((4, 1000)) * 0.5).astype(np.float32)
    ref = _generate(tmp_path, LLAMA3, [1, 2, 3], rows)
    plain = S.plain_call(S.Generate.from_config(LLAMA3))
    m = measure(plain.call(), _candle(plain, [1, 2, 3], rows), ref)
    assert max(m.generate_support) <= 50  # top-p 0.9 of the renormalised top 50
    assert min(m.candle_support) > 50 and m.worst > 0.1


def test_negative_control_a_moved_thousandth_is_another_distribution(tmp_path: Path) -> None:
    rows = (np.random.default_rng(2).standard_normal((3, 500)) * 2).astype(np.float32)
    ref = _generate(tmp_path, LLAMA3, [5], rows)
    advised = S.advised(S.Generate.from_config(LLAMA3))
    weights = _candle(advised, [5], rows)
    assert measure(advised.call(), weights, ref).same
    moved = ref.astype(np.float64)
    top = np.argsort(-moved[1])[:2]
    moved[1, top[0]] -= 1e-3
    moved[1, top[1]] += 1e-3
    m = measure(advised.call(), weights, moved)
    assert not m.same and m.worst_step == 1


def test_penalty_window_shorter_than_the_sequence(tmp_path: Path) -> None:
    """transformers penalises the whole sequence; a window of 4 misses the prompt's tokens."""
    doc = {"do_sample": True, "top_k": 0, "repetition_penalty": 1.5}
    rows = np.zeros((2, 300), dtype=np.float32)
    rows[:, :40] = 3.0  # the prompt's tokens are the likely ones: the penalty moves them
    prompt = list(range(40))
    ref = _generate(tmp_path, doc, prompt, rows)
    windowed = S.CandleSampler("All", temperature=1.0, repeat_penalty=1.5, repeat_last_n=4)
    assert [d.key for d in S.differences(S.Generate.from_config(doc), windowed)] == ["window"]
    assert not measure(windowed.call(), _candle(windowed, prompt, rows), ref).same
    whole = S.CandleSampler("All", temperature=1.0, repeat_penalty=1.5, repeat_last_n=None)
    assert measure(whole.call(), _candle(whole, prompt, rows), ref).same


def test_min_p_has_no_candle_equivalent_and_its_counterfactual_removes_it(tmp_path: Path) -> None:
    doc = {**LLAMA3, "min_p": 0.2}
    rows = (np.random.default_rng(3).standard_normal((3, 400)) * 3).astype(np.float32)
    ref = _generate(tmp_path, doc, [7], rows)
    without = _generate(tmp_path, doc, [7], rows, without="min_p")
    advised = S.advised(S.Generate.from_config(doc))
    weights = _candle(advised, [7], rows)
    assert not measure(advised.call(), weights, ref).same
    assert measure(advised.call(), weights, without).same
    assert BOUND < 1e-3


def test_verify_penalises_the_tokens_before_each_step_as_generate_does(tmp_path: Path) -> None:
    """verify's section (`verify_sampling`) on a reference made here: a repetition penalty over
    the whole sequence, and fed tokens that are not in the prompt and are the likely ones at
    every step. Step k's candle context must be prompt + fed[:k], generate()'s; one token more
    penalises the token that step decides, which generate() has not seen yet."""
    from portkit.verify.reference.result import SAMPLING, Reference
    from portkit.verify.sections.sampling import verify_sampling

    doc = {"do_sample": True, "top_k": 0, "repetition_penalty": 1.5}
    prompt, fed = list(range(10)), [200, 201, 202, 203, 204]
    rows = (np.random.default_rng(4).standard_normal((len(fed), 300)) * 0.5).astype(np.float32)
    rows[:, 200:205] += 3.0  # the fed tokens: where a penalty moves the most probability
    rows[:, :10] += 1.0  # the prompt's: penalised on both sides from the first step
    d = tmp_path / "model"
    d.mkdir()
    (d / "generation_config.json").write_text(json.dumps(doc))
    gen = R.distributions(R.generation_config(d), prompt, fed, rows)
    stated = "sampling=All, temperature=1, repeat_penalty=1.5, repeat_last_n=all"
    assert S.differences(S.Generate.from_config(doc), S.parse(stated)) == []  # the program generate() describes
    reference = Reference(prompt=prompt, greedy=[], rows=rows, forced=fed, extra={SAMPLING: gen})
    section = verify_sampling(d, reference, [], stated, pn)
    assert section is not None and section.steps == len(fed)
    assert section.program.same and section.ok, section.program.summary()
    assert section.sequence == len(prompt) + len(fed) - 1  # the tokens before the last step
    # negative control: the same program with each step's context one token longer is another distribution
    program = S.parse(stated)
    longer = [prompt + fed[: k + 1] for k in range(len(fed))]
    shifted = measure(program.call(), pn.sampling_weights(rows, longer, **program.native_kwargs()), gen)
    assert not shifted.same and shifted.worst > 100 * BOUND
