"""Dump files: the porting kit's layout in safetensors (what `portkit reference` and the Rust
crate `portkit-dump` write), and the JSON dump format (`{"logits": [...], "greedy": [...]}`,
what `bench/baseline/llm_json.py` writes), read the same way.

Tensor data is read with numpy from the offsets of a header that `read_safetensors_header`
has validated (so bf16 needs no torch, and a malformed file is one line, never a traceback);
nothing is executed or unpickled.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from portkit import atomicfile
from portkit.families import sublayers
from portkit.verify.errors import BadInput, one_line

#: Reference-only: row k holds the reference's logits where it chose greedy token k (the
#: margin where a candidate's greedy tokens fork is read from it).
GREEDY_LOGITS = "greedy.logits"
TOKEN_NAMES = ("ids", "greedy")
#: Reference-only: `truth.<name>` is transformers in f64 less the f32 value of `<name>` (the
#: f32 reference's own error; compare's floors: docs/verify.md, "Tolerances")
TRUTH = "truth."
_LAYER = re.compile(r"layer\.(0|[1-9][0-9]*)")

_NUMPY_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}
MAX_JSON_BYTES = 2 * 1024**3
#: Called with a dump's tensor shapes before any tensor data is read (compare's check against
#: the reference): what a header claims never decides how much is read.
ShapeCheck = Callable[[dict[str, tuple[int, ...]]], None]
#: The largest token id a dump may hold (int64, what the layout stores ids as).
MAX_TOKEN_ID = 2**63 - 1


def is_hidden(name: str) -> bool:
    """`[T, hidden]` values between the layers: compared per layer."""
    return name in ("embeddings", "norm") or _LAYER.fullmatch(name) is not None


def is_per_layer(name: str) -> bool:
    return is_hidden(name) or sublayers.is_sublayer(name)


def known_name(name: str) -> bool:
    base = name.removeprefix(TRUTH)
    return name in TOKEN_NAMES or base in ("logits", GREEDY_LOGITS) or is_per_layer(base)


_SUB_RANK = {sub: i for i, sub in enumerate(sublayers.ROLES)}
#: after every sub-layer of a layer comes the layer itself
_LAYER_RANK = 1 << 30


def order_key(name: str, sub_order: Sequence[str] = ()) -> tuple[int, int, int, str]:
    """The layout's order: ids, embeddings, layer.0's sub-layers in computation order, layer.0,
    layer.1's, layer.1, ..., norm, logits, greedy. The computation order is `sub_order` (what
    the reference recorded, its `sublayers` metadata), else `sublayers.ROLES`' order (every
    family's: a test holds each family's `SUBLAYERS` to it), other names after those, by name.
    The reference's `truth.*` follow, in the same order."""
    if name.startswith(TRUTH):
        rank, layer, sub, _ = order_key(name.removeprefix(TRUTH), sub_order)
        return (10 + rank, layer, sub, name)
    m = _LAYER.fullmatch(name)
    if m:
        return (2, int(m.group(1)), _LAYER_RANK, name)
    split = sublayers.split(name)
    if split is not None:
        return (2, split[0], _sub_rank(split[1], sub_order), name)
    ranks = {"ids": 0, "embeddings": 1, "norm": 3, "logits": 4, "greedy": 5, GREEDY_LOGITS: 6}
    return (ranks.get(name, 7), 0, 0, name)


def _sub_rank(sub: str, sub_order: Sequence[str]) -> int:
    if sub in sub_order:
        return list(sub_order).index(sub)
    return len(sub_order) + _SUB_RANK.get(sub, len(_SUB_RANK))


def layout_order(metadata: Mapping[str, str] | None) -> Callable[[str], tuple[int, int, int, str]]:
    """`order_key` with the computation order a dump's metadata records (its `sublayers`: a JSON
    list of paths; anything else there is ignored, the file is anyone's)."""
    try:
        listed = json.loads((metadata or {}).get("sublayers", "[]"))
    except ValueError:
        listed = []
    sub_order = [s for s in listed if isinstance(s, str)] if isinstance(listed, list) else []
    return lambda name: order_key(name, sub_order)


def _fold(layers: list[int]) -> str:
    return f"layer.{layers[0]}" if len(layers) == 1 else f"layer.{layers[0]}..layer.{layers[-1]}"


def describe_names(names: list[str]) -> str:
    """`ids, embeddings, layer.0..layer.29, norm, logits`: runs of layers folded; sub-layers
    as one entry (`210 sub-layer values: input_layernorm, ..., mlp of layer.0..layer.29`: the kit's
    names in their order, other models' in the order `names` has them, a dump's layout order),
    and the reference's `truth.*` as one."""
    out: list[str] = []
    layers: list[str] = []
    truth = [n for n in names if n.startswith(TRUTH)]
    names = [n for n in names if not n.startswith(TRUTH)]
    subs = [s for s in (sublayers.split(n) for n in names) if s is not None]

    def flush() -> None:
        if layers:
            out.append(layers[0] if len(layers) == 1 else f"{layers[0]}..{layers[-1]}")
            layers.clear()

    for n in sorted(names, key=order_key):
        if _LAYER.fullmatch(n):
            layers.append(n)
        elif not sublayers.is_sublayer(n):
            flush()
            out.append(n)
    flush()
    if subs:
        kinds = list(dict.fromkeys(s for _, s in subs))
        if set(kinds) <= set(_SUB_RANK):  # the kit's names: their one computation order
            kinds.sort(key=_SUB_RANK.__getitem__)
        where = sorted({i for i, _ in subs})
        span = _fold(where) if where == list(range(where[0], where[-1] + 1)) else f"{len(where)} layers"
        out.append(f"{len(subs)} sub-layer values: {', '.join(kinds)} of {span}")
    if truth:
        out.append(f"{len(truth)} truth.* values (transformers in f64, less each f32 value)")
    return ", ".join(out)


@dataclass
class DumpFile:
    path: Path
    tensors: dict[str, np.ndarray]  # in the layout's order; floats as float32, tokens as int64
    metadata: dict[str, str] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)  # as stored: F32, BF16, ... (JSON: "json")
    kind: str = "safetensors"

    def names(self) -> list[str]:
        return list(self.tensors)

    def shapes(self) -> dict[str, list[int]]:
        return {k: list(v.shape) for k, v in self.tensors.items()}


def _bad(path: Path, what: str) -> BadInput:
    return BadInput(f"{path}: {what}")


def _decode(raw: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "BF16":  # the high half of a float32
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).reshape(shape)


def _as_layout(name: str, arr: np.ndarray) -> np.ndarray:
    if name in TOKEN_NAMES:
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise ValueError(f"`{name}` holds token ids but has non-integer values")
        if (
            arr.size
            and arr.dtype.kind in "fu"
            and not (arr.min() >= 0 and arr.max() <= (MAX_TOKEN_ID if arr.dtype.kind == "u" else 2.0**63 - 1024))
        ):
            raise ValueError(f"`{name}` holds token ids but has values out of range ({arr.min():g} to {arr.max():g})")
        return arr.astype(np.int64)
    # a value beyond float32's range becomes inf, which the comparison names as non-finite
    with np.errstate(over="ignore"):
        return arr.astype(np.float32)


def read_safetensors_dump(path: Path, check: ShapeCheck | None = None) -> DumpFile:
    from portkit.errors import InputError
    from portkit.model.safetensors_header import LfsPointer, read_safetensors_header

    try:
        header = read_safetensors_header(path)
    except InputError as e:
        raise BadInput(str(e)) from None
    except LfsPointer:
        raise _bad(path, "a Git LFS pointer, not a dump (git lfs pull)") from None
    start = 8 + header.header_len
    tensors: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for name, info in header.tensors.items():
        if info.dtype not in _NUMPY_DTYPES and info.dtype != "BF16":
            raise _bad(path, f"tensor `{name}` has dtype {info.dtype}; dumps hold F32, F16, BF16, F64 or integers")
    if check is not None:
        check({name: tuple(info.shape) for name, info in header.tensors.items()})
    with open(path, "rb") as f:
        for name in sorted(header.tensors, key=layout_order(header.metadata)):
            info = header.tensors[name]
            begin, end = info.data_offsets
            f.seek(start + begin)
            try:
                arr = _decode(f.read(end - begin), info.dtype, info.shape)
                tensors[name] = _as_layout(name, arr)
            except ValueError as e:
                raise _bad(path, f"tensor `{name}`: {e}") from None
            dtypes[name] = info.dtype
    return DumpFile(path, tensors, dict(header.metadata or {}), dtypes, "safetensors")


def read_json_dump(path: Path, text: str, check: ShapeCheck | None = None) -> DumpFile:
    """A JSON dump: one JSON object of (nested) number lists, e.g. `{"logits", "greedy"}`."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _bad(path, f"not a safetensors file, and not JSON either ({e})") from None
    if not isinstance(doc, dict):
        raise _bad(path, 'a JSON dump is an object of number lists, e.g. {"logits": [...], "greedy": [...]}')
    tensors: dict[str, np.ndarray] = {}
    for name in sorted(doc, key=order_key):
        value = doc[name]
        try:
            if isinstance(value, (str, dict, bool)) or value is None:
                raise ValueError("not a number list")
            arr = np.asarray(value, dtype=np.float64)
            if arr.dtype == object:
                raise ValueError("ragged lists")
            tensors[name] = _as_layout(name, arr)
        except OverflowError:  # an integer of hundreds of digits
            raise _bad(path, f"JSON field `{name}`: a number too large for a float") from None
        except (ValueError, TypeError) as e:
            raise _bad(path, f"JSON field `{name}`: {one_line(e, 200)}") from None
    if check is not None:
        check({k: tuple(v.shape) for k, v in tensors.items()})
    return DumpFile(path, tensors, {}, {k: "json" for k in tensors}, "json")


def read_dump(path: str | Path, check: ShapeCheck | None = None, max_json_bytes: int = MAX_JSON_BYTES) -> DumpFile:
    """A safetensors dump, or a JSON one (recognised by its first non-space byte `{`). `check`
    sees the tensor shapes before any safetensors data is read; a JSON dump is parsed whole, so
    `max_json_bytes` bounds it instead."""
    path = Path(path)
    try:
        if not path.is_file():
            raise _bad(path, "no such file" if not path.exists() else "not a file")
        with open(path, "rb") as f:
            head = f.read(64)
        if head.lstrip()[:1] == b"{":
            size = path.stat().st_size
            if size > max_json_bytes:
                what = (
                    "2 GiB"
                    if max_json_bytes == MAX_JSON_BYTES
                    else f"{max_json_bytes} bytes (what the reference's values could take as JSON)"
                )
                raise _bad(path, f"a JSON dump of {size} bytes, over {what}: write safetensors instead")
            return read_json_dump(path, path.read_text(encoding="utf-8"), check)
    except UnicodeDecodeError:
        raise _bad(path, "not a safetensors file, and not UTF-8 JSON either") from None
    except OSError as e:
        raise _bad(path, e.strerror or str(e)) from None
    return read_safetensors_dump(path, check)


_SAFETENSORS_DTYPES = {"float32": "F32", "float16": "F16", "int64": "I64"}


def _safetensors_chunks(
    tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str], dtypes: Mapping[str, str] | None = None
) -> list[bytes | memoryview]:
    """A safetensors file as the pieces it is written in: the 8-byte header length and the JSON
    header (padded with spaces so the data starts 8-aligned, as the safetensors library pads it),
    then a view of each array's bytes in the header's order, never copied into one buffer (a
    reference's values can be gigabytes; they are in memory once). `dtypes` names what numpy has
    no dtype for (F16 and BF16 as torch rounds them, held as their raw 16 bits)."""
    arrays = {
        name: np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False) for name, arr in tensors.items()
    }
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, arr in arrays.items():
        dtype = (dtypes or {}).get(name) or _SAFETENSORS_DTYPES[arr.dtype.name]
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return [struct.pack("<Q", len(text)) + text, *(arr.data.cast("B") for arr in arrays.values() if arr.nbytes)]


def write_reference(path: Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str], dtype: str) -> None:
    """The reference as safetensors: floats as `dtype` (f32; f16 and bf16 rounded by torch, which
    the reference side has loaded), token ids as int64. Written the way `portkit fix --write`
    writes (`portkit.atomicfile`): the file is the earlier one or the whole new one, and what a
    killed `reference` leaves beside it is removed by the next one writing there."""
    out: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for name, arr in tensors.items():
        if name in TOKEN_NAMES:
            out[name] = np.asarray(arr).astype(np.int64, copy=False)
        elif dtype in ("f16", "bf16"):
            import torch

            f32 = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
            out[name] = f32.to(torch.float16 if dtype == "f16" else torch.bfloat16).view(torch.int16).numpy()
            dtypes[name] = dtype.upper()
        else:
            out[name] = np.asarray(arr).astype(np.float32, copy=False)
    try:
        atomicfile.replace(path, _safetensors_chunks(out, metadata, dtypes))
    except OSError as e:
        raise _bad(path, e.strerror or one_line(e, 200)) from None
