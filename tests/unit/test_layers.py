"""The import contracts (`[tool.importlinter]` in pyproject.toml, checked by `make test`) name
every module of portkit, so a new one cannot sit outside the layers unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layered() -> set[str]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in cfg["contracts"] if c["type"] == "layers"]
    return {m.strip() for layer in layers for m in layer.replace(":", "|").split("|")}


def test_every_top_level_module_has_a_layer() -> None:
    pkg = ROOT / "portkit"
    modules = {f"portkit.{p.stem}" for p in pkg.glob("*.py") if p.stem != "__init__"}
    modules |= {f"portkit.{p.name}" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert modules - _layered() == set()


def test_the_contracts_forbid_cycles_too() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["portkit"] for c in cfg["contracts"])
