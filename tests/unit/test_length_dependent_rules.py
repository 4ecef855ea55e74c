"""Effects that act only past a length (a sliding window, dynamic NTK past the original context):
lint names the length and is an error only when `--max-tokens` reaches past it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
}
CASES = {
    "PK109": ({"sliding_window": 1024}, 1024),
    "PK102": ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}}, 4096),
}


def _lint(d: Path, code: str, *extra: str) -> list[dict]:
    p = subprocess.run(
        [sys.executable, "-m", "portkit.cli", "lint", str(d), "--format", "json", "--select", code, *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("code", list(CASES))
def test_error_only_when_max_tokens_reaches_the_length(tmp_path: Path, code: str) -> None:
    edit, length = CASES[code]
    (tmp_path / "config.json").write_text(json.dumps({**BASE, **edit}))
    (plain,) = _lint(tmp_path, code)
    assert plain["severity"] == "warning" and f"the effect appears only past {length} tokens" in plain["message"]
    (within,) = _lint(tmp_path, code, "--max-tokens", str(length))
    assert within["severity"] == "warning" and f"--max-tokens {length} stays within" in within["message"]
    (past,) = _lint(tmp_path, code, "--max-tokens", str(length + 1))
    assert (
        past["severity"] == "error"
        and f"past {length} tokens, and --max-tokens {length + 1} reaches it" in past["message"]
    )


def test_other_rope_types_keep_their_severity(tmp_path: Path) -> None:
    """Negative control: linear scaling acts at every position, so no length is named."""
    cfg = {**BASE, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (f,) = _lint(tmp_path, "PK102", "--max-tokens", "10")
    assert f["severity"] == "error" and "effect appears" not in f["message"]
