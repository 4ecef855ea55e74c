"""Counterfactual GGUF files: a copy of a GGUF with one thing repaired, for `verify --gguf`.

candle's `quantized_llama` reads only a file path, so the "fixed" side of a GGUF finding is a
temporary GGUF: metadata keys set (e.g. `llama.rope.freq_base` restored from config.json) or
the Q/K rows permuted the way llama.cpp's converter does for interleaved RoPE. Tensor data is
copied as stored (quantized blocks included): a row permutation moves whole rows of blocks,
so nothing is requantized.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

_Q = re.compile(r"^blk\.\d+\.attn_q\.(weight|bias)$")
_K = re.compile(r"^blk\.\d+\.attn_k\.(weight|bias)$")


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute` on the first axis (rows), for any row layout (floats
    or a row of quantized blocks): HF's rotate_half pairs become interleaved neighbours."""
    return np.ascontiguousarray(
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def _typed(gguf: Any, value: Any) -> tuple[Any, Any]:
    T = gguf.GGUFValueType
    if isinstance(value, bool):
        return value, T.BOOL
    if isinstance(value, int):
        return value, T.UINT32
    if isinstance(value, float):
        return value, T.FLOAT32
    if isinstance(value, str):
        return value, T.STRING
    raise TypeError(f"cannot write GGUF metadata value {value!r}")


def read_metadata(path: Path) -> dict[str, Any]:
    import gguf

    r = gguf.GGUFReader(str(path))
    return {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}


def tensor_types(path: Path) -> dict[str, int]:
    """Count of tensors per GGML type name (F32, Q8_0, ...)."""
    import gguf

    out: dict[str, int] = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        name = gguf.GGMLQuantizationType(t.tensor_type).name
        out[name] = out.get(name, 0) + 1
    return out


def weight_types(path: Path) -> dict[str, int]:
    """Like `tensor_types`, over the 2-D weight tensors only (norms stay F32 in every file)."""
    import gguf

    out: dict[str, int] = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        if len(t.shape) < 2:
            continue
        name = gguf.GGMLQuantizationType(t.tensor_type).name
        out[name] = out.get(name, 0) + 1
    return out


def apply_edit(src: Path, dst: Path, edit: Mapping[str, Any]) -> Path:
    """`src` with a GGUF edit applied, written to `dst`: metadata keys set (None: removed), and
    `PERMUTE_QK` the Q/K rows permuted."""
    from portkit.semantics.gguf import PERMUTE_QK

    meta = {k: v for k, v in edit.items() if k != PERMUTE_QK and v is not None}
    drop = tuple(k for k, v in edit.items() if k != PERMUTE_QK and v is None)
    return rewrite_gguf(src, dst, set_meta=meta, drop_meta=drop, permute_qk=bool(edit.get(PERMUTE_QK)))


def rewrite_gguf(
    src: Path,
    dst: Path,
    *,
    set_meta: Mapping[str, Any] | None = None,
    drop_meta: tuple[str, ...] = (),
    permute_qk: bool = False,
) -> Path:
    import gguf

    reader = gguf.GGUFReader(str(src))
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    from portkit.semantics.gguf import QUANTIZED_LLAMA_ARCH

    arch = str(fields["general.architecture"].contents()) if "general.architecture" in fields else QUANTIZED_LLAMA_ARCH
    writer = gguf.GGUFWriter(str(dst), arch)  # writes general.architecture itself
    for name, f in fields.items():
        if name == "general.architecture" or name in drop_meta or (set_meta and name in set_meta):
            continue
        main = f.types[0]
        sub = f.types[-1] if main == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, f.contents(), main, sub)
    for name, value in (set_meta or {}).items():
        v, t = _typed(gguf, value)
        writer.add_key_value(name, v, t)

    def md(key: str) -> int | None:
        f = fields.get(f"{arch}.{key}") or fields.get(f"llama.{key}")
        return int(f.contents()) if f is not None else None

    n_head = md("attention.head_count")
    n_kv = md("attention.head_count_kv") or n_head
    for t in reader.tensors:
        data = np.asarray(t.data)
        if permute_qk and n_head and _Q.match(t.name):
            data = permute_rows(data, n_head)
        elif permute_qk and n_kv and _K.match(t.name):
            data = permute_rows(data, n_kv)
        writer.add_tensor(t.name, np.ascontiguousarray(data), raw_dtype=gguf.GGMLQuantizationType(t.tensor_type))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst
