"""`portkit.verify.arrayblob`: what verify's caches and the reference's pipe carry arrays in."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.verify.arrayblob import pack, unpack

ARRAYS = {
    "rows": np.arange(12, dtype=np.float32).reshape(3, 4),
    "empty": np.zeros((0, 5), np.float32),
    "f64": np.linspace(0, 1, 7),
    "ids": np.array([3, -1, 7], np.int64),
    "strided": np.arange(20, dtype=np.float32).reshape(4, 5)[:, 1:4],
}


def test_round_trip_keeps_names_order_dtypes_shapes_values_and_meta() -> None:
    meta, got = unpack(pack(ARRAYS, {"greedy": [1, 2]}))
    assert meta == {"greedy": [1, 2]} and list(got) == list(ARRAYS)
    for name, want in ARRAYS.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape and np.array_equal(got[name], want), name
    got["rows"][0, 0] = 9.0  # writable, and each array its own span of the blob
    assert got["rows"][0, 0] == 9.0 and got["empty"].size == 0 and got["f64"][0] == 0.0


def test_arrays_are_aligned_views_of_the_buffer_given() -> None:
    buf = bytearray(pack(ARRAYS))
    _, got = unpack(buf)
    assert all(a.flags.aligned and a.ctypes.data % a.itemsize == 0 for a in got.values())
    got["ids"][0] = 5  # no copy: the buffer itself changed
    assert unpack(buf)[1]["ids"][0] == 5


@pytest.mark.parametrize("cut", [1, 8, 40, -1])
def test_a_cut_blob_reads_as_none(cut: int) -> None:
    blob = pack(ARRAYS)
    assert unpack(blob[:cut]) is None


def test_only_the_asked_dtypes_are_read() -> None:
    blob = pack({"rows": ARRAYS["rows"]})
    assert unpack(blob, dtypes=("<f8",)) is None and unpack(blob, dtypes=("<f4",)) is not None
    with pytest.raises(ValueError, match="dtype"):
        pack({"big-endian": np.ones(2, ">f4")})
