"""`portkit.semantics.sampling`: generate()'s sampler and a candle program's, as settings (PK510).

The distributions are tests/native/test_sampling_probe.py's; here, what each side is set to and
which differences portkit names."""

from __future__ import annotations

import pytest

from portkit.semantics import sampling as S

LLAMA3 = {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "bos_token_id": 1}


def keys(gen: dict, program: S.CandleSampler) -> list[str]:
    return [d.key for d in S.differences(S.Generate.from_config(gen), program)]


def test_generate_fills_in_transformers_defaults() -> None:
    g = S.Generate.from_config(LLAMA3)
    assert (g.do_sample, g.temperature, g.top_k, g.top_p, g.repetition_penalty) == (True, 0.6, 50, 0.9, 1.0)
    assert "top_k" not in g.stated and g.applies_top_k
    assert S.Generate.from_config({}).do_sample is False
    # top_k 0 turns the warper off (generation/utils.py: `top_k != 0`)
    assert not S.Generate.from_config({**LLAMA3, "top_k": 0}).applies_top_k


def test_llama3_plain_call_lacks_the_implicit_top_k() -> None:
    g = S.Generate.from_config(LLAMA3)
    plain = S.plain_call(g)
    assert plain.processor() == "LogitsProcessor::new(seed, Some(0.6), Some(0.9))"
    diffs = S.differences(g, plain)
    assert [d.key for d in diffs] == ["top_k"]
    assert "fills `top_k`=50" in diffs[0].message
    assert diffs[0].fixed is not None and not S.differences(g, diffs[0].fixed)


def test_the_advised_call_has_no_difference() -> None:
    for doc in (
        LLAMA3,
        {**LLAMA3, "top_k": 20},
        {**LLAMA3, "top_p": 1.0},
        {**LLAMA3, "top_k": 0},
        {"do_sample": True},
        {"repetition_penalty": 1.3},
        {**LLAMA3, "repetition_penalty": 1.2},
        {},
    ):
        g = S.Generate.from_config(doc)
        assert S.differences(g, S.advised(g)) == [], doc


def test_top_k_then_top_p_is_named_for_not_renormalising() -> None:
    program = S.parse("temperature=1, top_k=20, top_p=0.8")
    assert program.sampling == "TopKThenTopP"
    assert keys({"do_sample": True, "top_k": 20, "top_p": 0.8}, program) == ["renormalisation"]


def test_candle_examples_presets() -> None:
    assert keys(LLAMA3, S.parse("candle-examples")) == ["greedy", "repetition_penalty"]
    assert keys(LLAMA3, S.parse("candle-examples-llama")) == ["temperature", "top_k", "top_p", "repetition_penalty"]
    # greedy with the same penalty: only the window differs
    assert keys({"repetition_penalty": 1.1}, S.parse("candle-examples")) == ["window"]
    assert keys({}, S.parse("greedy")) == []


def test_settings_without_a_candle_equivalent() -> None:
    g = S.Generate.from_config(
        {**LLAMA3, "min_p": 0.05, "typical_p": 1.0, "no_repeat_ngram_size": 3, "epsilon_cutoff": 0.0}
    )
    assert g.no_equivalent == {"min_p": 0.05, "no_repeat_ngram_size": 3}
    found = [d for d in S.differences(g, S.advised(g))]
    assert [(d.key, d.reference_without) for d in found] == [
        ("min_p", "min_p"),
        ("no_repeat_ngram_size", "no_repeat_ngram_size"),
    ]
    assert "stays different: `min_p`, `no_repeat_ngram_size`" in S.advice(g)
    # min_p only acts when sampling
    assert S.Generate.from_config({"min_p": 0.05}).no_equivalent == {}


def test_effective_variant_follows_logits_processor_new() -> None:
    assert S.CandleSampler("new").effective()[0] == "ArgMax"
    assert S.CandleSampler("new", temperature=1e-8).effective()[0] == "ArgMax"
    assert S.CandleSampler("new", temperature=0.7).effective()[0] == "All"
    assert S.CandleSampler("new", temperature=0.7, top_p=0.9).effective()[0] == "TopP"
    assert S.CandleSampler("TopP", temperature=0.7, top_p=1.0).effective()[0] == "All"


def test_parse_refuses_with_one_line() -> None:
    for bad, text in (
        ("bogus", "a preset"),
        ("temperature=hot", "not a number"),
        ("colour=1", "unknown key"),
        ("sampling=TopK, temperature=1", "needs top_k"),
        ("sampling=Nucleus", "unknown sampling"),
    ):
        with pytest.raises(S.SamplerError, match=text):
            S.parse(bad)
    assert S.parse("temperature=0.6, top_p=0.9, repeat_penalty=1.1, repeat_last_n=all").repeat_last_n is None


def test_a_stated_temperature_of_zero_is_argmax() -> None:
    """candle-examples' llama (main.rs:226-238): `temperature <= 0` is `Sampling::ArgMax`. Read as
    sampling at temperature 0, `--sampler temperature=0` would be another program."""
    for text in ("temperature=0", "temperature=0.0", "temperature=-1", "temperature=0, top_k=40, top_p=0.9"):
        p = S.parse(text)
        assert p.sampling == "ArgMax" and not p.samples, text
        assert p.processor() == "LogitsProcessor::from_sampling(seed, Sampling::ArgMax)"
    # negative control: any temperature above zero samples, the variant following top_k and top_p
    assert S.parse("temperature=0.01").sampling == "All" and S.parse("temperature=0.01").samples
    assert S.parse("temperature=0.5, top_k=40").sampling == "TopK"
    assert S.parse("temperature=0.5, top_p=0.9").sampling == "TopP"
    assert S.parse("temperature=0.5, top_k=40, top_p=0.9").sampling == "TopKThenTopP"
    assert S.parse("top_k=40").sampling == "ArgMax"  # no temperature: greedy too


def test_call_text_is_the_rust_a_program_writes() -> None:
    a = S.advised(S.Generate.from_config({**LLAMA3, "repetition_penalty": 1.2}))
    assert a.call() == (
        "apply_repeat_penalty(&logits, 1.2, &tokens), then LogitsProcessor::from_sampling(seed, Sampling::TopP { p: "
        "0.9, temperature: 0.6 }), then sample_f(&logits, |prs| keep_top_k_renormalised(prs, 50))"
    )
