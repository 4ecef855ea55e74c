"""gemma4 (candle's `gemma4::text::TextModel`): the reference-side counterfactual PK126 declares, as data
(`as_candle.affine`), and the serde mirror's alias; the rule cases live in rule_cases.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from portkit.families import BY_NAME
from portkit.lint import lint_paths
from portkit.rules import as_candle
from portkit.settings import Settings
from tests.unit.family_configs import LEGACY, T5


def test_affine_edit_is_data_and_round_trips() -> None:
    assert as_candle.parse_affine(as_candle.affine(0.25, 0.25)) == (0.25, 0.25)
    assert as_candle.parse_affine(as_candle.affine(0, 1)) == (0.0, 1.0)
    # negative controls: the zero edit and malformed texts are not affine
    for text in (as_candle.ZERO, "affine 1", "affine a b", "scale 1 2", "affine 1 2 3"):
        assert as_candle.parse_affine(text) is None, text


def _pk126_edit(d: Path) -> dict[str, str]:
    r = lint_paths([d], Settings(select=["PK126"], respect_pyproject=False))
    (f,) = r.findings
    edit = f.probe.as_candle  # type: ignore[union-attr]
    assert edit is not None
    return dict(edit["tensors"])


def test_pk126_scales_each_layers_q_norm_by_its_own_head_size(tmp_path: Path) -> None:
    """transformers' q_norm as (w + 1) / sqrt(head_dim) of its layer (16 on the sliding layers, 32 on the full
    ones from per_layer_config), every other norm as w + 1: candle's gain and its 1/sqrt(head_dim) on the scores."""
    from fixtures import skeleton as sk
    from tests.unit.rule_cases import family_tensors

    cfg = LEGACY["gemma4"]
    held = {**family_tensors(cfg), "model.layers.0.layer_scalar": (1,)}
    del held["model.layers.3.input_layernorm.weight"]
    d = sk.write_model(tmp_path / "m", cfg, tensors=held)
    tensors = _pk126_edit(d)
    for i, hd in enumerate((16, 32, 16, 32)):
        s = 1 / math.sqrt(hd)
        assert as_candle.parse_affine(tensors[f"model.layers.{i}.self_attn.q_norm.weight"]) == (s, s)
        assert as_candle.parse_affine(tensors[f"model.layers.{i}.self_attn.k_norm.weight"]) == (1.0, 1.0)
    assert as_candle.parse_affine(tensors["model.layers.0.input_layernorm.weight"]) == (1.0, 1.0)
    assert as_candle.parse_affine(tensors["model.norm.weight"]) == (1.0, 1.0)
    # only the checkpoint's tensors: the reference refuses an edit of a tensor it does not have
    assert "model.layers.3.input_layernorm.weight" not in tensors
    # `layer_scalar`, which candle never reads, is PK202's counterfactual (read as 1), not PK126's
    assert not any(k.endswith("layer_scalar") for k in tensors)
    r = lint_paths([d], Settings(select=["PK202"], respect_pyproject=False))
    (f,) = [f for f in r.findings if "layer_scalar" in f.message]
    assert f.probe.as_candle["tensors"] == {"model.layers.0.layer_scalar": as_candle.affine(0.0, 1.0)}  # type: ignore[union-attr]


def test_the_reference_applies_affine_edits_and_refuses_unknown_ones() -> None:
    pytest.importorskip("torch")
    from portkit.verify.reference.models import _checked_edits

    names = {"a", "b"}
    assert _checked_edits({"a": as_candle.affine(2, 1), "b": as_candle.ZERO}, names)
    with pytest.raises(ValueError, match="unknown tensor edit"):
        _checked_edits({"a": "affine x 1"}, names)
    with pytest.raises(ValueError, match="no tensor c"):
        _checked_edits({"c": as_candle.ZERO}, names)


def test_window_pattern_alias_is_one_field() -> None:
    """`#[serde(alias = "_sliding_window_pattern")]` (config.rs:99-103): either key fills the field, both
    is serde's duplicate-field error."""
    fam = BY_NAME["gemma4"]
    assert fam.view(json.dumps({**T5["gemma4"], "_sliding_window_pattern": 2})).get("sliding_window_pattern") == 2
    both = fam.view(json.dumps({**T5["gemma4"], "_sliding_window_pattern": 2, "sliding_window_pattern": 3}))
    assert both.refused == "duplicate field `sliding_window_pattern`"
    missing = fam.view(json.dumps({k: v for k, v in T5["gemma4"].items() if k != "layer_types"}))
    assert missing.refused == "missing field `layer_types`"
