"""Issue 35's "done when" for the RoPE tables: PK317 on each of the nine candle modules that build
their table in the model dtype (`fixtures.rope_half`), verify at f16 past position 2049 and the
f32 twin judged with the same finding.

- f16: PK317 CONFIRMED (mixtral: its f16 forward fails first, PK308 CRASH-CONFIRMED, and PK317
  is judged on PK308's repair, candle's mixtral.rs with its routing weights cast), with the
  distance to transformers at least halved against transformers run with candle's table and the
  effect over the f16 noise;
- f32, the same finding judged: NOT-REPRODUCED, candle within the f32 floor.

Bounds, never this CPU's floats: the measured numbers are docs/verify.md's table.
"""

from __future__ import annotations

import pytest

from fixtures.rope_half import EXPECT, FAMILIES, Outcome, run_family


@pytest.fixture(scope="module")
def outcomes():
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    cache: dict[str, Outcome] = {}

    def get(family: str) -> Outcome:
        if family not in cache:
            cache[family] = run_family(family)
        return cache[family]

    yield get
    mp.undo()


def _shown(o: Outcome) -> str:
    return "\n".join(
        f"{r.options.dtype}: {f.code} {f.verdict}: {f.evidence}" for r in (o.f16, o.f32) for f in r.findings
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_f16_past_2048_positions_is_confirmed(outcomes, family: str) -> None:
    o = outcomes(family)
    assert o.verdicts(o.f16) == EXPECT[family], _shown(o)
    assert len(o.f16.prompt.ids) + o.f16.options.tokens > 2050
    if EXPECT[family]["PK317"] != "CONFIRMED":
        return
    side = o.pk317.details["reference_side"]
    assert side["as_candle"] <= 0.5 * side["as_written"], side
    assert side["effect"] > 2 * side["noise"], side  # margin: measured 4x to 47x (docs/verify.md)
    assert "candle's f16 RoPE table" in o.pk317.evidence
    if "PK308" in EXPECT[family]:
        assert "PK308's fix" in o.pk317.evidence, o.pk317.evidence
    word, line = o.f16.verdict()
    if word == "agree":  # the tokens agree at f16 while the logits move: never "alike"
        assert "confirmed by the logits distance" in line and "alike" not in line, line


@pytest.mark.parametrize("family", FAMILIES)
def test_the_f32_twin_with_the_same_finding_is_not_reproduced(outcomes, family: str) -> None:
    o = outcomes(family)
    assert o.control.verdict == "NOT-REPRODUCED", _shown(o)
    assert o.f32.exit_code == 0, _shown(o)


def test_a_reference_without_candles_table_does_not_confirm(outcomes, monkeypatch) -> None:
    """Negative control of the probe itself: with the counterfactual's table made f32 (the
    reference as written), the distance does not halve and PK317 is not confirmed."""
    from portkit.verify.reference import rope_table

    outcomes("qwen2")  # the cached fixture and candle run
    real = rope_table.candle_cos_sin
    monkeypatch.setattr(rope_table, "candle_cos_sin", lambda inv, pos, _dtype: real(inv, pos, "f32"))
    from fixtures.rope_half import TOKENS, fixture
    from portkit.verify.pipeline import VerifyOptions, verify

    report = verify(VerifyOptions(model_dir=fixture("qwen2"), dtype="f16", tokens=TOKENS, cache=False))
    (f,) = [f for f in report.findings if f.code == "PK317"]
    assert f.verdict != "CONFIRMED", f.evidence
