"""What a truth delta is (`reference.compute.truth_deltas`): the f64 value minus the f32 value, so
that `floor.truth_of(f32, delta)` is the f64 value and a candle that computed the f64 value
exactly is at distance 0 from the truth. Checked on values whose f32 and f64 results IEEE 754
fixes on every CPU (one correctly rounded division each)."""

from __future__ import annotations

import numpy as np

from portkit.verify.judge.floor import measure, truth_of
from portkit.verify.reference.compute import TRUTH, truth_deltas

F32 = np.array(
    [[np.float32(1) / np.float32(3), np.float32(7) / np.float32(10)]], dtype=np.float32
)  # 0.33333334, 0.69999999
F64 = np.array([[1 / 3, 7 / 10]])


def test_a_delta_is_f64_minus_f32() -> None:
    """f32's 1/3 rounds up and its 7/10 down: the deltas are negative and positive, about one f32
    step (6e-8 at these magnitudes) apart from the f64 values, as f64 - f32 gives them."""
    out = truth_deltas(F32, {}, F64, {})
    delta = out[TRUTH + "rows"]
    assert delta.dtype == np.float32 and delta.shape == F32.shape
    assert np.array_equal(delta, (F64 - F32.astype(np.float64)).astype(np.float32))
    assert delta[0, 0] < 0 < delta[0, 1]
    assert 9.9e-9 < -delta[0, 0] < 1e-8 and 1.19e-8 < delta[0, 1] < 1.2e-8
    # negative control: f32 - f64, the other sign, is another array
    assert not np.array_equal(delta, (F32.astype(np.float64) - F64).astype(np.float32))


def test_the_f32_value_plus_its_delta_is_the_truth() -> None:
    """`truth_of` adds the delta back: the f64 value to f32's precision of the (small) delta, and a
    candle equal to the f64 value is at distance 0 while the f32 reference is |delta| away."""
    delta = truth_deltas(F32, {}, F64, {})[TRUTH + "rows"]
    truth = truth_of(F32, delta)
    assert np.abs(truth - F64).max() <= 1e-15
    f = measure(F32, delta, F64)
    assert f.candle <= 1e-15 and f.reference == float(np.abs(delta).max()) and f.ok
    # negative control: with the delta's sign flipped the truth is 2|delta| from the f64 value
    wrong = truth_of(F32, -delta)
    assert np.abs(wrong - F64).min() > 1.9e-8


def test_layers_get_deltas_where_both_runs_have_them_with_the_same_shape() -> None:
    rows64 = np.concatenate([F64, F64 * 2])  # the f64 run may have a row more: cut to the f32 rows
    layers = {"layer.0": F32[0].copy(), "norm": F32[0].copy(), "only.f32": F32[0].copy()}
    layers64 = {"layer.0": F64[0].copy(), "norm": F64[0, :1].copy()}
    out = truth_deltas(F32, layers, rows64, layers64)
    assert sorted(out) == [TRUTH + "layer.0", TRUTH + "rows"]
    assert out[TRUTH + "rows"].shape == F32.shape
    assert np.array_equal(out[TRUTH + "layer.0"], out[TRUTH + "rows"][0])
    assert out[TRUTH + "layer.0"][0] < 0 < out[TRUTH + "layer.0"][1]


def test_a_truth_measures_a_floor_only_where_both_sides_are_finite() -> None:
    """`floor.usable_truth` is the one test of the truth for decoders and encoders: present, one
    value per reference value, finite on both sides; anything else falls back."""
    from portkit.verify.judge.checks import compare_logits
    from portkit.verify.judge.floor import usable_truth

    ref = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    delta = np.array([1e-7, -1e-7, 2e-7])
    assert usable_truth(ref, delta) is not None and usable_truth(ref, delta).shape == ref.shape
    assert usable_truth(ref, None) is None
    assert usable_truth(ref, delta[:2]) is None
    assert usable_truth(ref, np.array([1e-7, np.nan, 0.0])) is None
    bad_ref = np.array([1.0, np.inf, 3.0], dtype=np.float32)
    assert usable_truth(bad_ref, delta) is None
    # a reference with inf is judged by the constants, never by a floor its own inf measured
    assert compare_logits(bad_ref, ref, atol=1e-4, delta=delta).floor is None
    assert compare_logits(ref, ref, atol=1e-4, delta=delta).floor is not None
