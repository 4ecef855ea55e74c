"""Each family's `FamilyRunner` (candle's own model) against transformers on the same tiny checkpoint
(fixtures/families.py): last-position logits agree within 1e-4 relative where candle reads the checkpoint
as transformers does, and the known candle differences stay visible (negative controls)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import FAMILIES, FAMILY_VARIANTS, family_fixture, reference_last_logits

TOLERANCE = 1e-4

#: The variant of each family that the fixture catalogue (fixtures/families.py) says candle reads as
#: transformers does. mixtral's hub-style config is refused (sliding_window null), hence int-window.
#: gemma4's module computes another model for every checkpoint (PK126: its norms multiply by weight + 1
#: and its scores are scaled by 1/sqrt(head_dim)): its legacy save is in SILENT, and verify confirms
#: it against transformers as candle computes (tests/acceptance/test_verify_families.py)
AGREEING = {family: ("int-window" if family == "mixtral" else "legacy") for family in FAMILIES if family != "gemma4"}

#: gemma3 appends its transposed keys to the KV cache (gemma3.rs:245-248), which candle refuses for a
#: prefill with more than one KV head; one token at a time (decode) works and agrees.
PREFILL_ERROR = {"gemma3": "slice-set only supports contiguous tensors"}

#: Variants where candle computes something else: the comparison must fail, or it proves nothing.
SILENT = [
    ("gemma4", "legacy"),
    ("mistral", "sliding-window-4"),
    ("gemma2", "query-pre-attn-scalar"),
    ("phi3", "longrope"),
    ("granite", "multipliers"),
    ("starcoder2", "untied"),
]


def _runner(family: str, variant: str) -> tuple[pn.FamilyRunner, Path, list[int]]:
    d = family_fixture(family, variant)
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    runner = pn.FamilyRunner(family, [str(d / "model.safetensors")], (d / "config.json").read_text())
    return runner, d, ids


def _rel(candle: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(candle - reference).max() / np.abs(reference).max())


def test_agreeing_variants_are_labelled_same():
    for family, variant in AGREEING.items():
        if family not in PREFILL_ERROR:
            assert FAMILY_VARIANTS[family][variant].label == "same", (family, variant)
    for family, variant in SILENT:
        assert FAMILY_VARIANTS[family][variant].label == "silent", (family, variant)


def test_every_family_has_a_runner():
    assert set(pn.families()) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(AGREEING))
def test_candle_matches_transformers(family: str):
    runner, d, ids = _runner(family, AGREEING[family])
    assert runner.family == family
    reference = reference_last_logits(d, ids).numpy()
    if family in PREFILL_ERROR:
        with pytest.raises(pn.CandleError, match=f"^{PREFILL_ERROR[family]}$"):
            runner.last_logits(ids)
        candle = runner.teacher_forced_logits(ids, prefill=1)[-1]
    else:
        candle = runner.last_logits(ids)
        # The KV-cache path lands on the same numbers (each call starts from an empty cache).
        rows = runner.teacher_forced_logits(ids, prefill=len(ids) // 2)
        assert _rel(rows[-1], reference) <= TOLERANCE
    rel = _rel(candle, reference)
    print(f"{family}: max|diff| {np.abs(candle - reference).max():.2e} rel {rel:.2e}")
    assert rel <= TOLERANCE, f"{family}: candle vs transformers rel {rel:.2e}"
    assert np.argmax(candle) == int(np.argmax(reference))


@pytest.mark.parametrize("family,variant", SILENT)
def test_known_candle_differences_stay_visible(family: str, variant: str):
    runner, d, ids = _runner(family, variant)
    candle, reference = runner.last_logits(ids), reference_last_logits(d, ids).numpy()
    rel = _rel(candle, reference)
    print(f"{family}/{variant}: max|diff| {np.abs(candle - reference).max():.2e} rel {rel:.2e}")
    assert rel > 100 * TOLERANCE, f"{family}/{variant}: expected a visible difference, got rel {rel:.2e}"


@pytest.mark.parametrize(
    "family,variant,error",
    [
        ("mistral", "t5", pn.ConfigError),
        ("qwen2", "t5", pn.ConfigError),
        ("stable_lm", "t5", pn.ConfigError),
        ("mistral", "tied", pn.CandleError),
        ("granite", "tied", pn.CandleError),
    ],
)
def test_refusals_carry_candles_text(family: str, variant: str, error: type[Exception]):
    d = family_fixture(family, variant)
    message = FAMILY_VARIANTS[family][variant].candle_message
    with pytest.raises(error, match=message.replace("`", ".")):
        pn.FamilyRunner(family, [str(d / "model.safetensors")], (d / "config.json").read_text())


CAPTURED = ["mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo2", "granite", "phi", "qwen2_moe", "smollm3"]
CAPTURED += ["glm4_new", "gemma4"]  # gemma4 computes another model (PK126) on every checkpoint: its legacy one


@pytest.mark.parametrize("family", CAPTURED)
def test_capture_copy_is_bit_identical_to_the_library(family: str):
    runner, d, ids = _runner(family, AGREEING.get(family, "legacy"))
    captured = runner.capture(ids)
    from portkit.families import BY_NAME, sublayers

    subs = sublayers.of(BY_NAME[family])  # each layer's sub-layers, as the reference names them
    layers = json.loads((d / "config.json").read_text())["num_hidden_layers"]
    per_layer = [n for i in range(layers) for n in [*(f"layer.{i}.{s}" for s in subs), f"layer.{i}"]]
    assert list(captured) == ["embeddings", *per_layer, "norm", "logits"]
    assert captured["layer.1"].shape == (len(ids), 64)
    assert all(captured[f"layer.1.{s}"].shape[0] == len(ids) and captured[f"layer.1.{s}"].ndim == 2 for s in subs)
    assert float(np.abs(captured["logits"] - runner.last_logits(ids)).max()) == 0.0
    alone = pn.capture_layers([str(d / "model.safetensors")], (d / "config.json").read_text(), ids, family=family)
    for name in captured:
        assert np.array_equal(alone[name], captured[name]), name


#: run under another release's runner: each capture family's copy generated from that release's source
OTHER_RELEASE = """
import json, sys
import numpy as np
import portkit_native as pn
from pathlib import Path
out = {}
for family, d in json.loads(sys.argv[1]).items():
    d = Path(d)
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    runner = pn.FamilyRunner(family, [str(d / "model.safetensors")], (d / "config.json").read_text())
    captured = runner.capture(ids)
    out[family] = [len(captured), float(np.abs(captured["logits"] - runner.last_logits(ids)).max())]
print(json.dumps({"release": pn.build_info()["candle_version"], "families": out}))
"""


def test_the_capture_copies_of_0_11_0_are_bit_identical_to_its_library():
    """0.11.0 builds the causal mask of qwen3, smollm3 and glm4_new without 0.11.1's
    `utils::build_additive_causal_mask`: their copies have patches of their own (native/copies/0.11.0/),
    generated from that release's source."""
    import os
    import subprocess
    import sys

    from portkit.verify.candle import release_build

    site = release_build.ensure("0.11.0", lambda _: None)
    dirs = {f: str(family_fixture(f, AGREEING[f])) for f in ("qwen3", "smollm3", "glm4_new", "phi", "qwen2_moe")}
    proc = subprocess.run(
        [sys.executable, "-c", OTHER_RELEASE, json.dumps(dirs)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        check=True,
    )
    doc = json.loads(proc.stdout)
    assert doc["release"] == "0.11.0"
    assert {f: d for f, (_, d) in doc["families"].items()} == dict.fromkeys(dirs, 0.0), doc
    assert all(n > 5 for n, _ in doc["families"].values()), doc


def test_gemma3_capture_fails_as_the_library_does():
    runner, d, ids = _runner("gemma3", "legacy")  # two KV heads: candle's prefill fails
    with pytest.raises(pn.CandleError, match=f"^{PREFILL_ERROR['gemma3']}$"):
        runner.capture(ids)
    one = runner.capture(ids[:1])  # one token: no transpose problem
    assert [n for n in one if n.count(".") < 2] == ["embeddings", *(f"layer.{i}" for i in range(6)), "norm", "logits"]
    assert float(np.abs(one["logits"] - runner.last_logits(ids[:1])).max()) == 0.0


def test_capture_families():
    assert pn.capture_families() == [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
        "gemma3",
        "phi3",
        "olmo2",
        "granite",
        "phi",
        "qwen2_moe",
        "smollm3",
        "glm4_new",
        "gemma4",
    ]
    runner, d, ids = _runner("stable_lm", "legacy")
    with pytest.raises(NotImplementedError, match="^per-layer: not available for stable_lm$"):
        runner.capture(ids)
    with pytest.raises(NotImplementedError, match="^per-layer: not available for starcoder2$"):
        text = (family_fixture("starcoder2", "legacy") / "config.json").read_text()
        pn.capture_layers([], text, ids, family="starcoder2")


def _safetensors_header(path: Path) -> dict[str, list[int]]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    return {name: info["shape"] for name, info in header.items() if name != "__metadata__"}


@pytest.mark.parametrize("family", sorted(AGREEING))
def test_requested_tensors_are_exactly_what_transformers_saved(family: str):
    d = family_fixture(family, AGREEING[family])
    saved = _safetensors_header(d / "model.safetensors")
    requested, error = pn.requested_tensors(family, (d / "config.json").read_text(), list(saved))
    assert error is None
    assert {name: shape for name, shape in requested} == saved


def test_gemma4_requests_every_saved_tensor_but_layer_scalar():
    """candle's gemma4 never reads transformers' `layer_scalar` (PK202); every other tensor it asks
    for is the one transformers saved, at its shape."""
    d = family_fixture("gemma4", "legacy")
    saved = _safetensors_header(d / "model.safetensors")
    requested, error = pn.requested_tensors("gemma4", (d / "config.json").read_text(), list(saved))
    assert error is None
    unread = {n for n in saved if n.endswith(".layer_scalar")}
    assert len(unread) == 4
    assert {name: shape for name, shape in requested} == {n: s for n, s in saved.items() if n not in unread}


def test_requested_tensors_name_the_missing_lm_head():
    d = family_fixture("mistral", "tied")
    saved = _safetensors_header(d / "model.safetensors")
    requested, error = pn.requested_tensors("mistral", (d / "config.json").read_text(), list(saved))
    assert "lm_head.weight" not in saved
    assert requested[-1] == ("lm_head.weight", [256, 64])
    assert error == "cannot find tensor lm_head.weight"
    # starcoder2 with its own lm_head: candle never asks for it (starcoder2.rs:288).
    d = family_fixture("starcoder2", "untied")
    saved = _safetensors_header(d / "model.safetensors")
    requested, error = pn.requested_tensors("starcoder2", (d / "config.json").read_text(), list(saved))
    assert error is None and "lm_head.weight" in saved
    assert set(saved) - {name for name, _ in requested} == {"lm_head.weight"}


#: (family, candle's GGUF loader, transformers config overrides that do what the loader does or None).
#: quantized_qwen2 agrees as is. quantized_phi3 hard-codes RoPE theta 10000 (quantized_phi3.rs:244; the
#: fixture has 1e5). quantized_gemma3's MLP uses SiLU where Gemma 3 uses the tanh GELU
#: (quantized_gemma3.rs:60), and its sliding layers read `rope.local_freq_base` (default 1e4) where the
#: converter writes `rope.freq_base_swa` (the fixture's local theta is 5e4). quantized_qwen3 builds its RoPE tables in
# F16 when the file has no
#: `general.dtype` (the converter writes none; no config edit reproduces that).
GGUF_CASES = [
    ("qwen2", "quantized_qwen2", {}),
    ("phi3", "quantized_phi3", {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}),
    (
        "gemma3",
        "quantized_gemma3",
        {
            "hidden_activation": "silu",
            "rope_parameters": {
                "full_attention": {"rope_theta": 1e6, "rope_type": "default"},
                "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"},
            },
        },
    ),
    ("qwen3", "quantized_qwen3", None),
]


@pytest.mark.parametrize("family,loader,mechanism", GGUF_CASES)
def test_gguf_loader_against_transformers(family: str, loader: str, mechanism: dict | None, tmp_path: Path):
    from fixtures.gguf_writer import write_gguf

    d = family_fixture(family, "legacy")
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    runner = pn.GgufRunner(str(write_gguf(d, tmp_path / f"{family}.gguf", "f32")), loader=loader)
    assert runner.loader == loader
    candle, reference = runner.last_logits(ids), reference_last_logits(d, ids).numpy()
    rel = _rel(candle, reference)
    print(f"{loader}: max|diff| {np.abs(candle - reference).max():.2e} rel {rel:.2e}")
    assert (rel <= TOLERANCE) == (mechanism == {}), f"{loader}: rel {rel:.2e}"
    if mechanism:
        # Counterfactual: transformers made to do what the loader does lands on candle's numbers.
        edited = reference_last_logits(d, ids, **mechanism).numpy()
        print(f"{loader} vs transformers {mechanism}: rel {_rel(candle, edited):.2e}")
        assert _rel(candle, edited) <= TOLERANCE
        reference = edited
    rows = runner.teacher_forced_logits(ids, prefill=len(ids) // 2)
    assert rows.shape == (len(ids) - len(ids) // 2 + 1, reference.shape[0])
    if mechanism is not None:
        assert _rel(rows[-1], reference) <= TOLERANCE


@pytest.mark.parametrize("family", sorted(f for f in AGREEING if f not in PREFILL_ERROR))
@pytest.mark.parametrize("n", [0, 1, 4])
def test_generate_is_greedy_and_teacher_forcing_in_one_pass(family: str, n: int):
    """verify takes candle's greedy tokens and teacher-forced rows from one `generate`: it must
    be bit for bit the two calls it replaces."""
    runner, _d, ids = _runner(family, AGREEING[family])
    tokens, rows = runner.generate(ids, n)
    assert tokens == runner.greedy(ids, n)
    forced = runner.teacher_forced_logits(ids + tokens[: max(n - 1, 0)], len(ids))
    assert rows.shape == forced.shape == (max(n, 1), forced.shape[1])
    assert np.array_equal(rows, forced)


def test_llama_runner_generate_and_shared_capture():
    d = family_fixture("llama", "legacy")
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    files, text = [str(d / "model.safetensors")], (d / "config.json").read_text()
    runner = pn.LlamaRunner(files, text)
    tokens, rows = runner.generate(ids, 3)
    assert tokens == runner.greedy(ids, 3)
    assert np.array_equal(rows, runner.teacher_forced_logits(ids + tokens[:2], len(ids)))
    alone = pn.capture_layers(files, text, ids)
    captured = runner.capture(ids)  # built from the runner's own tensors
    assert list(captured) == list(alone) and all(np.array_equal(alone[k], captured[k]) for k in alone)
