"""Run `portkit lint` in-process for verify: the findings whose probes verify runs.

Lint is torch-free and takes milliseconds; verify hands it the same target (device, dtype,
flash-attn, tokens) that its own candle runs use, so the runtime findings describe exactly
the run verify makes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class LintUnavailable(RuntimeError):
    pass


def _entry() -> Any:
    """lint's in-process entry point: `(paths, target) -> findings`."""
    try:
        from portkit.lint import lint_paths  # type: ignore[import-not-found]
    except ImportError as e:
        raise LintUnavailable(f"portkit lint is not available ({e})") from e
    return lint_paths


def make_target(device: str, dtype: str, use_flash_attn: bool, max_tokens: int, build: dict[str, Any]) -> Any:
    """lint's `Target` for the run verify makes: the native wheel's cargo features (from
    `portkit_native.build_info()`), the device and dtype, flash-attn, prompt + generated tokens."""
    try:
        from portkit.target import Target
    except ImportError as e:
        raise LintUnavailable(f"portkit lint is not available ({e})") from e
    feats = set()
    if build.get("accelerate"):
        feats.add("accelerate")
    if build.get("flash_attn"):
        feats.add("flash-attn")
    for dev in build.get("devices", ()):
        if dev in ("metal", "cuda"):
            feats.add(dev)
    return Target(device=device, dtype=dtype, features=frozenset(feats), use_flash_attn=use_flash_attn, max_tokens=max_tokens)


def lint(paths: list[Path], target: Any) -> list[Any]:
    return list(_entry()(paths, target))
