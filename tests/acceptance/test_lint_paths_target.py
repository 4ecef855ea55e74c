"""lint's two target dimensions for chat programs and servers: `--turns` and `--batch N`, on the
command line and in `[tool.portkit]` (`turns`, `batch`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portkit.cli import main
from portkit.target import Target
from tests.unit.rule_cases import CLEAN


def _lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, set[str], str]:
    code = main(["lint", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, ({f["code"] for f in json.loads(out)} if out.strip() else set()), err


def test_turns_and_batch_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, _ = CLEAN["qwen2"](tmp_path / "m")
    assert _lint(capsys, str(d), "--no-config")[1] == set()
    assert _lint(capsys, str(d), "--no-config", "--turns", "--dtype", "f16")[1] >= {"PK309"}
    assert _lint(capsys, str(d), "--no-config", "--turns", "2", "--dtype", "f16")[1] >= {"PK309"}
    assert "PK309" not in _lint(capsys, str(d), "--no-config", "--turns", "1", "--dtype", "f16")[1]
    assert _lint(capsys, str(d), "--no-config", "--batch", "8")[1] == {"PK312"}


@pytest.mark.parametrize("flag", ["--batch", "--turns"])
def test_zero_is_a_usage_error(flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, _ = CLEAN["qwen2"](tmp_path / "m")
    code, _, err = _lint(capsys, str(d), flag, "0")
    assert code == 2 and err.strip() == f"portkit: error: {flag} must be at least 1, got 0"


def test_pyproject_turns_and_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, _ = CLEAN["qwen3_moe"](tmp_path / "repo" / "m")
    py = tmp_path / "repo" / "pyproject.toml"
    py.write_text('[tool.portkit]\nbatch = 4\ndtype = "f16"\ncandle = "0.11.0"\n')  # PK311 holds up to 0.11.0
    assert "PK311" in _lint(capsys, str(d))[1]
    assert "PK311" not in _lint(capsys, str(d), "--batch", "1")[1]  # the command line wins
    py.write_text("[tool.portkit]\nbatch = 0\n")
    code, _, err = _lint(capsys, str(d))
    assert code == 2 and "[tool.portkit]: `batch` should be a whole number of at least 1, got 0" in err
    py.write_text('[tool.portkit]\nturns = "two"\n')
    code, _, err = _lint(capsys, str(d))
    assert code == 2 and "`turns` should be a whole number of at least 1" in err


def test_target_values() -> None:
    t = Target(turns="2", batch=8.0)  # TOML users' spellings, as max-tokens takes them
    assert (t.turns, t.batch, t.continues, t.batched) == (2, 8, True, True)
    assert t.describe() == "cpu/f32 turns=2 batch=8"
    assert Target().describe() == "cpu/f32" and Target().to_dict()["batch"] == 1
    for bad in (0, -1, True, 1.5, "x"):
        with pytest.raises(ValueError, match="should be a whole number of at least 1"):
            Target(batch=bad)
