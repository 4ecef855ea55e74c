"""The checkpoint's pages the streamed reference is done with, handed back to the kernel.

The reference reads the safetensors files through safetensors' file mapping: an f32 weight of an
f32 checkpoint is then a view of the mapping (no copy, the address alignment `from_pretrained`
gives it), and a weight converted on load (f64 for the truth, f32 from bf16) is read from it once.
Every page a forward touched would stay in the process's RSS until the file is closed, the whole
checkpoint by the end of one streamed forward; so a decoder layer's pages are dropped once the
layer has run, and a converted tensor's once it is converted (`madvise(MADV_DONTNEED)`: the
mapping is read-only, so a later touch reads the same bytes back from the page cache; the values
never change). Linux only: elsewhere the pages stay mapped, clean and reclaimable by the kernel.
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

_MADV_DONTNEED = 4  # linux/mman-common.h


@cache
def _madvise() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc.madvise


def dont_need(start: int, length: int) -> bool:
    """`madvise(MADV_DONTNEED)` on [start, start + length) of this process (Linux; whole pages of a
    read-only file mapping: they leave the process and a later touch reads the same bytes back).
    Whether the kernel took it."""
    return _madvise()(start, length, _MADV_DONTNEED) == 0


def mapped_ranges(path: Path, maps: str | None = None) -> list[tuple[int, int]]:
    """[start, end) of every mapping of `path` in this process (/proc/self/maps; empty elsewhere)."""
    if maps is None:
        if not sys.platform.startswith("linux"):
            return []
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return []
    target = str(Path(path).resolve())
    out = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == target:
            lo, hi = fields[0].split("-")
            out.append((int(lo, 16), int(hi, 16)))
    return out


def page_spans(
    spans: Iterable[tuple[int, int]], within: list[tuple[int, int]], page: int = mmap.PAGESIZE
) -> list[tuple[int, int]]:
    """The byte spans widened to whole pages, merged, and cut to the mappings in `within`: only
    pages of the file's own mappings are ever advised."""
    widened = sorted((lo // page * page, -(-hi // page) * page) for lo, hi in spans if hi > lo)
    merged: list[list[int]] = []
    for lo, hi in widened:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(max(lo, a), min(hi, b)) for lo, hi in merged for a, b in within if max(lo, a) < min(hi, b)]


class FilePages:
    """Where each tensor of the open safetensors files lies in this model's own mapping of them,
    and `release(keys)` of those pages. Only this model's mapping: another mapping of the same
    file (another model's) may be unmapped and its addresses reused while this one lives. None,
    when safetensors gives copies, not views: then nothing is ever released."""

    def __init__(self, files: Iterable[tuple[Path, Any]]) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.spans: dict[str, tuple[int, int]] = {}  # key -> [start, end) of its bytes
        for path, f in files:
            spans = {key: _span(f.get_slice(key)[...]) for key in f.keys()}  # views: no page read
            at = next((lo for lo, hi in spans.values() if hi > lo), None)
            own = [(lo, hi) for lo, hi in mapped_ranges(path) if lo <= at < hi] if at is not None else []
            if own:
                self.ranges += own
                self.spans.update(spans)

    def release(self, keys: Iterable[str]) -> None:
        """Drop these tensors' pages from the process's mappings."""
        spans = [self.spans[k] for k in keys if k in self.spans]
        for lo, hi in page_spans(spans, self.ranges):
            dont_need(lo, hi - lo)


def _span(view: Any) -> tuple[int, int]:
    start = view.data_ptr()
    return start, start + view.numel() * view.element_size()
