"""The header readers' bounds, tested at the exact byte where they switch.

GGUF: an array's elements must fit in what remains of the file, counted with their real size
(an array of n U32 needs 4n bytes, not n); safetensors: the header length cap is 100 MiB, and
a file claiming one byte more is refused before anything is read, so it costs no memory.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit.cli import main
from portkit.errors import InputError
from portkit.model import gguf_header
from portkit.model.gguf_header import KEEP_ARRAY, VALUE_TYPES, read_gguf
from portkit.model.safetensors_header import MAX_HEADER_BYTES, read_safetensors_header

ROOT = Path(__file__).resolve().parents[2]
NUMERIC = [(tid, name, fmt, size) for tid, (name, fmt, size) in VALUE_TYPES.items() if fmt is not None]


def gguf_with_array(version: int, etype: int, n: int, payload: bytes, key: bytes = b"k") -> bytes:
    """A GGUF with no tensors and one metadata entry `key`: ARRAY of `n` `etype`, then `payload`."""
    length = "<I" if version == 1 else "<Q"
    head = b"GGUF" + struct.pack("<I", version) + struct.pack(length, 0) + struct.pack(length, 1)
    kv = struct.pack(length, len(key)) + key + struct.pack("<II", 9, etype) + struct.pack(length, n)
    return head + kv + payload


def write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "x.gguf"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("tid,name,fmt,size", NUMERIC, ids=[n for _, n, _, _ in NUMERIC])
def test_numeric_array_that_exactly_fits_is_read(
    version: int, tid: int, name: str, fmt: str, size: int, tmp_path: Path
) -> None:
    n = 7
    values = [1] * n if name == "BOOL" else list(range(n))
    payload = b"".join(struct.pack(fmt, v) for v in values)
    assert len(payload) == n * size
    g = read_gguf(write(tmp_path, gguf_with_array(version, tid, n, payload)))
    v = g.metadata["k"]
    assert (v.type, v.elem_type, v.length) == ("ARRAY", name, n)
    assert [x.value for x in v.value] == ([True] * n if name == "BOOL" else values)


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("tid,name,fmt,size", NUMERIC, ids=[n for _, n, _, _ in NUMERIC])
def test_numeric_array_one_byte_short_is_refused(
    version: int, tid: int, name: str, fmt: str, size: int, tmp_path: Path
) -> None:
    """n elements of `size` bytes with n*size - 1 left: refused by the count check, never a
    struct error (counting elements as one byte each would let n*size - 1 >= n through)."""
    n = 7
    p = write(tmp_path, gguf_with_array(version, tid, n, b"\0" * (n * size - 1)))
    with pytest.raises(
        InputError,
        match=rf"hostile GGUF: `k` array of 7 elements needs at least {n * size} bytes, only {n * size - 1} remain",
    ):
        read_gguf(p)


def test_the_65_byte_file_is_bad_input_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """16 U32 with 16 bytes left: counted as bytes it fits, counted as U32 it does not."""
    data = gguf_with_array(3, 4, 16, b"\0" * 16)
    assert len(data) == 65
    p = write(tmp_path, data)
    code = main(["lint", str(p)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert (
        err == f"portkit: error: {p}: hostile GGUF: `k` array of 16 elements needs at least 64 bytes, only 16 remain\n"
    )


@pytest.mark.parametrize("version,prefix", [(1, 4), (3, 8)])
def test_string_and_nested_arrays_count_their_length_prefix(version: int, prefix: int, tmp_path: Path) -> None:
    # n empty strings need n length prefixes
    n = 5
    empty = struct.pack("<I" if version == 1 else "<Q", 0)
    g = read_gguf(write(tmp_path, gguf_with_array(version, 8, n, empty * n)))
    assert [x.value for x in g.metadata["k"].value] == [""] * n
    with pytest.raises(InputError, match=f"needs at least {n * prefix} bytes, only {n * prefix - 1} remain"):
        read_gguf(write(tmp_path, gguf_with_array(version, 8, n, (empty * n)[:-1])))
    # n nested arrays need an element type and a length each
    with pytest.raises(
        InputError, match=f"needs at least {n * (4 + prefix)} bytes, only {n * (4 + prefix) - 1} remain"
    ):
        read_gguf(write(tmp_path, gguf_with_array(version, 9, n, b"\0" * (n * (4 + prefix) - 1))))
    inner = struct.pack("<I", 4) + struct.pack("<I" if version == 1 else "<Q", 0)  # empty U32 arrays
    g = read_gguf(write(tmp_path, gguf_with_array(version, 9, n, inner * n)))
    assert [x.length for x in g.metadata["k"].value] == [0] * n


def test_arrays_keep_their_values_up_to_keep_array(tmp_path: Path) -> None:
    for n, kept in ((KEEP_ARRAY, True), (KEEP_ARRAY + 1, False)):
        g = read_gguf(write(tmp_path, gguf_with_array(3, 0, n, b"\x01" * n)))
        v = g.metadata["k"]
        assert v.length == n and (v.value is not None) == kept
        if kept:
            assert len(v.value) == n and v.value[-1].value == 1


def test_array_count_cap_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`n > GGUF_MAX_ARRAY_ELEMENTS` is refused, `n == cap` goes on to the size check."""
    monkeypatch.setattr(gguf_header, "GGUF_MAX_ARRAY_ELEMENTS", 8)
    with pytest.raises(InputError, match="array length 9 exceeds 8"):
        read_gguf(write(tmp_path, gguf_with_array(3, 0, 9, b"\0" * 9)))
    assert read_gguf(write(tmp_path, gguf_with_array(3, 0, 8, b"\0" * 8))).metadata["k"].length == 8


def test_tensor_data_that_ends_at_the_last_byte_fits(tmp_path: Path) -> None:
    cfg = sk.config("tf4")
    p = sk.write_gguf(tmp_path / "m.gguf", sk.llama_metadata(cfg), sk.gguf_tensors(cfg, "F32"))
    g = read_gguf(p)
    end = max(g.data_offset + t.offset + (t.nbytes or 0) for t in g.tensors.values())
    data = p.read_bytes()[:end]  # drop the writer's padding: the last tensor ends at the last byte
    p.write_bytes(data)
    assert len(read_gguf(p).tensors) == len(g.tensors)
    p.write_bytes(data[:-1])
    with pytest.raises(InputError, match=rf"needs \d+ bytes at offset \d+, file has {end - 1} bytes"):
        read_gguf(p)


# --------------------------------------------------------------------------- safetensors


def sparse_safetensors(path: Path, header_len: int) -> Path:
    """An 8-byte length and then a hole: the file claims `header_len` bytes of header and has
    them on paper (so only the cap can refuse it), but none take disk space."""
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len))
        f.truncate(8 + header_len + 1024)
    return path


def test_header_cap_is_100_mib_to_the_byte(tmp_path: Path) -> None:
    assert MAX_HEADER_BYTES == 100 * 1024 * 1024
    over = sparse_safetensors(tmp_path / "over.safetensors", MAX_HEADER_BYTES + 1)
    with pytest.raises(
        InputError, match=f"header length {MAX_HEADER_BYTES + 1} exceeds portkit's cap of {MAX_HEADER_BYTES} bytes"
    ):
        read_safetensors_header(over)
    # one byte less passes the cap and is read (then refused for what it contains)
    small = tmp_path / "small.safetensors"
    small.write_bytes(struct.pack("<Q", 16) + b"\0" * 16)
    with pytest.raises(InputError) as e:
        read_safetensors_header(small, max_header=16)
    assert "exceeds portkit's cap" not in str(e.value)
    with pytest.raises(InputError, match="length 16 exceeds portkit's cap of 15 bytes"):
        read_safetensors_header(small, max_header=15)


def test_a_valid_header_exactly_at_the_cap_is_read(tmp_path: Path) -> None:
    p = sk.write_safetensors(tmp_path / "model.safetensors", {"a": (2, 2)})
    n = struct.unpack("<Q", p.read_bytes()[:8])[0]
    assert read_safetensors_header(p, max_header=n).tensors["a"].shape == (2, 2)


_MEASURE = textwrap.dedent(
    """
    import json, sys, tracemalloc
    from pathlib import Path
    from portkit.errors import InputError
    from portkit.model import safetensors_header as sh
    cap = int(sys.argv[2])
    tracemalloc.start()
    try:
        sh.read_safetensors_header(Path(sys.argv[1]), max_header=cap)
        msg = "read"
    except InputError as e:
        msg = str(e)
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"peak_kib": peak // 1024, "message": msg}))
    """
)


def peak_growth(path: Path, cap: int) -> tuple[int, str]:
    """The reader's peak allocation in KiB (tracemalloc, in a fresh process: what it allocates,
    whether or not the pages stay resident) and its message."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(cap)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return out["peak_kib"], out["message"]


def test_a_header_just_over_the_cap_costs_no_memory(tmp_path: Path) -> None:
    p = sparse_safetensors(tmp_path / "model.safetensors", MAX_HEADER_BYTES + 1)
    assert p.stat().st_blocks * 512 < 1024 * 1024  # the 100 MiB are a hole
    grew, message = peak_growth(p, MAX_HEADER_BYTES)
    assert "exceeds portkit's cap" in message
    assert grew < 1024, f"refusing the header allocated {grew} KiB at its peak"
    # negative control: with a cap one byte higher the same file is read, and the measurement sees it
    grew, message = peak_growth(p, MAX_HEADER_BYTES + 1)
    assert "exceeds portkit's cap" not in message
    assert grew > 100 * 1024, f"reading a 100 MiB header allocated only {grew} KiB at its peak"


def test_a_file_that_starts_like_an_lfs_pointer_costs_no_memory(tmp_path: Path) -> None:
    """ "version " and then a hole: the reader looks at the LFS prefix's length, not the file, then
    refuses the length those 8 bytes spell."""
    p = tmp_path / "model.safetensors"
    with open(p, "wb") as f:
        f.write(b"version ")
        f.truncate(200 * 1024 * 1024)
    message = (
        f"{p}: safetensors header length {struct.unpack('<Q', b'version ')[0]} exceeds portkit's cap of "
        f"{MAX_HEADER_BYTES} bytes (hostile or corrupt file)"
    )
    with pytest.raises(InputError) as e:  # in this process too: mutmut selects tests by the calls it sees
        read_safetensors_header(p)
    assert str(e.value) == message
    grew, measured = peak_growth(p, MAX_HEADER_BYTES)
    assert measured == message
    assert grew < 1024, f"looking for an LFS pointer allocated {grew} KiB at its peak"
