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
    for exc in (pn.ConfigError, pn.CandleError, pn.CandlePanic, pn.DeviceUnavailableError, pn.TokenizerError):
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


def test_candle_config_per_family_and_unknown_family():
    mistral = dict(BASE, rope_theta=1e6, sliding_window=None)
    eff = pn.candle_config(json.dumps(mistral), family="mistral")
    assert eff["hidden_act"] == "silu" and eff["sliding_window"] is None and eff["head_dim"] == 16
    assert eff["rope_theta"] == 1e6
    with pytest.raises(pn.ConfigError, match=r"^missing field `rope_theta`"):
        pn.candle_config(json.dumps(dict(BASE, rope_parameters={"rope_theta": 1e6})), family="mistral")
    with pytest.raises(ValueError, match="unknown family `gpt2`"):
        pn.candle_config(json.dumps(BASE), family="gpt2")
    # llama stays the default, with its old fields.
    assert pn.candle_config(json.dumps(BASE)) == pn.candle_config(json.dumps(BASE), family="llama")


def test_granite_reads_multipliers_nowhere_and_defaults_theta():
    eff = pn.candle_config(json.dumps(dict(BASE, embedding_multiplier=12.0)), family="granite")
    assert eff["rope_theta"] == 10000.0 and eff["head_dim"] == 16
    assert "embedding_multiplier" not in eff


def test_private_field_families_come_from_candles_debug_text():
    cfg = dict(
        BASE, rope_theta=1e6, hidden_act="gelu_pytorch_tanh", norm_epsilon=1e-5, use_bias=True, sliding_window=None
    )
    del cfg["rms_norm_eps"]
    eff = pn.candle_config(json.dumps(cfg), family="starcoder2")
    assert eff == {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_act": "gelu_pytorch_tanh",
        "max_position_embeddings": 128,
        "norm_epsilon": 1e-5,
        "rope_theta": 1e6,
        "use_bias": True,
        "sliding_window": None,
        "head_dim": 16,
    }


def test_family_runner_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown family"):
        pn.FamilyRunner("gpt2", [str(tmp_path / "x")], json.dumps(BASE))
    with pytest.raises(FileNotFoundError):
        pn.FamilyRunner("mistral", [str(tmp_path / "x")], json.dumps(dict(BASE, rope_theta=1e6)))


def test_requested_tensors_api():
    requested, error = pn.requested_tensors("llama", json.dumps(BASE))
    assert error is None
    assert requested[0] == ("model.embed_tokens.weight", [256, 64])
    assert ("model.layers.2.mlp.down_proj.weight", [64, 128]) in requested
    assert len({name for name, _ in requested}) == len(requested)
    with pytest.raises(pn.ConfigError):
        pn.requested_tensors("qwen3", json.dumps(BASE))


def test_gguf_loaders_are_candles(gguf_file):
    assert pn.gguf_loaders() == [
        "quantized_llama",
        "quantized_qwen2",
        "quantized_qwen3",
        "quantized_gemma3",
        "quantized_phi3",
        "quantized_phi",
        "quantized_glm4",
        "quantized_smollm3",
    ]
    path = gguf_file("healthy-tied")
    assert pn.GgufRunner(str(path)).loader == "quantized_llama"
    with pytest.raises(ValueError, match="unknown GGUF loader"):
        pn.GgufRunner(str(path), loader="quantized_gpt2")
    # A llama GGUF through the qwen2 loader: candle's own metadata error.
    with pytest.raises(pn.CandleError, match="cannot find qwen2.attention.head_count in metadata"):
        pn.GgufRunner(str(path), loader="quantized_qwen2")
