"""The family differential on every release `make test` does not build (its own lint target, its own runner):
FN 0 and FP 0 over the bounded seeds; `make fuzz` runs the long one per release."""

from __future__ import annotations

import pytest

from portkit.candle_release import NATIVE, RUNNABLE
from tests.native.test_differential import SEEDS, release_differential


@pytest.mark.parametrize("release", [r for r in RUNNABLE if r not in (NATIVE, "0.11.0")])
def test_lint_predicts_what_each_release_does(release: str) -> None:
    release_differential(release, len(SEEDS))
