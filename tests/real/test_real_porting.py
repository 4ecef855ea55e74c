"""The porting kit on real weights: `portkit reference` on the fixed SmolLM2 checkpoint, and
native/portkit-dump's example port (`llama_port`, a user's own candle Llama written with
candle-nn blocks) dumped on the same ids. The healthy port agrees within the f32 tolerance at
every layer; a wrong `rms_norm_eps` is localised to the norm where it starts: layer.0's when the
config the port reads says 1e-6 (every norm wrong, docs/measurements.md's eps row), layer.2's
with the example's planted `--bug eps-layer2`. Negative controls: one logit of the healthy dump
moved by 1e-3, and the port reading the unfixed config (candle's default theta)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from portkit.cli import main
from portkit.porting.dumpfile import read_dump
from portkit.verify.judge.checks import TOLERANCES
from tests.real.inputs import linked_copy

F32 = TOLERANCES["f32"]
#: 13 tokens (at least 8, so position 0 is not most of the prompt), 8 greedy ones.
TEXT = "The capital of France is Paris, and the capital of Germany is"
TOKENS = 8


@pytest.fixture(scope="module")
def ref_path(real, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real-ref") / "ref.safetensors"
    assert main(["reference", str(real.fixed), "--out", str(out), "--text", TEXT, "--tokens", str(TOKENS)]) == 0
    return out


@pytest.fixture(scope="module")
def port(llama_port, ref_path, tmp_path_factory):
    """`port(model_dir, bug="none") -> Path`: the example port's dump on the reference's ids."""
    ids = ",".join(str(i) for i in read_dump(ref_path).tensors["ids"].tolist())
    out = tmp_path_factory.mktemp("real-port")
    made: dict[tuple[str, str], Path] = {}

    def go(model_dir: Path, bug: str = "none") -> Path:
        key = (str(model_dir), bug)
        if key not in made:
            path = out / f"{len(made)}-{bug}.safetensors"
            subprocess.run(
                [str(llama_port), str(model_dir), str(path), "--ids", ids, "--tokens", str(TOKENS), "--bug", bug],
                check=True,
                capture_output=True,
            )
            made[key] = path
        return made[key]

    return go


def _compare(capsys, ref: Path, cand: Path) -> tuple[int, dict]:
    code = main(["compare", str(ref), str(cand), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_reference_is_every_layer_of_the_real_model(ref_path, real):
    ref = read_dump(ref_path)
    t = ref.tensors
    assert t["ids"].tolist()[:5] == [504, 3575, 282, 4649, 314] and len(t["ids"]) == 13
    assert t["layer.29"].shape == (13, 576) and t["logits"].shape == (13, 49152) and t["greedy"].shape == (TOKENS,)
    assert len(json.loads(ref.metadata["sublayers"])) == 7 and "layer.29.mlp" in t
    assert Path(ref.metadata["model"]) == real.fixed.resolve()


def test_the_healthy_port_agrees(capsys, ref_path, port, real):
    code, doc = _compare(capsys, ref_path, port(real.fixed))
    c = doc["comparison"]
    assert code == 0 and doc["first_bad"] is None, c["summary"]
    # judged against the floors `portkit reference` measured (its f64 truth), not a constant
    assert c["last_position"]["floor"] is not None and c["last_position"]["ok"]
    assert c["layers"]["judged"] and c["layers"]["first_over"] is None and c["layers"]["ok"]
    assert c["teacher_forced"]["ok"] and c["greedy"]["first_divergence"] is None


def test_negative_control_one_logit_plus_1e3_is_a_mismatch(capsys, ref_path, port, real, tmp_path):
    d = read_dump(port(real.fixed))
    tensors = {k: np.ascontiguousarray(v) for k, v in d.tensors.items()}
    tensors["logits"] = tensors["logits"].copy()
    tensors["logits"][-1, 7] += np.float32(1e-3)
    bumped = tmp_path / "bumped.safetensors"
    save_file(tensors, str(bumped))
    code, doc = _compare(capsys, ref_path, bumped)
    assert code == 1 and doc["verdict"] == "mismatch" and doc["first_bad"] == "logits"
    assert (
        not doc["comparison"]["last_position"]["ok"]
        and doc["comparison"]["last_position"]["max_abs_diff"] >= 1e-3 - F32.logits_atol
    )


def test_negative_control_the_port_on_the_unfixed_config_diverges(capsys, ref_path, port, real):
    """The port reads config.json with candle's LlamaConfig: on the tf5 save it gets theta 10000."""
    code, doc = _compare(capsys, ref_path, port(real.tf5))
    assert (
        code == 1 and doc["first_bad"] == "layer.0.self_attn" and doc["comparison"]["localisation"]["position0_agrees"]
    )


def _localised_at(doc: dict, sub: str) -> None:
    loc = doc["comparison"]["localisation"]
    layer = ".".join(sub.split(".")[:2])
    assert doc["first_bad"] == sub == loc["name"] and loc["layer"] == layer == doc["comparison"]["layers"]["first_over"]
    assert (
        loc["diagnosis"] == "input_layernorm differs: eps or weight offset (gemma's 1 + w)"
        and "eps" in loc["candidates"]
    )
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    order = list(rows)
    assert all(rows[n]["rel"] < F32.layer_rtol for n in order[: order.index(sub)])  # clean up to the bug
    assert rows[sub]["rel"] > 10 * F32.layer_rtol


def test_a_wrong_eps_in_the_config_is_localised_to_layer_0s_norm(capsys, ref_path, port, real, tmp_path):
    """docs/measurements.md's eps row on real weights: rms_norm_eps 1e-6 instead of 1e-5."""
    eps = linked_copy(real.fixed, tmp_path / "eps-1e-6", {"rms_norm_eps": 1e-6})
    code, doc = _compare(capsys, ref_path, port(eps))
    assert code == 1
    _localised_at(doc, "layer.0.input_layernorm")


def test_the_planted_eps_bug_is_localised_to_its_layers_norm(capsys, ref_path, port, real):
    """The example's `--bug eps-layer2`: layer 2's norms with eps 1e-2; layers 0 and 1 agree."""
    code, doc = _compare(capsys, ref_path, port(real.fixed, "eps-layer2"))
    assert code == 1
    _localised_at(doc, "layer.2.input_layernorm")
