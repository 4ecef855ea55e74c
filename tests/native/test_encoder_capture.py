"""bert's capture copy (native/src/bert_copy.rs, generated from candle's bert.rs plus
native/copies/bert.patch) against the library's own forward: its last layer must equal
`BertModel::forward` bit for bit, on one text, on a padded batch with the mask, and without one; its
sub-layers must be the transformers modules' outputs `portkit.encoders.SUBLAYERS` names. And the
judge must localise a difference to the sub-layer it starts in (a negative control)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import portkit_native as pn
import pytest

from fixtures.embedding_models import embedding_model
from portkit.encoders import SUBLAYERS
from portkit.verify.embedding import corpus
from portkit.verify.embedding.candle import run_encoder
from portkit.verify.embedding.judge import check_row
from portkit.verify.embedding.reference import load_reference

IDS = [[101, 7, 12, 30, 5, 102], [101, 9, 102, 0, 0, 0]]
MASK = [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]


@pytest.fixture(scope="module")
def bert() -> tuple[Path, object]:
    d = embedding_model("bert")
    cfg = json.loads((d / "config.json").read_text())
    runner = pn.EncoderRunner("bert", [str(d / "model.safetensors")], json.dumps(cfg))
    return d, runner


def test_bert_is_captured() -> None:
    assert "bert" in pn.encoder_capture_families()
    assert set(SUBLAYERS) <= set(pn.encoder_capture_families())


@pytest.mark.parametrize("mask", [MASK, None], ids=["mask", "no-mask"])
def test_copy_equals_library_bit_for_bit(bert: tuple[Path, object], mask: list[list[int]] | None) -> None:
    _, runner = bert
    lib = np.asarray(runner.hidden_states(IDS, None, mask))
    got = runner.capture(IDS, None, mask)
    n = json.loads(runner.config_json())["num_hidden_layers"]
    layers = [k for k in got if k.count(".") < 2]
    assert layers == ["embeddings", *(f"layers.{i}" for i in range(n))]
    subs = [k for k in got if k.count(".") == 2]
    assert subs == [f"layers.{i}.{name}" for i in range(n) for name, _ in SUBLAYERS["bert"]]
    assert all(np.asarray(v).shape == lib.shape[:2] + (np.asarray(v).shape[-1],) for v in got.values())
    assert np.array_equal(np.asarray(got[f"layers.{n - 1}"]), lib)  # bit for bit, not close


def test_one_row_equals_library(bert: tuple[Path, object]) -> None:
    _, runner = bert
    lib = np.asarray(runner.hidden_states(IDS[:1]))
    got = runner.capture(IDS[:1])
    assert np.array_equal(np.asarray(got[[k for k in got if k.count(".") == 1][-1]]), lib)


def test_a_module_without_a_copy_refuses_capture() -> None:
    d = embedding_model("distilbert")
    runner = pn.EncoderRunner("distilbert", [str(d / "model.safetensors")], (d / "config.json").read_text())
    with pytest.raises(ValueError, match="no capture copy of candle's `distilbert`"):
        runner.capture(IDS)


def test_sublayers_match_the_reference_and_a_perturbed_one_is_named(bert: tuple[Path, object]) -> None:
    d, runner = bert
    texts = [t for t, _ in corpus.TEXTS][:2]
    ref = load_reference(d, texts, batch=False, sublayers=SUBLAYERS["bert"])
    enc, r, t = ref.single[0], ref.reference[0], ref.truth[0]
    assert sorted(r.sublayers) == sorted(f"layers.{i}.{name}" for i in range(2) for name, _ in SUBLAYERS["bert"])
    got = run_encoder(runner, "bert", enc, ref.steps, capture=True)
    clean = check_row(texts[0], "t", enc.mask[0], got, r, t)
    assert clean.ok and clean.first_layer_out is None
    names = [row.name for row in clean.layers]
    assert names[:4] == ["embeddings", "layers.0.attention", "layers.0.intermediate", "layers.0"]
    assert all(row.floor.ok and not math.isnan(row.max_diff) for row in clean.layers)
    # negative control: candle's layer-1 attention moved by 1e-3 is where the judge says it starts
    moved = dict(got.sublayers)
    moved["layers.1.attention"] = moved["layers.1.attention"] + 1e-3
    bad = check_row(texts[0], "t", enc.mask[0], dataclasses.replace(got, sublayers=moved), r, t)
    assert bad.first_layer_out == "layers.1.attention"
    assert [row.name for row in bad.layers if not row.floor.ok] == ["layers.1.attention"]
