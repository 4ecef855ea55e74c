"""verify's cache entry files: where they live, what a weight file's fingerprint covers (whole
file, or sampled blocks plus the mtime above the threshold), that an entry holds only float32
arrays and JSON, refuses pickles, and that eviction stops exactly at the bound."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from portkit.verify import arrayblob, cachefiles

MAGIC = b"portkit-test-v1\n"


def test_cache_base_is_portkit_cache_else_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "pc"))
    assert cachefiles.cache_base() == tmp_path / "pc"
    monkeypatch.delenv("PORTKIT_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cachefiles.cache_base() == tmp_path / "home" / ".cache" / "portkit"


@pytest.mark.parametrize("value,expected", [("3", 3 * 2**20), ("0.5", 2**19), ("lots", 2048 * 2**20)])
def test_max_bytes(monkeypatch: pytest.MonkeyPatch, value: str, expected: int) -> None:
    monkeypatch.setenv("PORTKIT_REFCACHE_MAX_MB", value)
    assert cachefiles.max_bytes() == expected


def _safetensors(path: Path, header: bytes, body: bytes) -> bytes:
    raw = len(header).to_bytes(8, "little") + header + body
    path.write_bytes(raw)
    return raw


def test_small_file_fingerprint_is_the_whole_file(tmp_path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    raw = _safetensors(tmp_path / "model.safetensors", header, bytes(range(16)))
    fp = cachefiles.file_fingerprint(tmp_path / "model.safetensors")
    assert fp == {
        "name": "model.safetensors",
        "size": len(raw),
        "header": hashlib.sha256(header).hexdigest(),
        "digest": hashlib.sha256(raw).hexdigest(),
        "mtime_ns": None,  # the content says it all: a touch is not a change
        "ctime_ns": None,
        "inode": None,
    }


def test_header_longer_than_the_limit_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachefiles, "MAX_HEADER_BYTES", 32)
    at_limit = b"h" * 32
    _safetensors(tmp_path / "a.safetensors", at_limit, b"")
    assert cachefiles.file_fingerprint(tmp_path / "a.safetensors")["header"] == hashlib.sha256(at_limit).hexdigest()
    _safetensors(tmp_path / "b.safetensors", b"h" * 33, b"")
    assert cachefiles.file_fingerprint(tmp_path / "b.safetensors")["header"] == hashlib.sha256(b"").hexdigest()
    (tmp_path / "short").write_bytes(b"\x01\x02")  # not even a length: no header, still a fingerprint
    assert cachefiles.file_fingerprint(tmp_path / "short")["header"] == hashlib.sha256(b"").hexdigest()
    # a GGUF's first 8 bytes read as a length far over the limit: no header
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 24)
    assert cachefiles.file_fingerprint(tmp_path / "x.gguf")["header"] == hashlib.sha256(b"").hexdigest()


BLOCK, SAMPLES = 16, 16
SIZE = 4096


def _sampled_offsets(size: int) -> list[int]:
    """The spec: the first and the last block, and 16 evenly spaced blocks in between."""
    return [0, size - BLOCK] + [(size - BLOCK) * i // (SAMPLES + 1) for i in range(1, SAMPLES + 1)]


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachefiles, "BLOCK", BLOCK)
    monkeypatch.setattr(cachefiles, "FULL_DIGEST_BYTES", SIZE - 1)


def test_threshold_size_is_still_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cachefiles, "FULL_DIGEST_BYTES", SIZE)
    f = tmp_path / "w.bin"
    f.write_bytes(bytes(SIZE))
    fp = cachefiles.file_fingerprint(f)
    assert fp["mtime_ns"] is None and fp["digest"] == hashlib.sha256(bytes(SIZE)).hexdigest()


def test_large_file_fingerprint_samples_blocks_and_the_mtime(tmp_path: Path, small_blocks: None) -> None:
    f = tmp_path / "w.bin"
    raw = bytearray(np.random.default_rng(0).integers(0, 256, SIZE, dtype=np.uint8).tobytes())
    f.write_bytes(bytes(raw))
    os.utime(f, ns=(1, 2_000_000_000))
    fp = cachefiles.file_fingerprint(f)
    expected = hashlib.sha256(b"".join(bytes(raw[o : o + BLOCK]) for o in _sampled_offsets(SIZE))).hexdigest()
    assert fp["digest"] == expected
    assert fp["mtime_ns"] == 2_000_000_000 and fp["size"] == SIZE

    sampled = {o + k for o in _sampled_offsets(SIZE) for k in range(BLOCK)}
    outside = next(i for i in range(SIZE) if i not in sampled)
    for i in (0, SIZE - 1, _sampled_offsets(SIZE)[5] + 3, outside):
        edited = bytearray(raw)
        edited[i] ^= 0xFF
        f.write_bytes(bytes(edited))
        os.utime(f, ns=(1, 2_000_000_000))
        same_digest = cachefiles.file_fingerprint(f)["digest"] == fp["digest"]
        assert same_digest == (i == outside), f"byte {i}"
    # the edit between samples is caught by the mtime, which an edit changes
    os.utime(f, ns=(1, 3_000_000_000))
    assert cachefiles.file_fingerprint(f) != fp


def test_an_edit_between_samples_with_the_mtime_put_back_is_still_seen(tmp_path: Path, small_blocks: None) -> None:
    """`touch -r` restores the mtime; the ctime (which no user call sets) and the inode still
    change (issue 20, item 7: exit 0 "agree" where the truth was exit 3)."""
    import time

    f = tmp_path / "w.bin"
    raw = bytearray(np.random.default_rng(1).integers(0, 256, SIZE, dtype=np.uint8).tobytes())
    f.write_bytes(bytes(raw))
    st = f.stat()
    fp = cachefiles.file_fingerprint(f)
    sampled = {o + k for o in _sampled_offsets(SIZE) for k in range(BLOCK)}
    outside = next(i for i in range(SIZE) if i not in sampled)
    time.sleep(0.05)  # past the kernel's timestamp granularity (a jiffy), so the ctime can move
    with open(f, "r+b") as h:  # edited in place: same inode
        h.seek(outside)
        h.write(bytes([raw[outside] ^ 0xFF]))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r
    after = cachefiles.file_fingerprint(f)
    assert after["digest"] == fp["digest"] and after["mtime_ns"] == fp["mtime_ns"] and after["inode"] == fp["inode"]
    assert after["ctime_ns"] != fp["ctime_ns"] and after != fp
    # written anew with the same bytes and the mtime put back: another inode, also a new key
    time.sleep(0.05)
    g = tmp_path / "w.new"
    g.write_bytes(f.read_bytes())
    os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(g, f)
    assert (
        cachefiles.file_fingerprint(f)["inode"] != fp["inode"]
        or cachefiles.file_fingerprint(f)["ctime_ns"] != after["ctime_ns"]
    )


def test_sampled_header_is_the_whole_header(tmp_path: Path, small_blocks: None) -> None:
    """A header longer than the first block is still digested whole when the content is sampled."""
    header = b"{" + b" " * 200 + b"}"
    body = bytes(SIZE)
    _safetensors(tmp_path / "a.safetensors", header, body)
    fp = cachefiles.file_fingerprint(tmp_path / "a.safetensors")
    assert fp["header"] == hashlib.sha256(header).hexdigest()


def test_digest_ignores_key_order() -> None:
    assert cachefiles.digest({"a": 1, "b": [2]}) == cachefiles.digest({"b": [2], "a": 1})
    assert cachefiles.digest({"a": 1}) != cachefiles.digest({"a": 2})


def test_entry_round_trip_is_float32_and_json() -> None:
    blob = cachefiles.encode(MAGIC, {"greedy": [1, 2]}, {"rows": np.arange(6, dtype=np.float64).reshape(2, 3)})
    meta, arrays = cachefiles.decode(MAGIC, blob)
    assert meta == {"greedy": [1, 2]}
    assert set(arrays) == {"rows"} and arrays["rows"].dtype == np.float32
    assert np.array_equal(arrays["rows"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert cachefiles.decode(b"portkit-other-v1\n", blob) is None


def _checked(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def test_an_entry_of_objects_or_another_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match="dtype"):
        arrayblob.pack({"rows": np.array([{"a": 1}], dtype=object)})
    payload = arrayblob.pack({"rows": np.ones((2, 3), np.float32)}, {})
    assert cachefiles.decode(MAGIC, _checked(payload)) is not None
    as_objects = payload.replace(b'"<f4"', b'"|O8"', 1)
    assert as_objects != payload and cachefiles.decode(MAGIC, _checked(as_objects)) is None
    assert cachefiles.decode(MAGIC, _checked(arrayblob.pack({"rows": np.ones((2, 3), np.float64)}, {}))) is None


def test_meta_must_be_an_object() -> None:
    assert cachefiles.decode(MAGIC, cachefiles.encode(MAGIC, [1, 2], {})) is None  # type: ignore[arg-type]
    assert cachefiles.decode(MAGIC, cachefiles.encode(MAGIC, {}, {})) == ({}, {})


def test_write_leaves_only_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "ab" / "abc.e"
    cachefiles.write_entry(path, b"x" * 10, tmp_path, ".e")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["ab", "abc.e"] and path.read_bytes() == b"x" * 10


def test_evict_stops_at_the_bound_oldest_first(tmp_path: Path) -> None:
    for i, name in enumerate(("old", "mid", "new")):
        p = tmp_path / name / f"{name}.e"
        p.parent.mkdir()
        p.write_bytes(b"x" * 100)
        os.utime(p, ns=(i, (i + 1) * 10**9))
    (tmp_path / "mid" / "other.keep").write_bytes(b"y" * 1000)  # another suffix: not this cache's
    assert cachefiles.evict(tmp_path, 300, ".e") == []  # exactly at the bound: nothing goes
    assert cachefiles.evict(tmp_path, 299, ".e") == [tmp_path / "old" / "old.e"]
    assert not (tmp_path / "old").exists(), "an emptied directory goes too"
    assert cachefiles.evict(tmp_path, 100, ".e") == [tmp_path / "mid" / "mid.e"]
    assert (tmp_path / "mid" / "other.keep").exists() and (tmp_path / "new" / "new.e").exists()


def test_evict_skips_an_entry_gone_meanwhile(tmp_path: Path) -> None:
    (tmp_path / "00").mkdir()
    (tmp_path / "00" / "gone.e").symlink_to(tmp_path / "nowhere")  # stat fails, as for a removed entry
    for i, name in enumerate(("a", "b")):
        p = tmp_path / name / f"{name}.e"
        p.parent.mkdir()
        p.write_bytes(b"x" * 100)
        os.utime(p, ns=(i, (i + 1) * 10**9))
    assert cachefiles.evict(tmp_path, 100, ".e") == [tmp_path / "a" / "a.e"]


def test_a_cache_that_cannot_be_written_is_only_slower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "ab"
    d.mkdir()
    (d / "x.e").write_bytes(b"damaged")

    def refuse(*_a: object, **_k: object) -> None:
        raise PermissionError(13, "read-only cache")

    monkeypatch.setattr(Path, "unlink", refuse)
    assert cachefiles.read_entry(d / "x.e", MAGIC) is None  # ignored, not raised
    monkeypatch.undo()

    def full(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    cachefiles.write_entry(d / "y.e", b"blob", tmp_path, ".e")
    assert sorted(p.name for p in d.iterdir()) == ["x.e"], "no entry and no temporary file left behind"


def test_a_cache_path_blocked_by_a_file_is_only_slower(tmp_path: Path) -> None:
    (tmp_path / "ab").write_bytes(b"a file where the entry's directory would go")
    cachefiles.write_entry(tmp_path / "ab" / "y.e", b"blob", tmp_path, ".e")  # no exception
    assert (tmp_path / "ab").read_bytes().startswith(b"a file")
