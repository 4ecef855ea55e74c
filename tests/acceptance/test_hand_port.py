"""The porting kit on a port written by hand: tests/hand_port is a Qwen2 port in candle 0.11.0
(candle-nn blocks, portkit-dump, docs/porting.md's snippet as its forward) with a switch for
each bug ports really have. `portkit compare` must name the sub-layer where each one starts,
its diagnosis must point to the right candidates, and say "position 0 agrees" exactly for the
bugs that only change the attention scores (RoPE, the scale); the healthy port agrees.

The model: the qwen2 family fixture (theta 1e6, q/k/v biases, tied embeddings) with a third
layer, so that a bug in layer 2 has two clean layers before it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from portkit.cli import main
from portkit.porting.dumpfile import read_dump

CRATE = Path(__file__).resolve().parents[1] / "hand_port"

SCORES = (
    "q/k/v projections agree, attention output differs, position 0 agrees: rotary embedding (theta, pairing, "
    "scaling) or the attention scale/softcap"
)
# bug -> (first bad name, the diagnosis line, the candidates it must name)
BUGS = {
    "rope-theta-key": ("layer.0.self_attn", SCORES, ["rotary embedding (theta, pairing, scaling)"]),
    "rope-interleaved": ("layer.0.self_attn", SCORES, ["rotary embedding (theta, pairing, scaling)"]),
    "no-attention-scale": ("layer.0.self_attn", SCORES, ["the attention scale/softcap"]),
    "no-qkv-bias": ("layer.0.self_attn.q_proj", "q_proj differs from position 0: weight layout or bias", ["bias"]),
    "o-proj-transposed": (
        "layer.0.self_attn",
        "q/k/v projections agree, attention output differs from position 0: o_proj (weight layout or bias) or the "
        "value path (v heads, key-value grouping)",
        ["o_proj (weight layout or bias)"],
    ),
    "gate-up-swapped": (
        "layer.0.mlp",
        "post_attention_layernorm agrees, mlp differs from position 0: gate/up order, the activation (hidden_act) or "
        "down_proj weight layout",
        ["gate/up order"],
    ),
    "eps-layer2": ("layer.2.input_layernorm", "input_layernorm differs: eps or weight offset (gemma's 1 + w)", ["eps"]),
}
SCORE_BUGS = {"rope-theta-key", "rope-interleaved", "no-attention-scale"}


@pytest.fixture(scope="session")
def hand_port() -> Path:
    """`cargo build --release` in tests/hand_port: the same dependencies and Cargo.lock as
    native/portkit-dump's tests and examples, so the shared CARGO_TARGET_DIR's candle is reused
    (a few seconds) and docs/porting.md's snippet is compiled on the way."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build tests/hand_port (the README's set-up installs it)")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or Path.home() / ".cache" / "portkit" / "target")
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(["cargo", "build", "--release", "--quiet", "--locked"], cwd=CRATE, env=env, check=True)
    exe = target / "release" / "portkit-hand-port"
    assert exe.is_file()
    return exe


@pytest.fixture(scope="module")
def qwen2_three_layers(tmp_path_factory) -> Path:
    from fixtures.families import write_family

    return write_family(
        "qwen2", "legacy", tmp_path_factory.mktemp("qwen2-3") / "model", overrides={"num_hidden_layers": 3}
    )


@pytest.fixture(scope="module")
def ref_path(qwen2_three_layers, tmp_path_factory) -> Path:
    from portkit.porting.reference import write

    out = tmp_path_factory.mktemp("hand-port-ref") / "ref.safetensors"
    write(qwen2_three_layers, out, tokens=8)
    return out


@pytest.fixture(scope="module")
def dumps(hand_port, qwen2_three_layers, ref_path, tmp_path_factory) -> dict[str, Path]:
    ids = ",".join(str(i) for i in read_dump(ref_path).tensors["ids"].tolist())
    out = tmp_path_factory.mktemp("hand-port-dumps")
    paths = {}
    for bug in ["none", *BUGS]:
        paths[bug] = out / f"{bug}.safetensors"
        subprocess.run(
            [str(hand_port), str(qwen2_three_layers), str(paths[bug]), "--ids", ids, "--bug", bug],
            check=True,
            capture_output=True,
        )
    return paths


def _compare(capsys, ref: Path, cand: Path) -> tuple[int, dict, str]:
    code = main(["compare", str(ref), str(cand), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert main(["compare", str(ref), str(cand)]) == code
    return code, doc, capsys.readouterr().out


def test_the_reference_holds_every_sub_layer_of_qwen2(ref_path):
    ref = read_dump(ref_path)
    assert json.loads(ref.metadata["sublayers"]) == [
        "input_layernorm",
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn",
        "post_attention_layernorm",
        "mlp",
    ]
    names = list(ref.tensors)
    layer1 = [n for n in names if n.startswith("layer.1")]
    assert layer1 == [f"layer.1.{s}" for s in json.loads(ref.metadata["sublayers"])] + [
        "layer.1"
    ]  # computation order, then the layer
    T = ref.tensors["ids"].shape[0]
    assert ref.tensors["layer.1.self_attn.q_proj"].shape == (T, 64) and ref.tensors[
        "layer.1.self_attn.k_proj"
    ].shape == (T, 32)
    assert ref.tensors["layer.2.mlp"].shape == (T, 64) and ref.dtypes["layer.2.mlp"] == "F32"


def test_the_healthy_port_agrees_at_every_sub_layer(capsys, ref_path, dumps):
    d = read_dump(dumps["none"])
    assert sum(1 for n in d.tensors if n.count(".") >= 2) == 3 * 7  # every sub-layer of the 3 layers
    code, doc, text = _compare(capsys, ref_path, dumps["none"])
    assert code == 0 and doc["first_bad"] is None and doc["comparison"]["localisation"] is None, text
    rows = doc["comparison"]["layers"]["rows"]
    assert len(rows) == 1 + 3 * 8 + 2 and max(r["rel"] for r in rows) < 1e-5  # sub-layers too, not only the judged rows


@pytest.mark.parametrize("bug", list(BUGS))
def test_compare_names_the_sub_layer_and_what_it_points_to(capsys, ref_path, dumps, bug):
    first_bad, diagnosis, candidates = BUGS[bug]
    code, doc, text = _compare(capsys, ref_path, dumps[bug])
    loc = doc["comparison"]["localisation"]
    assert code == 1 and doc["first_bad"] == first_bad == loc["name"], text
    assert loc["layer"] == ".".join(first_bad.split(".")[:2])
    assert loc["diagnosis"] == diagnosis and set(candidates) <= set(loc["candidates"])
    # "position 0 agrees" exactly for the bugs that only change the attention scores
    assert ("position 0 agrees" in loc["diagnosis"]) == (bug in SCORE_BUGS) == loc["position0_agrees"]
    T = len(read_dump(ref_path).tensors["ids"])
    errors = loc["per_position"]
    assert len(errors) == T and max(errors) == pytest.approx(loc["rel"], rel=1e-12)
    if bug in SCORE_BUGS:
        assert errors[0] < 1e-6 < 1e-3 < max(errors[1:])
    else:
        assert errors[0] > 1e-5
    # every sub-layer before the first bad one, in this layer, agrees
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    order = [n for n in rows if n.startswith(loc["layer"] + ".")]
    assert all(rows[n]["rel"] < 1e-5 for n in order[: order.index(first_bad)]) and rows[first_bad]["over"]
    assert loc["agreeing"] == order[: order.index(first_bad)]
    # the text: the summary's number is the named row's own, then the localisation
    m = re.search(r"first layer (?:over 1e-5 \(fallback\)|out of its floor): (\S+) \(rel ([0-9.e+-]+)", text)
    assert m and m.group(1) == loc["layer"] and m.group(2) == f"{rows[loc['layer']]['rel']:.2e}", text
    assert f"first bad sub-layer: {first_bad} (rel {loc['rel']:.2e}" in text
    assert f"diagnosis: {diagnosis}" in text and f"starting at {first_bad} (exit 1)" in text


def test_a_candidate_with_only_layers_is_told_which_sub_layers_would_localise_it(capsys, ref_path, dumps, tmp_path):
    from safetensors.numpy import save_file

    d = read_dump(dumps["no-qkv-bias"])
    only_layers = {k: v for k, v in d.tensors.items() if k.count(".") < 2 or k == "greedy.logits"}
    cand = tmp_path / "layers.safetensors"
    save_file(only_layers, str(cand))
    code, doc, text = _compare(capsys, ref_path, cand)
    loc = doc["comparison"]["localisation"]
    assert code == 1 and doc["first_bad"] == "layer.0" == loc["name"]
    assert loc["missing"] == [f"layer.0.{s}" for s in json.loads(read_dump(ref_path).metadata["sublayers"])]
    assert (
        "layer.0 differs; its sub-layers would localise it: dump layer.0.input_layernorm, layer.0.self_attn.q_proj"
        in text
    )


def test_the_hand_port_locks_portkit_dumps_versions():
    """The same versions as native/portkit-dump's Cargo.lock, so that its build reuses the candle
    that portkit-dump's tests and examples compiled in the shared CARGO_TARGET_DIR (a second
    candle build would cost CI minutes)."""
    import tomllib

    def versions(lock: Path) -> dict[str, str]:
        return {p["name"]: p["version"] for p in tomllib.loads(lock.read_text())["package"]}

    ours = versions(CRATE / "Cargo.lock")
    dump = versions(CRATE.parents[1] / "native" / "portkit-dump" / "Cargo.lock")
    assert ours.pop("portkit-hand-port") == "0.0.0"
    assert ours == dump
