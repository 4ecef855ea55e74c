"""candle's run cache: its key follows every input that determines candle's numbers, an entry
round-trips exactly, a damaged entry is never returned, and a failed run is never stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from portkit.verify import cachefiles, code_closure
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.cache import RunCache
from portkit.verify.candle.run import RunOutputs, from_cache, run_candle


@pytest.fixture(autouse=True)
def _wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runcache, "wheel_digest", lambda: "wheel-1")
    monkeypatch.setattr(runcache, "candle_threads", lambda: 2)
    monkeypatch.delenv("CANDLE_NUM_THREADS", raising=False)


def _weights(tmp_path: Path, payload: bytes = b"\x00" * 64) -> Path:
    header = json.dumps({"w": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}).encode()
    f = tmp_path / "model.safetensors"
    f.write_bytes(len(header).to_bytes(8, "little") + header + payload)
    return f


def _key(files: list[Path], **over: Any) -> str:
    kw: dict[str, Any] = dict(
        loader="llama",
        device="cpu",
        dtype="f32",
        config_text='{"vocab_size": 4}',
        files=cachefiles.fingerprints(files),
        prompt=[1, 2, 3],
        forced=None,
        tokens=2,
        capture=True,
    )
    kw.update(over)
    return runcache.run_key(**kw)


@pytest.mark.parametrize(
    "change",
    [
        dict(loader="mistral"),
        dict(loader="gguf:quantized_llama", config_text=None),
        dict(device="cuda"),
        dict(dtype="f16"),
        dict(flash_attn=True),
        dict(config_text='{"vocab_size": 4} '),
        dict(prompt=[1, 2, 4]),
        dict(forced=[3, 1]),
        dict(tokens=3),
        dict(capture=False),
        dict(edit={"permute_qk": True}),
        dict(edit={"llama.rope.freq_base": np.float32(1e4)}),  # a gguf-package scalar
    ],
)
def test_key_follows_each_input(tmp_path: Path, change: dict[str, Any]) -> None:
    files = [_weights(tmp_path)]
    assert _key(files) == _key(files)
    assert _key(files, **change) != _key(files)


def test_key_follows_the_wheel_the_threads_and_the_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [_weights(tmp_path)]
    k = _key(files)
    monkeypatch.setattr(runcache, "wheel_digest", lambda: "wheel-2")
    assert _key(files) != k
    monkeypatch.setattr(runcache, "wheel_digest", lambda: "wheel-1")
    monkeypatch.setattr(runcache, "candle_threads", lambda: 4)
    assert _key(files) != k
    monkeypatch.setattr(runcache, "candle_threads", lambda: 2)
    assert _key(files) == k
    monkeypatch.setenv("CANDLE_NUM_THREADS", "3")
    assert _key(files) != k
    monkeypatch.delenv("CANDLE_NUM_THREADS")
    assert _key(files) == k
    _weights(tmp_path, b"\x00" * 63 + b"\x01")  # one bit of one weight, same size and header
    assert _key(files) != k


def _rows() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)


def test_round_trip(tmp_path: Path) -> None:
    c = RunCache(_key([_weights(tmp_path)]), root=tmp_path / "cache")
    assert c.get() is None and from_cache(c, "as written") is None
    layers = {"embeddings": np.ones((3, 4), np.float32), "layer.0": np.full((3, 4), 0.5, np.float32)}
    c.put([4, 0, 2], _rows(), layers)
    hit = from_cache(c, "as written")
    assert isinstance(hit, RunOutputs) and hit.source == "cache" and hit.label == "as written"
    assert hit.greedy == [4, 0, 2] and np.array_equal(hit.rows, _rows()) and np.array_equal(hit.last, _rows()[0])
    assert hit.layers is not None and list(hit.layers) == list(layers)
    assert all(np.array_equal(hit.layers[k], layers[k]) for k in layers)
    c.put([4], _rows(), None)
    again = c.get()
    assert again is not None and again.layers is None, "a run without capture has no layers, not an empty set"


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "reference-entry"])
def test_damaged_entry_is_ignored_and_removed(tmp_path: Path, damage: str) -> None:
    c = RunCache(_key([_weights(tmp_path)]), root=tmp_path / "cache")
    c.put([1], _rows(), None)
    blob = c.path.read_bytes()
    if damage == "truncate":
        c.path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        c.path.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    elif damage == "empty":
        c.path.write_bytes(b"")
    else:  # an intact entry of the other cache is not a run
        from portkit.verify.reference import cache as refcache

        c.path.write_bytes(cachefiles.encode(refcache.MAGIC, {"greedy": [1]}, {"rows": _rows()}))
    assert c.get() is None
    assert not c.path.exists()


class _Runner:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def generate(self, ids: list[int], n: int) -> tuple[list[int], np.ndarray]:
        if self.fail:
            raise ValueError("candle: forward failed")
        return [4] * n, _rows()

    def capture(self, ids: list[int]) -> dict[str, np.ndarray]:
        return {"embeddings": np.ones((3, 4), np.float32)}


@pytest.mark.parametrize("fail", [False, True])
def test_only_a_completed_run_is_stored(tmp_path: Path, fail: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from portkit.verify.candle import run as runs

    monkeypatch.setattr(runs, "native_errors", lambda: (ValueError,))
    c = RunCache(_key([_weights(tmp_path)]), root=tmp_path / "cache")
    loads = []

    def load() -> _Runner:
        loads.append(1)
        return _Runner(fail)

    first = run_candle(load, [1, 2, 3], None, 3, label="x", capture=True, cache=c)
    assert first.source == "computed" and (first.failure is not None) == fail
    assert c.path.exists() == (not fail)
    second = run_candle(load, [1, 2, 3], None, 3, label="x", capture=True, cache=c)
    assert len(loads) == (2 if fail else 1), "a stored run is not loaded again; a failed one is"
    if not fail:
        assert second.source == "cache" and second.greedy == first.greedy and np.array_equal(second.rows, first.rows)
        assert second.layers is not None and np.array_equal(second.layers["embeddings"], np.ones((3, 4), np.float32))


def test_each_cache_keeps_its_own_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    files = [_weights(tmp_path)]
    for i in range(4):
        RunCache(_key(files, prompt=[i]), root=root).put([i % 5], _rows(), None)
    size = next(root.glob("*/*.run")).stat().st_size
    monkeypatch.setenv("PORTKIT_REFCACHE_MAX_MB", str(2.5 * size / 2**20))
    RunCache(_key(files, prompt=[9]), root=root).put([4], _rows(), None)
    left = sorted(root.glob("*/*.run"))
    assert len(left) == 2
    assert RunCache(_key(files, prompt=[9]), root=root).get() is not None, "the newest entry stays"


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path))
    assert runcache.cache_root() == tmp_path / "candle"
    assert RunCache("ab" * 32).path == tmp_path / "candle" / "ab" / f"{'ab' * 32}.run"


def test_cpu_model_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_bytes(
        b"processor\t: 0\nvendor_id\t: X\xff\nmodel name\t: AMD EPYC 7B13: 64-Core Processor\nflags\t: a:b\n"
    )
    assert runcache._cpu_model(info) == "AMD EPYC 7B13: 64-Core Processor"  # undecodable bytes elsewhere are fine
    import platform

    assert runcache._cpu_model(tmp_path / "absent") == platform.processor()
    if Path("/proc/cpuinfo").is_file():  # this machine's own, read by default
        names = [
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
            if ln.startswith("model name")
        ]
        assert runcache._cpu_model() == (names[0] if names else platform.processor())


def test_machine_names_the_threads_candle_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    monkeypatch.setenv("CANDLE_NUM_THREADS", "5")
    assert runcache.machine() == {
        "arch": platform.machine(),
        "system": platform.system(),
        "cpu": runcache._cpu_model(),
        "threads": 2,
        "candle_num_threads": "5",
    }


def test_key_covers_the_code_that_runs_candle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key holds the digest of the code closure rooted at the modules that drive the run."""
    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(code_closure, "code_digest", lambda roots: (seen.append(tuple(roots)), "src")[1])
    _key([_weights(tmp_path)])
    (roots,) = seen
    assert set(roots) == {
        "portkit.verify.candle.run",
        "portkit.verify.candle.native",
        "portkit.verify.candle.gguf_edit",
    }
    assert "portkit.verify.candle.run" in code_closure.closure(roots)


@pytest.mark.parametrize(
    "device,use_cache,expected",
    [("cpu", True, True), ("cpu", False, False), ("cuda", True, False), ("metal", True, False)],
)
def test_only_cpu_runs_are_cached(device: str, use_cache: bool, expected: bool) -> None:
    assert runcache.cacheable(device, use_cache) is expected
