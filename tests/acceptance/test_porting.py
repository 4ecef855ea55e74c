"""`portkit reference` and `portkit compare` end to end on a generated fixture: the reference's
layout and metadata, an identical candidate (exit 0), a candidate perturbed from layer.1 on
(named at layer.1, with a negative control under the tolerance), subsets, the JSON dump
format, and malformed candidates (one line, exit 2)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from portkit.cli import main
from portkit.porting.dumpfile import read_dump

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ref_path(tmp_path_factory, healthy_tied_dir) -> Path:
    from portkit.porting.reference import write

    out = tmp_path_factory.mktemp("porting") / "ref.safetensors"
    write(healthy_tied_dir, out, tokens=8)
    return out


@pytest.fixture(scope="module")
def ref(ref_path):
    return read_dump(ref_path)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _candidate(tmp_path: Path, tensors: dict[str, np.ndarray], name: str = "cand.safetensors") -> Path:
    path = tmp_path / name
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))
    return path


def _perturbed_from(ref, first: str, rel: float) -> dict[str, np.ndarray]:
    """The reference, with every value from `first` on (layers, norm, logits) scaled by 1 + rel."""
    names = list(ref.tensors)
    start = names.index(first)
    out = {}
    for i, (k, v) in enumerate(ref.tensors.items()):
        if k == "greedy.logits":
            continue
        scaled = i >= start and v.dtype.kind == "f"
        out[k] = (v * np.float32(1 + rel)).astype(np.float32) if scaled else v
    return out


# --------------------------------------------------------------------------- reference


def test_reference_layout_and_metadata(ref, healthy_tied_dir):
    from portkit.verify.reference.runtime import ReferenceModel

    t = ref.tensors
    subs = [
        "input_layernorm",
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn",
        "post_attention_layernorm",
        "mlp",
    ]
    per_layer = [name for i in range(3) for name in [*(f"layer.{i}.{s}" for s in subs), f"layer.{i}"]]
    layout = ["ids", "embeddings", *per_layer, "norm", "logits", "greedy", "greedy.logits"]
    # then transformers in f64 less each f32 value (compare's floors), in the same order
    assert list(t) == layout + [f"truth.{n}" for n in layout if n not in ("ids", "greedy")]
    assert json.loads(ref.metadata["sublayers"]) == subs
    T = len(json.loads((healthy_tied_dir / "prompt.json").read_text())["ids"])
    assert t["ids"].shape == (T,) and t["embeddings"].shape == (T, 64) and t["layer.2"].shape == (T, 64)
    assert t["logits"].shape == (T, 256) and t["greedy"].shape == (8,) and t["greedy.logits"].shape == (8, 256)
    assert ref.dtypes["logits"] == "F32" and ref.dtypes["ids"] == "I64"
    m = ref.metadata
    assert m["format"] == "portkit-reference/1" and m["family"] == "llama" and m["dtype"] == "f32"
    assert Path(m["model"]) == healthy_tied_dir.resolve()
    assert m["transformers"][0].isdigit() and m["torch"][0].isdigit()
    assert m["runtime"] == "transformers eager f32 cpu (whole)"  # auto: a tiny model fits in memory
    assert json.loads(m["prompt"])["ids"] == t["ids"].tolist()
    # the values are transformers' own forward, at every position, and its greedy tokens
    model = ReferenceModel.load(healthy_tied_dir)
    ids = t["ids"].tolist()
    np.testing.assert_array_equal(model.all_logits(ids), t["logits"])
    cap = model.capture(ids)
    for name in ("embeddings", "layer.0", "layer.1", "layer.2", "norm"):
        np.testing.assert_array_equal(cap[name], t[name])
    assert model.greedy(ids, 8) == t["greedy"].tolist()
    np.testing.assert_allclose(t["greedy.logits"][0], t["logits"][-1], atol=1e-5)


def test_sub_layers_are_what_their_names_say(ref, healthy_tied_dir):
    """Each sub-layer is that submodule's output: the projections before RoPE (the layer's
    normalised input times the checkpoint's weight), the residual stream adds self_attn and mlp."""
    from safetensors.numpy import load_file

    w = load_file(str(healthy_tied_dir / "model.safetensors"))
    t = {k: v.astype(np.float64) for k, v in ref.tensors.items()}
    for i in range(3):
        p = f"model.layers.{i}."
        x = t[f"layer.{i - 1}"] if i else t["embeddings"]
        for proj in ("q_proj", "k_proj", "v_proj"):
            want = t[f"layer.{i}.input_layernorm"] @ w[p + f"self_attn.{proj}.weight"].T.astype(np.float64)
            np.testing.assert_allclose(t[f"layer.{i}.self_attn.{proj}"], want, atol=1e-5, err_msg=f"layer.{i} {proj}")
        np.testing.assert_allclose(t[f"layer.{i}"], x + t[f"layer.{i}.self_attn"] + t[f"layer.{i}.mlp"], atol=1e-5)
    assert (
        t["layer.0.self_attn.q_proj"].shape == (t["ids"].shape[0], 64) and t["layer.0.self_attn.k_proj"].shape[1] == 32
    )


def test_layers_only_writes_the_layer_outputs_alone(capsys, tmp_path, healthy_tied_dir, ref):
    out = tmp_path / "layers.safetensors"
    code, stdout, err = _run(capsys, "reference", healthy_tied_dir, "--out", out, "--layers-only")
    assert code == 0, err
    d = read_dump(out)
    layout = ["ids", "embeddings", "layer.0", "layer.1", "layer.2", "norm", "logits", "greedy", "greedy.logits"]
    assert list(d.tensors) == layout + [f"truth.{n}" for n in layout if n not in ("ids", "greedy")]
    assert json.loads(d.metadata["sublayers"]) == [] and "sub-layer" not in stdout
    for name, values in d.tensors.items():
        np.testing.assert_array_equal(values, ref.tensors[name], err_msg=name)


def test_a_short_prompt_is_warned_about(capsys, tmp_path, healthy_tied_dir):
    code, _stdout, err = _run(
        capsys, "reference", healthy_tied_dir, "--out", tmp_path / "s.safetensors", "--ids", "1,5,9", "--tokens", "1"
    )
    assert code == 0 and err.count("\n") == 1
    assert (
        err.startswith("portkit: warning: the prompt has 3 tokens: position 0 has rotation angle 0")
        and "use at least 8" in err
    )
    code, _stdout, err = _run(
        capsys,
        "reference",
        healthy_tied_dir,
        "--out",
        tmp_path / "s.safetensors",
        "--ids",
        "1,5,9,2,3,4,5,6",
        "--tokens",
        "1",
    )
    assert code == 0 and err == ""


def test_reference_cli_prints_what_it_wrote(capsys, tmp_path, healthy_tied_dir):
    out = tmp_path / "r.safetensors"
    code, stdout, err = _run(
        capsys, "reference", healthy_tied_dir, "--out", out, "--ids", "1,5,9,20,33", "--tokens", "2", "--dtype", "bf16"
    )
    assert code == 0, err
    assert (
        f"wrote {out}" in stdout
        and "layer.0..layer.2" in stdout
        and "logits [5x256]" in stdout
        and "ids 1,5,9,20,33" in stdout
    )
    assert (
        "21 sub-layer values: input_layernorm, self_attn.q_proj, self_attn.k_proj, self_attn.v_proj, self_attn, "
        "post_attention_layernorm, mlp of layer.0..layer.2" in stdout
    )
    d = read_dump(out)
    assert d.tensors["ids"].tolist() == [1, 5, 9, 20, 33] and d.tensors["greedy"].shape == (2,)
    assert d.dtypes["layer.0"] == "BF16" and d.metadata["dtype"] == "bf16"


def test_reference_as_a_command(tmp_path, healthy_tied_dir, ref):
    """The real process (it leaves without torch's teardown): exit 0, its report on stdout, the
    file complete; bad input: exit 2, one line."""
    out = tmp_path / "cmd.safetensors"
    argv = [sys.executable, "-m", "portkit.cli", "reference", str(healthy_tied_dir), "--out", str(out), "--tokens", "1"]
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"wrote {out}") and p.stdout.rstrip().endswith("yours.safetensors`")
    got = read_dump(out).tensors
    assert got["greedy"].tolist() == ref.tensors["greedy"].tolist()[:1]
    np.testing.assert_array_equal(got["layer.2"], ref.tensors["layer.2"])
    p = subprocess.run(argv + ["--ids", "1,2,999"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "outside the vocabulary" in p.stderr


def test_reference_called_in_process_keeps_the_callers_collector(capsys, tmp_path, healthy_tied_dir):
    """Only the command, a process of its own, turns Python's cyclic GC off (for its imports); a
    program calling `portkit.cli.main` keeps its collector on."""
    import gc

    assert gc.isenabled()
    code, _stdout, err = _run(
        capsys, "reference", healthy_tied_dir, "--out", tmp_path / "r.safetensors", "--tokens", "1"
    )
    assert code == 0, err
    assert gc.isenabled()


def test_streamed_reference_writes_the_same_values(capsys, tmp_path, healthy_tied_dir, ref):
    """--reference streamed (one decoder layer in memory at a time): bit-identical to the whole model."""
    out = tmp_path / "streamed.safetensors"
    code, stdout, err = _run(capsys, "reference", healthy_tied_dir, "--out", out, "--reference", "streamed")
    assert code == 0, err
    assert "transformers eager f32 cpu (streamed)" in stdout
    streamed = read_dump(out)
    assert list(streamed.tensors) == list(ref.tensors)
    for name, values in ref.tensors.items():
        np.testing.assert_array_equal(streamed.tensors[name], values, err_msg=name)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reference", "lazy"], "--reference must be one of auto, streamed, whole"),
        (["--ids", "1,2,999"], "outside the vocabulary"),
        (["--dtype", "f8"], "--dtype must be one of f32, f16, bf16"),
        (["--tokens", "-1"], "--tokens must be >= 0"),
    ],
)
def test_reference_bad_input_exit_2(capsys, tmp_path, healthy_tied_dir, argv, message):
    code, _, err = _run(capsys, "reference", healthy_tied_dir, "--out", tmp_path / "r.safetensors", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_write_reference_replaces_the_file_whole_and_sweeps_a_dead_writers_temporary(tmp_path, monkeypatch):
    """The output is written by portkit.atomicfile, as fix writes config.json: renamed over the old
    file from beside it (never from the working directory), and a temporary file a killed writer
    of the same output left is removed; another output's, or a live writer's, is not."""
    from portkit.porting.dumpfile import write_reference
    from portkit.verify.errors import BadInput

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "r.safetensors"
    out.write_bytes(b"an earlier reference")
    left = tmp_path / f".r.safetensors.portkit-{dead.pid}-abcd.tmp"
    other = tmp_path / f".other.safetensors.portkit-{dead.pid}-abcd.tmp"
    for p in (left, other):
        p.write_bytes(b"half")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    values = {
        "ids": np.array([1, 5, 9]),
        "logits": np.arange(6, dtype=np.float32).reshape(3, 2) / 3,
        "greedy": np.array([4]),
    }
    write_reference(out, values, {"format": "portkit-reference/1"}, "bf16")
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == sorted(["r.safetensors", other.name, "cwd"])
        and list(cwd.iterdir()) == []
    )
    dump = read_dump(out)
    assert dump.metadata == {"format": "portkit-reference/1"} and dump.dtypes == {
        "ids": "I64",
        "logits": "BF16",
        "greedy": "I64",
    }
    assert dump.tensors["ids"].tolist() == [1, 5, 9] and dump.tensors["greedy"].tolist() == [4]
    np.testing.assert_allclose(dump.tensors["logits"], values["logits"], rtol=2**-8)
    # a directory it cannot write: one line, the earlier file kept, nothing left
    blocked = tmp_path / "file-not-dir"
    blocked.write_bytes(b"")
    with pytest.raises(BadInput, match=r"file-not-dir/r.safetensors: Not a directory$"):
        write_reference(blocked / "r.safetensors", values, {}, "f32")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_written_reference_is_what_the_safetensors_library_reads(dtype, tmp_path):
    """Each value as torch would store it at `dtype` (token ids int64), the metadata, the data
    8-aligned as the library pads it; an empty value is fine."""
    import torch
    from safetensors import safe_open

    from portkit.porting.dumpfile import write_reference

    rng = np.random.default_rng(0)
    values = {
        "ids": np.array([1, 5, 9], dtype=np.int32),
        "embeddings": rng.standard_normal((3, 4)).astype(np.float32),
        "logits": (rng.standard_normal((3, 7)) * 30).astype(np.float64),
        "greedy": np.array([], dtype=np.int64),
        "norm": np.zeros((0, 4), dtype=np.float32),
    }
    meta = {"format": "portkit-reference/1", "prompt": '{"text": "héllo"}'}
    out = tmp_path / "r.safetensors"
    write_reference(out, values, meta, dtype)
    want_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    with safe_open(str(out), "pt") as f:
        assert f.metadata() == meta and list(f.keys()) == sorted(values)
        for name, v in values.items():
            want = torch.from_numpy(v).to(torch.int64 if name in ("ids", "greedy") else want_dtype)
            got = f.get_tensor(name)
            assert got.dtype == want.dtype and torch.equal(got, want), name
    raw = out.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0 and raw[8 : 8 + n].rstrip(b" ").endswith(b"}")
    assert list(read_dump(out).tensors) == ["ids", "embeddings", "norm", "logits", "greedy"]  # the layout's order


def test_writing_a_reference_never_joins_its_values_into_one_buffer(tmp_path):
    """The values are in memory once: the file is written from views of them, not from a copy."""
    import tracemalloc

    from portkit.porting.dumpfile import write_reference

    values = {"ids": np.arange(4), "logits": np.ones((4, 4 * 2**20), dtype=np.float32)}  # 64 MiB
    tracemalloc.start()
    try:
        write_reference(tmp_path / "r.safetensors", values, {"format": "portkit-reference/1"}, "f32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "r.safetensors").stat().st_size > 64 * 2**20
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB allocated while writing 64 MiB of values"


def test_reference_bad_dirs_exit_2(capsys, tmp_path, healthy_tied_dir):
    code, _, err = _run(capsys, "reference", tmp_path / "nope", "--out", tmp_path / "r.safetensors")
    assert code == 2 and "no such directory" in err
    code, _, err = _run(capsys, "reference", healthy_tied_dir, "--out", tmp_path / "no" / "r.safetensors")
    assert code == 2 and "the directory does not exist" in err


# --------------------------------------------------------------------------- compare: verdicts


def test_identical_candidate_exit_0(capsys, tmp_path, ref_path):
    cand = tmp_path / "same.safetensors"
    shutil.copy(ref_path, cand)
    code, out, err = _run(capsys, "compare", ref_path, cand)
    assert code == 0, out + err
    # judged against the floor `portkit reference` measured (transformers in f64 beside f32)
    assert "last position   n=256  max|diff|=0.00e+00" in out and "from f64: candle" in out and "bound 8x)  OK" in out
    assert "argmax 23/23" in out  # 16 prompt positions + 7 shared greedy positions
    assert "greedy          8 tokens  identical" in out
    assert "values against transformers in f64" in out and "OK" in out
    assert "verdict: the candidate agrees with the reference (exit 0)" in out


def test_perturbed_from_layer_1_is_named_at_layer_1(capsys, tmp_path, ref_path, ref):
    cand = _candidate(tmp_path, _perturbed_from(ref, "layer.1", 1e-3))
    code, out, _ = _run(capsys, "compare", ref_path, cand)
    assert code == 1
    assert "first layer out of its floor: layer.1" in out
    assert "verdict: MISMATCH: the candidate diverges from the reference, starting at layer.1 (exit 1)" in out
    code, js, _ = _run(capsys, "compare", ref_path, cand, "--format", "json")
    doc = json.loads(js)
    assert code == 1 and doc["first_bad"] == "layer.1" and doc["exit_code"] == 1 and doc["verdict"] == "mismatch"
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    assert not rows["layer.0"]["over"] and rows["layer.1"]["over"] and rows["layer.2"]["over"]
    assert rows["layer.1"]["rel"] == pytest.approx(1e-3, rel=1e-2)


def test_negative_control_under_tolerance_agrees(capsys, tmp_path, ref_path, ref):
    """The same perturbation, 1000 times smaller (1e-6 relative, under 1e-5): exit 0, with the
    difference measured and shown."""
    cand = _candidate(tmp_path, _perturbed_from(ref, "layer.1", 1e-6))
    code, out, _ = _run(capsys, "compare", ref_path, cand, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["first_bad"] is None
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    assert rows["layer.0"]["rel"] == 0 and 1e-7 < rows["layer.1"]["rel"] < 1e-5


def test_last_position_logits_only(capsys, tmp_path, ref_path, ref):
    last = ref.tensors["logits"][-1]
    code, out, _ = _run(capsys, "compare", ref_path, _candidate(tmp_path, {"logits": last}))
    assert code == 0 and "last position   n=256" in out and "teacher-forced" not in out
    bumped = last.copy()
    bumped[3] += 1e-3
    code, out, _ = _run(capsys, "compare", ref_path, _candidate(tmp_path, {"logits": bumped}, "b.safetensors"))
    assert code == 1 and "MISMATCH" in out and "max|diff|=1.00e-03" in out
    assert "verdict: MISMATCH: the candidate diverges from the reference, starting at logits (exit 1)" in out


def test_greedy_fork_reported_with_margin(capsys, tmp_path, ref_path, ref):
    g = ref.tensors["greedy"].copy()
    g[3] = (g[3] + 1) % 256
    code, out, _ = _run(
        capsys, "compare", ref_path, _candidate(tmp_path, {"ids": ref.tensors["ids"], "greedy": g}), "--format", "json"
    )
    doc = json.loads(out)
    assert code == 1 and doc["comparison"]["greedy"]["first_divergence"] == 3
    assert doc["comparison"]["greedy"]["ref_margin"] > 0 and doc["first_bad"] == "greedy"


def test_quantized_tolerance_judges_by_argmax(capsys, tmp_path, ref_path, ref):
    """Noise of 0.05 on every logit: a mismatch for f32 (1e-4 absolute), agreement for q4_k
    (argmax per position, layers reported only) as long as no argmax flips."""
    rng = np.random.default_rng(0)
    logits = ref.tensors["logits"]
    noisy = (logits + rng.uniform(-0.05, 0.05, logits.shape)).astype(np.float32)
    assert (noisy.argmax(1) == logits.argmax(1)).all()
    cand = _candidate(tmp_path, {"logits": noisy})
    assert _run(capsys, "compare", ref_path, cand)[0] == 1
    for dtype in ("q4_k", "q8_0"):
        code, out, _ = _run(capsys, "compare", ref_path, cand, "--dtype", dtype)
        assert code == 0, out
        assert "(reported; not judged below f32)" in out
    code, _, err = _run(capsys, "compare", ref_path, cand, "--dtype", "q2_k")
    assert code == 2 and "--dtype must be one of f32, f16, bf16, q8_0, q4_k" in err


def test_bf16_reference_is_judged_at_bf16(capsys, tmp_path, healthy_tied_dir, ref_path):
    """An f32 candidate against a reference stored in bf16: the bf16 tolerance, said in a note."""
    from portkit.porting.reference import write

    bf16 = tmp_path / "ref-bf16.safetensors"
    write(healthy_tied_dir, bf16, tokens=8, dtype="bf16")
    code, out, _ = _run(capsys, "compare", bf16, ref_path)
    assert code == 0, out
    assert "note: the reference is stored in bf16: judged with the bf16 tolerance" in out


def test_plot_writes_png(capsys, tmp_path, ref_path, ref):
    pytest.importorskip("matplotlib")
    cand = _candidate(tmp_path, _perturbed_from(ref, "layer.1", 1e-3))
    png = tmp_path / "layers.png"
    code, out, _ = _run(capsys, "compare", ref_path, cand, "--plot", png)
    assert code == 1 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"per-layer plot: {png}" in out


# --------------------------------------------------------------------------- compare: the JSON dump format


def test_json_dumps_keep_working(capsys, tmp_path, ref_path, ref, healthy_tied_dir):
    """bench/baseline/llm_json.py's output ({"logits": [vocab], "greedy": [...]}) as a candidate
    and as a reference."""
    ids = ",".join(str(i) for i in ref.tensors["ids"].tolist())
    pt = tmp_path / "pt.json"
    with open(pt, "w") as f:
        subprocess.run(
            [sys.executable, "-I", str(ROOT / "bench/baseline/llm_json.py"), str(healthy_tied_dir), ids, "8", "2"],
            stdout=f,
            check=True,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        )
    code, out, err = _run(capsys, "compare", ref_path, pt)
    assert code == 0, out + err
    assert "candidate: logits, greedy" in out and "greedy          8 tokens  identical" in out
    doc = json.loads(pt.read_text())
    doc["logits"][7] += 0.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert _run(capsys, "compare", pt, bad)[0] == 1
    assert _run(capsys, "compare", pt, pt)[0] == 0


# --------------------------------------------------------------------------- compare: bad input


def _bad_candidates(ref, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    t = dict(ref.tensors)
    t.pop("greedy.logits")
    without_layer1 = {k: v for k, v in t.items() if k != "layer.1"}
    short_layer = dict(t, **{"layer.1": t["layer.1"][:-1]})
    other_ids = dict(t, ids=t["ids"][::-1].copy())
    extra = dict(t, **{"layer.3": t["layer.2"]})
    unknown = {"hidden": t["layer.2"]}
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x00\x01not a safetensors file at all")
    return {
        "missing layer.1": (
            _candidate(tmp_path, without_layer1, "a.safetensors"),
            "layer.1 is missing between layer.0 and layer.2",
        ),
        "bad shape": (
            _candidate(tmp_path, short_layer, "b.safetensors"),
            "`layer.1` has shape [15, 64], the reference's is [16, 64]",
        ),
        "ids differ": (_candidate(tmp_path, other_ids, "c.safetensors"), "they part at token 0"),
        "shorter prompt": (
            _candidate(tmp_path, {"ids": t["ids"][:3], "logits": t["logits"][2]}, "g.safetensors"),
            "they part at token 3",
        ),
        "layer the reference lacks": (
            _candidate(tmp_path, extra, "d.safetensors"),
            "tensor `layer.3` is not in the reference",
        ),
        "unknown name": (_candidate(tmp_path, unknown, "e.safetensors"), "tensor `hidden` is not in the reference"),
        "logits shape": (
            _candidate(tmp_path, {"logits": t["logits"][:, :100]}, "f.safetensors"),
            "`logits` has shape [16, 100]",
        ),
        "not safetensors": (garbage, "safetensors"),
        "no file": (tmp_path / "missing.safetensors", "no such file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing layer.1",
        "bad shape",
        "layer the reference lacks",
        "unknown name",
        "logits shape",
        "not safetensors",
        "no file",
    ],
)
def test_malformed_candidate_one_line_exit_2(capsys, tmp_path, ref_path, ref, case):
    path, message = _bad_candidates(ref, tmp_path)[case]
    code, out, err = _run(capsys, "compare", ref_path, path)
    assert code == 2, out
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("portkit: error: ")


@pytest.mark.parametrize("case", ["ids differ", "shorter prompt"])
def test_other_ids_are_a_mismatch_before_any_logits(capsys, tmp_path, ref_path, ref, case):
    """Another prompt is the candidate's first difference (exit 1), named where the ids part;
    nothing else is compared. (It was bad input, exit 2, before compare read ids first.)"""
    path, message = _bad_candidates(ref, tmp_path)[case]
    code, out, err = _run(capsys, "compare", ref_path, path)
    assert code == 1, err
    assert message in out and "nothing else compared" in out and "last position" not in out and "Traceback" not in err


def test_subprocess_exit_codes(tmp_path, ref_path, ref):
    """The installed entry point's real exit status: 0, 1, 2."""
    same = tmp_path / "same.safetensors"
    shutil.copy(ref_path, same)
    perturbed = _candidate(tmp_path, _perturbed_from(ref, "layer.1", 1e-3), "p.safetensors")
    shape = _bad_candidates(ref, tmp_path)["bad shape"][0]
    codes = []
    for cand in (same, perturbed, shape):
        p = subprocess.run(
            [sys.executable, "-m", "portkit.cli", "compare", str(ref_path), str(cand)], capture_output=True, text=True
        )
        codes.append(p.returncode)
        assert "Traceback" not in p.stderr
    assert codes == [0, 1, 2]


def test_subcommands_are_wired_and_lazy(capsys):
    """Both commands are in `portkit --help`; `portkit lint` and `portkit rules` import neither."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    listing = capsys.readouterr().out
    assert e.value.code == 0 and "reference" in listing and "compare" in listing
    prog = (
        "import sys; from portkit.cli import main; main(['rules']); print([m for m in sys.modules if "
        "m.startswith('portkit.porting')])"
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip().splitlines()[-1] == "[]"
