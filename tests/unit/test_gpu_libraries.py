"""`gpu_libraries`: only read-only mappings of GPU libraries that hold nothing but the file's bytes
are dropped; in a process that imported torch their pages leave its RSS, and torch computes the
same bits afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from portkit.verify.reference.gpu_libraries import droppable, mappings

SITE = "/venv/lib/python3.11/site-packages"


def _smaps(*entries: tuple[str, str, int, int]) -> str:
    out, at = [], 0x7F0000000000
    for perms, path, rss, anon in entries:
        out.append(f"{at:x}-{at + 0x200000:x} {perms} 00000000 08:01 1234       {path}".rstrip())
        out += [
            "Size:               2048 kB",
            f"Rss:            {rss:6d} kB",
            f"Anonymous:      {anon:6d} kB",
            "VmFlags: rd mr mw me",
        ]
        at += 0x200000
    return "\n".join(out) + "\n"


def test_only_unwritten_read_only_gpu_library_mappings_are_dropped():
    text = _smaps(
        ("r-xp", f"{SITE}/nvidia/cu13/lib/libcublasLt.so.13", 2048, 0),  # code: the file's bytes
        ("r--p", f"{SITE}/triton/_C/libtriton.so", 1024, 0),
        ("r--p", f"{SITE}/nvidia/cu13/lib/libnvrtc.so.13", 512, 8),  # relocated: holds written pages
        ("rw-p", f"{SITE}/nvidia/cu13/lib/libnvrtc.so.13", 64, 0),  # writable
        ("r-xp", f"{SITE}/torch/lib/libtorch_cuda.so", 300, 0),
        ("r-xp", f"{SITE}/torch/lib/libtorch_cpu.so", 4096, 0),  # the CPU's own kernels
        ("rw-p", "[heap]", 9000, 9000),
        ("rw-p", "", 100, 100),
    )
    assert len(mappings(text)) == 8
    got = [(m.perms, m.path.rsplit("/", 1)[-1], m.rss_kib) for m in droppable(text)]
    assert got == [
        ("r-xp", "libcublasLt.so.13", 2048),
        ("r--p", "libtriton.so", 1024),
        ("r-xp", "libtorch_cuda.so", 300),
    ]


_CHILD = r"""
import json, torch
from pathlib import Path
from portkit.verify.reference.gpu_libraries import droppable, drop_gpu_library_pages, mappings
torch.manual_seed(0)
a, b = torch.randn(64, 96), torch.randn(96, 32)
before = (a @ b).numpy().tobytes()
found = droppable(Path("/proc/self/smaps").read_text())
spans = {(m.start, m.end) for m in found}
dropped = drop_gpu_library_pages()
after = sum(m.rss_kib for m in mappings(Path("/proc/self/smaps").read_text()) if (m.start, m.end) in spans)
print(json.dumps(dict(held=sum(m.rss_kib for m in found), dropped=dropped, after=after, same=(a @ b).numpy().tobytes() == before)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps: Linux only")
def test_the_pages_leave_and_torch_computes_the_same():
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["same"]
    # PyPI's CUDA torch maps its GPU libraries on import; a CPU-only build has none to drop
    assert got["dropped"] == got["held"]
    assert got["after"] <= got["held"] // 10
