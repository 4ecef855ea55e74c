"""The streamed reference (one decoder layer's weights in memory at a time) computes exactly what
the whole-model reference (`from_pretrained`) computes, on every variant of every family portkit
supports: logits at every position and every captured layer, bit-identical (both run
transformers' own forward over the same weights). Negative controls: one changed weight, or a NaN
in one tensor, shows up on both paths."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from fixtures.families import FAMILY_VARIANTS, family_fixture
from portkit.verify import refproc
from portkit.verify.inputs import read_model_dir
from portkit.verify.streamed import StreamedModel, WholeModel

CASES = [(f, v) for f, vs in FAMILY_VARIANTS.items() for v in vs]
#: prompt + 4 continuation tokens: sliding windows (4) and longrope's original context matter
IDS = [1, 17, 200, 33, 5, 99, 140, 7, 64, 250, 3, 18, 77, 128, 9, 44, 21, 180, 6, 90]


def _ids(d: Path) -> list[int]:
    vocab = json.loads((d / "config.json").read_text()).get("vocab_size", 256)
    return [i % vocab for i in IDS]


@pytest.mark.parametrize("family,variant", CASES, ids=[f"{f}-{v}" for f, v in CASES])
def test_streamed_equals_whole_model(family: str, variant: str) -> None:
    d = family_fixture(family, variant)
    md = read_model_dir(d)
    ids = _ids(d)
    streamed = StreamedModel(d, md.weight_files).forward(ids)
    whole = WholeModel(d).forward(ids)
    assert streamed.logits.shape == whole.logits.shape == (len(ids), streamed.logits.shape[1])
    assert np.array_equal(streamed.logits, whole.logits), float(np.abs(streamed.logits - whole.logits).max())
    assert list(streamed.layers) == list(whole.layers)
    assert list(streamed.layers)[0] == "embeddings" and list(streamed.layers)[-1] == "norm"
    for name in whole.layers:
        assert np.array_equal(streamed.layers[name], whole.layers[name]), name
    assert streamed.nonfinite_weights == whole.nonfinite_weights == []


def test_streamed_layers_go_back_to_meta(healthy_tied_dir: Path) -> None:
    """After the forward no decoder layer holds weights: memory is one layer, not the model."""
    md = read_model_dir(healthy_tied_dir)
    m = StreamedModel(healthy_tied_dir, md.weight_files)
    m.forward(_ids(healthy_tied_dir))
    assert all(p.is_meta for p in m.layers.parameters())
    assert not any(p.is_meta for _, p in m._resident_params())


def _rewrite_tensor(src: Path, dst: Path, name: str, edit) -> None:
    """Copy a safetensors file, applying `edit(np.ndarray) -> None` to one f32 tensor in place."""
    raw = src.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    info = header[name]
    assert info["dtype"] == "F32"
    start, end = (8 + n + o for o in info["data_offsets"])
    arr = np.frombuffer(raw[start:end], dtype=np.float32).copy()
    edit(arr)
    dst.write_bytes(raw[:start] + arr.tobytes() + raw[end:])


def _copy_with(tmp_path: Path, family: str, name: str, edit) -> Path:
    d = family_fixture(family, "legacy")
    out = tmp_path / family
    shutil.copytree(d, out)
    _rewrite_tensor(d / "model.safetensors", out / "model.safetensors", name, edit)
    return out


def test_changed_weight_changes_both_paths(tmp_path: Path) -> None:
    """Negative control: the equality above is not two copies of one cached result."""
    d = family_fixture("llama", "legacy")
    out = _copy_with(tmp_path, "llama", "model.layers.1.mlp.down_proj.weight", lambda a: a.__setitem__(0, a[0] + 1.0))
    ids = _ids(d)
    base = StreamedModel(d, read_model_dir(d).weight_files).forward(ids)
    changed = StreamedModel(out, read_model_dir(out).weight_files).forward(ids)
    whole = WholeModel(out).forward(ids)
    assert np.array_equal(base.layers["layer.0"], changed.layers["layer.0"])
    assert not np.array_equal(base.layers["layer.1"], changed.layers["layer.1"])
    assert np.array_equal(changed.logits, whole.logits)


def test_nan_weight_is_named_from_the_tensors(tmp_path: Path) -> None:
    name = "model.layers.1.mlp.down_proj.weight"
    out = _copy_with(tmp_path, "llama", name, lambda a: a.__setitem__(3, np.nan))
    md = read_model_dir(out)
    streamed = StreamedModel(out, md.weight_files).forward(_ids(out))
    assert streamed.nonfinite_weights == [name]
    assert WholeModel(out).nonfinite == [name]
    assert np.isfinite(streamed.layers["layer.0"]).all()
    assert not np.isfinite(streamed.layers["layer.1"]).all()


def test_one_forward_gives_the_greedy_fork() -> None:
    """forward_reference over candle's tokens: rows are the reference's logits on those inputs, and
    its own tokens run up to its first fork from them, matching what it generates by itself."""
    d = family_fixture("llama", "legacy")
    md = read_model_dir(d)
    prompt = _ids(d)[:12]
    own, own_rows, _, _ = refproc.forward_reference(d, md.weight_files, prompt, None, 5, "streamed", lambda _s: None)
    assert len(own) == 5 and own_rows.shape[0] == 5
    same, rows, layers, _ = refproc.forward_reference(d, md.weight_files, prompt, own, 5, "streamed", lambda _s: None)
    assert same == own
    # its own tokens come from cached decoding (generate()'s arithmetic), candle's from one full
    # forward: the same numbers up to summation order, well within the f32 tolerance
    np.testing.assert_allclose(rows, own_rows, rtol=0, atol=1e-4)
    assert layers["embeddings"].shape[0] == len(prompt)
    # a continuation that forks at token 2: the reference's tokens stop at its own pick there
    other = own[:2] + [(own[2] + 1) % 256, 5, 6]
    forked, _, _, _ = refproc.forward_reference(d, md.weight_files, prompt, other, 5, "streamed", lambda _s: None)
    assert forked == own[:3]


def test_reference_greedy_stops_at_nan() -> None:
    rows = np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert refproc.reference_greedy(rows, [1, 1, 0]) == [1]
    assert refproc.reference_greedy(rows[[0, 2, 2]], [1, 0, 0]) == [1, 0, 0]
    assert refproc.reference_greedy(rows[[0, 2]], [0, 0]) == [1]
