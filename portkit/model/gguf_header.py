"""Read GGUF metadata and tensor infos with bounded reads (never gguf-py's memory map).

gguf-py's `GGUFReader` maps the whole file and builds numpy views of every field: a hostile
string or array count makes it allocate or loop for ever. This parser checks every count
against the bytes left in the file before using it (the same caps candle 0.11.0 applies in
`candle-core/src/quantized/gguf_file.rs:16-19,480-504`), keeps only small values in memory,
and records raw tensor type ids so a type candle cannot load becomes a finding, not a crash.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from portkit.errors import InputError
from portkit.model.jsonfile import _oserror

GGUF_MAX_STRING_LENGTH = 1 << 30
GGUF_MAX_ARRAY_ELEMENTS = 1 << 30
GGUF_MAX_TENSOR_DIMS = 4
GGUF_MAX_VALUE_DEPTH = 64
DEFAULT_ALIGNMENT = 32
KEEP_ARRAY = 4096  # arrays longer than this keep only their length (tokenizer vocabularies)
KEEP_STRING = 1 << 20

VALUE_TYPES = {
    0: ("U8", "<B", 1),
    1: ("I8", "<b", 1),
    2: ("U16", "<H", 2),
    3: ("I16", "<h", 2),
    4: ("U32", "<I", 4),
    5: ("I32", "<i", 4),
    6: ("F32", "<f", 4),
    7: ("BOOL", "<B", 1),
    8: ("STRING", None, 0),
    9: ("ARRAY", None, 0),
    10: ("U64", "<Q", 8),
    11: ("I64", "<q", 8),
    12: ("F64", "<d", 8),
}

# ggml type id -> (name, block size, bytes per block). From ggml.h / gguf-py constants.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}


@dataclass(frozen=True, slots=True)
class GgufValue:
    """One GGUF metadata value with its GGUF type."""

    type: str  # U32, F32, STRING, ARRAY, ...
    value: Any  # python value; for ARRAY a tuple of GgufValue or None when not kept
    elem_type: str | None = None
    length: int | None = None  # ARRAY length

    def __repr__(self) -> str:  # candle's Debug-ish: `U64(32)`
        if self.type == "ARRAY":
            return f"Array[{self.elem_type}; {self.length}]"
        return f"{self.type}({self.value!r})"


@dataclass(frozen=True, slots=True)
class GgufTensor:
    """One GGUF tensor info (name, ggml type, dims, offset); never its data."""

    name: str
    type_id: int
    dims: tuple[int, ...]  # GGUF order (ne0 first)
    offset: int

    @property
    def type_name(self) -> str:
        t = GGML_TYPES.get(self.type_id)
        return t[0] if t else f"type {self.type_id}"

    @property
    def shape(self) -> tuple[int, ...]:
        """Row-major shape, as candle and numpy see it (dims reversed)."""
        return tuple(reversed(self.dims))

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def nbytes(self) -> int | None:
        t = GGML_TYPES.get(self.type_id)
        if t is None or self.numel % t[1]:
            return None
        return self.numel // t[1] * t[2]


@dataclass(frozen=True, slots=True)
class GgufFile:
    """A GGUF file's header: metadata and tensor infos."""

    path: Path
    version: int
    file_size: int
    metadata: Mapping[str, GgufValue]
    tensors: Mapping[str, GgufTensor]
    data_offset: int

    def get(self, key: str) -> GgufValue | None:
        return self.metadata.get(key)


class _Reader:
    def __init__(self, path: Path, buf: Any, size: int, v1: bool) -> None:
        self.path = path
        self.buf = buf
        self.size = size
        self.pos = 0
        self.v1 = v1

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise InputError(
                self.path,
                f"truncated or hostile GGUF: {what} needs {n} bytes at offset {self.pos}, only {self.size - self.pos} "
                "remain",
            )

    def unpack(self, fmt: str, n: int, what: str) -> Any:
        self.need(n, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return v

    def length(self, what: str) -> int:
        return self.unpack("<I", 4, what) if self.v1 else self.unpack("<Q", 8, what)

    @property
    def prefix(self) -> int:
        return 4 if self.v1 else 8

    def string(self, what: str, keep: int = KEEP_STRING) -> str | None:
        n = self.length(what)
        if n > GGUF_MAX_STRING_LENGTH:
            raise InputError(self.path, f"hostile GGUF: {what} string length {n} exceeds {GGUF_MAX_STRING_LENGTH}")
        self.need(n, f"{what} string of {n} bytes")
        start = self.pos
        self.pos += n
        if n > keep:
            return None
        return bytes(self.buf[start : start + n]).decode("utf-8", errors="replace")

    def _skip_strings(self, n: int, what: str) -> None:
        """Skip `n` length-prefixed strings (a tokenizer vocabulary) without decoding them."""
        buf, size, pos = self.buf, self.size, self.pos
        fmt, pre = ("<I", 4) if self.v1 else ("<Q", 8)
        unpack_from = struct.unpack_from
        for i in range(n):
            if pos + pre > size:
                self.pos = pos
                self.need(pre, f"{what}[{i}] length")
            (ln,) = unpack_from(fmt, buf, pos)
            pos += pre + ln
            if ln > GGUF_MAX_STRING_LENGTH or pos > size:
                raise InputError(
                    self.path,
                    f"truncated or hostile GGUF: {what}[{i}] string length {ln} runs past the end of the file",
                )
        self.pos = pos

    def value(self, vtype: int, what: str, depth: int = 0) -> GgufValue:
        if depth > GGUF_MAX_VALUE_DEPTH:
            raise InputError(self.path, f"hostile GGUF: {what} nests arrays deeper than {GGUF_MAX_VALUE_DEPTH}")
        info = VALUE_TYPES.get(vtype)
        if info is None:
            raise InputError(self.path, f"corrupt GGUF: {what} has unknown value type {vtype}")
        name, fmt, size = info
        if fmt is not None:
            v = self.unpack(fmt, size, what)
            if name == "BOOL":
                if v not in (0, 1):
                    raise InputError(self.path, f"corrupt GGUF: {what} bool byte is {v}")
                v = bool(v)
            return GgufValue(name, v)
        if name == "STRING":
            return GgufValue("STRING", self.string(what))
        # ARRAY
        etype = self.unpack("<I", 4, f"{what} array type")
        einfo = VALUE_TYPES.get(etype)
        if einfo is None:
            raise InputError(self.path, f"corrupt GGUF: {what} array has unknown element type {etype}")
        n = self.length(f"{what} array length")
        if n > GGUF_MAX_ARRAY_ELEMENTS:
            raise InputError(self.path, f"hostile GGUF: {what} array length {n} exceeds {GGUF_MAX_ARRAY_ELEMENTS}")
        ename, efmt, esize = einfo
        min_size = esize if efmt else (self.prefix if ename == "STRING" else 4 + self.prefix)
        if n * min_size > self.size - self.pos:
            raise InputError(
                self.path,
                f"hostile GGUF: {what} array of {n} elements needs at least {n * min_size} bytes, only "
                f"{self.size - self.pos} remain",
            )
        keep = n <= KEEP_ARRAY
        if efmt is not None:
            if keep:
                vals = tuple(
                    GgufValue(ename, x if ename != "BOOL" else bool(x))
                    for x in struct.unpack_from(f"<{n}{efmt[1]}", self.buf, self.pos)
                )
            else:
                vals = None
            self.pos += n * esize
            return GgufValue("ARRAY", vals, ename, n)
        if ename == "STRING" and not keep:
            self._skip_strings(n, what)
            return GgufValue("ARRAY", None, ename, n)
        items: list[GgufValue] | None = [] if keep else None
        for i in range(n):
            v = (
                self.value(etype, f"{what}[{i}]", depth + 1)
                if ename == "ARRAY"
                else GgufValue("STRING", self.string(f"{what}[{i}]", KEEP_STRING if keep else 0))
            )
            if items is not None:
                items.append(v)
        return GgufValue("ARRAY", tuple(items) if items is not None else None, ename, n)


def read_gguf(path: Path) -> GgufFile:
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            if size < 8:
                raise InputError(path, f"truncated GGUF: {size} bytes")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                return _parse(path, mm, size)
    except OSError as e:
        raise InputError(path, _oserror(e)) from None
    except ValueError as e:  # mmap of an empty/special file
        raise InputError(path, f"cannot map GGUF file: {e}") from None


def _parse(path: Path, mm: Any, size: int) -> GgufFile:
    magic, version = struct.unpack_from("<II", mm, 0)
    if magic not in (0x46554747, 0x47475546):
        raise InputError(path, f"not a GGUF file (magic 0x{magic:08x})")
    if version not in (1, 2, 3):
        raise InputError(path, f"unsupported GGUF version {version}")
    r = _Reader(path, mm, size, v1=version == 1)
    r.pos = 8
    n_tensors = r.length("tensor count")
    n_kv = r.length("metadata count")
    if n_tensors > GGUF_MAX_ARRAY_ELEMENTS:
        raise InputError(path, f"hostile GGUF: tensor count {n_tensors} exceeds {GGUF_MAX_ARRAY_ELEMENTS}")
    if n_kv > GGUF_MAX_ARRAY_ELEMENTS:
        raise InputError(path, f"hostile GGUF: metadata count {n_kv} exceeds {GGUF_MAX_ARRAY_ELEMENTS}")
    need = n_kv * (r.prefix + 4 + 1) + n_tensors * (r.prefix + 4 + 4 + 8)
    if need > size - r.pos:
        raise InputError(
            path,
            f"truncated or hostile GGUF: header declares {n_tensors} tensors and {n_kv} metadata entries, "
            f"needs at least {need} bytes, only {size - r.pos} remain",
        )
    metadata: dict[str, GgufValue] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key #{i}", keep=65536)
        if key is None:
            raise InputError(path, f"hostile GGUF: metadata key #{i} is longer than 64 KiB")
        vtype = r.unpack("<I", 4, f"`{key[:60]}` value type")
        metadata[key] = r.value(vtype, f"`{key[:60]}`")
    tensors: dict[str, GgufTensor] = {}
    for i in range(n_tensors):
        name = r.string(f"tensor name #{i}", keep=65536)
        if name is None:
            raise InputError(path, f"hostile GGUF: tensor name #{i} is longer than 64 KiB")
        nd = r.unpack("<I", 4, f"tensor `{name[:60]}` dimension count")
        if nd > GGUF_MAX_TENSOR_DIMS:
            raise InputError(
                path,
                f"corrupt GGUF: tensor `{name[:60]}` has {nd} dimensions; candle 0.11.0 accepts at most "
                f"{GGUF_MAX_TENSOR_DIMS}",
            )
        fmt = "<I" if r.v1 else "<Q"
        dims = tuple(r.unpack(fmt, r.prefix, f"tensor `{name[:60]}` dims") for _ in range(nd))
        type_id = r.unpack("<I", 4, f"tensor `{name[:60]}` type")
        offset = r.unpack("<Q", 8, f"tensor `{name[:60]}` offset")
        tensors[name] = GgufTensor(name=name, type_id=type_id, dims=dims, offset=offset)
    align_v = metadata.get("general.alignment")
    alignment = DEFAULT_ALIGNMENT
    if align_v is not None and align_v.type in ("U8", "U16", "U32", "I8", "I16", "I32") and align_v.value >= 0:
        alignment = align_v.value
    if alignment == 0:
        raise InputError(path, "corrupt GGUF: `general.alignment` is 0")
    data_offset = -(-r.pos // alignment) * alignment
    for t in tensors.values():
        nb = t.nbytes
        if nb is not None and data_offset + t.offset + nb > size:
            raise InputError(
                path,
                f"truncated GGUF: tensor `{t.name[:60]}` needs {nb} bytes at offset {data_offset + t.offset}, "
                f"file has {size} bytes",
            )
    return GgufFile(
        path=path,
        version=version,
        file_size=size,
        metadata=MappingProxyType(metadata),
        tensors=MappingProxyType(tensors),
        data_offset=data_offset,
    )


def read_tensor_bytes(g: GgufFile, t: GgufTensor, limit: int = 64 * 1024 * 1024) -> bytes:
    """Bytes of one tensor (the Q/K layout rule and `rope_freqs` values only), bounded."""
    nb = t.nbytes
    if nb is None:
        raise InputError(g.path, f"tensor `{t.name}` has type {t.type_name}, whose size portkit does not know")
    if nb > limit:
        raise InputError(g.path, f"tensor `{t.name}` is {nb} bytes; portkit reads at most {limit}")
    try:
        with open(g.path, "rb") as f:
            f.seek(g.data_offset + t.offset)
            data = f.read(nb)
    except OSError as e:
        raise InputError(g.path, _oserror(e)) from None
    if len(data) != nb:
        raise InputError(g.path, f"truncated GGUF tensor `{t.name}`")
    return data
