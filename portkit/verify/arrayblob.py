"""Named arrays and a JSON document as one blob: how verify's caches store an entry and how the
reference's child and verify pass arrays through their pipes.

    [u64 little-endian: header length][header: JSON {"meta": ..., "arrays": [[name, dtype, shape], ...]}]
    then each array's bytes (C order, little-endian), each starting at a multiple of 64 bytes

One JSON header instead of np.savez's zip member per array: a reference answer holds ~480
arrays, and reading each member's own header (a Python literal, parsed) took 0.04-0.06 s of
every answer and cache entry read. `unpack` returns writable views of the blob (copied
once unless it is writable already; never a copy per array), and refuses anything `pack` could not have written: a dtype
outside
`DTYPES`, a shape that is not a list of non-negative integers, sizes that do not add up to the
blob's exact length, padding that is not zeros. Nothing a blob says can make it allocate more than the blob itself.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

_LENGTH = struct.Struct("<Q")
_ALIGN = 64
#: the dtypes a blob may hold: plain little-endian numbers, never objects
DTYPES = ("<f4", "<f8", "<i8", "<i4", "|u1")


def pack(arrays: Mapping[str, np.ndarray], meta: Any = None) -> bytes:
    """`arrays` (each in one of `DTYPES`) and the JSON document `meta`, as one blob."""
    parts: list[Any] = []
    index = []
    for name, value in arrays.items():
        a = np.ascontiguousarray(value)
        if a.dtype.str not in DTYPES:
            raise ValueError(f"arrayblob: {name} has dtype {a.dtype.str}, not one of {DTYPES}")
        index.append([name, a.dtype.str, list(a.shape)])
        parts.append(a)
    header = json.dumps({"meta": meta, "arrays": index}).encode()
    out: list[Any] = [_LENGTH.pack(len(header)), header]
    end = _LENGTH.size + len(header)
    for a in parts:
        pad = -end % _ALIGN
        out.append(b"\0" * pad)
        out.append(memoryview(a).cast("B") if a.nbytes else b"")
        end += pad + a.nbytes
    return b"".join(out)


def unpack(
    blob: bytes | bytearray | memoryview, dtypes: Collection[str] = DTYPES
) -> tuple[Any, dict[str, np.ndarray]] | None:
    """(meta, arrays) of a blob `pack` wrote with arrays in `dtypes`, or None for anything else."""
    writable = isinstance(blob, bytearray) or (
        isinstance(blob, memoryview) and not blob.readonly and blob.format == "B"
    )
    buf = blob if writable else bytearray(blob)
    if len(buf) < _LENGTH.size:
        return None
    (n,) = _LENGTH.unpack_from(buf)
    if n > len(buf) - _LENGTH.size:
        return None
    try:
        header = json.loads(bytes(buf[_LENGTH.size : _LENGTH.size + n]))
    except (ValueError, RecursionError):
        return None
    index = header.get("arrays") if isinstance(header, dict) else None
    if not isinstance(index, list):
        return None
    arrays: dict[str, np.ndarray] = {}
    end = _LENGTH.size + n
    for entry in index:
        if not (isinstance(entry, list) and len(entry) == 3):
            return None
        name, dtype, shape = entry
        if not isinstance(name, str) or name in arrays or dtype not in dtypes or dtype not in DTYPES:
            return None
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            return None
        start = end + (-end % _ALIGN)
        if start > len(buf) or any(buf[end:start]):  # `pack` pads with zeros
            return None
        count = 1
        for d in shape:
            count *= d
        end = start + count * np.dtype(dtype).itemsize
        if end > len(buf):  # checked before anything of this size exists
            return None
        arrays[name] = np.frombuffer(buf, dtype=dtype, count=count, offset=start).reshape(shape)
    if end != len(buf):
        return None
    return header.get("meta"), arrays
