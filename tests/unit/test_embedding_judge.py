"""verify's judging of an embedding model, on numbers made here (no model, no candle): pooling as
sentence-transformers pools, the floor measured against the truth, pads left out, and the
counterfactual programs' verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from portkit.verify.embedding.candle import CandleSide, apply_steps, program_mask
from portkit.verify.embedding.judge import check_batch, check_row, floor_of
from portkit.verify.embedding.pooling import cosine, normalize, pool
from portkit.verify.embedding.reference import Side, Step

RNG = np.random.default_rng(0)
HIDDEN = RNG.standard_normal((2, 5, 8)).astype(np.float32)
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def test_mean_pooling_leaves_pads_out():
    got = pool(HIDDEN, MASK, "mean")
    assert np.allclose(got[1], HIDDEN[1, :3].mean(axis=0), atol=1e-6)
    assert not np.allclose(got[1], HIDDEN[1].mean(axis=0), atol=1e-3)  # a pad counted would move it


@pytest.mark.parametrize(
    ("mode", "expect"),
    [
        ("cls", lambda h: h[1, 0]),
        ("max", lambda h: h[1, :3].max(axis=0)),
        ("lasttoken", lambda h: h[1, 2]),
        ("mean_sqrt_len_tokens", lambda h: h[1, :3].sum(axis=0) / np.sqrt(3)),
    ],
)
def test_each_pooling_mode_reads_the_tokens_only(mode, expect):
    assert np.allclose(pool(HIDDEN, MASK, mode)[1], expect(HIDDEN), atol=1e-6)


def test_lasttoken_with_left_padding_takes_the_last_position():
    left = np.array([[0, 0, 1, 1, 1]])
    assert np.allclose(pool(HIDDEN[:1], left, "lasttoken")[0], HIDDEN[0, 4])


def test_an_unknown_pooling_mode_is_refused():
    with pytest.raises(ValueError, match="weightedmean"):
        pool(HIDDEN, MASK, "weightedmean")


def test_normalize_gives_unit_rows_and_cosine_of_a_row_with_itself_is_one():
    n = normalize(HIDDEN[:, 0])
    assert np.allclose((n.astype(np.float64) ** 2).sum(axis=1), 1.0, atol=1e-6)
    assert np.allclose(cosine(n, n), 1.0)


def test_the_mask_each_module_wants():
    assert program_mask("bert", MASK) == MASK.tolist()
    assert program_mask("distilbert", MASK) == (1 - MASK).tolist()  # distilbert.rs: 1 is masked
    assert program_mask("jina_bert", MASK) is None  # its forward takes no mask
    assert program_mask("bert", MASK, passed=False) is None


STEPS = (Step("pool", mode="mean"), Step("normalize"))


def _sides(delta: float, pad_noise: float = 0.0):
    """truth (f64-like), reference = truth + 1e-7 noise, candle = truth + `delta` on a token; pads get `pad_noise`."""
    truth_last = HIDDEN.astype(np.float64)
    ref_last = truth_last + 1e-7 * RNG.standard_normal(truth_last.shape)
    got_last = truth_last.copy()
    got_last[:, 0, 0] += delta
    got_last[1, 3:] += pad_noise  # what a pad holds is nobody's output
    emb = lambda h: apply_steps(h.astype(np.float32), MASK, STEPS)  # noqa: E731
    truth = Side(apply_steps(truth_last, MASK, STEPS).astype(np.float64), truth_last, None)
    ref = Side(emb(ref_last), ref_last.astype(np.float32), None)
    got = CandleSide(emb(got_last), got_last.astype(np.float32), None)
    return got, ref, truth


def test_candle_at_the_reference_own_distance_agrees_and_1e3_off_does_not():
    got, ref, truth = _sides(0.0)
    ok = check_row("t", "short", MASK[0], got, ref, truth, row=0)
    assert ok.ok and ok.cosine > 0.999999
    got, ref, truth = _sides(1e-3)  # the negative control: one value 1e-3 off
    bad = check_row("t", "short", MASK[0], got, ref, truth, row=0)
    assert not bad.ok and bad.embedding is not None and bad.embedding.ratio > 8


def test_a_pad_position_is_never_judged():
    got, ref, truth = _sides(0.0, pad_noise=5.0)
    assert check_row("t", "short", MASK[1], got, ref, truth, row=1).ok


def test_nan_from_candle_is_out_of_the_floor_and_reads_nonfinite():
    got, ref, truth = _sides(math.nan)
    r = check_row("t", "short", MASK[0], got, ref, truth, row=0)
    assert not r.ok and r.nonfinite


def test_a_batch_row_is_judged_against_the_reference_batch_and_compared_with_the_text_alone():
    got, ref, truth = _sides(0.0)
    alone = [CandleSide(got.embeddings[i : i + 1], got.last[i : i + 1], None) for i in range(2)]
    b = check_batch([("a", "x"), ("b", "y")], MASK, got, ref, truth, alone)
    assert b.ok and b.padded_rows == 1 and all(r.alone_diff == 0.0 for r in b.rows)


def test_a_candle_failure_is_a_row_that_differs_with_candle_s_words():
    got = CandleSide(None, None, None, failure="unexpected rank, expected: 3, got: 2")
    _, ref, truth = _sides(0.0)
    r = check_row("t", "short", MASK[0], got, ref, truth)
    assert not r.ok and "unexpected rank" in (r.failure or "")


def test_a_batch_truth_row_that_is_not_finite_is_the_text_alone() -> None:
    """transformers' ModernBERT in f64 gives NaN on a padded batch's pads, and mean pooling carries
    it into the vector: that row's truth becomes the same text alone; finite rows, and a row whose
    text alone is not finite either, stay as they are."""
    from portkit.verify.embedding.reference import Side, rows_alone_where_not_finite

    mask = np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    last = np.arange(18, dtype=np.float64).reshape(3, 3, 2)
    last[0, 2] = np.nan
    emb = np.array([[np.nan, 1.0], [2.0, 3.0], [np.nan, 4.0]])
    truth = Side(embeddings=emb, last=last, hidden=None)
    alone = [Side(np.array([[5.0, 6.0]]), np.array([[[7.0, 8.0], [9.0, 10.0]]]), None),
             Side(np.array([[0.0, 0.0]]), np.zeros((1, 3, 2)), None),
             Side(np.array([[np.nan, 0.0]]), np.zeros((1, 1, 2)), None)]  # fmt: skip
    fixed = rows_alone_where_not_finite(truth, mask, alone)
    assert fixed.embeddings[0].tolist() == [5.0, 6.0] and fixed.last[0][:2].tolist() == [[7.0, 8.0], [9.0, 10.0]]
    assert fixed.embeddings[1].tolist() == [2.0, 3.0] and np.array_equal(fixed.last[1], last[1])  # finite: untouched
    assert np.isnan(fixed.embeddings[2][0])  # its text alone is no truth either: left for the judge's no-truth floor
    assert np.isnan(truth.embeddings[0][0])  # the input is not changed in place
    finite = Side(embeddings=emb[1:2], last=last[1:2], hidden=None)
    assert rows_alone_where_not_finite(finite, mask[1:2], alone[1:2]) is finite


def test_where_the_truth_is_not_finite_candle_is_measured_against_the_f32_reference() -> None:
    """transformers in f64 NaN where its f32 run is finite (ModernBERT's padded batch): the floor
    is "no-truth" and candle's distance is to the f32 reference, on the least floor. Measured
    against the NaN truth instead, a candle equal to the reference would read out of its floor."""
    ref = np.array([1.0, 2.0], dtype=np.float32)
    truth = np.array([math.nan, 2.0])
    f = floor_of(ref.copy(), ref, truth)
    assert f.kind == "no-truth" and f.candle == 0.0 and f.reference == 0.0 and f.ok
    # negative control: candle 1e-3 from the reference is out of the least floor (a few f32 steps of 2)
    off = floor_of(np.array([1.0 + 1e-3, 2.0], dtype=np.float32), ref, truth)
    assert off.kind == "no-truth" and not off.ok and 9e-4 < off.candle < 1.1e-3
    # a finite truth is the truth: candle and the reference measured from it
    g = floor_of(ref.copy(), ref, np.array([1.0 + 1e-3, 2.0]))
    assert g.kind == "value" and g.candle == g.reference > 0 and g.ok
