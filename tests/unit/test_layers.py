"""The import contracts (`[tool.importlinter]` in pyproject.toml, checked by `make test`) name
every module of portkit, and every module and package of portkit.verify, so a new one cannot sit
outside the layers unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict[str, Any]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _layered(container: str | None) -> set[str]:
    (layers,) = [
        c["layers"] for c in _contracts() if c["type"] == "layers" and (c.get("containers") or [None]) == [container]
    ]
    return {m.strip() for layer in layers for m in layer.replace(":", "|").split("|")}


def _children(pkg: Path, prefix: str) -> set[str]:
    modules = {f"{prefix}{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"}
    return modules | {f"{prefix}{p.name}" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def test_every_top_level_module_has_a_layer() -> None:
    assert _children(ROOT / "portkit", "portkit.") - _layered(None) == set()


def test_every_module_of_verify_has_a_layer() -> None:
    """verify's own layers: the reference side, the candle side and the judging independent of
    each other, the sections above them, the run plan above the sections."""
    layered = _layered("portkit.verify")
    assert _children(ROOT / "portkit" / "verify", "") - layered == set()
    assert layered - _children(ROOT / "portkit" / "verify", "") == set(), "a layer names a module that is gone"
    (layers,) = [c["layers"] for c in _contracts() if c.get("containers") == ["portkit.verify"]]
    assert "judge | reference | candle" in layers


def test_the_contracts_forbid_cycles_too() -> None:
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["portkit"] for c in _contracts())


def test_the_judge_names_the_sides_records_in_annotations_only() -> None:
    """pyproject.toml lets verify's judge/ import candle.run and reference.result past the layers: only under
    `if TYPE_CHECKING:`, which this checks (a runtime import there would run a side's code)."""
    import ast

    root = Path(__file__).resolve().parents[2] / "portkit" / "verify" / "judge"
    sides = {"portkit.verify.candle.run", "portkit.verify.reference.result"}
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in sides:
                assert id(node) in guarded, f"{path.name}:{node.lineno} imports {node.module} at run time"
