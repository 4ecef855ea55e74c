"""How much memory a reference model takes and how much the machine has: whether a model may be
loaded whole (every layer once, kept) instead of streamed one layer at a time."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def f32_weight_bytes(weight_files: Sequence[Path]) -> int:
    """The checkpoint's size once loaded in f32, from the safetensors headers alone."""
    from portkit.model.safetensors_header import read_safetensors_header

    return sum(4 * t.numel for f in weight_files for t in read_safetensors_header(Path(f)).tensors.values())


def available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
