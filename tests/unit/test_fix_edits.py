"""`portkit fix`: the edits it makes, the place of every key, and what it refuses.

Each case states the config before and checks the file after, byte for byte where the
order of keys matters, so a fix that moves a key or accepts what it should refuse fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit import fix
from portkit.cli import main
from portkit.semantics import transformers_view

# PK103's documentation example: legacy `type` key, no `original_max_position_embeddings`
LEGACY_LLAMA3 = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pk103_legacy_llama3_type_is_fixed_as_lint_promises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3), weights=False)
    code, out, _ = cli(capsys, "lint", str(d))
    assert code == 1 and "PK103" in out and "1 fixable with `portkit fix --write`" in out
    before = json.loads((d / "config.json").read_text())
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0, err
    assert "PK103" in err
    after = json.loads((d / "config.json").read_text())
    assert after["rope_scaling"] == {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        # transformers fills it from max_position_embeddings; fix writes that value
        "original_max_position_embeddings": before["max_position_embeddings"],
        "rope_type": "llama3",
    }
    assert list(after) == list(before)
    assert cli(capsys, "lint", str(d))[0] == 0


def test_effective_values_ignore_only_the_legacy_type_key() -> None:
    base = sk.config("tf4", rope_theta=500000.0, scaling=LEGACY_LLAMA3)
    without_type = {k: v for k, v in LEGACY_LLAMA3.items() if k != "type"} | {"rope_type": "llama3"}
    same = fix.effective(transformers_view(sk.config("tf4", rope_theta=500000.0, scaling=without_type)))
    assert fix.effective(transformers_view(base)) == same
    # negative controls: a real rope value or the rope type still counts
    other_factor = sk.config("tf4", rope_theta=500000.0, scaling={**LEGACY_LLAMA3, "factor": 4.0})
    assert fix.effective(transformers_view(other_factor)) != same
    linear = sk.config("tf4", rope_theta=500000.0, scaling={"type": "linear", "factor": 8.0})
    assert fix.effective(transformers_view(linear))["rope_type"] == "linear"
    assert fix.effective(transformers_view(linear)) != same
