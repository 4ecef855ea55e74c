"""`make mutation`'s table (tests/mutation/run_mutmut.py) names modules and tests that exist,
so a rename cannot quietly drop a module from the run."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mutation"))
import run_mutmut  # noqa: E402

sys.path.remove(str(ROOT / "tests" / "mutation"))


def test_every_module_and_its_targeted_tests_exist() -> None:
    table = run_mutmut.targets(ROOT)
    assert set(run_mutmut.TARGETS) <= set(table)
    for module, tests in run_mutmut.TARGETS.items():
        assert (ROOT / module).is_file(), module
        assert all((ROOT / t).exists() for t in tests), (module, [t for t in tests if not (ROOT / t).exists()])


def test_family_modules_join_the_table_when_they_exist(tmp_path: Path) -> None:
    assert run_mutmut.targets(tmp_path) == run_mutmut.TARGETS
    fam = tmp_path / "portkit" / "families"
    fam.mkdir(parents=True)
    (fam / "__init__.py").write_text("")
    (fam / "qwen2.py").write_text("")
    table = run_mutmut.targets(tmp_path)
    assert table["portkit/families/qwen2.py"] == table["portkit/families/__init__.py"] == run_mutmut.FAMILY_TESTS


def test_the_scratch_config_mutates_one_module_against_its_tests(tmp_path: Path) -> None:
    work = tmp_path / "work"
    run_mutmut.prepare(ROOT, "portkit/fix.py", ["tests/unit/test_fix_edits.py"], work)
    text = (work / "pyproject.toml").read_text()
    assert 'only_mutate = ["portkit/fix.py"]' in text
    assert 'pytest_add_cli_args_test_selection = ["tests/unit/test_fix_edits.py"]' in text
    assert (work / "portkit" / "fix.py").read_text() == (ROOT / "portkit" / "fix.py").read_text()
    assert (work / "fixtures").is_dir() and (work / "tests" / "unit").is_dir()
