"""The GPU libraries' pages in the reference's process, handed back to the kernel after its import.

PyPI's torch is a CUDA build: `import torch` maps cuBLAS, nvrtc, nvJitLink, cuFFT and
libtorch_cuda, and transformers' import brings triton. Their relocation and initialisation leave
about 210 MiB of their file pages in the process's RSS (765 MiB after the child's import, on the
2-core machine this project is tested on), though the reference computes on the CPU and never
calls them again.

A mapping of such a library that cannot be written and holds no copy-on-write copy (smaps'
`Anonymous: 0`) holds only the file's own bytes, so `madvise(MADV_DONTNEED)` drops its pages
from the process and leaves them in the page cache; a later touch maps the same bytes again.
Writable mappings, and read-only ones the loader wrote relocations into, are left alone: dropping
those would lose what was written. Linux only; elsewhere nothing is dropped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from portkit.verify.reference.file_pages import dont_need

#: file names of torch's own CUDA libraries (its wheel's torch/lib)
_TORCH_CUDA = ("libtorch_cuda", "libc10_cuda", "libcaffe2_nvrtc")


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    path: str
    rss_kib: int
    anonymous_kib: int


def mappings(smaps: str) -> list[Mapping]:
    """The mappings /proc/PID/smaps lists, with their resident and copy-on-write sizes."""
    out: list[Mapping] = []
    head: list[str] | None = None
    sizes: dict[str, int] = {}

    def close() -> None:
        if head is not None:
            lo, hi = head[0].split("-")
            path = head[5] if len(head) > 5 else ""
            out.append(Mapping(int(lo, 16), int(hi, 16), head[1], path, sizes.get("Rss", 0), sizes.get("Anonymous", 0)))

    for line in smaps.splitlines():
        fields = line.split(maxsplit=5)
        if not fields:
            continue
        if fields[0].endswith(":"):
            if len(fields) >= 2 and fields[1].isdigit():
                sizes[fields[0][:-1]] = int(fields[1])
            continue
        close()
        head, sizes = fields, {}
    close()
    return out


def is_gpu_library(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return "/site-packages/nvidia/" in path or "/site-packages/triton/" in path or name.startswith(_TORCH_CUDA)


def droppable(smaps: str) -> list[Mapping]:
    """The GPU libraries' mappings whose pages are all the file's: not writable, no copy-on-write copy."""
    return [m for m in mappings(smaps) if is_gpu_library(m.path) and "w" not in m.perms and m.anonymous_kib == 0]


def drop_gpu_library_pages() -> int:
    """Drops the pages of `droppable` mappings from this process; the KiB they held."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        found = droppable(Path("/proc/self/smaps").read_text())
    except OSError:
        return 0
    return sum(m.rss_kib for m in found if dont_need(m.start, m.end - m.start))
