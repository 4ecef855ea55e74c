"""NaN/inf are named (which side, where first, the checkpoint's tensors), never counted as a
difference or an argmax flip."""

from __future__ import annotations

import numpy as np

from portkit.verify.judge.checks import compare_layers, compare_steps
from portkit.verify.judge.nonfinite import analyse, first_nonfinite


def _layers(nan_from: int | None, n: int = 3) -> dict[str, np.ndarray]:
    out = {"embeddings": np.ones((2, 4), np.float32)}
    for i in range(n):
        v = np.full((2, 4), float(i + 1), np.float32)
        if nan_from is not None and i >= nan_from:
            v[0, 0] = np.nan
        out[f"layer.{i}"] = v
    out["norm"] = out[f"layer.{n - 1}"].copy()
    return out


def test_all_finite_is_none() -> None:
    rows = np.zeros((3, 5), np.float32)
    assert analyse(_layers(None), rows, _layers(None), rows) is None


def test_both_sides_from_the_same_layer() -> None:
    rows = np.full((3, 5), np.nan, np.float32)
    nf = analyse(_layers(1), rows, _layers(1), rows, ["model.layers.1.mlp.down_proj.weight"])
    assert nf is not None
    assert nf.reference_first == nf.candle_first == "layer.1" and nf.first_side == "both"
    assert (
        nf.line()
        == "the checkpoint holds non-finite weights (model.layers.1.mlp.down_proj.weight); both sides turn non-finite "
        "at layer.1"
    )


def test_which_side_first() -> None:
    rows = np.zeros((3, 5), np.float32)
    nan_rows = rows.copy()
    nan_rows[1, 2] = np.inf
    nf = analyse(_layers(2), rows, _layers(0), nan_rows)
    assert nf is not None and nf.first_side == "candle"
    assert nf.line() == "candle turns non-finite first, at layer.0 (transformers at layer.2)"
    only_candle = analyse(None, rows, None, nan_rows)
    assert (
        only_candle is not None
        and only_candle.line() == "candle turns non-finite at logits at step 1; transformers stays finite"
    )
    only_ckpt = analyse(_layers(None), rows, _layers(None), rows, ["lm_head.weight"])
    assert only_ckpt is not None and only_ckpt.reference_first is None and "lm_head.weight" in only_ckpt.line()


def test_first_nonfinite_order() -> None:
    assert first_nonfinite(_layers(1)) == "layer.1"
    assert first_nonfinite(_layers(None)) is None


def test_layer_rows_name_nonfinite_instead_of_over() -> None:
    check = compare_layers(_layers(1), _layers(None), rtol=1e-5)
    assert check.first_over is None and check.first_nonfinite == "layer.1"
    assert [r.nonfinite for r in check.rows] == [None, None, "transformers", "transformers", "transformers"]
    assert not check.ok and check.max_rel == 0.0
    # negative control: a finite difference is still "over"
    other = _layers(None)
    other["layer.0"] = other["layer.0"] * 1.1
    assert compare_layers(_layers(None), other, rtol=1e-5).first_over == "layer.0"


def test_nonfinite_steps_are_not_flips() -> None:
    ref = np.array([[0.0, 2.0, 1.0], [np.nan, 0.0, 0.0], [3.0, 0.0, 0.0]], np.float32)
    got = np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 5.0], [0.0, 0.0, 3.0]], np.float32)
    s = compare_steps(ref, got, near_tie=0.1, atol=None)
    assert s.nonfinite_steps == [1]
    assert [d.step for d in s.disagreements] == [2] and s.agree == 1
    assert np.isfinite(s.max_abs_diff) and not s.ok
    finite = compare_steps(ref[[0, 2]], ref[[0, 2]], near_tie=0.1, atol=1e-4)
    assert finite.ok and finite.nonfinite_steps == []
