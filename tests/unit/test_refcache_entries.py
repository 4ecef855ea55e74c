"""The reference cache: its key follows every input that determines the reference, a damaged entry
is detected and never returned, and the cache stays within its size bound."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from portkit.verify.reference import cache as refcache
from portkit.verify.reference.cache import RefCache
from portkit.verify.reference.compute import ReferenceOutputs


def _model(tmp_path: Path, weights: bytes = b"\x00" * 64, config: str = '{"vocab_size": 4}') -> tuple[str, list[Path]]:
    header = json.dumps({"w": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}).encode()
    f = tmp_path / "model.safetensors"
    f.write_bytes(len(header).to_bytes(8, "little") + header + weights)
    return config, [f]


def _entry() -> ReferenceOutputs:
    rng = np.random.default_rng(0)
    return ReferenceOutputs(
        greedy=[3, 1],
        rows=rng.standard_normal((2, 4)).astype(np.float32),
        layers={"embeddings": rng.standard_normal((3, 8)).astype(np.float32), "logits": np.zeros(4, np.float32)},
        nonfinite_weights=["model.layers.1.mlp.down_proj.weight"],
    )


def test_round_trip(tmp_path: Path) -> None:
    config, files = _model(tmp_path)
    c = RefCache(refcache.model_key(config, files, "streamed"), [1, 2, 3], 2, root=tmp_path / "cache")
    assert not c.likely() and c.get([3, 1]) is None
    c.put([3, 1], _entry())
    assert c.likely()
    got = c.get([3, 1])
    assert got is not None
    assert got.greedy == [3, 1] and got.nonfinite_weights == _entry().nonfinite_weights
    assert np.array_equal(got.rows, _entry().rows)
    assert list(got.layers) == ["embeddings", "logits"] and np.array_equal(
        got.layers["embeddings"], _entry().layers["embeddings"]
    )
    assert c.get([3, 2]) is None, "other continuation tokens are another entry"
    assert c.get(None) is None, "the reference's own greedy is another entry"


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "magic"])
def test_damaged_entry_is_ignored_and_removed(tmp_path: Path, damage: str) -> None:
    config, files = _model(tmp_path)
    c = RefCache(refcache.model_key(config, files, "streamed"), [1, 2, 3], 2, root=tmp_path / "cache")
    c.put([3, 1], _entry())
    path = c.path([3, 1])
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"X" + blob[1:])
    assert c.get([3, 1]) is None
    assert not path.exists()
    c.put([3, 1], _entry())  # rewritten
    assert c.get([3, 1]) is not None


def test_key_follows_content(tmp_path: Path) -> None:
    config, files = _model(tmp_path)
    k = refcache.model_key(config, files, "streamed")
    assert refcache.model_key(config, files, "streamed") == k
    assert refcache.model_key(config, files, "whole") != k
    assert refcache.model_key(config + " ", files, "streamed") != k
    _model(tmp_path, weights=b"\x00" * 63 + b"\x01")  # same size and header, one byte of data
    assert refcache.model_key(config, files, "streamed") != k


def test_a_counterfactual_key_reuses_the_reference_fingerprints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference's fingerprints of the weight files travel with it: a reference-side
    counterfactual's cache key does not read the checkpoint again, and is the same key."""
    from types import SimpleNamespace

    from portkit.verify import cachefiles
    from portkit.verify.reference import as_candle, compute

    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    config, files = _model(tmp_path)
    fingerprints = cachefiles.fingerprints(files)
    model = SimpleNamespace(root=tmp_path, weight_files=tuple(files), vocab_size=4, config_text="{}")
    reference = SimpleNamespace(
        use_cache=True, prompt=[1, 2, 3], inputs=[3, 1], fingerprints=fingerprints, mode="streamed"
    )
    # the key computed from the files themselves is the one the counterfactual uses
    key = as_candle.as_candle_key(model, SimpleNamespace(mode="streamed", fingerprints=None), "{}", {}, 0, ())  # type: ignore[arg-type]
    monkeypatch.setattr(
        cachefiles, "fingerprints", lambda _files: pytest.fail("the weight files were fingerprinted again")
    )
    monkeypatch.setattr(
        compute, "as_candle_reference", lambda *_a: (np.ones((2, 4), np.float32), {}, np.zeros(0, np.float32))
    )
    as_candle.reference_as_candle(model, reference, 2, {"what": "x"}, 0, lambda _s: None)  # type: ignore[arg-type]
    assert RefCache(key, [1, 2, 3], 2, vocab=4).get([3, 1]) is not None


def test_key_without_import_of_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pathlib, tempfile; from portkit.verify.reference import cache as refcache, job; "
        "d = pathlib.Path(tempfile.mkdtemp()); f = d / 'w.safetensors'; f.write_bytes(b'\\x02' + b'\\x00' * 7 + "
        "b'{}'); refcache.model_key('{}', [f], 'streamed'); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_size_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    import os
    import time

    config, files = _model(tmp_path)
    root = tmp_path / "cache"
    paths = []
    for i in range(4):
        c = RefCache(refcache.model_key(config, files, "streamed"), [i], 2, root=root)
        c.put([3, 1], _entry())
        p = c.path([3, 1])
        os.utime(p, ns=(time.time_ns() - (10 - i) * 10**9,) * 2)
        paths.append(p)
    size = paths[0].stat().st_size
    removed = refcache.evict(root, int(size * 2.5))
    assert removed == paths[:2]
    assert [p.exists() for p in paths] == [False, False, True, True]
    assert refcache.evict(root, 10 * size) == []
