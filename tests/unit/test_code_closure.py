"""A cache key covers the code that computes its entries, found by following imports
(portkit.verify.code_closure), not a list someone must remember to extend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from portkit.verify import code_closure
from portkit.verify.candle import cache as runcache
from portkit.verify.reference import cache as refcache
from portkit.verify.reference import tokenizer_cache

PACKAGE_DIR = Path(code_closure.__file__).resolve().parents[1]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_closure_follows_every_kind_of_import(tmp_path: Path) -> None:
    base = _package(
        tmp_path,
        {
            "portkit/__init__.py": "",
            "portkit/a/__init__.py": "",
            "portkit/a/root.py": "from portkit.a import sibling\n\ndef f():\n    from .lazy import g\n",
            "portkit/a/sibling.py": "import portkit.b.deep\n",
            "portkit/a/lazy.py": "X = 'portkit.b.by_name'\n",
            "portkit/b/__init__.py": "from portkit.b.init_import import *\n",
            "portkit/b/init_import.py": "",
            "portkit/b/deep.py": "import numpy\nfrom portkit.b.deep_helper import function_not_module\n",
            "portkit/b/deep_helper.py": "",
            "portkit/b/by_name.py": "",
            "portkit/b/typing_only.py": "",
            "portkit/b/unused.py": "",
        },
    )
    (base / "portkit/a/root.py").write_text(
        (base / "portkit/a/root.py").read_text()
        + "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from portkit.b import typing_only\nelse:\n    pass\n"
    )
    found = code_closure.closure(["portkit.a.root"], base)
    assert sorted(found) == [
        "portkit",
        "portkit.a",
        "portkit.a.lazy",  # relative, inside a function
        "portkit.a.root",
        "portkit.a.sibling",  # `from pkg import module`
        "portkit.b",  # the package of an imported module runs its __init__
        "portkit.b.by_name",  # a module named whole in a string (python -m, import_module)
        "portkit.b.deep",
        "portkit.b.deep_helper",
        "portkit.b.init_import",
    ]  # not typing_only (TYPE_CHECKING never runs), not unused, not numpy


def test_a_module_added_to_the_computation_changes_the_digest(tmp_path: Path) -> None:
    base = _package(
        tmp_path,
        {"portkit/__init__.py": "", "portkit/root.py": "def f():\n    return 1\n", "portkit/new.py": "Y = 1\n"},
    )
    before = code_closure.digest(["portkit.root"], base)
    (base / "portkit/new.py").write_text("Y = 2\n")
    assert code_closure.digest(["portkit.root"], base) == before  # not imported yet: not part of it
    (base / "portkit/root.py").write_text("def f():\n    from portkit import new\n    return new.Y\n")
    with_new = code_closure.digest(["portkit.root"], base)
    assert with_new != before
    (base / "portkit/new.py").write_text("Y = 3\n")
    assert code_closure.digest(["portkit.root"], base) != with_new


def test_a_root_that_is_no_module_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="portkit.verify.moved_away"):
        code_closure.closure(["portkit.verify.moved_away"])


@pytest.mark.parametrize(
    "changed", ["verify/reference/stored_vocab.py", "verify/reference/sampling.py", "verify/reference/models.py"]
)
def test_the_reference_key_covers_the_truths_vocabulary_and_sampling(tmp_path: Path, changed: str) -> None:
    """stored_vocab.py and sampling.py compute values the reference cache stores; a hand-kept list
    of modules missed both, so a change to them served the old truth."""
    copy = tmp_path / "portkit"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_closure.digest(refcache.CODE_ROOTS, tmp_path)
    with (copy / changed).open("a") as f:
        f.write("\n# a change\n")
    assert code_closure.digest(refcache.CODE_ROOTS, tmp_path) != before


def test_the_reference_key_moves_with_its_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """model_key reads the code digest of CODE_ROOTS: another digest, another key."""
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    key = refcache.model_key("{}", [weights], "streamed")
    monkeypatch.setattr(code_closure, "code_digest", lambda roots: "other code")
    assert refcache.model_key("{}", [weights], "streamed") != key


@pytest.mark.parametrize("roots", [refcache.CODE_ROOTS, runcache.CODE_ROOTS, tokenizer_cache.CODE_ROOTS])
def test_every_cache_roots_at_modules_that_exist(roots: tuple[str, ...]) -> None:
    found = code_closure.closure(roots)
    assert set(roots) <= set(found) and len(set(roots)) == len(roots)
