"""The floor measured in the run (portkit/verify/judge/floor.py): candle is judged on its distance
from transformers in f64 against the f32 reference's own, at the last position, every
teacher-forced step and every value between the layers. Each check has its negative control."""

from __future__ import annotations

import math

import numpy as np
import pytest

from portkit.verify.judge import floor as floors
from portkit.verify.judge.checks import TOLERANCES, compare_layers, compare_logits, compare_steps
from portkit.verify.judge.comparison import Comparison
from portkit.verify.judge.explain import _where
from portkit.verify.judge.floor import FACTOR, measure

F32 = TOLERANCES["f32"]
RNG = np.random.default_rng(0)


def _sides(shape, scale=20.0, noise=1e-5):
    """(f32 reference, its delta to the truth, a healthy candle): both f32 sides `noise` from the truth."""
    truth = RNG.normal(0, scale, shape)
    ref = truth + RNG.normal(0, noise, shape)
    candle = truth + RNG.normal(0, noise, shape)
    return ref.astype(np.float32), (truth - ref.astype(np.float64)).astype(np.float32), candle.astype(np.float32)


def test_a_candle_as_far_from_the_truth_as_the_reference_agrees():
    ref, delta, candle = _sides((256,))
    f = measure(ref, delta, candle)
    assert f.ok and 0.3 < f.ratio < 3 and f.bound == FACTOR * f.floor


def test_negative_control_one_logit_plus_1e3_on_the_reference_side_is_out_of_the_floor():
    """The reference side moved as a whole (its f32 values and the truth): candle is 1e-3 from it."""
    ref, delta, candle = _sides((256,))
    moved = ref.copy()
    moved[0] += np.float32(1e-3)  # delta unchanged: the truth moves with the reference
    c = compare_logits(moved, candle, F32.logits_atol, delta)
    assert not c.ok and c.floor is not None and c.floor.ratio > FACTOR
    assert "MISMATCH" in c.line() and "from f64" in c.line()


def test_just_inside_and_just_outside_the_bound():
    truth = np.linspace(-10, 10, 64)
    ref = truth + 1e-5
    delta = truth - ref
    inside = measure(ref, delta, truth + FACTOR * 1e-5 * 0.99)
    outside = measure(ref, delta, truth + FACTOR * 1e-5 * 1.01)
    assert inside.ok and not outside.ok


def test_nan_is_out_of_any_floor():
    ref, delta, candle = _sides((8,))
    candle[3] = np.nan
    f = measure(ref, delta, candle)
    assert not f.ok and math.isinf(f.ratio)


def test_an_exact_value_has_a_floor_of_a_few_f32_steps_not_zero():
    """An embedding row: both sides exact, the floor is MIN_ULPS steps of its magnitude; one step
    of rounding on candle's side is inside, a 1e-4 relative difference is not."""
    v = np.linspace(-1, 1, 32).astype(np.float32)
    zero = np.zeros_like(v)
    assert measure(v, zero, v).ok
    assert measure(v, zero, np.nextafter(v, np.float32(2))).ok
    assert not measure(v, zero, v * np.float32(1 + 1e-4)).ok


def test_without_the_truth_the_fallback_constant_judges():
    ref, _delta, candle = _sides((16,))
    c = compare_logits(ref, candle + np.float32(2e-4), F32.logits_atol)
    assert c.floor is None and c.tolerance == F32.logits_atol and not c.ok and "(fallback)" in c.line()


def test_steps_are_judged_against_their_floor():
    ref, delta, candle = _sides((5, 64))
    assert compare_steps(ref, candle, near_tie=F32.near_tie, atol=F32.logits_atol, delta=delta).ok
    bad = candle.copy()
    bad[4, 7] += np.float32(1e-3)
    s = compare_steps(ref, bad, near_tie=F32.near_tie, atol=F32.logits_atol, delta=delta)
    assert not s.ok and s.floor is not None and s.floor.ratio > FACTOR


def _stream(err_in: float, cancel: bool):
    """layer.0 carries a massive activation (533) with `err_in` of summation error on both f32
    sides; layer.1 cancels it (output max ~1), carrying the error in."""
    base = RNG.normal(0, 1, (6, 16))
    big = base.copy()
    big[:, 3] = 533.0
    out = base * 0.5 if cancel else big
    ref = {"embeddings": base, "layer.0": big, "layer.1": out}
    truth = {k: v for k, v in ref.items()}

    def noise(k: str, a: np.ndarray) -> np.ndarray:  # the embeddings are exact on both sides
        return (a if k == "embeddings" else a + RNG.normal(0, err_in, a.shape)).astype(np.float32)

    r32 = {k: noise(k, v) for k, v in truth.items()}
    c32 = {k: noise(k, v) for k, v in truth.items()}
    deltas = {k: (truth[k] - r32[k].astype(np.float64)).astype(np.float32) for k in truth}
    return r32, c32, deltas


def test_an_error_carried_into_a_cancelling_layer_is_within_its_floor():
    """The SmolLM2 shape: layer.9 cancels layer.8's massive activation. Against the floor it is
    healthy; the fallback divides by the larger of the input's and the output's scale, so it is
    healthy there too, where dividing by the output's alone read 9e-4 / 117 as a fault."""
    r32, c32, deltas = _stream(4e-4, cancel=True)
    measured = compare_layers(r32, c32, F32.layer_rtol, deltas)
    assert measured.ok and measured.measured and measured.row("layer.1").floor is not None
    fallback = compare_layers(r32, c32, F32.layer_rtol)
    assert fallback.ok
    own_scale = fallback.row("layer.1").max_abs_diff / fallback.row("layer.1").max_abs_ref
    assert own_scale > F32.layer_rtol  # what the output's own scale would have said


def test_a_layer_that_adds_its_own_error_is_out_of_its_floor():
    r32, c32, deltas = _stream(4e-6, cancel=False)
    c32["layer.1"] = c32["layer.1"] * np.float32(1 + 1e-4)
    check = compare_layers(r32, c32, F32.layer_rtol, deltas)
    assert not check.ok and check.first_over == "layer.1" and check.row("layer.1").floor.ratio > FACTOR


def test_the_headline_quotes_the_number_that_failed_not_the_one_that_passed():
    ref, delta, candle = _sides((4, 64))
    bad = candle.copy()
    bad[2, 1] += np.float32(1e-3)
    c = Comparison(
        tolerance=F32,
        last=compare_logits(ref[0], bad[0], F32.logits_atol, delta[0]),
        steps=compare_steps(ref, bad, near_tie=F32.near_tie, atol=F32.logits_atol, delta=delta),
    )
    assert c.last.ok and not c.steps.ok and not c.ok
    head = c.headline()
    assert head.startswith("teacher-forced logits differ") and "logits differ" not in head.split("teacher-forced", 1)[0]
    assert f"{FACTOR:g}x transformers' own f32 error" in head


@pytest.mark.parametrize("layers_ok", [True, False])
def test_where_never_says_no_per_layer_values_when_they_were_compared(layers_ok):
    r32, c32, deltas = _stream(4e-6, cancel=False)
    if not layers_ok:
        c32["layer.1"] = c32["layer.1"] * np.float32(1.01)
    c = Comparison(tolerance=F32)
    c.judge_layers(r32, c32, no_sublayers_hint="-", deltas=deltas)
    where = _where(c.localisation, None, c)
    assert "no per-layer values" not in where
    assert ("agrees, so it starts after the prefill's layers" in where) == layers_ok


def test_per_position_is_against_the_truth():
    t = np.ones((3, 4))
    g = t.copy()
    g[2, 1] = 1.5
    assert floors.per_position(t, g).tolist() == [0.0, 0.0, 0.5]


def test_a_fault_under_the_layers_bound_that_shows_at_the_norm_is_named_at_its_layer():
    """One layer adds 30 floors (under 64x), the final norm is 20 floors out: the first bad layer
    is the first one adding more than 8x before it, not the norm; a healthy layer at 5x is not."""
    truth = {k: RNG.normal(0, 1, (4, 8)) for k in ("embeddings", "layer.0", "layer.1", "layer.2", "norm")}
    r32 = {k: (v + 1e-6).astype(np.float32) for k, v in truth.items()}
    deltas = {k: (truth[k] - r32[k].astype(np.float64)).astype(np.float32) for k in truth}
    c32 = {k: v.copy() for k, v in r32.items()}
    c32["layer.0"] = (truth["layer.0"] + 5e-6).astype(np.float32)  # healthy-ish: 5 floors
    for k, err in (("layer.1", 5e-6 + 3e-5), ("layer.2", 5e-6 + 3e-5), ("norm", 2e-5)):
        c32[k] = (truth[k] + err).astype(np.float32)
    check = compare_layers(r32, c32, F32.layer_rtol, deltas)
    assert not check.row("layer.1").over and check.row("norm").over
    assert check.first_over == "layer.1"


def test_a_window_that_only_the_steps_miss_is_quoted_by_the_steps_number():
    """PK115's patched run: the prompt's last position agrees, the generated steps do not (a real
    flip): the headline quotes the steps' distance, never the last position's that passed."""
    ref, delta, candle = _sides((3, 64))
    bad = candle.copy()
    bad[2] = ref[2][::-1]  # another row: a real argmax flip and a large distance
    c = Comparison(
        tolerance=F32,
        last=compare_logits(ref[0], bad[0], F32.logits_atol, delta[0]),
        steps=compare_steps(ref, bad, near_tie=F32.near_tie, atol=F32.logits_atol, delta=delta),
    )
    assert c.last.ok and c.steps.real_flips
    head = c.headline()
    assert head.startswith("teacher-forced logits differ") and "real flip" in head
    assert f"{c.last.max_abs_diff:.2e}" not in head


def test_a_layer_run_on_candles_input_is_judged_on_its_own_error():
    """`own`: transformers' layer.1 on candle's layer.0 output (f32 value, f64 delta). candle's
    layer.0 carries a large error in; layer.1 adds nothing of its own: within its floor, though
    its accumulated error is far out. The same layer adding 1e-4 relative of its own is out."""
    r32, c32, deltas = _stream(4e-6, cancel=False)
    c32["layer.0"] = (r32["layer.0"] + np.float32(1e-3)).astype(np.float32)  # carried in
    truth1 = r32["layer.1"].astype(np.float64) + deltas["layer.1"] + 1e-3  # the f64 layer on candle's input
    fed32 = (truth1 + RNG.normal(0, 4e-6, truth1.shape)).astype(np.float32)
    own = {"layer.1": (fed32, (truth1 - fed32).astype(np.float32))}
    c32["layer.1"] = (truth1 + RNG.normal(0, 4e-6, truth1.shape)).astype(np.float32)
    check = compare_layers(r32, c32, F32.layer_rtol, deltas, own)
    row = check.row("layer.1")
    assert row.floor.kind == "own" and row.floor.factor == floors.OWN_FACTOR and row.floor.ok and check.ok
    c32["layer.1"] = (truth1 * (1 + 1e-4)).astype(np.float32)
    bad = compare_layers(r32, c32, F32.layer_rtol, deltas, own)
    assert bad.row("layer.1").over and bad.first_over == "layer.1"
