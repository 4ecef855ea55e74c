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
    turns = 2                   # a chat's second turn on the warm KV cache (default 1)
    batch = 8                   # rows of equal length in one forward (default 1)
    sampler = "candle-examples" # the candle program's sampler (PK510; docs/verify.md, "Sampling")
    candle = "0.10.0"           # the candle release (else --candle, the Cargo.lock above, the default)

A command-line `--select` replaces the file's `select`; `--ignore` adds to its `ignore`;
target options on the command line win.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from portkit.errors import UsageError
from portkit.target import Target

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

_KEYS = {
    "candle",
    "select",
    "ignore",
    "preview",
    "device",
    "dtype",
    "features",
    "max-tokens",
    "max-prompt-tokens",
    "use-flash-attn",
    "turns",
    "batch",
    "sampler",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Rule selection and target for one lint run (command line, then `[tool.portkit]`)."""

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    preview: bool = False
    target: Target = field(default_factory=Target)
    respect_pyproject: bool = True
    # which options the command line set explicitly (they win over [tool.portkit])
    explicit: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.select is not None:
            object.__setattr__(self, "select", list(self.select))
        object.__setattr__(self, "ignore", list(self.ignore))
        object.__setattr__(self, "explicit", frozenset(self.explicit))


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
    import tomllib  # only when a pyproject.toml is there to read

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
    tgt: dict[str, Any] = base.target.to_dict()
    for key, name in (
        ("device", "device"),
        ("dtype", "dtype"),
        ("features", "features"),
        ("max-tokens", "max_tokens"),
        ("max-prompt-tokens", "max_prompt_tokens"),
        ("use-flash-attn", "use_flash_attn"),
        ("turns", "turns"),
        ("batch", "batch"),
        ("sampler", "sampler"),
    ):
        if key in table and name not in base.explicit:
            tgt[name] = table[key]
    if "candle" in table and "candle" not in base.explicit:  # above a Cargo.lock's, below --candle
        tgt["candle"], tgt["candle_from"] = table["candle"], str(f)
    try:
        upd["target"] = Target(**tgt)
    except ValueError as e:
        raise UsageError(f"{f}: [tool.portkit]: {e}") from None
    return dataclasses.replace(base, **upd)


def _str_list(f: Path, key: str, v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise UsageError(f"{f}: [tool.portkit] {key} must be a list of strings")
    return v
