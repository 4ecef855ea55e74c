"""The Rust crate `native/portkit-dump` as a user uses it: its example `llama_port` (a user's own
candle Llama port, written with candle-nn blocks) dumps its values with `Dump`, and
`portkit compare` judges them against `portkit reference`: the fixed port agrees, each
injected bug is named at the layer where it starts. (`llama_port`, the build: tests/conftest.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from portkit.cli import main
from portkit.porting.dumpfile import read_dump


@pytest.fixture(scope="module")
def ref_path(tmp_path_factory, healthy_tied_dir) -> Path:
    from portkit.porting.reference import write

    out = tmp_path_factory.mktemp("portkit-dump") / "ref.safetensors"
    write(healthy_tied_dir, out, tokens=8)
    return out


def _dump(llama_port: Path, model_dir: Path, ref_path: Path, out: Path, bug: str) -> Path:
    ids = ",".join(str(i) for i in read_dump(ref_path).tensors["ids"].tolist())
    subprocess.run(
        [str(llama_port), str(model_dir), str(out), "--ids", ids, "--tokens", "8", "--bug", bug],
        check=True,
        capture_output=True,
    )
    return out


def _compare(capsys, ref: Path, cand: Path) -> tuple[int, dict]:
    code = main(["compare", str(ref), str(cand), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_fixed_port_compares_clean(capsys, tmp_path, llama_port, healthy_tied_dir, ref_path):
    cand = _dump(llama_port, healthy_tied_dir, ref_path, tmp_path / "fixed.safetensors", "none")
    d = read_dump(cand)
    # every layer and each of its sub-layers (the reference's f64 truth is its own)
    assert list(d.tensors) == [n for n in read_dump(ref_path).tensors if not n.startswith("truth.")]
    assert (
        d.dtypes["ids"] == "U32" and d.tensors["logits"].shape == (16, 256) and d.tensors["layer.1"].shape == (16, 64)
    )
    code, doc = _compare(capsys, ref_path, cand)
    c = doc["comparison"]
    assert code == 0, doc
    assert c["last_position"]["max_abs_diff"] <= 1e-4 and c["layers"]["max_rel"] < 1e-5
    assert c["teacher_forced"]["argmax_agree"] == c["teacher_forced"]["steps"] == 23
    assert c["greedy"]["first_divergence"] is None


@pytest.mark.parametrize(
    "bug, first, sub",
    [("eps-layer2", "layer.2", "layer.2.input_layernorm"), ("rope-interleaved", "layer.0", "layer.0.self_attn")],
)
def test_buggy_port_is_named_where_it_starts(capsys, tmp_path, llama_port, healthy_tied_dir, ref_path, bug, first, sub):
    cand = _dump(llama_port, healthy_tied_dir, ref_path, tmp_path / f"{bug}.safetensors", bug)
    code, doc = _compare(capsys, ref_path, cand)
    assert code == 1
    assert doc["comparison"]["layers"]["first_over"] == first and doc["first_bad"] == sub
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    order = list(rows)
    assert all(rows[n]["rel"] < 1e-5 for n in order[: order.index(sub)])  # clean up to the bug, sub-layers too
    main(["compare", str(ref_path), str(cand)])
    out = capsys.readouterr().out
    assert (
        f"first layer out of its floor: {first} (rel {rows[first]['rel']:.2e};" in out
        and f"starting at {sub} (exit 1)" in out
    )


def test_dump_refuses_a_name_outside_the_layout(tmp_path, llama_port, healthy_tied_dir):
    """The crate's own checks run in the user's program (cargo test covers each); here: a bad
    --bug makes the example exit non-zero with its message, and writes nothing."""
    out = tmp_path / "x.safetensors"
    p = subprocess.run(
        [str(llama_port), str(healthy_tied_dir), str(out), "--ids", "1,2", "--bug", "nope"],
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and "unknown --bug" in p.stderr and not out.exists()
