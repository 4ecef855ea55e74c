"""Lint settings: rule selection and the target, from the command line and `[tool.portkit]`.

`[tool.portkit]` is read from the nearest `pyproject.toml` above each model directory
(the directory itself first), like ruff finds its configuration:

    [tool.portkit]
    select = ["PK1", "PK2"]     # default: every stable rule
    ignore = ["PK111"]
    preview = false
    device = "cpu"              # target for the PK3xx rules
    dtype = "f32"
    features = ["accelerate"]
    max-tokens = 8192

A command-line `--select` replaces the file's `select`; `--ignore` adds to its `ignore`;
target options on the command line win.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from portkit.errors import UsageError
from portkit.target import Target

_KEYS = {"select", "ignore", "preview", "device", "dtype", "features", "max-tokens", "use-flash-attn"}


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    select: list[str] | None = None
    ignore: list[str] = []
    preview: bool = False
    target: Target = Target()
    respect_pyproject: bool = True
    # which options the command line set explicitly (they win over [tool.portkit])
    explicit: frozenset[str] = frozenset()


def find_pyproject(start: Path) -> Path | None:
    try:
        d = start.resolve()
    except (OSError, RuntimeError):
        return None
    for p in (d, *d.parents):
        f = p / "pyproject.toml"
        try:
            if f.is_file():
                data = _load(f)
                if "portkit" in data.get("tool", {}):
                    return f
        except OSError:
            return None
    return None


_cache: dict[tuple[Path, int, int], dict[str, Any]] = {}


def _load(f: Path) -> dict[str, Any]:
    st = f.stat()
    key = (f, st.st_mtime_ns, st.st_size)
    if key not in _cache:
        try:
            _cache[key] = tomllib.loads(f.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{f}: invalid TOML: {e}") from None
    return _cache[key]


def for_dir(base: Settings, model_dir: Path) -> Settings:
    """`base` with the `[tool.portkit]` table that applies to `model_dir` merged in."""
    if not base.respect_pyproject:
        return base
    f = find_pyproject(model_dir)
    if f is None:
        return base
    table = _load(f).get("tool", {}).get("portkit", {})
    if not isinstance(table, dict):
        raise UsageError(f"{f}: [tool.portkit] must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{f}: unknown [tool.portkit] key(s): {', '.join(unknown)}")
    upd: dict[str, Any] = {}
    if "select" in table and "select" not in base.explicit:
        upd["select"] = _str_list(f, "select", table["select"])
    if "ignore" in table:
        upd["ignore"] = _str_list(f, "ignore", table["ignore"]) + list(base.ignore)
    if "preview" in table and "preview" not in base.explicit:
        upd["preview"] = bool(table["preview"])
    tgt: dict[str, Any] = base.target.model_dump()
    for key, field in (("device", "device"), ("dtype", "dtype"), ("features", "features"), ("max-tokens", "max_tokens"), ("use-flash-attn", "use_flash_attn")):
        if key in table and field not in base.explicit:
            tgt[field] = table[key]
    try:
        upd["target"] = Target(**tgt)
    except ValidationError as e:
        raise UsageError(f"{f}: [tool.portkit]: {e.errors()[0]['msg']}") from None
    return base.model_copy(update=upd)


def _str_list(f: Path, key: str, v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise UsageError(f"{f}: [tool.portkit] {key} must be a list of strings")
    return v
