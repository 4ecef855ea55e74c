"""`portkit verify` as a user runs it: exit codes, stdout/stderr, JSON validated by the schema.

Most tests call the CLI in-process (`portkit.verify.cli.main`, what `portkit verify` runs) so
torch loads once; two run real subprocesses for the exit status and the one-line errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixtures.seams import reference_perturbed
from portkit.verify.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "verify-report.schema.json").read_text())


@pytest.fixture(autouse=True)
def _reference_in_process(request, monkeypatch):
    """transformers in this process (torch imported once) unless a test asks for the child
    process `portkit verify` uses by default (a test whose name says `child`, and the subprocess tests)."""
    if "child" not in request.node.name and "subprocess" not in request.node.name:
        monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_healthy_text_exit_0_reference_in_child(capsys, healthy_tied_dir):
    """The default: transformers runs in a child process; the result is the same report."""
    code, out, err = _run(capsys, healthy_tied_dir)
    print(out)
    assert code == 0, out + err
    assert "last position" in out and "from f64: candle" in out and "bound 8x)  OK" in out
    assert "teacher-forced  8 steps  argmax 8/8" in out
    assert "greedy          8 tokens  identical" in out
    assert "layer.2" in out and "values against transformers in f64" in out
    assert "verdict: candle agrees with transformers (exit 0)" in out
    assert "Traceback" not in err


def test_rope_theta_text_shows_confirmed_with_numbers(capsys, fixture_dir):
    code, out, _ = _run(capsys, fixture_dir("rope-theta-in-rope-parameters"))
    print(out)
    assert code == 1
    assert "PK101 rope-theta-in-rope-parameters  CONFIRMED" in out
    assert "evidence: logits differ 4.9" in out and "with rope_theta=100000 restored" in out
    assert "first layer out of its floor: layer.0" in out
    assert "verdict: MISMATCH" in out
    # inside layer.0 (the llama copy records sub-layers): the lost theta leaves position 0 exact
    assert "first bad sub-layer: layer.0.self_attn" in out
    assert "diagnosis: q/k/v projections agree, attention output differs, position 0 agrees: rotary embedding" in out
    capsys.readouterr()  # the print above
    code, js, _ = _run(capsys, fixture_dir("rope-theta-in-rope-parameters"), "--format", "json")
    doc = json.loads(js)
    jsonschema.validate(doc, SCHEMA)
    rows = {r["name"]: r for r in doc["comparison"]["layers"]["rows"]}
    loc = doc["comparison"]["localisation"]
    assert loc["name"] == "layer.0.self_attn" and loc["position0_agrees"] and loc["per_position"][0] < 1e-6
    # the summary's number is the named row's own (not the table's largest, a later row's)
    assert f"first layer out of its floor: layer.0 (rel {rows['layer.0']['rel']:.2e};" in out
    assert f"first bad sub-layer: layer.0.self_attn (rel {rows['layer.0.self_attn']['rel']:.2e};" in out
    assert max(r["rel"] for r in rows.values()) > 2 * rows["layer.0"]["rel"]


def test_a_short_prompt_is_warned_about_on_stderr(capsys, healthy_tied_dir):
    code, out, err = _run(capsys, healthy_tied_dir, "--ids", "1,72,101", "--tokens", "2", "--format", "json")
    assert code == 0 and json.loads(out)["prompt"]["ids"] == [1, 72, 101]
    assert err == (
        "portkit: warning: the prompt has 3 tokens: position 0 has rotation angle 0 and attends to one key, so "
        "rotary-embedding and attention-scale errors show only from position 1 on; use at least 8\n"
    )


def test_json_output_follows_schema(capsys, fixture_dir):
    for variant, want in (("healthy-untied", 0), ("missing-layer", 1)):
        code, out, _ = _run(capsys, fixture_dir(variant), "--format", "json", "--tokens", "4")
        doc = json.loads(out)
        jsonschema.validate(doc, SCHEMA)
        assert code == want == doc["exit_code"]
        assert doc["tokens"] == 4 and doc["prompt"]["source"] == "prompt.json"
    assert doc["candle"]["failure"]["kind"] == "CandlePanic"
    assert doc["candle"]["failure"]["location"].endswith("llama.rs:524")
    assert doc["findings"][0]["verdict"] == "CRASH-CONFIRMED"


def test_negative_control_makes_verify_fail(capsys, healthy_tied_dir):
    """The negative control (one reference logit + 1e-3, `fixtures.seams`) goes through the same comparisons as a real
    run."""
    with reference_perturbed(1e-3):
        code, out, _ = _run(capsys, healthy_tied_dir, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "mismatch"
    last = doc["comparison"]["last_position"]
    assert last["ok"] is False and last["max_abs_diff"] >= 9e-4 and last["worst_index"] == 0


def test_ids_and_tokens(capsys, healthy_tied_dir):
    code, out, _ = _run(
        capsys, healthy_tied_dir, "--ids", "1,5,9,13,17,21,25,29,33", "--tokens", "3", "--format", "json"
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["prompt"] == {"ids": [1, 5, 9, 13, 17, 21, 25, 29, 33], "source": "--ids", "text": None}
    assert doc["comparison"]["teacher_forced"]["steps"] == 3
    assert len(doc["comparison"]["greedy"]["reference"]) == 3


def test_no_layers_skips_the_capture(capsys, healthy_tied_dir):
    code, out, _ = _run(capsys, healthy_tied_dir, "--no-layers", "--format", "json", "--tokens", "2")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert code == 0 and doc["comparison"]["layers"] is None and doc["comparison"]["last_position"]["ok"]


@pytest.fixture()
def dir_with_tokenizer(tmp_path, healthy_tied_dir):
    """A copy of healthy-tied with a tiny word-level tokenizer.json and no prompt.json."""
    tokenizers = pytest.importorskip("tokenizers")
    d = tmp_path / "with-tok"
    shutil.copytree(healthy_tied_dir, d)
    (d / "prompt.json").unlink()
    words = "the capital of france is paris , and germany hello world".split()
    vocab = {"[UNK]": 0, "<s>": 1, **{w: i + 10 for i, w in enumerate(words)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.Lowercase()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.post_processor = tokenizers.processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.save(str(d / "tokenizer.json"))
    return d


def test_text_uses_the_dirs_tokenizer(capsys, dir_with_tokenizer):
    code, out, _ = _run(
        capsys, dir_with_tokenizer, "--text", "Hello world, hello Paris", "--format", "json", "--tokens", "2"
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["prompt"]["ids"] == [1, 19, 20, 16, 19, 15] and doc["prompt"]["source"] == "--text"


def test_default_prompt_without_prompt_json(capsys, dir_with_tokenizer):
    code, out, _ = _run(capsys, dir_with_tokenizer, "--format", "json", "--tokens", "1")
    doc = json.loads(out)
    assert code == 0 and doc["prompt"]["source"] == "default text"
    assert len(doc["prompt"]["ids"]) >= 8
    (dir_with_tokenizer / "tokenizer.json").unlink()
    code, out, _ = _run(capsys, dir_with_tokenizer, "--format", "json", "--tokens", "1")
    doc = json.loads(out)
    assert code == 0 and doc["prompt"]["source"] == "default ids" and len(doc["prompt"]["ids"]) >= 8


def test_plot_writes_a_png(capsys, fixture_dir, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "layers.png"
    code, out, _ = _run(capsys, fixture_dir("rope-theta-in-rope-parameters"), "--plot", png)
    assert code == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert f"per-layer plot: {png}" in out


def _bad_dirs(tmp_path: Path, healthy: Path) -> dict[str, tuple[list[str], str]]:
    broken = tmp_path / "broken"
    shutil.copytree(healthy, broken)
    (broken / "config.json").write_text("{not json")
    pickles = tmp_path / "pickles"
    pickles.mkdir()
    (pickles / "config.json").write_text((healthy / "config.json").read_text())
    (pickles / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    nocfg = tmp_path / "nocfg"
    nocfg.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    return {
        "missing dir": ([str(tmp_path / "absent")], "no such directory"),
        "a file": ([str(afile)], "not a directory"),
        "no config": ([str(nocfg)], "no config.json"),
        "broken json": ([str(broken)], "cannot read config.json"),
        "pickle only": ([str(pickles)], "verify never unpickles"),
        "id out of vocab": ([str(healthy), "--ids", "1,2,256"], "outside the vocabulary (vocab_size 256)"),
        "bad ids": ([str(healthy), "--ids", "1,two"], "not an integer token id"),
        "text without tokenizer": ([str(healthy), "--text", "hello"], "has no tokenizer"),
        "bad dtype": ([str(healthy), "--dtype", "f64"], "--dtype must be one of f32, bf16, f16"),
        "bad device": ([str(healthy), "--device", "tpu"], "--device must be one of cpu, metal, cuda"),
        "negative tokens": ([str(healthy), "--tokens", "-1"], "--tokens must be >= 0"),
        "missing gguf": ([str(healthy), "--gguf", str(tmp_path / "x.gguf")], "no such file"),
        "plot not png": ([str(healthy), "--plot", str(tmp_path / "x.svg")], "the plot is a PNG"),
        "plot without layers": (
            [str(healthy), "--no-layers", "--plot", str(tmp_path / "x.png")],
            "cannot be combined with --no-layers",
        ),
        **(
            {"metal here": ([str(healthy), "--device", "metal"], "Metal is only built into portkit_native on macOS")}
            if sys.platform != "darwin"
            else {}
        ),
    }


def test_bad_input_is_one_line_exit_2(capsys, tmp_path, healthy_tied_dir):
    for what, (argv, text) in _bad_dirs(tmp_path, healthy_tied_dir).items():
        code, out, err = _run(capsys, *argv)
        assert code == 2, (what, out, err)
        assert out == "", what
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("portkit: error: "), (what, err)
        assert text in lines[0], (what, err)


def test_cuda_without_feature_is_exit_2(capsys, healthy_tied_dir):
    import portkit_native

    if "cuda" in portkit_native.build_info()["devices"]:
        pytest.skip("this wheel was built with CUDA")
    code, _, err = _run(capsys, healthy_tied_dir, "--device", "cuda")
    assert code == 2 and "--features cuda" in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- subprocess


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_subprocess_metal_off_macos_exit_2(healthy_tied_dir):
    """`--device metal` here: the native DeviceUnavailableError message, exit 2, no traceback."""
    if sys.platform == "darwin":
        pytest.skip("Metal is built in on macOS")
    p = subprocess.run(
        [sys.executable, "-m", "portkit.cli", "verify", str(healthy_tied_dir), "--device", "metal"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "portkit: error: Metal is only built into portkit_native on macOS (it is enabled by target there); "
        "on this machine use --device cpu, or cuda with a `--features cuda` build"
    ]


def test_subprocess_portkit_verify_healthy_exit_0(healthy_tied_dir):
    """The user's entry point: `portkit verify` through portkit.cli's lazy subcommand (and, as
    by default, transformers in a child process)."""
    p = subprocess.run(
        [sys.executable, "-m", "portkit.cli", "verify", str(healthy_tied_dir), "--tokens", "2"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verdict: candle agrees with transformers (exit 0)" in p.stdout
    assert "Traceback" not in p.stderr


def test_a_numeric_finding_behind_candles_crash_is_not_reached(capsys, fixture_dir, tmp_path):
    """head_dim 32 makes candle panic at load (PK104); the same config saved with `rope_theta`
    only in `rope_parameters` also carries PK101, whose numeric check then never runs. It is
    NOT-REACHED with where candle stopped, not NOT-REPRODUCED, in the text, the JSON and the
    schema."""
    d = tmp_path / "m"
    shutil.copytree(fixture_dir("head-dim-mismatch"), d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_theta": cfg.pop("rope_theta"), "rope_type": "default"}
    (d / "config.json").write_text(json.dumps(cfg, indent=2))

    code, out, _ = _run(capsys, d, "--format", "json", "--no-cache")
    rep = json.loads(out)
    jsonschema.validate(rep, SCHEMA)
    verdicts = {f["code"]: (f["verdict"], f["evidence"]) for f in rep["findings"]}
    assert verdicts["PK104"][0] == "CRASH-CONFIRMED"
    assert verdicts["PK101"][0] == "NOT-REACHED", verdicts
    assert verdicts["PK101"][1].startswith("not reached: candle stopped before any number (candle panicked at load")
    assert code == 1

    code, out, _ = _run(capsys, d)
    assert "PK101 rope-theta-in-rope-parameters  NOT-REACHED" in out and "NOT-REPRODUCED" not in out
    assert "not reached: candle stopped before any number" in out
