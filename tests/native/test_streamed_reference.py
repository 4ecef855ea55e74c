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
from portkit.verify.model_dir import read_model_dir
from portkit.verify.reference import compute
from portkit.verify.reference.models import StreamedModel, WholeModel

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


def test_the_loader_reads_the_models_own_state(healthy_tied_dir: Path) -> None:
    """`LiveState` answers transformers' loader with the model's own state-dict keys and each
    key's current tensor (meta before its layer loads, the loaded one after), and gives the model
    its own `state_dict` back after the load, even when the load fails."""
    md = read_model_dir(healthy_tied_dir)
    m = StreamedModel(healthy_tied_dir, md.weight_files)
    state = m.state
    assert list(state) == list(type(m.model).state_dict(m.model, keep_vars=True))
    key = f"{m.layers_path}.0.self_attn.q_proj.weight"
    assert state[key].is_meta
    m._load(0)
    assert state[key] is m.layers[0].self_attn.q_proj.weight and not state[key].is_meta
    with pytest.raises(RuntimeError, match="boom"):
        with state.standing_in():
            assert m.model.state_dict() is state
            raise RuntimeError("boom")
    assert "state_dict" not in vars(m.model) and "named_buffers" not in vars(m.model)
    assert set(m.model.state_dict()) == set(state)


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
    alone = compute.forward_reference(d, md.weight_files, prompt, None, 5, "streamed", lambda _s: None)
    own, own_rows = alone.greedy, alone.rows
    assert len(own) == 5 and own_rows.shape[0] == 5
    fed = compute.forward_reference(d, md.weight_files, prompt, own, 5, "streamed", lambda _s: None)
    same, rows, layers = fed.greedy, fed.rows, fed.layers
    assert same == own
    # its own tokens come from cached decoding (generate()'s arithmetic), candle's from one full
    # forward: the same numbers up to summation order, well within the f32 tolerance
    np.testing.assert_allclose(rows, own_rows, rtol=0, atol=1e-4)
    assert layers["embeddings"].shape[0] == len(prompt)
    # a continuation that forks at token 2: the reference's tokens stop at its own pick there
    other = own[:2] + [(own[2] + 1) % 256, 5, 6]
    forked = compute.forward_reference(d, md.weight_files, prompt, other, 5, "streamed", lambda _s: None).greedy
    assert forked == own[:3]


def test_reference_greedy_stops_at_nan() -> None:
    rows = np.array([[0.0, 1.0], [np.nan, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert compute.reference_greedy(rows, [1, 1, 0]) == [1]
    assert compute.reference_greedy(rows[[0, 2, 2]], [1, 0, 0]) == [1, 0, 0]
    assert compute.reference_greedy(rows[[0, 2]], [0, 0]) == [1]


@pytest.mark.parametrize("family,variant", CASES, ids=[f"{f}-{v}" for f, v in CASES])
def test_reference_decoding_equals_whole_model(family: str, variant: str) -> None:
    """`portkit reference`'s values (resident: every layer loaded once and kept, no NaN scan, the
    cached steps on one thread) are the whole model's (from_pretrained at 2 threads) bit for bit:
    the prefill's logits and layers, and generate()'s cached greedy steps. `--reference streamed`
    too: its f32 weights are views of the file mapping, at from_pretrained's address alignments
    (a one-token step's row-times-matrix kernels round by alignment: copies into read buffers put
    the steps up to 9e-6 from from_pretrained's on logits of 12 on these fixtures)."""
    from portkit.porting.reference import reference_values

    d = family_fixture(family, variant)
    md = read_model_dir(d)
    prompt, tokens = _ids(d)[:12], 5
    whole = WholeModel(d)
    prefill, _ = whole._run(prompt, capture=True, use_cache=True)
    steps, fed = whole.decode(prompt, None, tokens)
    for mode in ("whole", "streamed"):
        got = reference_values(d, md.weight_files, prompt, tokens, mode)
        assert np.array_equal(got["logits"], prefill.logits), (
            mode,
            float(np.abs(got["logits"] - prefill.logits).max()),
        )
        for name, values in prefill.layers.items():
            assert np.array_equal(got[name], values), (mode, name)
        step_error = float(np.abs(got["greedy.logits"] - steps.logits).max())
        assert step_error == 0.0, (mode, step_error)
        assert got["greedy"].tolist() == fed and len(fed) == tokens


def test_resident_model_keeps_every_layer(healthy_tied_dir: Path) -> None:
    """Resident: loaded at construction, still loaded after a forward (no per-layer hooks), and
    the same forward as the streamed model's."""
    md = read_model_dir(healthy_tied_dir)
    ids = _ids(healthy_tied_dir)
    m = StreamedModel(healthy_tied_dir, md.weight_files, resident=True)
    assert not any(p.is_meta for p in m.model.parameters())
    first = m.forward(ids)
    assert not any(p.is_meta for p in m.model.parameters())
    streamed = StreamedModel(healthy_tied_dir, md.weight_files).forward(ids)
    assert np.array_equal(first.logits, streamed.logits)
    assert np.array_equal(m.forward(ids).logits, first.logits)


def test_resident_names_nan_weights_as_streamed_does_unless_told_not_to_scan(tmp_path: Path) -> None:
    names = ["model.layers.1.mlp.down_proj.weight", "model.embed_tokens.weight"]
    d = family_fixture("llama", "legacy")
    out = tmp_path / "nan"
    shutil.copytree(d, out)
    src = d / "model.safetensors"
    for name in names:
        _rewrite_tensor(src, out / "model.safetensors", name, lambda a: a.__setitem__(3, np.nan))
        src = tmp_path / "step.safetensors"
        shutil.copyfile(out / "model.safetensors", src)
    md = read_model_dir(out)
    ids = _ids(out)
    streamed = StreamedModel(out, md.weight_files).forward(ids)
    assert streamed.nonfinite_weights == names[::-1]  # outside the layers first, then layer by layer
    assert (
        StreamedModel(out, md.weight_files, resident=True).forward(ids).nonfinite_weights == streamed.nonfinite_weights
    )
    unscanned = StreamedModel(out, md.weight_files, resident=True, scan_nonfinite=False).forward(ids)
    assert unscanned.nonfinite_weights == []
    assert not np.isfinite(unscanned.logits).all()


def test_decode_runs_the_steps_on_step_threads_and_restores_the_count() -> None:
    import torch

    from portkit.verify.reference.models import ForwardResult, decode

    seen: list[int] = []
    vocab = 7

    def run(ids, **_kw):
        seen.append(torch.get_num_threads())
        if len(seen) == 4:
            raise RuntimeError("a failing step")
        row = np.zeros((len(ids), vocab), dtype=np.float32)
        row[:, len(seen) % vocab] = 1.0
        return ForwardResult(logits=row, layers={}), type("Out", (), {"cache": object()})()

    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with pytest.raises(RuntimeError, match="a failing step"):
        decode(run, [1, 2, 3], None, 6, step_threads=target)
    assert seen == [before, target, target, target]  # the prefill keeps the caller's count
    assert torch.get_num_threads() == before
    seen.clear()
    res, fed = decode(run, [1, 2, 3], None, 3)
    assert seen == [before] * 3 and fed == [1, 2, 3] and res.logits.shape == (3, vocab)


def test_one_thread_steps_equal_two_thread_steps_where_the_kernels_thread(tmp_path: Path) -> None:
    """The family fixtures' matrices are small enough that most kernels run on one thread at any
    setting; here the lm_head (hidden 512 x vocab 32768) and the MLP are large enough that 2
    threads split them. `portkit reference`'s one-thread greedy steps still equal the whole
    model's 2-thread steps bit for bit: the split is over output columns, never a reduction."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from portkit.porting.reference import reference_values

    torch.manual_seed(0)
    shape = dict(
        vocab_size=32768,
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
    )
    LlamaForCausalLM(LlamaConfig(**shape)).to(torch.float32).save_pretrained(tmp_path, safe_serialization=True)
    prompt, tokens = [1, 504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 10328], 4
    whole = WholeModel(tmp_path)  # 2 threads (REFERENCE_THREADS)
    assert torch.get_num_threads() == 2
    steps, fed = whole.decode(prompt, None, tokens)
    got = reference_values(tmp_path, read_model_dir(tmp_path).weight_files, prompt, tokens, "whole")
    assert np.array_equal(got["greedy.logits"], steps.logits), float(np.abs(got["greedy.logits"] - steps.logits).max())
    assert got["greedy"].tolist() == fed


def test_missing_weights_are_the_same_in_every_run_and_leave_the_callers_rng(fixture_dir) -> None:
    """A parameter the checkpoint lacks (`lm_head.weight` of an untied model) is drawn at random,
    as `from_pretrained` does; two loads, and the f64 truth, must hold the same draw, or the
    reference's greedy tokens change from run to run. The caller's generator is left as it was."""
    import torch

    d = fixture_dir("untied-missing-lm-head")
    md = read_model_dir(d)
    ids = _ids(d)
    before = torch.random.get_rng_state()
    first, second = StreamedModel(d, md.weight_files), StreamedModel(d, md.weight_files)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert first.missing == second.missing == ["lm_head.weight"]
    assert np.array_equal(first.forward(ids).logits, second.forward(ids).logits)
    truth = StreamedModel(d, md.weight_files, precision="float64")
    w32, w64 = first.model.lm_head.weight, truth.model.lm_head.weight
    assert float(w32.std()) > 0 and torch.allclose(w64.float(), w32, rtol=0, atol=1e-6)
    # negative control: the draw is the seed's, not a constant (another seed, other weights)
    torch.manual_seed(1)
    assert not torch.equal(torch.empty_like(w32).normal_(std=float(w32.std())), w32)


WIDEN_CASES = [*CASES, ("llama", "bf16-weights")]


@pytest.mark.parametrize("family,variant", WIDEN_CASES, ids=[f"{f}-{v}" for f, v in WIDEN_CASES])
def test_widened_truth_equals_the_converted_one(family: str, variant: str, monkeypatch, fixture_dir) -> None:
    """The f64 truth loads f32 and widens each layer into buffers the last layer left
    (`StreamedModel.widen`); the same forward with every tensor converted to f64 on load, as
    transformers converts it, gives the same bits: logits and every captured layer (a bf16
    checkpoint too: bf16 to f32 to f64 is exact)."""
    from portkit.verify.reference import models

    d = fixture_dir(variant) if variant == "bf16-weights" else family_fixture(family, variant)
    md = read_model_dir(d)
    ids = _ids(d)
    widened = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64")
    assert widened.widen
    a = widened.forward(ids)
    monkeypatch.setattr(models, "_WIDENS_EXACTLY", set())
    converted = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64")
    assert not converted.widen
    b = converted.forward(ids)
    assert a.logits.dtype == np.float64 and np.array_equal(a.logits, b.logits), float(np.abs(a.logits - b.logits).max())
    assert list(a.layers) == list(b.layers)
    for name in a.layers:
        assert np.array_equal(a.layers[name], b.layers[name]), name


@pytest.mark.parametrize("family,variant", WIDEN_CASES, ids=[f"{f}-{v}" for f, v in WIDEN_CASES])
def test_truth_reads_its_vocab_as_stored(family: str, variant: str, monkeypatch, fixture_dir) -> None:
    """The f64 truth keeps its embedding and lm_head in the checkpoint's dtype (`stored_vocab`),
    here widened 7 rows at a time: its layers are those of the truth with both widened whole,
    bit for bit, and its logits the same f64 sums within 1e-13 of the largest."""
    import torch

    from portkit.verify.reference import models, stored_vocab

    monkeypatch.setattr(stored_vocab, "BLOCK_ROWS", 7)
    d = fixture_dir(variant) if variant == "bf16-weights" else family_fixture(family, variant)
    md = read_model_dir(d)
    ids = _ids(d)
    kept = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64")
    assert kept.vocab and {p.dtype for m in kept.vocab for p in m.parameters()} == {kept.vocab_dtype}
    a = kept.forward(ids)
    monkeypatch.setattr(models, "vocab_modules", lambda _torch, _model: [])
    whole = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64")
    assert whole.model.get_input_embeddings().weight.dtype == torch.float64
    b = whole.forward(ids)
    assert list(a.layers) == list(b.layers)
    for name in a.layers:
        assert np.array_equal(a.layers[name], b.layers[name]), name
    scale = np.abs(b.logits).max()
    assert a.logits.dtype == np.float64 and np.abs(a.logits - b.logits).max() <= 1e-13 * scale
    # negative control: logits off by 1e-3 of themselves fail the same bound
    assert np.abs(a.logits * (1 + 1e-3) - b.logits).max() > 1e-13 * scale


@pytest.mark.parametrize("family,variant", [("mistral", "sliding-window-4"), ("qwen2", "sliding-window-4")])
def test_truth_decoding_reads_its_vocab_as_stored(family: str, variant: str, monkeypatch) -> None:
    """generate()'s arithmetic (a window shorter than the prompt), one id a step: each step's f64
    rows with the vocabulary as stored are those with it widened whole."""
    from portkit.verify.reference import models, stored_vocab

    monkeypatch.setattr(stored_vocab, "BLOCK_ROWS", 7)
    d = family_fixture(family, variant)
    md = read_model_dir(d)
    ids = _ids(d)
    prompt, forced = ids[:16], ids[16:]
    a, fed_a = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64").decode(
        prompt, forced, len(forced) + 1
    )
    monkeypatch.setattr(models, "vocab_modules", lambda _torch, _model: [])
    b, fed_b = StreamedModel(d, md.weight_files, scan_nonfinite=False, precision="float64").decode(
        prompt, forced, len(forced) + 1
    )
    assert fed_a == fed_b and a.logits.shape == (len(forced) + 1, b.logits.shape[1])
    assert np.abs(a.logits - b.logits).max() <= 1e-13 * np.abs(b.logits).max()
    assert np.abs(a.logits * (1 + 1e-3) - b.logits).max() > 1e-13 * np.abs(b.logits).max()  # negative control
