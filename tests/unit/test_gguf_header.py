"""portkit's GGUF header reader, byte by byte: every value it keeps and every refusal, word for word.

Files are built here from raw bytes, so each test knows the offset and the count the reader
must report. Refusals are compared whole (`path: message`), because the message is what a
user of `portkit lint` gets instead of a traceback.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from portkit.errors import InputError
from portkit.model import gguf_header
from portkit.model.gguf_header import GgufTensor, GgufValue, read_gguf, read_tensor_bytes

VT = {"U8": 0, "I8": 1, "U16": 2, "I16": 3, "U32": 4, "I32": 5, "F32": 6, "BOOL": 7, "STRING": 8, "ARRAY": 9, "U64": 10, "I64": 11, "F64": 12}


class G:
    """A GGUF file assembled from parts, with the version's length width."""

    def __init__(self, version: int = 3) -> None:
        self.version = version
        self.kvs: list[bytes] = []
        self.tensors: list[bytes] = []

    def n(self, v: int) -> bytes:
        return struct.pack("<I" if self.version == 1 else "<Q", v)

    def s(self, text: str | bytes) -> bytes:
        b = text.encode() if isinstance(text, str) else text
        return self.n(len(b)) + b

    def kv(self, key: str | bytes, vtype: str | int, payload: bytes) -> G:
        self.kvs.append(self.s(key) + struct.pack("<I", VT[vtype] if isinstance(vtype, str) else vtype) + payload)
        return self

    def tensor(self, name: str | bytes, dims: tuple[int, ...], type_id: int, offset: int) -> G:
        self.tensors.append(self.s(name) + struct.pack("<I", len(dims)) + b"".join(self.n(d) for d in dims) + struct.pack("<IQ", type_id, offset))
        return self

    def bytes(self, n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
        nt = len(self.tensors) if n_tensors is None else n_tensors
        nk = len(self.kvs) if n_kv is None else n_kv
        return b"GGUF" + struct.pack("<I", self.version) + self.n(nt) + self.n(nk) + b"".join(self.kvs) + b"".join(self.tensors)


def write(tmp_path: Path, data: bytes, name: str = "x.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def refused(p: Path) -> str:
    with pytest.raises(InputError) as e:
        read_gguf(p)
    prefix = f"{p}: "
    assert str(e.value).startswith(prefix)
    return str(e.value)[len(prefix) :]


# --------------------------------------------------------------------------- what it keeps


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_scalar_type_is_read_with_its_value(version: int, tmp_path: Path) -> None:
    g = G(version)
    values = {"U8": 250, "I8": -5, "U16": 65000, "I16": -300, "U32": 4_000_000_000, "I32": -70000, "F32": 1.5, "U64": 2**40, "I64": -(2**40), "F64": 0.1}
    fmts = {"U8": "<B", "I8": "<b", "U16": "<H", "I16": "<h", "U32": "<I", "I32": "<i", "F32": "<f", "U64": "<Q", "I64": "<q", "F64": "<d"}
    for t, v in values.items():
        g.kv(f"k.{t}", t, struct.pack(fmts[t], v))
    g.kv("k.true", "BOOL", b"\x01").kv("k.false", "BOOL", b"\x00").kv("k.str", "STRING", g.s("héllo"))
    f = read_gguf(write(tmp_path, g.bytes()))
    assert f.version == version and f.tensors == {}
    for t, v in values.items():
        assert f.metadata[f"k.{t}"] == GgufValue(t, v)
    assert f.metadata["k.true"] == GgufValue("BOOL", True) and f.metadata["k.false"] == GgufValue("BOOL", False)
    assert f.get("k.str") == GgufValue("STRING", "héllo") and f.get("nope") is None
    assert list(f.metadata) == [*(f"k.{t}" for t in values), "k.true", "k.false", "k.str"]
    assert repr(f.metadata["k.U64"]) == "U64(1099511627776)"
    assert f.file_size == len(g.bytes())


def test_arrays_of_strings_and_of_arrays(tmp_path: Path) -> None:
    g = G()
    words = g.n(2) + g.s("a") + g.s("bc")
    inner = struct.pack("<I", VT["U8"]) + g.n(2) + b"\x07\x08"
    nested = struct.pack("<I", VT["ARRAY"]) + g.n(2) + inner + inner
    g.kv("words", "ARRAY", struct.pack("<I", VT["STRING"]) + words).kv("nested", "ARRAY", nested)
    f = read_gguf(write(tmp_path, g.bytes()))
    w = f.metadata["words"]
    assert (w.type, w.elem_type, w.length) == ("ARRAY", "STRING", 2)
    assert w.value == (GgufValue("STRING", "a"), GgufValue("STRING", "bc"))
    assert repr(w) == "Array[STRING; 2]"
    n = f.metadata["nested"]
    assert n.elem_type == "ARRAY" and n.length == 2
    assert [tuple(x.value for x in a.value) for a in n.value] == [(7, 8), (7, 8)]


def test_long_arrays_keep_only_their_length(tmp_path: Path) -> None:
    n = gguf_header.KEEP_ARRAY + 1
    g = G()
    strings = b"".join(g.s("t" * (i % 3)) for i in range(n))
    g.kv("tokens", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + strings)
    g.kv("after", "U32", struct.pack("<I", 9))  # read from the right offset after the skip
    f = read_gguf(write(tmp_path, g.bytes()))
    assert f.metadata["tokens"] == GgufValue("ARRAY", None, "STRING", n)
    assert f.metadata["after"].value == 9
    # an array of arrays that long keeps no items either, and still reads past them
    g = G()
    empty = struct.pack("<I", VT["U8"]) + g.n(0)
    g.kv("arrs", "ARRAY", struct.pack("<I", VT["ARRAY"]) + g.n(n) + empty * n).kv("after", "U8", b"\x05")
    f = read_gguf(write(tmp_path, g.bytes()))
    assert f.metadata["arrs"] == GgufValue("ARRAY", None, "ARRAY", n) and f.metadata["after"].value == 5


def test_a_long_string_keeps_no_text(tmp_path: Path) -> None:
    keep = gguf_header.KEEP_STRING
    g = G()
    g.kv("short", "STRING", g.s("a" * keep))
    g.kv("long", "STRING", g.s("b" * (keep + 1)))
    g.kv("after", "U8", b"\x03")
    f = read_gguf(write(tmp_path, g.bytes()))
    assert f.metadata["short"].value == "a" * keep and f.metadata["long"].value is None and f.metadata["after"].value == 3


def test_tensors_dims_type_offset_and_the_data_offset(tmp_path: Path) -> None:
    g = G()
    g.tensor("a", (4, 2), 0, 0)  # F32 [2, 4] row-major: 32 bytes
    g.tensor("q", (64,), 8, 32)  # Q8_0: 2 blocks of 34
    g.tensor("odd", (3,), 8, 128)  # 3 elements in 32-element blocks: no size
    g.tensor("unknown", (2,), 99, 160)
    head = g.bytes()
    data_offset = -(-len(head) // 32) * 32
    f = read_gguf(write(tmp_path, head + b"\0" * (data_offset - len(head)) + b"\0" * 200))
    assert f.data_offset == data_offset
    a, q, odd, unknown = (f.tensors[k] for k in ("a", "q", "odd", "unknown"))
    assert a == GgufTensor(name="a", type_id=0, dims=(4, 2), offset=0)
    assert (a.shape, a.numel, a.nbytes, a.type_name) == ((2, 4), 8, 32, "F32")
    assert (q.type_name, q.nbytes, q.offset) == ("Q8_0", 68, 32)
    assert odd.nbytes is None and unknown.nbytes is None and unknown.type_name == "type 99"


@pytest.mark.parametrize(
    "vtype,payload,data_offset_align",
    [
        ("U32", struct.pack("<I", 64), 64),
        ("U8", struct.pack("<B", 16), 16),
        ("I32", struct.pack("<i", 64), 64),
        ("I32", struct.pack("<i", -64), 32),  # negative: the default
        ("F32", struct.pack("<f", 64.0), 32),  # not an integer type: the default
        ("U64", struct.pack("<Q", 64), 32),  # candle reads it as u32 only
    ],
)
def test_general_alignment(vtype: str, payload: bytes, data_offset_align: int, tmp_path: Path) -> None:
    g = G().kv("general.alignment", vtype, payload)
    head = g.bytes()
    f = read_gguf(write(tmp_path, head))
    assert f.data_offset == -(-len(head) // data_offset_align) * data_offset_align


def test_a_tensor_ending_at_the_last_byte_fits_and_one_more_does_not(tmp_path: Path) -> None:
    g = G().kv("general.alignment", "U32", struct.pack("<I", 8)).tensor("a", (4,), 0, 8)
    head = g.bytes()
    base = -(-len(head) // 8) * 8
    exact = head + b"\0" * (base - len(head)) + b"\0" * (8 + 16)
    assert read_gguf(write(tmp_path, exact)).tensors["a"].nbytes == 16
    p = write(tmp_path, exact[:-1])
    assert refused(p) == f"truncated GGUF: tensor `a` needs 16 bytes at offset {base + 8}, file has {len(exact) - 1} bytes"


# --------------------------------------------------------------------------- refusals, word for word


def _refusals() -> list[tuple[str, bytes, str]]:
    cap = gguf_header.GGUF_MAX_ARRAY_ELEMENTS
    g = G()
    cases = [
        ("magic", b"NOPE" + struct.pack("<I", 3) + b"\0" * 16, "not a GGUF file (magic 0x45504f4e)"),
        ("version 0", b"GGUF" + struct.pack("<I", 0) + b"\0" * 16, "unsupported GGUF version 0"),
        ("version 4", b"GGUF" + struct.pack("<I", 4) + b"\0" * 16, "unsupported GGUF version 4"),
        ("tensor count", G().bytes(n_tensors=cap + 1), f"hostile GGUF: tensor count {cap + 1} exceeds {cap}"),
        ("metadata count", G().bytes(n_kv=cap + 1), f"hostile GGUF: metadata count {cap + 1} exceeds {cap}"),
        ("declared counts", G().bytes(n_tensors=1, n_kv=2) + b"\0" * 40,
         "truncated or hostile GGUF: header declares 1 tensors and 2 metadata entries, needs at least 50 bytes, only 40 remain"),
        ("no counts", b"GGUF" + struct.pack("<I", 3) + b"\0" * 12,
         "truncated or hostile GGUF: metadata count needs 8 bytes at offset 16, only 4 remain"),
        ("key string", G().bytes(n_kv=1) + g.n(2**30 + 1) + b"\0" * 8,
         f"hostile GGUF: metadata key #0 string length {2**30 + 1} exceeds {2**30}"),
        ("key past the end", G().bytes(n_kv=1) + g.n(10) + b"k" * 5,
         "truncated or hostile GGUF: metadata key #0 string of 10 bytes needs 10 bytes at offset 32, only 5 remain"),
        ("key over 64 KiB", G().kv("k" * 65537, "U8", b"\0").bytes(), "hostile GGUF: metadata key #0 is longer than 64 KiB"),
        ("value type", G().kv("k", 13, b"\0" * 8).bytes(), "corrupt GGUF: `k` has unknown value type 13"),
        ("bool byte", G().kv("flag", "BOOL", b"\x02").bytes(), "corrupt GGUF: `flag` bool byte is 2"),
        ("scalar past the end", G().kv("k", "U64", b"\0" * 7).bytes(), "truncated or hostile GGUF: `k` needs 8 bytes at offset 37, only 7 remain"),
        ("array type", G().kv("k", "ARRAY", struct.pack("<I", 13) + b"\0" * 8).bytes(), "corrupt GGUF: `k` array has unknown element type 13"),
        ("array length", G().kv("k", "ARRAY", struct.pack("<I", 0) + g.n(cap + 1)).bytes(), f"hostile GGUF: `k` array length {cap + 1} exceeds {cap}"),
        ("tensor name over 64 KiB", G().tensor("t" * 65537, (1,), 0, 0).bytes(), "hostile GGUF: tensor name #0 is longer than 64 KiB"),
        ("tensor dims", G().tensor("t", (1, 1, 1, 1, 1), 0, 0).bytes(), "corrupt GGUF: tensor `t` has 5 dimensions; candle 0.11.0 accepts at most 4"),
        ("alignment 0", G().kv("general.alignment", "U32", struct.pack("<I", 0)).bytes(), "corrupt GGUF: `general.alignment` is 0"),
    ]
    # a string array whose element runs past the end, in the long (skipped) form
    n = gguf_header.KEEP_ARRAY + 1
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(50) + b"y" * 10
    cases.append(("skipped string", G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes(),
                  f"truncated or hostile GGUF: `tok`[{n - 1}] string length 50 runs past the end of the file"))
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(2**30 + 1)
    cases.append(("skipped string over the cap", G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes() + b"\0" * 8,
                  f"truncated or hostile GGUF: `tok`[{n - 1}] string length {2**30 + 1} runs past the end of the file"))
    return cases


@pytest.mark.parametrize("data,message", [(d, m) for _, d, m in _refusals()], ids=[c[0] for c in _refusals()])
def test_refusal_messages(data: bytes, message: str, tmp_path: Path) -> None:
    assert refused(write(tmp_path, data)) == message


def test_skipped_strings_missing_their_last_length_prefix(tmp_path: Path) -> None:
    g = G()
    n = gguf_header.KEEP_ARRAY + 1
    # enough bytes in all for n length prefixes (the first string is long), but the last
    # prefix is cut in half
    body = g.s("x" * 100) + b"".join(g.s("") for _ in range(n - 2)) + b"\0" * 4
    data = G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes()
    offset = len(data) - 4
    assert refused(write(tmp_path, data)) == f"truncated or hostile GGUF: `tok`[{n - 1}] length needs 8 bytes at offset {offset}, only 4 remain"


def test_arrays_nested_past_the_depth_cap(tmp_path: Path) -> None:
    g = G()
    depth = gguf_header.GGUF_MAX_VALUE_DEPTH + 1
    payload = b"".join(struct.pack("<I", VT["ARRAY"]) + g.n(1) for _ in range(depth)) + struct.pack("<I", VT["U8"]) + g.n(0)
    msg = refused(write(tmp_path, G().kv("deep", "ARRAY", payload).bytes()))
    assert msg == "hostile GGUF: `deep`" + "[0]" * depth + " nests arrays deeper than 64"
    # one level less is read
    ok = b"".join(struct.pack("<I", VT["ARRAY"]) + g.n(1) for _ in range(depth - 1)) + struct.pack("<I", VT["U8"]) + g.n(0)
    assert read_gguf(write(tmp_path, G().kv("deep", "ARRAY", ok).bytes())).metadata["deep"].length == 1


def test_short_and_unreadable_files(tmp_path: Path) -> None:
    for size in (0, 7):
        assert refused(write(tmp_path, b"GGUF\x03\0\0"[:size])) == f"truncated GGUF: {size} bytes"
    d = tmp_path / "dir.gguf"
    d.mkdir()
    with pytest.raises(InputError, match=r"dir\.gguf: "):
        read_gguf(d)


# --------------------------------------------------------------------------- tensor bytes


def test_read_tensor_bytes_reads_exactly_the_tensor(tmp_path: Path) -> None:
    g = G().tensor("a", (2,), 0, 0).tensor("b", (3,), 0, 32)
    head = g.bytes()
    base = -(-len(head) // 32) * 32
    a = struct.pack("<2f", 1.0, 2.0)
    b = struct.pack("<3f", 3.0, 4.0, 5.0)
    data = head + b"\0" * (base - len(head)) + a + b"\xff" * (32 - len(a)) + b
    f = read_gguf(write(tmp_path, data))
    assert read_tensor_bytes(f, f.tensors["a"]) == a
    assert read_tensor_bytes(f, f.tensors["b"]) == b
    assert read_tensor_bytes(f, f.tensors["b"], limit=12) == b  # equal to the limit is read
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f, f.tensors["b"], limit=11)
    assert str(e.value) == f"{f.path}: tensor `b` is 12 bytes; portkit reads at most 11"


def test_read_tensor_bytes_refuses_unknown_sizes_and_truncation(tmp_path: Path) -> None:
    g = G().tensor("u", (2,), 99, 0).tensor("a", (4,), 0, 0)
    head = g.bytes()
    base = -(-len(head) // 32) * 32
    p = write(tmp_path, head + b"\0" * (base - len(head) + 16))
    f = read_gguf(p)
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f, f.tensors["u"])
    assert str(e.value) == f"{p}: tensor `u` has type type 99, whose size portkit does not know"
    p.write_bytes(p.read_bytes()[:-1])  # shorter after the header was read
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f, f.tensors["a"])
    assert str(e.value) == f"{p}: truncated GGUF tensor `a`"
    p.unlink()
    with pytest.raises(InputError, match=r"x\.gguf: "):
        read_tensor_bytes(f, f.tensors["a"])


# --------------------------------------------------------------------------- mutmut's survivors


def test_invalid_utf8_is_replaced_not_raised(tmp_path: Path) -> None:
    g = G().kv("name", "STRING", G().s(b"ok\xff\xfeend"))
    assert read_gguf(write(tmp_path, g.bytes())).metadata["name"].value == "ok\ufffd\ufffdend"


def test_bool_arrays_hold_bools(tmp_path: Path) -> None:
    g = G().kv("flags", "ARRAY", struct.pack("<I", VT["BOOL"]) + G().n(3) + b"\x01\x00\x01")
    vals = read_gguf(write(tmp_path, g.bytes())).metadata["flags"].value
    assert vals == (GgufValue("BOOL", True), GgufValue("BOOL", False), GgufValue("BOOL", True))
    assert all(type(v.value) is bool for v in vals)
    u8 = G().kv("bytes", "ARRAY", struct.pack("<I", VT["U8"]) + G().n(2) + b"\x01\x00")
    assert [type(v.value) for v in read_gguf(write(tmp_path, u8.bytes())).metadata["bytes"].value] == [int, int]


@pytest.mark.parametrize("version,count", [(1, 2**31), (3, 2**63)])
def test_lengths_are_unsigned(version: int, count: int, tmp_path: Path) -> None:
    """A count with the top bit set is huge, not negative."""
    g = G(version)
    cap = gguf_header.GGUF_MAX_ARRAY_ELEMENTS
    assert refused(write(tmp_path, g.bytes(n_tensors=count) + b"\0" * 64)) == f"hostile GGUF: tensor count {count} exceeds {cap}"
    key = G(version).kv("k", "ARRAY", struct.pack("<I", VT["U8"]) + g.n(count)).bytes()
    assert refused(write(tmp_path, key)) == f"hostile GGUF: `k` array length {count} exceeds {cap}"
    s = G(version).kv("k", "STRING", g.n(count)).bytes()
    assert refused(write(tmp_path, s)) == f"hostile GGUF: `k` string length {count} exceeds {2**30}"


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("last", [b"", b"tail"])
def test_skipped_string_arrays_may_end_at_the_last_byte(version: int, last: bytes, tmp_path: Path) -> None:
    g = G(version)
    n = gguf_header.KEEP_ARRAY + 1
    body = b"".join(g.s("ab") for _ in range(n - 1)) + g.s(last)
    f = read_gguf(write(tmp_path, G(version).kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes()))
    assert f.metadata["tok"] == GgufValue("ARRAY", None, "STRING", n)
    # one byte less: the last string (or its length) runs past the end
    short = G(version).kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body[:-1]).bytes()
    assert refused(write(tmp_path, short)).startswith(f"truncated or hostile GGUF: `tok`[{n - 1}] ")


def test_kept_string_array_elements_name_themselves_in_errors(tmp_path: Path) -> None:
    g = G()
    big = 2**30 + 1
    data = G().kv("k", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(2) + g.s("a") + g.n(big) + b"\0" * 8).bytes()
    assert refused(write(tmp_path, data)) == f"hostile GGUF: `k`[1] string length {big} exceeds {2**30}"


def test_a_string_of_exactly_the_cap_is_allowed(tmp_path: Path) -> None:
    """2**30 bytes (a hole in a sparse file, never read: longer than what is kept)."""
    cap = gguf_header.GGUF_MAX_STRING_LENGTH
    g = G()
    head = G().kv("k", "STRING", g.n(cap)).bytes()
    p = tmp_path / "big.gguf"
    with open(p, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + cap)
    assert read_gguf(p).metadata["k"] == GgufValue("STRING", None)
