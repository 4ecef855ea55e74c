"""The wheel's Python surface: stubs match the module, errors are typed and keep candle's text."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import portkit_native as pn

STUB = Path(pn.__file__).with_name("__init__.pyi")

BASE = dict(
    hidden_size=64,
    intermediate_size=128,
    vocab_size=256,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    rms_norm_eps=1e-5,
    max_position_embeddings=128,
)


def test_stub_names_match_module():
    tree = ast.parse(STUB.read_text())
    stub_names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert stub_names == set(pn.__all__)
    for name in pn.__all__:
        assert hasattr(pn, name), name


def test_exceptions_are_exceptions_not_base_exceptions():
    for exc in (pn.ConfigError, pn.CandleError, pn.CandlePanic, pn.DeviceUnavailableError):
        assert issubclass(exc, pn.NativeError) and issubclass(exc, Exception)


def test_candle_config_defaults_theta_when_only_in_rope_parameters():
    cfg = dict(BASE, rope_parameters={"rope_theta": 100000.0, "rope_type": "default"})
    eff = pn.candle_config(json.dumps(cfg))
    assert eff["rope_theta"] == 10000.0
    assert eff["head_dim"] == 16 and eff["num_key_value_heads"] == 2 and eff["tie_word_embeddings"] is False


def test_candle_config_error_carries_serde_text():
    with pytest.raises(pn.ConfigError, match=r"missing field `max_position_embeddings`"):
        pn.candle_config(json.dumps({k: v for k, v in BASE.items() if k != "max_position_embeddings"}))


def test_metal_off_macos_is_a_clear_error(tmp_path):
    with pytest.raises(pn.DeviceUnavailableError, match="macOS"):
        pn.LlamaRunner([str(tmp_path / "x.safetensors")], json.dumps(BASE), device="metal")


def test_cuda_without_feature_says_how_to_build(tmp_path):
    if "cuda" in pn.build_info()["devices"]:
        pytest.skip("this wheel was built with CUDA")
    with pytest.raises(pn.DeviceUnavailableError, match="--features cuda"):
        pn.LlamaRunner([str(tmp_path / "x.safetensors")], json.dumps(BASE), device="cuda")


def test_bad_dtype_and_device_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown dtype `f64`"):
        pn.LlamaRunner([str(tmp_path / "x")], json.dumps(BASE), dtype="f64")
    with pytest.raises(ValueError, match="unknown device `tpu`"):
        pn.LlamaRunner([str(tmp_path / "x")], json.dumps(BASE), device="tpu")


def test_missing_weight_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        pn.LlamaRunner([str(tmp_path / "absent.safetensors")], json.dumps(BASE))


def test_numpy_ids_are_accepted_and_outputs_are_float32(healthy_tied_dir):
    import numpy as np

    d = healthy_tied_dir
    r = pn.LlamaRunner([str(d / "model.safetensors")], (d / "config.json").read_text())
    ids = np.array(json.loads((d / "prompt.json").read_text())["ids"], dtype=np.int64)
    from_np = r.last_logits(ids)
    from_list = r.last_logits(ids.tolist())
    assert from_np.dtype == np.float32 and from_np.shape == (256,)
    assert np.array_equal(from_np, from_list)
    rows = r.teacher_forced_logits(ids, 4)
    assert rows.shape == (len(ids) - 3, 256) and rows.dtype == np.float32


def test_capture_layers_without_runner_equals_runner_capture(healthy_untied_dir):
    import numpy as np

    d = healthy_untied_dir
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    files = [str(d / "model.safetensors")]
    runner = pn.LlamaRunner(files, (d / "config.json").read_text())
    via_runner = runner.capture(ids)
    alone = pn.capture_layers(files, (d / "config.json").read_text(), ids)
    assert list(alone) == list(via_runner)
    for name in alone:
        assert np.array_equal(alone[name], via_runner[name]), name
    assert float(np.abs(alone["logits"] - runner.last_logits(ids)).max()) == 0.0


def test_check_device():
    assert pn.check_device("cpu") is None
    with pytest.raises(pn.DeviceUnavailableError):
        pn.check_device("metal")
    with pytest.raises(ValueError):
        pn.check_device("tpu")
