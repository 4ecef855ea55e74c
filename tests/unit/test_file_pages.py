"""The streamed reference hands a layer's pages of the checkpoint's mapping back to the kernel
(`portkit.verify.reference.file_pages`): only pages of the file's own mappings, whole pages."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from portkit.verify.reference.file_pages import FilePages, mapped_ranges, page_spans

MAPS = """\
7f0000000000-7f0000004000 r--s 00000000 08:01 1234   /data/model.safetensors
7f0000010000-7f0000011000 rw-p 00000000 00:00 0
7f0000020000-7f0000022000 r--s 00000000 08:01 99     /data/model.safetensors.bak
"""


def test_only_the_files_own_mappings_are_found() -> None:
    assert mapped_ranges(Path("/data/model.safetensors"), MAPS) == [(0x7F0000000000, 0x7F0000004000)]
    assert mapped_ranges(Path("/data/other.safetensors"), MAPS) == []


def test_spans_widen_to_whole_pages_merge_and_stay_inside_the_mapping() -> None:
    within = [(0x10000, 0x14000)]
    # two tensors sharing a page merge; one reaching past the mapping is cut to it
    assert page_spans([(0x10010, 0x10800), (0x10900, 0x11010)], within, page=0x1000) == [(0x10000, 0x12000)]
    assert page_spans([(0x13F00, 0x15000)], within, page=0x1000) == [(0x13000, 0x14000)]
    # memory outside every mapping of the file (a copy on the heap) is never advised
    assert page_spans([(0x20000, 0x21000)], within, page=0x1000) == []
    assert page_spans([(0x10000, 0x10000)], within, page=0x1000) == []  # an empty tensor


def _resident_kib(path: Path) -> int:
    """Rss of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            inside = len(head) == 6 and head[5] == str(path.resolve())
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pages are handed back on Linux only (file_pages)")
def test_released_tensors_leave_the_processs_memory(tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({f"t{i}": np.full((512, 1024), i, dtype=np.float32) for i in range(4)}, str(path))  # 8 MiB
    f = safe_open(str(path), framework="pt", device="cpu", backend="mmap")
    pages = FilePages([(path, f)])
    assert pages.ranges
    touched = sum(float(f.get_slice(k)[...].sum()) for k in f.keys())  # every page read
    assert touched == 512 * 1024 * (0 + 1 + 2 + 3)
    assert _resident_kib(path) >= 8 * 1024 - 64
    pages.release(["t0", "t1"])
    assert _resident_kib(path) <= 4 * 1024 + 64  # the other two tensors stay
    assert float(f.get_slice("t1")[...].sum()) == 512 * 1024  # read back from the page cache, unchanged


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pages are handed back on Linux only (file_pages)")
def test_only_this_models_own_mapping_is_advised(tmp_path: Path) -> None:
    """Two open files of one checkpoint (two models) map it twice: each releases within its own
    mapping only, since the other may be unmapped and its addresses reused while it lives."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"t": np.ones((256, 1024), dtype=np.float32)}, str(path))
    first = safe_open(str(path), framework="pt", device="cpu", backend="mmap")
    second = safe_open(str(path), framework="pt", device="cpu", backend="mmap")
    a, b = FilePages([(path, first)]), FilePages([(path, second)])
    assert len(mapped_ranges(path)) == 2 and len(a.ranges) == len(b.ranges) == 1 and a.ranges != b.ranges
    start = first.get_slice("t")[...].data_ptr()
    assert a.ranges[0][0] <= start < a.ranges[0][1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pages are handed back on Linux only (file_pages)")
def test_the_embeddings_are_read_by_the_lm_head_not_before_the_layers(tmp_path: Path) -> None:
    """A streamed forward looks up a few rows of the embeddings; their non-finite scan waits for
    the lm_head, which reads them all, so they are not resident while the layers run."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from portkit.verify.reference.models import StreamedModel

    config = LlamaConfig(vocab_size=16384, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    embeddings_kib = 16384 * 64 * 4 // 1024
    model = StreamedModel(tmp_path, [path])
    seen = []
    model.layers[0].register_forward_pre_hook(lambda *_a: seen.append(_resident_kib(path)))
    result = model.forward([1, 2, 3])
    assert seen and seen[0] < embeddings_kib // 4, seen
    assert _resident_kib(path) >= embeddings_kib - 64  # the lm_head read them, and the scan after it
    assert result.nonfinite_weights == []
