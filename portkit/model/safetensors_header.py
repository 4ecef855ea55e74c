"""Read a safetensors header (never tensor data), with bounded memory.

Layout: an 8-byte little-endian header length N, N bytes of JSON
`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`, then data.
A hostile N (2**60) or a truncated file is refused before anything is allocated.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from portkit.errors import InputError
from portkit.model.jsonfile import _oserror, parse_json_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_HEADER_BYTES = 100 * 1024 * 1024
LFS_PREFIX = b"version https://git-lfs"

# bytes per element; sub-byte types are counted in bits below
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "F4": 4,
}


class LfsPointer(Exception):
    """The file is a Git LFS pointer, not the weights: skip it, never an error."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor of a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    data_offsets: tuple[int, int]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class SafetensorsFile:
    """A safetensors file's header (the 8-byte length and the JSON), never its data."""

    path: Path
    header_len: int
    file_size: int
    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str] | None


def read_safetensors_header(path: Path, max_header: int = MAX_HEADER_BYTES) -> SafetensorsFile:
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if head[:8] == LFS_PREFIX[:8] and (head + f.read(len(LFS_PREFIX) - 8)).startswith(LFS_PREFIX):
                raise LfsPointer(str(path))
            if len(head) < 8:
                raise InputError(path, f"truncated safetensors file: {size} bytes, no 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > max_header:
                raise InputError(
                    path,
                    f"safetensors header length {n} exceeds portkit's cap of {max_header} bytes (hostile or corrupt "
                    "file)",
                )
            if n > size - 8:
                raise InputError(
                    path, f"truncated safetensors file: header length {n} but only {size - 8} bytes follow"
                )
            f.seek(8)
            raw = f.read(n)
    except OSError as e:
        raise InputError(path, _oserror(e)) from None
    if len(raw) != n:
        raise InputError(path, "truncated safetensors header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "safetensors header is not UTF-8") from None
    try:
        hdr, _dups = parse_json_text(text.rstrip(" "))
    except ValueError as e:
        raise InputError(path, f"safetensors header: {e}") from None
    if not isinstance(hdr, dict):
        raise InputError(path, "safetensors header is not a JSON object")
    data_len = size - 8 - n
    meta = hdr.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise InputError(path, "safetensors `__metadata__` must map strings to strings")
    tensors: dict[str, TensorInfo] = {}
    for name, info in hdr.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(path, name, info, data_len)
    # The safetensors crate (which candle uses) requires the tensors to tile the data section.
    end = 0
    for t in sorted(tensors.values(), key=lambda t: t.data_offsets):
        if t.data_offsets[0] != end:
            raise InputError(
                path,
                f"safetensors tensor `{t.name[:80]}` starts at byte {t.data_offsets[0]}, expected {end} (gap or "
                "overlap)",
            )
        end = t.data_offsets[1]
    if end != data_len:
        raise InputError(path, f"safetensors data section is {data_len} bytes but the tensors cover {end}")
    return SafetensorsFile(
        path=path,
        header_len=n,
        file_size=size,
        tensors=MappingProxyType(tensors),
        metadata=MappingProxyType(dict(meta)) if isinstance(meta, dict) else None,
    )


def _tensor(path: Path, name: str, info: object, data_len: int) -> TensorInfo:
    if not isinstance(info, dict):
        raise InputError(path, f"safetensors tensor `{name[:80]}`: entry is not an object")
    dtype = info.get("dtype")
    shape = info.get("shape")
    offs = info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise InputError(path, f"safetensors tensor `{name[:80]}`: unknown dtype {str(dtype)[:20]!r}")
    if not (
        isinstance(shape, list)
        and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63 for d in shape)
    ):
        raise InputError(path, f"safetensors tensor `{name[:80]}`: shape must be a list of non-negative integers")
    if len(shape) > 16:
        raise InputError(path, f"safetensors tensor `{name[:80]}`: {len(shape)} dimensions")
    if not (
        isinstance(offs, list)
        and len(offs) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
        and 0 <= offs[0] <= offs[1]
    ):
        raise InputError(path, f"safetensors tensor `{name[:80]}`: data_offsets must be [begin, end] with begin <= end")
    numel = 1
    for d in shape:
        numel *= d
    nbits = numel * DTYPE_BITS[dtype]
    need = (nbits + 7) // 8
    if offs[1] - offs[0] != need:
        raise InputError(
            path,
            f"safetensors tensor `{name[:80]}`: {dtype} {shape} needs {need} bytes, data_offsets span "
            f"{offs[1] - offs[0]}",
        )
    if offs[1] > data_len:
        raise InputError(
            path,
            f"truncated safetensors file: tensor `{name[:80]}` ends at byte {offs[1]} "
            f"of a {data_len}-byte data section",
        )
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), file=path, data_offsets=(offs[0], offs[1]))


def read_tensor_bytes(t: TensorInfo, header_len: int, limit: int = 64 * 1024 * 1024) -> bytes:
    """Read one tensor's raw bytes (used only by the GGUF Q/K layout rule), bounded."""
    begin, end = t.data_offsets
    if end - begin > limit:
        raise InputError(t.file, f"tensor `{t.name}` is {end - begin} bytes; portkit reads at most {limit}")
    try:
        with open(t.file, "rb") as f:
            f.seek(8 + header_len + begin)
            data = f.read(end - begin)
    except OSError as e:
        raise InputError(t.file, _oserror(e)) from None
    if len(data) != end - begin:
        raise InputError(t.file, f"truncated tensor `{t.name}`")
    return data
