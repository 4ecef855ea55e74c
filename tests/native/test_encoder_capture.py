"""The encoders' capture copies (native/src/<family>_copy.rs, generated from candle's module plus
native/copies/<family>.patch) against the library's own forward: each copy's last layer must equal
the module's forward bit for bit, on one text, on a padded batch with the mask, and without one;
its sub-layers must be the transformers modules' outputs `portkit.encoders.SUBLAYERS` names. And
the judge must localise a difference to the sub-layer it starts in (a negative control)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import portkit_native as pn
from fixtures.embedding_models import FAMILIES, embedding_model
from portkit.encoders import SUBLAYERS
from portkit.verify.embedding import corpus
from portkit.verify.embedding.candle import program_mask, run_encoder
from portkit.verify.embedding.judge import check_row
from portkit.verify.embedding.reference import load_reference

IDS = [[101, 7, 12, 30, 5, 102], [101, 9, 102, 0, 0, 0]]
MASK = [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]
#: every encoder family with a transformers module (jina_bert has none: nothing to compare against)
CAPTURED = [f for f in FAMILIES if f in SUBLAYERS]


def _layers(cfg: dict) -> int:
    return int(cfg.get("num_hidden_layers") or cfg.get("n_layers") or cfg.get("n_layer"))


@pytest.fixture(scope="module", params=CAPTURED)
def family(request: pytest.FixtureRequest) -> tuple[str, Path, object]:
    d = embedding_model(request.param, twin=True)  # the twin: a config candle's serde reads
    runner = pn.EncoderRunner(request.param, [str(d / "model.safetensors")], (d / "config.json").read_text())
    return request.param, d, runner


def test_every_family_with_a_reference_is_captured() -> None:
    assert set(CAPTURED) == set(FAMILIES) == set(SUBLAYERS)
    assert set(pn.encoder_capture_families()) == set(SUBLAYERS)


@pytest.mark.parametrize("mask", [MASK, None], ids=["mask", "no-mask"])
def test_copy_equals_library_bit_for_bit(family: tuple[str, Path, object], mask: list[list[int]] | None) -> None:
    name, d, runner = family
    mask = program_mask(name, np.asarray(mask)) if mask is not None else None  # in the module's convention
    lib = np.asarray(runner.hidden_states(IDS, None, mask))
    got = runner.capture(IDS, None, mask)
    n = _layers(json.loads((d / "config.json").read_text()))
    layers = [k for k in got if k.count(".") < 2]
    assert layers == ["embeddings", *(f"layers.{i}" for i in range(n))]
    subs = [k for k in got if k.count(".") == 2]
    assert subs == [f"layers.{i}.{sub}" for i in range(n) for sub, _ in SUBLAYERS[name]]
    assert all(np.asarray(v).shape == lib.shape[:2] + (np.asarray(v).shape[-1],) for v in got.values())
    assert np.array_equal(np.asarray(got[f"layers.{n - 1}"]), lib)  # bit for bit, not close
    if mask is not None:  # negative control: the padded row differs from the unmasked forward
        assert not np.array_equal(np.asarray(runner.hidden_states(IDS, None, None))[1], lib[1])


def test_one_row_equals_library(family: tuple[str, Path, object]) -> None:
    _, _, runner = family
    lib = np.asarray(runner.hidden_states(IDS[:1]))
    got = runner.capture(IDS[:1])
    assert np.array_equal(np.asarray(got[[k for k in got if k.count(".") == 1][-1]]), lib)


def _tiny_jina(d: Path) -> Path:
    """A one-layer jina_bert checkpoint (jina_bert.rs:95-400's tensor names), random weights."""
    from safetensors.numpy import save_file

    h, inter, vocab = 8, 16, 185
    rng = np.random.default_rng(0)
    shapes = {
        "embeddings.word_embeddings.weight": (vocab, h),
        "embeddings.token_type_embeddings.weight": (2, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    p = "encoder.layer.0."
    for lin in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
        shapes |= {f"{p}{lin}.weight": (h, h), f"{p}{lin}.bias": (h,)}
    shapes |= {
        f"{p}attention.output.LayerNorm.weight": (h,),
        f"{p}attention.output.LayerNorm.bias": (h,),
        f"{p}mlp.gated_layers.weight": (2 * inter, h),
        f"{p}mlp.wo.weight": (h, inter),
        f"{p}mlp.wo.bias": (h,),
        f"{p}mlp.layernorm.weight": (h,),
        f"{p}mlp.layernorm.bias": (h,),
    }
    d.mkdir()
    save_file({k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}, str(d / "model.safetensors"))
    cfg = {
        "vocab_size": vocab,
        "hidden_size": h,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": inter,
        "hidden_act": "gelu",
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "alibi",
    }
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_a_module_without_a_copy_refuses_capture(tmp_path: Path) -> None:
    d = _tiny_jina(tmp_path / "jina")
    runner = pn.EncoderRunner("jina_bert", [str(d / "model.safetensors")], (d / "config.json").read_text())
    assert np.asarray(runner.hidden_states(IDS)).shape == (2, 6, 8)  # it loads and runs; only the copy is missing
    with pytest.raises(ValueError, match="no capture copy of candle's `jina_bert`"):
        runner.capture(IDS)


def test_sublayers_match_the_reference_and_a_perturbed_one_is_named(family: tuple[str, Path, object]) -> None:
    name, d, runner = family
    texts = [t for t, _ in corpus.TEXTS][:2]
    ref = load_reference(d, texts, batch=False, sublayers=SUBLAYERS[name])
    enc, r, t = ref.single[0], ref.reference[0], ref.truth[0]
    n = _layers(json.loads((d / "config.json").read_text()))
    assert sorted(r.sublayers) == sorted(f"layers.{i}.{sub}" for i in range(n) for sub, _ in SUBLAYERS[name])
    got = run_encoder(runner, name, enc, ref.steps, capture=True)
    clean = check_row(texts[0], "t", enc.mask[0], got, r, t)
    assert clean.ok and clean.first_layer_out is None, [
        (row.name, row.max_diff) for row in clean.layers if not row.floor.ok
    ]
    first = SUBLAYERS[name][0][0]
    names = [row.name for row in clean.layers]
    assert names[: 2 + len(SUBLAYERS[name])] == [
        "embeddings",
        *(f"layers.0.{sub}" for sub, _ in SUBLAYERS[name]),
        "layers.0",
    ]
    assert all(row.floor.ok and not math.isnan(row.max_diff) for row in clean.layers)
    # negative control: candle's layer-1 first sub-layer moved by 1e-3 is where the judge says it starts
    moved = dict(got.sublayers)
    moved[f"layers.1.{first}"] = moved[f"layers.1.{first}"] + 1e-3
    bad = check_row(texts[0], "t", enc.mask[0], dataclasses.replace(got, sublayers=moved), r, t)
    assert bad.first_layer_out == f"layers.1.{first}"
    assert [row.name for row in bad.layers if not row.floor.ok] == [f"layers.1.{first}"]
