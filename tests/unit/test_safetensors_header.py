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
        ({"t": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: unknown dtype 'F8'"),
        ({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: unknown dtype '5'"),
        ({"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: shape must be a list of non-negative integers"),
        ({"t": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: shape must be a list of non-negative integers"),
        ({"t": {"dtype": "U8", "shape": [2**63], "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: shape must be a list of non-negative integers"),
        ({"t": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: shape must be a list of non-negative integers"),
        ({"t": {"dtype": "U8", "shape": [1] * 17, "data_offsets": [0, 1]}}, b"\0", "safetensors tensor `t`: 17 dimensions"),
        ({"t": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}, b"\0", "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end"),
        ({"t": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}}, b"\0", "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end"),
        ({"t": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}}, b"\0", "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end"),
        ({"t": {"dtype": "U8", "shape": [1], "data_offsets": [False, True]}}, b"\0", "safetensors tensor `t`: data_offsets must be [begin, end] with begin <= end"),
        ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 7]}}, b"\0" * 7, "safetensors tensor `t`: F32 [2] needs 8 bytes, data_offsets span 7"),
        ({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 7, "truncated safetensors file: tensor `t` ends at byte 8 of a 7-byte data section"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}, b"\0\0", "safetensors tensor `a` starts at byte 1, expected 0 (gap or overlap)"),
        ({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"\0" * 3,
         "safetensors tensor `b` starts at byte 1, expected 2 (gap or overlap)"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\0\0", "safetensors data section is 2 bytes but the tensors cover 1"),
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
    with pytest.raises(InputError, match=r"dir\.safetensors: "):
        read_safetensors_header(d)


def test_read_tensor_bytes(tmp_path: Path) -> None:
    header = {"a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [3, 5]}}
    p = st(tmp_path, header, b"\x01\x02\x03\x04\x05")
    f = read_safetensors_header(p)
    assert read_tensor_bytes(f.tensors["b"], f.header_len) == b"\x04\x05"
    assert read_tensor_bytes(f.tensors["a"], f.header_len, limit=3) == b"\x01\x02\x03"
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["a"], f.header_len, limit=2)
    assert str(e.value) == f"{p}: tensor `a` is 3 bytes; portkit reads at most 2"
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f.tensors["b"], f.header_len)
    assert str(e.value) == f"{p}: truncated tensor `b`"
    p.unlink()
    with pytest.raises(InputError, match=r"model\.safetensors: "):
        read_tensor_bytes(f.tensors["b"], f.header_len)
