"""`portkit.verify.judge.checks`: every judgement at its boundary, on arrays whose answer is known.

Pure numpy: the numbers verify prints next to each tolerance, the side of the tolerance each
lands on (equal passes, NaN never does), argmax flips with the reference's top-2 margin, and
where free generation forks.
"""

from __future__ import annotations

import numpy as np
import pytest

from portkit.verify.judge.checks import (
    TOLERANCES,
    GreedyCheck,
    ShapeMismatch,
    compare_greedy,
    compare_layers,
    compare_logits,
    compare_steps,
    top2_margin,
)


def test_tolerances_are_the_documented_numbers() -> None:
    got = {n: (t.logits_atol, t.layer_rtol, t.near_tie) for n, t in TOLERANCES.items()}
    assert got == {
        "f32": (1e-4, 1e-5, 1e-4),
        "f16": (None, None, 0.0625),
        "bf16": (None, None, 0.5),
        "q8_0": (None, None, 0.3),
        "q4_k": (None, None, 0.6),
    }
    assert all(t.name == n for n, t in TOLERANCES.items())


# --------------------------------------------------------------------------- logits


def test_logits_within_and_just_over_the_tolerance() -> None:
    ref = np.array([1.0, -3.0, 2.0, 0.5])
    at = compare_logits(ref, ref + np.array([0.0, 0.0, 0.25, 0.0]), 0.25)
    assert at.ok and at.max_abs_diff == 0.25 and at.worst_index == 2  # equal to the tolerance passes
    over = compare_logits(ref, ref + np.array([0.0, -0.2500001, 0.0, 0.0]), 0.25)
    assert not over.ok and over.worst_index == 1
    assert over.n == 4 and over.max_abs_ref == 3.0 and over.tolerance == 0.25


def test_logits_nan_is_a_mismatch_even_without_a_tolerance() -> None:
    ref = np.array([1.0, 2.0, 3.0])
    got = np.array([1.0, np.nan, 3.0])
    for atol in (1e-4, None):
        c = compare_logits(ref, got, atol)
        assert np.isnan(c.max_abs_diff) and not c.ok


def test_logits_without_a_tolerance_are_reported_not_judged() -> None:
    c = compare_logits(np.zeros(3), np.array([0.0, 7.0, 0.0]), None)
    assert c.ok and c.max_abs_diff == 7.0
    assert c.line().endswith("(reported; judged by per-step argmax)")
    assert c.line().startswith("logits     n=3      max|diff|=7.00e+00  max|ref|=0  ")


def test_logits_line_says_ok_or_mismatch() -> None:
    ok = compare_logits(np.ones(2), np.ones(2), 1e-4)
    assert ok.line("last") == "last       n=2      max|diff|=0.00e+00  max|ref|=1  tol=1e-04 (fallback)  OK"
    bad = compare_logits(np.ones(2), np.zeros(2), 1e-4)
    assert bad.line().endswith("tol=1e-04 (fallback)  MISMATCH")


def test_empty_logits_and_shape_mismatch() -> None:
    c = compare_logits(np.zeros(0), np.zeros(0), 1e-4)
    assert c.ok and c.n == 0 and c.max_abs_diff == 0.0 and c.max_abs_ref == 0.0 and c.worst_index == 0
    with pytest.raises(ShapeMismatch, match=r"^logits: shape \(4,\) from candle, \(3,\) from the reference$"):
        compare_logits(np.zeros(3), np.zeros(4), 1e-4)


# --------------------------------------------------------------------------- layers


def test_layer_relative_error_at_the_tolerance() -> None:
    ref = {"embeddings": np.array([2.0, -4.0]), "layer.0": np.array([10.0, 0.0]), "zero": np.zeros(2)}
    # layer.0 is judged on the error it adds: its difference less its input's, elementwise
    got = {
        "embeddings": np.array([2.0 + 4e-5, -4.0]),
        "layer.0": np.array([10.0, 1.0001e-4]),
        "zero": np.array([0.0, 3e-6]),
    }
    c = compare_layers(ref, got, 1e-5)
    rows = {r.name: r for r in c.rows}
    assert [r.name for r in c.rows] == ["embeddings", "layer.0", "zero"]  # the reference's order
    assert rows["embeddings"].rel == pytest.approx(1e-5) and not rows["embeddings"].over  # equal passes
    assert rows["layer.0"].max_abs_ref == 10.0 and rows["layer.0"].rel == pytest.approx(1.0001e-5)
    assert rows["layer.0"].over
    assert rows["zero"].rel == pytest.approx(3e-6) and not rows["zero"].over  # max|ref| 0: the diff itself
    assert c.first_over == "layer.0" and not c.ok and c.rtol == 1e-5
    assert c.max_rel == pytest.approx(1.0001e-5)
    table = c.table().splitlines()
    assert table[0] == f"{'name':<12}{'max|ref|':>12}{'max|diff|':>12}{'rel':>10}"
    assert table[2].endswith("  <- over") and not table[1].endswith("over") and not table[3].endswith("over")


def test_layers_all_within_and_empty() -> None:
    ref = {"a": np.array([1.0, 2.0])}
    c = compare_layers(ref, {"a": np.array([1.0, 2.0])}, 1e-5)
    assert c.ok and c.first_over is None and c.max_rel == 0.0
    assert compare_layers({}, {}, 1e-5).max_rel == 0.0


def test_layer_names_and_shapes_must_match() -> None:
    with pytest.raises(ShapeMismatch, match=r"captured names differ: candle \['a'\], reference \['a', 'b'\]"):
        compare_layers({"a": np.zeros(1), "b": np.zeros(1)}, {"a": np.zeros(1)}, 1e-5)
    with pytest.raises(ShapeMismatch, match="names differ"):
        compare_layers({"a": np.zeros(1), "b": np.zeros(1)}, {"b": np.zeros(1), "a": np.zeros(1)}, 1e-5)
    with pytest.raises(ShapeMismatch, match=r"^layer.3: shape \(2,\) from candle, \(1,\) from the reference$"):
        compare_layers({"layer.3": np.zeros(1)}, {"layer.3": np.zeros(2)}, 1e-5)


# --------------------------------------------------------------------------- teacher-forced steps


def test_top2_margin() -> None:
    assert top2_margin(np.array([1.0, 5.0, 3.5, -2.0])) == 1.5
    assert top2_margin(np.array([4.0, 4.0, 1.0])) == 0.0


def test_steps_count_flips_with_the_reference_margin() -> None:
    ref = np.array([[5.0, 1.0, 0.0], [0.0, 3.0, 2.9], [1.0, 0.0, 4.0], [2.0, 2.2, 0.0]])
    got = np.array([[5.0, 1.0, 0.0], [0.0, 2.9, 3.0], [9.0, 0.0, 4.0], [2.2, 2.0, 0.0]])
    c = compare_steps(ref, got, near_tie=0.2, atol=None)
    assert (c.steps, c.agree) == (4, 1)
    assert [(d.step, d.ref_token, d.got_token) for d in c.disagreements] == [(1, 1, 2), (2, 2, 0), (3, 1, 0)]
    margins = [d.ref_margin for d in c.disagreements]
    assert margins == pytest.approx([0.1, 3.0, 0.2])
    # under the near-tie line is a fair pick; at it or above is a real flip
    assert [d.near_tie for d in c.disagreements] == [True, False, False]
    assert [d.step for d in c.real_flips] == [2, 3]
    assert not c.ok
    assert c.max_abs_diff == 8.0 and c.max_abs_ref == 5.0
    assert c.median_abs_diff == pytest.approx(np.median([0.0, 0.1, 8.0, 0.2]))
    assert c.line() == (
        "steps=4 argmax 1/4  max|diff|=8.00e+00 median=1.50e-01 max|ref|=5  differing steps (ref margin): 1(0.1) 2(3!) "
        "3(0.2!)"
    )


def test_steps_near_ties_only_pass_without_atol_and_fail_over_it() -> None:
    ref = np.array([[1.0, 1.25], [3.0, 0.0]])
    got = np.array([[1.25, 1.0], [3.0, 0.0]])
    assert compare_steps(ref, got, near_tie=0.5, atol=None).ok
    assert compare_steps(ref, got, near_tie=0.5, atol=0.25).ok  # 0.25 == atol passes
    assert not compare_steps(ref, got, near_tie=0.5, atol=0.2499).ok
    assert not compare_steps(ref, got, near_tie=0.25, atol=None).ok  # margin 0.25 is not under 0.25
    same = compare_steps(ref, ref, near_tie=0.1, atol=0.0)
    assert same.ok and same.disagreements == [] and "differing" not in same.line()
    assert same.near_tie == 0.1 and same.atol == 0.0 and same.nonfinite_steps == []
    with pytest.raises(
        ShapeMismatch, match=r"^per-step logits: shape \(1, 2\) from candle, \(2, 2\) from the reference$"
    ):
        compare_steps(ref, ref[:1], near_tie=0.1, atol=None)


# --------------------------------------------------------------------------- greedy


def test_greedy_first_divergence() -> None:
    assert GreedyCheck([1, 2, 3], [1, 2, 3]).first_divergence is None
    assert GreedyCheck([1, 2, 3], [1, 5, 3]).first_divergence == 1
    assert GreedyCheck([1, 2, 3], [1, 2]).first_divergence == 2  # candle stopped early
    assert GreedyCheck([1], [1, 2]).first_divergence == 1
    assert GreedyCheck([], []).ok and GreedyCheck([1, 2], [1, 2]).line() == "greedy     n=2      identical"


def test_greedy_margin_from_step_rows_and_near_tie_boundary() -> None:
    steps = np.array([[9.0, 0.0, 0.0], [0.0, 2.0, 1.75]])
    tie = compare_greedy([0, 1], [0, 2], step_rows=steps, near_tie=0.3)
    assert tie.ref_margin == 0.25 and tie.at_near_tie and tie.ok
    assert tie.line() == "greedy     n=2      first divergence at token 1 (ref margin 0.25, near tie)"
    edge = compare_greedy([0, 1], [0, 2], step_rows=steps, near_tie=0.25)
    assert not edge.at_near_tie and not edge.ok  # a margin equal to the line is not under it
    assert edge.line() == "greedy     n=2      first divergence at token 1 (ref margin 0.25)"
    none = compare_greedy([0, 1], [0, 2], step_rows=steps)  # no near-tie line: any fork fails
    assert none.ref_margin == 0.25 and not none.at_near_tie and not none.ok


def test_greedy_margin_from_prompt_rows() -> None:
    rows = np.zeros((5, 3))
    rows[3] = [0.0, 4.0, 3.9]  # prompt of 3: token 1 is decided at row 3
    rows[2] = [5.0, 0.0, 0.0]
    c = compare_greedy([0, 1], [0, 2], ref_rows=rows, prompt_len=3, near_tie=0.2)
    assert c.ref_margin == pytest.approx(0.1) and c.ok
    assert compare_greedy([0, 1], [0, 2], ref_rows=rows, near_tie=0.2).ref_margin is None  # no prompt length
    assert compare_greedy([0, 1], [0, 2], prompt_len=3, near_tie=0.2).ref_margin is None


def test_greedy_without_a_row_for_the_fork_has_no_margin() -> None:
    steps = np.array([[9.0, 0.0]])
    c = compare_greedy([0, 1], [0, 0], step_rows=steps, near_tie=10.0)
    assert c.first_divergence == 1 and c.ref_margin is None and not c.ok
    # candle generated more tokens: the fork is past the reference's, no margin to read
    c = compare_greedy([0], [0, 1], step_rows=np.zeros((2, 2)), near_tie=10.0)
    assert c.first_divergence == 1 and c.ref_margin is None and not c.ok
    # a negative row (prompt_len 0) is not read from the end
    rows = np.zeros((3, 2))
    rows[-1] = [0.0, 0.01]
    c = compare_greedy([0, 1], [1, 1], ref_rows=rows, prompt_len=0, near_tie=10.0)
    assert c.ref_margin is None and not c.ok


# --------------------------------------------------------------------------- mutmut's survivors


def test_integer_inputs_are_compared_as_numbers_not_wrapped() -> None:
    """Everything is widened to float64 first: uint8 0 - 1 is -1, not 255."""
    a, b = np.array([0, 5], dtype=np.uint8), np.array([1, 5], dtype=np.uint8)
    assert compare_logits(a, b, None).max_abs_diff == 1.0
    rows_a, rows_b = np.array([[0, 9]], dtype=np.uint8), np.array([[1, 9]], dtype=np.uint8)
    c = compare_steps(rows_a, rows_b, near_tie=0.5, atol=None)
    assert c.max_abs_diff == 1.0 and c.agree == 1
    assert top2_margin(np.array([3, 1, 2], dtype=np.uint8)) == 1.0
    assert top2_margin(np.array([1, 2], dtype=np.uint8)) == 1.0  # 2 - 1, not 1 - 2 wrapped
    lay = compare_layers({"a": np.array([0, 4], dtype=np.uint8)}, {"a": np.array([1, 4], dtype=np.uint8)}, 1.0)
    assert lay.rows[0].max_abs_diff == 1.0 and lay.rows[0].rel == 0.25


def test_relative_error_divides_by_any_positive_reference() -> None:
    c = compare_layers({"a": np.array([0.5])}, {"a": np.array([0.25])}, 1.0)
    assert c.rows[0].rel == 0.5  # 0.25 / 0.5, not the bare 0.25
    exact = compare_layers({"a": np.array([4.0])}, {"a": np.array([5.0])}, 0.25)
    assert exact.rows[0].rel == 0.25 and not exact.rows[0].over and exact.ok  # equal to rtol passes


@pytest.mark.parametrize(
    "ref,got,side",
    [
        ([1.0, np.nan], [1.0, 2.0], "transformers"),
        ([1.0, 2.0], [np.inf, 2.0], "candle"),
        ([np.nan, 1.0], [1.0, -np.inf], "both"),
    ],
)
def test_non_finite_layers_are_named_not_measured(ref: list[float], got: list[float], side: str) -> None:
    c = compare_layers(
        {"emb": np.array([1.0]), "layer.0": np.array(ref), "layer.1": np.array([2.0])},
        {"emb": np.array([1.0]), "layer.0": np.array(got), "layer.1": np.array([2.0])},
        1e-5,
    )
    assert [r.name for r in c.rows] == ["emb", "layer.0", "layer.1"]  # the rows after it are still measured
    row = c.rows[1]
    assert row.name == "layer.0" and row.nonfinite == side and not row.over
    assert np.isnan(row.max_abs_ref) and np.isnan(row.max_abs_diff) and np.isnan(row.rel)
    assert c.first_nonfinite == "layer.0" and c.first_over is None and not c.ok and c.max_rel == 0.0
    assert c.rows[2].rel == 0.0 and c.rows[2].nonfinite is None
    table = c.table().splitlines()
    assert (
        table[2].endswith(f"  non-finite ({side})") and table[1].endswith("0.00e+00") and table[3].endswith("0.00e+00")
    )


def test_non_finite_steps_are_listed_not_flipped() -> None:
    ref = np.array([[5.0, 1.0], [np.nan, 1.0], [1.0, 4.0], [2.0, 0.0]])
    got = np.array([[5.0, 1.5], [0.0, 1.0], [1.0, np.inf], [2.0, 0.25]])
    c = compare_steps(ref, got, near_tie=0.1, atol=None)
    assert c.nonfinite_steps == [1, 2] and c.disagreements == [] and c.agree == 2 and not c.ok
    assert c.max_abs_diff == 0.5 and c.median_abs_diff == 0.375  # over the finite steps 0 and 3 only
    assert c.max_abs_ref == 5.0
    all_bad = compare_steps(np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]), near_tie=0.1, atol=None)
    assert np.isnan(all_bad.max_abs_diff) and np.isnan(all_bad.median_abs_diff) and np.isnan(all_bad.max_abs_ref)
    assert all_bad.nonfinite_steps == [0]
    # a NaN in candle's row only: the reference's row still gives max|ref|
    one_side = compare_steps(np.array([[3.0, 1.0]]), np.array([[np.nan, 1.0]]), near_tie=0.1, atol=None)
    assert one_side.max_abs_ref == 3.0 and one_side.nonfinite_steps == [0]


def test_greedy_fork_at_the_first_token_reads_row_zero() -> None:
    steps = np.array([[1.0, 1.1], [9.0, 0.0]])
    c = compare_greedy([1], [0], step_rows=steps, near_tie=0.5)
    assert c.first_divergence == 0 and c.ref_margin == pytest.approx(0.1) and c.ok
    rows = np.array([[1.0, 1.2], [0.0, 0.0]])
    c = compare_greedy([1], [0], ref_rows=rows, prompt_len=1, near_tie=0.5)  # row prompt_len - 1 = 0
    assert c.ref_margin == pytest.approx(0.2) and c.ok


def test_greedy_against_an_incomplete_reference() -> None:
    """A reference continuation that stopped early: candle agreeing with all of it agrees."""
    c = compare_greedy([1, 2], [1, 2, 3], ref_complete=False, step_rows=np.zeros((2, 2)), near_tie=0.1)
    assert c.first_divergence is None and c.ok and c.ref_complete is False
    assert compare_greedy([1, 2], [1, 2, 3], step_rows=np.zeros((2, 2)), near_tie=0.1).first_divergence == 2
    forked = compare_greedy(
        [1, 2], [1, 3, 3], ref_complete=False, step_rows=np.array([[0.0, 1.0], [0.0, 5.0]]), near_tie=0.1
    )
    assert forked.first_divergence == 1 and forked.ref_margin == 5.0 and forked.ref_complete is False and not forked.ok


def test_margins_are_computed_in_float64_from_float32_logits() -> None:
    """3 - 1e-8 rounds to 3.0 in float32; the margin verify prints is the float64 one."""
    tiny = float(np.float32(1e-8))
    assert top2_margin(np.array([3.0, 1e-8], dtype=np.float32)) == 3.0 - tiny != 3.0
    ref = np.array([[3.0, 1e-8]], dtype=np.float32)
    got = np.array([[0.0, 1.0]], dtype=np.float32)
    (d,) = compare_steps(ref, got, near_tie=0.1, atol=None).disagreements
    assert d.ref_margin == 3.0 - tiny


def test_line_and_flags_of_clean_and_non_finite_results() -> None:
    ref = np.array([[2.0, 0.0]])
    same = compare_steps(ref, ref, near_tie=0.1, atol=None)
    assert same.line() == "steps=1 argmax 1/1  max|diff|=0.00e+00 median=0.00e+00 max|ref|=2"
    c = compare_layers({"a": np.array([np.nan])}, {"a": np.array([1.0])}, 1e-5)
    assert c.rows[0].over is False
