"""The differential's bounded run (the long one is `make fuzz`, its table docs/differential.md):
random config mutations of every family's fixture, lint's prediction against transformers and
candle's own module. Every wrong class it found is replayed by seed here, and has a named test in
tests/unit/test_wrong_classes.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.differential import BASE, Outcome, make_case, run_case
from fixtures.families import family_fixture
from portkit.families import FAMILIES

pytest.importorskip("transformers")

#: seeds of the bounded run, per family (`python -m fixtures.differential --cases 4`)
SEEDS = range(4)
#: (family, seed) of each class the long run found, replayed whatever SEEDS holds
FOUND = [
    ("gemma3", 19),  # legacy `rope_scaling` spelled with `type`: transformers keeps the default rope (an FP of PK102)
    ("gemma4", 19),  # a window shorter than the prompt: candle's prefill keeps W+1 keys (an FN before PK115 had gemma4)
]


def _run(family: str, seed: int, tmp_path: Path) -> Outcome:
    base_dir = family_fixture(family, BASE.get(family, "legacy"))
    base = json.loads((base_dir / "config.json").read_text())
    return run_case(make_case(family, seed, base), base_dir, tmp_path)


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_lint_predicts_what_the_engines_do(family: str, tmp_path: Path) -> None:
    wrong = [o.line() for o in (_run(family, s, tmp_path) for s in SEEDS) if o.kind]
    assert wrong == []


@pytest.mark.parametrize("family,seed", FOUND)
def test_a_class_the_differential_found_stays_fixed(family: str, seed: int, tmp_path: Path) -> None:
    o = _run(family, seed, tmp_path)
    assert o.kind is None, o.line()


def test_the_differential_tells_the_engines_apart(tmp_path: Path) -> None:
    """Negative control: a case the engines compute differently is `differ` (a theta candle
    never reads), and one they compute alike is `agree`."""
    base_dir = family_fixture("mistral", "legacy")
    base = json.loads((base_dir / "config.json").read_text())
    case = make_case("mistral", 0, base)
    case.config = {**base, "rope_theta": 10000.0, "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}}
    o = run_case(case, base_dir, tmp_path)
    assert o.status == "differ" and "PK101" in o.errors and o.kind is None, o.line()
    case.config = dict(base)
    o = run_case(case, base_dir, tmp_path)
    assert o.status == "agree" and not o.errors and o.diff is not None and o.diff < 1e-4, o.line()


def release_differential(release: str, cases: int) -> None:
    """`python -m fixtures.differential --candle RELEASE`: lint targeting the release against that release's own
    runner (built from native/ on first use), every family the release has; exit 0 is FN 0 and FP 0."""
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "fixtures.differential", "--candle", release, "--cases", str(cases)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=3000,
    )
    (total,) = [line for line in proc.stdout.splitlines() if line.startswith("| all |")]
    assert proc.returncode == 0 and total.endswith("| 0 | 0 |"), proc.stdout[-3000:] + proc.stderr[-2000:]


def test_lint_predicts_what_candle_0_11_0_does() -> None:
    """The release `make test` builds besides the wheel's; the others: tests_releases/ (`make release-verify`)."""
    release_differential("0.11.0", len(SEEDS))


def test_a_release_is_judged_on_the_families_it_has() -> None:
    """0.9.1 has no qwen3, smollm3 or glm4_new module (they arrived in 0.9.2), nor gemma4 (0.11.0): nothing of
    candle's to run for them there; 0.11.1 has every family."""
    from fixtures.differential import judged

    names = [f.name for f in FAMILIES]
    old = judged(names, "0.9.1")
    assert {"qwen3", "qwen3_moe", "olmo2", "smollm3", "glm4_new", "gemma4"}.isdisjoint(old) and "llama" in old
    assert judged(names, "0.11.1") == names
