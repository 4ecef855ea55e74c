"""Hypothesis is derandomized in CI (CI=true), random elsewhere: tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROG = (
    "import json, tests.conftest\n"
    "from hypothesis import settings\n"
    "d = settings.default\n"
    "print(json.dumps([d.derandomize, d.print_blob, d.database is None]))\n"
)


@pytest.mark.parametrize(
    "ci,expect", [("true", [True, True, True]), ("1", [True, True, True]), (None, [False, False, False])]
)
def test_ci_selects_the_derandomized_profile(ci: str | None, expect: list[bool]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    r = subprocess.run([sys.executable, "-c", PROG], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == expect
