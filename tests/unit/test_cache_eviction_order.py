"""Eviction goes by last *use*, not last write (issue 20, item 8): an entry read since it was
written outlives entries written after it and never read. Both caches, through their own API."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from portkit.verify.candle.cache import RunCache
from portkit.verify.reference.cache import RefCache
from portkit.verify.reference.compute import ReferenceOutputs

ROWS = np.arange(10, dtype=np.float32).reshape(2, 5)


def _age(p: Path, seconds: int) -> None:
    os.utime(p, ns=(seconds * 10**9, seconds * 10**9))


def test_a_run_entry_read_since_is_kept_over_older_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "candle"
    caches = {name: RunCache(f"{i:02x}" + name * 62, root=root, tokens=2, vocab=5) for i, name in enumerate("abcd")}
    for i, name in enumerate("abc"):
        caches[name].put([1], ROWS, None)
        _age(caches[name].path, 1000 * (i + 1))  # written in the order a, b, c
    assert caches["a"].get() is not None  # a is used: now the most recent
    size = caches["a"].path.stat().st_size
    monkeypatch.setenv("PORTKIT_REFCACHE_MAX_MB", str(2.5 * size / 2**20))
    caches["d"].put([1], ROWS, None)  # over the bound: the two least recently used go
    assert {n for n, c in caches.items() if c.path.exists()} == {"a", "d"}


def test_a_reference_entry_read_since_is_kept_over_older_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "reference"
    entry = ReferenceOutputs(greedy=[1], rows=ROWS, layers={}, nonfinite_weights=[])
    caches = {name: RefCache(name * 64, [1, 2], 2, root=root, vocab=5) for name in "abcd"}
    for i, name in enumerate("abc"):
        caches[name].put(None, entry)
        _age(caches[name].path(None), 1000 * (i + 1))
    assert caches["a"].get(None) is not None
    size = caches["a"].path(None).stat().st_size
    monkeypatch.setenv("PORTKIT_REFCACHE_MAX_MB", str(2.5 * size / 2**20))
    caches["d"].put(None, entry)
    assert {n for n, c in caches.items() if c.path(None).exists()} == {"a", "d"}
