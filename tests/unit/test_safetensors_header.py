"""portkit's safetensors header reader: what it keeps and every refusal, word for word."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from portkit.errors import InputError
from portkit.model.safetensors_header import LfsPointer, TensorInfo, read_safetensors_header, read_tensor_bytes


def st(tmp_path: Path, header: Any, data: bytes = b"", *, pad: bytes = b"", raw: bytes | None = None) -> Path:
    text = raw if raw is not None else json.dumps(header).encode()
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", len(text) + len(pad)) + text + pad + data)
    return p


def refused(p: Path) -> str:
    with pytest.raises(InputError) as e:
        read_safetensors_header(p)
    assert str(e.value).startswith(f"{p}: ")
    return str(e.value)[len(f"{p}: ") :]


def test_tensors_metadata_and_sizes_are_kept(tmp_path: Path) -> None:
    header = {
        "__metadata__": {"format": "pt"},
        "b": {"dtype": "F16", "shape": [2, 3], "data_offsets": [16, 28]},
        "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "packed": {"dtype": "F4", "shape": [3], "data_offsets": [28, 30]},  # 12 bits: 2 bytes
        "scalar": {"dtype": "U8", "shape": [], "data_offsets": [30, 31]},
        "empty": {"dtype": "I64", "shape": [0, 5], "data_offsets": [31, 31]},
    }
    p = st(tmp_path, header, b"\0" * 31, pad=b"   ")
    f = read_safetensors_header(p)
    assert f.path == p and f.file_size == p.stat().st_size
    assert f.header_len == len(json.dumps(header)) + 3
    assert dict(f.metadata or {}) == {"format": "pt"}
    assert list(f.tensors) == ["b", "a", "packed", "scalar", "empty"]
    assert f.tensors["b"] == TensorInfo(name="b", dtype="F16", shape=(2, 3), file=p, data_offsets=(16, 28))
    assert f.tensors["b"].numel == 6 and f.tensors["scalar"].numel == 1 and f.tensors["empty"].numel == 0
    with pytest.raises(TypeError):
        f.tensors["c"] = f.tensors["a"]  # type: ignore[index]
    assert read_safetensors_header(st(tmp_path, {}, b"")).metadata is None


def test_lfs_pointer_is_recognised_by_its_whole_prefix(tmp_path: Path) -> None:
    p = tmp_path / "model.safetensors"
    p.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")
    with pytest.raises(LfsPointer):
        read_safetensors_header(p)
    # "version " then something else: read as an (absurd) length, refused by the cap
    p.write_bytes(b"version  https://example.com/\n")
    assert "exceeds portkit's cap" in refused(p)


@pytest.mark.parametrize(
    "header,data,message",
    [
        ([1, 2], b"", "safetensors header is not a JSON object"),
        ({"__metadata__": {"a": 1}}, b"", "safetensors `__metadata__` must map strings to strings"),
        ({"__metadata__": ["a"]}, b"", "safetensors `__metadata__` must map strings to strings"),
        ({"t": [1]}, b"", "safetensors tensor `t`: entry is not an object"),
        (
            {"t": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: unknown dtype 'F8'",
        ),
        ({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: unknown dtype '5'"),
        (
            {"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: shape must be a list of non-negative integers",
        ),
        (
            {"t": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: shape must be a list of non-negative integers",
        ),
        (
            {"t": {"dtype": "U8", "shape": [2**63], "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: shape must be a list of non-negative integers",
        ),
        (
            {"t": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: shape must be a list of non-negative integers",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1] * 17, "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: 17 dimensions",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}},
            b"\0",
            "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}},
            b"\0",
            "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}},
            b"\0",
            "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end",
        ),
        (
            {"t": {"dtype": "U8", "shape": [1], "data_offsets": [False, True]}},
            b"\0",
            "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end",
        ),
        (
            {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 7]}},
            b"\0" * 7,
            "safetensors tensor `t`: F32 [2] needs 8 bytes, data_offsets span 7",
        ),
        (
            {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
            b"\0" * 7,
            "truncated safetensors file: tensor `t` ends at byte 8 of a 7-byte data section",
        ),
        (
            {"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}},
            b"\0\0",
            "safetensors tensor `a` starts at byte 1, expected 0 (gap or overlap)",
        ),
        (
            {
                "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]},
            },
            b"\0" * 3,
            "safetensors tensor `b` starts at byte 1, expected 2 (gap or overlap)",
        ),
        (
            {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}},
            b"\0\0",
            "safetensors data section is 2 bytes but the tensors cover 1",
        ),
        ({"t" * 100: [1]}, b"", f"safetensors tensor `{'t' * 80}`: entry is not an object"),
    ],
)
def test_refusal_messages(header: Any, data: bytes, message: str, tmp_path: Path) -> None:
    assert refused(st(tmp_path, header, data)) == message


def test_refusals_before_the_json(tmp_path: Path) -> None:
    p = tmp_path / "model.safetensors"
    for n in (0, 7):
        p.write_bytes(b"\x01" * n)
        assert refused(p) == f"truncated safetensors file: {n} bytes, no 8-byte header length"
    p.write_bytes(struct.pack("<Q", 11) + b"{}" + b" " * 8)  # one byte short of the header
    assert refused(p) == "truncated safetensors file: header length 11 but only 10 bytes follow"
    p.write_bytes(struct.pack("<Q", 10) + b"{}" + b" " * 8)  # exactly there: read
    assert read_safetensors_header(p).tensors == {}
    assert refused(st(tmp_path, None, raw=b"\xff\xfe")) == "safetensors header is not UTF-8"
    assert refused(st(tmp_path, None, raw=b"{,}")).startswith("safetensors header: ")
    d = tmp_path / "dir.safetensors"
    d.mkdir()
    assert refused(d) == "is a directory"


def test_read_tensor_bytes(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
        "b": {"dtype": "U8", "shape": [2], "data_offsets": [3, 5]},  # in the middle: its size is end - begin
        "c": {"dtype": "U8", "shape": [4], "data_offsets": [5, 9]},
    }
    p = st(tmp_path, header, bytes(range(1, 10)))
    f = read_safetensors_header(p)
    assert read_tensor_bytes(f.tensors["b"], f.header_len) == b"\x04\x05"
    assert read_tensor_bytes(f.tensors["a"], f.header_len, limit=3) == b"\x01\x02\x03"
    assert read_tensor_bytes(f.tensors["b"], f.header_len, limit=2) == b"\x04\x05"
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["a"], f.header_len, limit=2)
    assert str(e.value) == f"{p}: tensor `a` is 3 bytes; portkit reads at most 2"
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["b"], f.header_len, limit=1)
    assert str(e.value) == f"{p}: tensor `b` is 2 bytes; portkit reads at most 1"
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["c"], f.header_len)
    assert str(e.value) == f"{p}: truncated tensor `c`"
    p.unlink()
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["b"], f.header_len)
    assert str(e.value) == f"{p}: no such file or directory"


# --------------------------------------------------------------------------- mutmut's survivors

LONG = "n" * 80 + "TAIL"  # a tensor name is the checkpoint's own text: messages keep 80 characters of it
CUT = "n" * 80


@pytest.mark.parametrize(
    "header,data,message",
    [
        (
            {LONG: {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}},
            b"\0",
            f"safetensors tensor `{CUT}`: unknown dtype 'F8'",
        ),
        (
            {LONG: {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}},
            b"\0",
            f"safetensors tensor `{CUT}`: shape must be a list of non-negative integers",
        ),
        (
            {LONG: {"dtype": "U8", "shape": [1] * 17, "data_offsets": [0, 1]}},
            b"\0",
            f"safetensors tensor `{CUT}`: 17 dimensions",
        ),
        (
            {LONG: {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}},
            b"\0",
            f"safetensors tensor `{CUT}`: data_offsets must be [begin, end] with begin <= end",
        ),
        (
            {LONG: {"dtype": "F32", "shape": [2], "data_offsets": [0, 7]}},
            b"\0" * 7,
            f"safetensors tensor `{CUT}`: F32 [2] needs 8 bytes, data_offsets span 7",
        ),
        (
            {LONG: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
            b"\0" * 7,
            f"truncated safetensors file: tensor `{CUT}` ends at byte 8 of a 7-byte data section",
        ),
        (
            {LONG: {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}},
            b"\0\0",
            f"safetensors tensor `{CUT}` starts at byte 1, expected 0 (gap or overlap)",
        ),
        # the dtype is the file's text too: 20 characters of it
        (
            {"t": {"dtype": "F" * 30, "shape": [1], "data_offsets": [0, 1]}},
            b"\0",
            f"safetensors tensor `t`: unknown dtype '{'F' * 20}'",
        ),
        (
            {"t": {"dtype": [1, 2, 3, 4, 5, 6, 7], "shape": [1], "data_offsets": [0, 1]}},
            b"\0",
            "safetensors tensor `t`: unknown dtype '[1, 2, 3, 4, 5, 6, 7'",
        ),
        # a span that does not start at 0: its length is end - begin
        (
            {
                "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                "t": {"dtype": "F32", "shape": [2], "data_offsets": [1, 8]},
            },
            b"\0" * 8,
            "safetensors tensor `t`: F32 [2] needs 8 bytes, data_offsets span 7",
        ),
    ],
    ids=[
        "dtype",
        "shape",
        "rank",
        "offsets",
        "span",
        "past the end",
        "gap",
        "long dtype",
        "dtype list",
        "span not at 0",
    ],
)
def test_long_names_are_cut_in_refusals(header: Any, data: bytes, message: str, tmp_path: Path) -> None:
    assert refused(st(tmp_path, header, data)) == message


def test_sixteen_dimensions_are_read(tmp_path: Path) -> None:
    f = read_safetensors_header(st(tmp_path, {"t": {"dtype": "U8", "shape": [1] * 16, "data_offsets": [0, 1]}}, b"\0"))
    assert f.tensors["t"].shape == (1,) * 16


def test_an_eight_byte_file_has_a_length_and_an_empty_header(tmp_path: Path) -> None:
    """Exactly the 8-byte length (0) is not "no header length": it is an empty header, which is not JSON."""
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", 0))
    assert refused(p) == "safetensors header: invalid JSON: Expecting value (line 1 column 1)"


@pytest.mark.parametrize("tail,accepted", [(b"  ", True), (b"\x0c", False), (b"X", False)])
def test_only_trailing_spaces_pad_the_header(tail: bytes, accepted: bool, tmp_path: Path) -> None:
    """Writers pad the header with spaces (the safetensors crate accepts them); any other trailing
    byte is not JSON whitespace and candle's serde_json refuses it."""
    p = st(tmp_path, None, raw=b"{}" + tail)
    if accepted:
        assert read_safetensors_header(p).tensors == {}
    else:
        assert refused(p).startswith("safetensors header: invalid JSON: Extra data (line 1 column 3)")


def test_a_file_that_shrinks_after_stat_is_refused_as_truncated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A download still being written: stat saw the whole header, the read gets less."""
    import os
    from types import SimpleNamespace

    p = st(tmp_path, {}, b"")
    real = os.stat(p).st_size
    p.write_bytes(p.read_bytes()[:9])  # the length says 2 header bytes, one is left
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: SimpleNamespace(st_size=real))
    assert refused(p) == "truncated safetensors header"


def test_the_header_length_is_unsigned(tmp_path: Path) -> None:
    """Every bit set is 2**64 - 1, refused by the cap (read as signed it would be -1, and pass it)."""
    p = tmp_path / "model.safetensors"
    p.write_bytes(b"\xff" * 8 + b"{}")
    assert (
        refused(p)
        == f"safetensors header length {2**64 - 1} exceeds portkit's cap of {100 * 1024 * 1024} bytes (hostile or "
        "corrupt file)"
    )
