"""`portkit fix` does what it can, like ruff's `--fix`: every safe edit is written, each finding
no config edit fixes is listed with its reason, and the exit code is 1 while findings remain.
`--diff` prints exactly what `--write` writes.

The issue's case: a Llama saved by transformers 5 with dynamic rope scaling. lint finds PK101
(fixable: `rope_theta` only in `rope_parameters`) and PK102 (dynamic scaling: candle has
none). fix writes `rope_theta`, reports PK102, exits 1; verify then no longer finds PK101.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from portkit.cli import main

DYNAMIC = "dynamic-scaling-in-rope-parameters"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def two_copies(fixture_dir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    src = fixture_dir(DYNAMIC)
    for name in ("a", "b"):
        shutil.copytree(src, tmp_path / name)
    return Path("a"), Path("b")


def test_fix_writes_rope_theta_and_reports_dynamic_scaling_as_remaining(two_copies, capsys) -> None:
    a, _ = two_copies
    code, out, _ = cli(capsys, "lint", str(a))
    assert code == 1 and "PK101 [*]" in out and "PK102 " in out and "1 fixable with `portkit fix --write`" in out

    code, out, err = cli(capsys, "fix", str(a), "--write")
    assert code == 1, err
    assert out == ""
    assert f"portkit: fixed 1 finding (PK101) in {(a / 'config.json').resolve()}" in err
    assert "portkit: 1 finding remains, no config edit fixes it:\nPK102 rope-scaling-in-rope-parameters: " in err
    assert "  reason: No config edit makes candle 0.11.1 apply `dynamic` scaling" in err
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["rope_theta"] == 100000.0 and cfg["rope_parameters"]["rope_type"] == "dynamic"

    code, out, _ = cli(capsys, "lint", str(a))
    assert code == 1 and "PK101" not in out and "PK102" in out
    code, out, err = cli(capsys, "fix", str(a), "--write")  # nothing left to write
    assert code == 1 and "fixed" not in err and "PK102" in err
    code, out, err = cli(capsys, "fix", str(a))
    assert code == 1 and out == "" and "1 finding would remain" in err


def test_diff_is_exactly_what_write_writes(two_copies, capsys) -> None:
    a, b = two_copies
    code, patch, err = cli(capsys, "fix", str(a))  # --diff is the default
    assert code == 1 and patch.startswith("--- a/a/config.json\n+++ b/a/config.json\n"), patch
    assert "PK102" in err  # what remains is on stderr: stdout is the patch alone
    code, _, _ = cli(capsys, "fix", str(b), "--write")
    assert code == 1
    Path("fix.patch").write_text(patch)
    r = subprocess.run(["git", "apply", "fix.patch"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (a / "config.json").read_bytes() == (b / "config.json").read_bytes()


def test_diff_and_write_exit_0_when_nothing_remains(fixture_dir, tmp_path: Path, capsys) -> None:
    d = tmp_path / "m"
    shutil.copytree(fixture_dir("rope-theta-in-rope-parameters"), d)
    assert cli(capsys, "fix", str(d))[0] == 1  # a diff to apply
    code, _, err = cli(capsys, "fix", str(d), "--write")
    assert code == 0 and "remain" not in err, err
    code, out, err = cli(capsys, "fix", str(d))
    assert (code, out) == (0, "") and "nothing to fix" in err


def test_fix_help_documents_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["fix", "--help"])
    out = capsys.readouterr().out
    assert "--diff (default)  0: nothing to change and nothing remains; 1: a diff was printed, or" in out
    assert "--write           0: written (or nothing to do) and nothing remains; 1: findings remain" in out


def test_verify_after_fix_no_longer_finds_pk101(two_copies, capsys, monkeypatch) -> None:
    from portkit.verify.pipeline import VerifyOptions, verify

    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    a, _ = two_copies
    before = verify(VerifyOptions(model_dir=a))
    assert {f.code: f.verdict for f in before.findings}["PK101"] == "CONFIRMED"
    assert before.exit_code == 1
    assert cli(capsys, "fix", str(a), "--write")[0] == 1
    after = verify(VerifyOptions(model_dir=a))
    verdicts = {f.code: f.verdict for f in after.findings}
    assert "PK101" not in verdicts and verdicts["PK102"] == "NOT-REPRODUCED", verdicts
    assert after.exit_code == 0 and after.comparison is not None and after.comparison.last.max_abs_diff < 1e-4
