"""lint and fix on the real checkpoint as transformers 5 saves it: PK101 and nothing else, the fix
a user writes, and the exit codes of both (README, "Exit codes")."""

from __future__ import annotations

import json
import subprocess
import sys

from portkit.cli import main
from tests.real.inputs import linked_copy


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_lint_finds_pk101_alone_on_the_tf5_save(capsys, real):
    code, out, _ = _run(capsys, "lint", real.tf5, "--format", "json")
    assert code == 1 and [f["code"] for f in json.loads(out)] == ["PK101"]
    code, out, _ = _run(capsys, "lint", real.tf5)
    assert code == 1 and "PK101 [*] transformers uses `rope_theta`=100000 from `rope_parameters`" in out
    assert "uses 10000" in out and "Found 1 finding (1 fixable with `portkit fix --write`)." in out
    # the control: the fixed copy lints clean
    code, out, _ = _run(capsys, "lint", real.fixed)
    assert code == 0 and "All checks passed!" in out


def test_fix_diff_then_write_then_nothing_left(capsys, real, tmp_path):
    code, out, _ = _run(capsys, "fix", real.tf5)  # --diff is the default: prints, writes nothing
    assert code == 1 and '+  "rope_theta": 100000.0,' in out
    assert "rope_theta" not in json.loads((real.tf5 / "config.json").read_text())
    copy = linked_copy(real.tf5, tmp_path / "tf5")
    code, _, err = _run(capsys, "fix", copy, "--write")
    assert code == 0, err
    assert (copy / "config.json").read_bytes() == (real.fixed / "config.json").read_bytes()
    code, out, err = _run(capsys, "fix", copy)
    assert code == 0 and "nothing to fix" in out + err
    assert _run(capsys, "lint", copy)[0] == 0


def test_lint_and_fix_exit_codes_as_commands(real, tmp_path):
    """The installed entry point's real exit status (lint is torch-free: fast)."""

    def status(*argv) -> int:
        p = subprocess.run([sys.executable, "-m", "portkit.cli", *map(str, argv)], capture_output=True, text=True)
        assert "Traceback" not in p.stderr
        return p.returncode

    copy = linked_copy(real.tf5, tmp_path / "tf5")
    assert [status("lint", real.tf5), status("lint", real.fixed), status("fix", real.tf5, "--diff")] == [1, 0, 1]
    assert [status("fix", copy, "--write"), status("fix", copy, "--diff"), status("lint", copy)] == [0, 0, 0]
    assert status("lint", tmp_path / "nope") == 2
