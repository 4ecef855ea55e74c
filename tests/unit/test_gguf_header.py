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

VT = {
    "U8": 0,
    "I8": 1,
    "U16": 2,
    "I16": 3,
    "U32": 4,
    "I32": 5,
    "F32": 6,
    "BOOL": 7,
    "STRING": 8,
    "ARRAY": 9,
    "U64": 10,
    "I64": 11,
    "F64": 12,
}


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
        self.tensors.append(
            self.s(name)
            + struct.pack("<I", len(dims))
            + b"".join(self.n(d) for d in dims)
            + struct.pack("<IQ", type_id, offset)
        )
        return self

    def bytes(self, n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
        nt = len(self.tensors) if n_tensors is None else n_tensors
        nk = len(self.kvs) if n_kv is None else n_kv
        return (
            b"GGUF"
            + struct.pack("<I", self.version)
            + self.n(nt)
            + self.n(nk)
            + b"".join(self.kvs)
            + b"".join(self.tensors)
        )


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
    values = {
        "U8": 250,
        "I8": -5,
        "U16": 65000,
        "I16": -300,
        "U32": 4_000_000_000,
        "I32": -70000,
        "F32": 1.5,
        "U64": 2**40,
        "I64": -(2**40),
        "F64": 0.1,
    }
    fmts = {
        "U8": "<B",
        "I8": "<b",
        "U16": "<H",
        "I16": "<h",
        "U32": "<I",
        "I32": "<i",
        "F32": "<f",
        "U64": "<Q",
        "I64": "<q",
        "F64": "<d",
    }
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
    assert (
        f.metadata["short"].value == "a" * keep and f.metadata["long"].value is None and f.metadata["after"].value == 3
    )


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
    assert (
        refused(p) == f"truncated GGUF: tensor `a` needs 16 bytes at offset {base + 8}, file has {len(exact) - 1} bytes"
    )


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
        (
            "declared counts",
            G().bytes(n_tensors=1, n_kv=2) + b"\0" * 40,
            "truncated or hostile GGUF: header declares 1 tensors and 2 metadata entries, needs at least 50 bytes, "
            "only 40 remain",
        ),
        (
            "no counts",
            b"GGUF" + struct.pack("<I", 3) + b"\0" * 12,
            "truncated or hostile GGUF: metadata count needs 8 bytes at offset 16, only 4 remain",
        ),
        (
            "key string",
            G().bytes(n_kv=1) + g.n(2**30 + 1) + b"\0" * 8,
            f"hostile GGUF: metadata key #0 string length {2**30 + 1} exceeds {2**30}",
        ),
        (
            "key past the end",
            G().bytes(n_kv=1) + g.n(10) + b"k" * 5,
            "truncated or hostile GGUF: metadata key #0 string of 10 bytes needs 10 bytes at offset 32, only 5 remain",
        ),
        (
            "key over 64 KiB",
            G().kv("k" * 65537, "U8", b"\0").bytes(),
            "hostile GGUF: metadata key #0 is longer than 64 KiB",
        ),
        ("value type", G().kv("k", 13, b"\0" * 8).bytes(), "corrupt GGUF: `k` has unknown value type 13"),
        ("bool byte", G().kv("flag", "BOOL", b"\x02").bytes(), "corrupt GGUF: `flag` bool byte is 2"),
        (
            "scalar past the end",
            G().kv("k", "U64", b"\0" * 7).bytes(),
            "truncated or hostile GGUF: `k` needs 8 bytes at offset 37, only 7 remain",
        ),
        (
            "array type",
            G().kv("k", "ARRAY", struct.pack("<I", 13) + b"\0" * 8).bytes(),
            "corrupt GGUF: `k` array has unknown element type 13",
        ),
        (
            "array length",
            G().kv("k", "ARRAY", struct.pack("<I", 0) + g.n(cap + 1)).bytes(),
            f"hostile GGUF: `k` array length {cap + 1} exceeds {cap}",
        ),
        (
            "tensor name over 64 KiB",
            G().tensor("t" * 65537, (1,), 0, 0).bytes(),
            "hostile GGUF: tensor name #0 is longer than 64 KiB",
        ),
        (
            "tensor dims",
            G().tensor("t", (1, 1, 1, 1, 1), 0, 0).bytes(),
            "corrupt GGUF: tensor `t` has 5 dimensions; candle 0.11.0 accepts at most 4",
        ),
        (
            "alignment 0",
            G().kv("general.alignment", "U32", struct.pack("<I", 0)).bytes(),
            "corrupt GGUF: `general.alignment` is 0",
        ),
    ]
    # a string array whose element runs past the end, in the long (skipped) form
    n = gguf_header.KEEP_ARRAY + 1
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(50) + b"y" * 10
    cases.append(
        (
            "skipped string",
            G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes(),
            f"truncated or hostile GGUF: `tok`[{n - 1}] string length 50 runs past the end of the file",
        )
    )
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(2**30 + 1)
    cases.append(
        (
            "skipped string over the cap",
            G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes() + b"\0" * 8,
            f"truncated or hostile GGUF: `tok`[{n - 1}] string length {2**30 + 1} runs past the end of the file",
        )
    )
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
    assert (
        refused(write(tmp_path, data))
        == f"truncated or hostile GGUF: `tok`[{n - 1}] length needs 8 bytes at offset {offset}, only 4 remain"
    )


def test_arrays_nested_past_the_depth_cap(tmp_path: Path) -> None:
    g = G()
    depth = gguf_header.GGUF_MAX_VALUE_DEPTH + 1
    payload = (
        b"".join(struct.pack("<I", VT["ARRAY"]) + g.n(1) for _ in range(depth)) + struct.pack("<I", VT["U8"]) + g.n(0)
    )
    msg = refused(write(tmp_path, G().kv("deep", "ARRAY", payload).bytes()))
    assert msg == "hostile GGUF: `deep`" + "[0]" * depth + " nests arrays deeper than 64"
    # one level less is read
    ok = (
        b"".join(struct.pack("<I", VT["ARRAY"]) + g.n(1) for _ in range(depth - 1))
        + struct.pack("<I", VT["U8"])
        + g.n(0)
    )
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
    with pytest.raises(InputError) as e:
        read_tensor_bytes(f, f.tensors["a"])
    assert str(e.value) == f"{p}: no such file or directory"


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
    assert (
        refused(write(tmp_path, g.bytes(n_tensors=count) + b"\0" * 64))
        == f"hostile GGUF: tensor count {count} exceeds {cap}"
    )
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
    f = read_gguf(
        write(tmp_path, G(version).kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes())
    )
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


# names longer than 60 characters are cut to 60 in every message (the rest is the user's
# own key, which can be 64 KiB long: one line of output, never a page)

LONG = "n" * 60 + "TAIL"
CUT = "n" * 60


def _long_name_refusals() -> list[tuple[str, bytes, str]]:
    g = G()
    head_kv = G().bytes(n_kv=1)
    head_t = G().bytes(n_tensors=1)
    name = g.s(LONG)  # 8 + 64 bytes, after the 24-byte header: the next field is at offset 96
    t_data = G().tensor(LONG, (4,), 0, 0).bytes()
    t_base = -(-len(t_data) // 32) * 32
    return [
        (
            "key value type",
            head_kv + name + b"\0\0",
            f"truncated or hostile GGUF: `{CUT}` value type needs 4 bytes at offset 96, only 2 remain",
        ),
        ("key value", G().kv(LONG, "BOOL", b"\x02").bytes(), f"corrupt GGUF: `{CUT}` bool byte is 2"),
        (
            "tensor dimension count",
            head_t + name + b"\0\0",
            f"truncated or hostile GGUF: tensor `{CUT}` dimension count needs 4 bytes at offset 96, only 2 remain",
        ),
        (
            "tensor dims",
            head_t + name + struct.pack("<I", 2) + g.n(5),
            f"truncated or hostile GGUF: tensor `{CUT}` dims needs 8 bytes at offset 108, only 0 remain",
        ),
        (
            "tensor type",
            head_t + name + struct.pack("<I", 1) + g.n(5) + b"\0",
            f"truncated or hostile GGUF: tensor `{CUT}` type needs 4 bytes at offset 108, only 1 remain",
        ),
        (
            "tensor offset",
            head_t + name + struct.pack("<I", 1) + g.n(5) + struct.pack("<I", 0) + b"\0" * 7,
            f"truncated or hostile GGUF: tensor `{CUT}` offset needs 8 bytes at offset 112, only 7 remain",
        ),
        (
            "tensor dimensions",
            G().tensor(LONG, (1,) * 5, 0, 0).bytes(),
            f"corrupt GGUF: tensor `{CUT}` has 5 dimensions; candle 0.11.0 accepts at most 4",
        ),
        (
            "tensor data",
            t_data,
            f"truncated GGUF: tensor `{CUT}` needs 16 bytes at offset {t_base}, file has {len(t_data)} bytes",
        ),
    ]


@pytest.mark.parametrize(
    "data,message", [(d, m) for _, d, m in _long_name_refusals()], ids=[c[0] for c in _long_name_refusals()]
)
def test_long_names_are_cut_to_60_characters_in_refusals(data: bytes, message: str, tmp_path: Path) -> None:
    assert refused(write(tmp_path, data)) == message


@pytest.mark.parametrize("what", ["key", "tensor"])
def test_names_of_exactly_64_kib_are_kept(what: str, tmp_path: Path) -> None:
    name = "k" * 65536
    g = G().kv(name, "U8", b"\x01") if what == "key" else G().tensor(name, (1,), 99, 0)
    f = read_gguf(write(tmp_path, g.bytes()))
    assert list(f.metadata if what == "key" else f.tensors) == [name]


def test_magic_and_version_are_unsigned(tmp_path: Path) -> None:
    assert (
        refused(write(tmp_path, b"\xff\xff\xff\xff" + struct.pack("<I", 3) + b"\0" * 16))
        == "not a GGUF file (magic 0xffffffff)"
    )
    assert refused(write(tmp_path, b"GGUF" + b"\xff\xff\xff\xff" + b"\0" * 16)) == "unsupported GGUF version 4294967295"


def test_the_byte_swapped_magic_is_accepted_as_candle_does(tmp_path: Path) -> None:
    """candle 0.11.0 accepts both 0x46554747 and 0x47475546 (`VersionedMagic::read`, gguf_file.rs)."""
    f = read_gguf(write(tmp_path, b"FUGG" + G().kv("k", "U8", b"\x02").bytes()[4:]))
    assert f.version == 3 and f.metadata["k"].value == 2


@pytest.mark.parametrize("version,top", [(1, 2**32 - 1), (3, 2**64 - 1)])
def test_tensor_dims_type_and_offset_are_unsigned(version: int, top: int, tmp_path: Path) -> None:
    """An unknown type has no size, so nothing checks these against the file: they are kept as read."""
    g = G(version).tensor("t", (top, 2), 2**32 - 1, 2**64 - 1)
    t = read_gguf(write(tmp_path, g.bytes())).tensors["t"]
    assert (t.dims, t.type_id, t.offset) == ((top, 2), 2**32 - 1, 2**64 - 1)


@pytest.mark.parametrize("version", [1, 3])
def test_declared_counts_that_exactly_fit_are_read(version: int, tmp_path: Path) -> None:
    """The smallest entry is an empty key, its type and a one-byte value; the smallest tensor an
    empty name, a dimension count and no dims, a type and an offset: exactly that many bytes pass."""
    g = G(version).kv("", "U8", b"\x07").tensor("", (), 99, 0)
    data = g.bytes()
    pre = 4 if version == 1 else 8
    assert len(data) == 8 + 2 * pre + (pre + 4 + 1) + (pre + 4 + 4 + 8)
    f = read_gguf(write(tmp_path, data))
    assert f.metadata[""].value == 7 and f.tensors[""].dims == ()


def test_unreadable_files_are_named_by_path_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    from types import SimpleNamespace

    d = tmp_path / "dir.gguf"
    d.mkdir()
    assert refused(d) == "is a directory"
    assert refused(tmp_path / "absent.gguf") == "no such file or directory"
    # a file emptied after stat (a download being rewritten): mmap refuses an empty file
    p = write(tmp_path, b"")
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: SimpleNamespace(st_size=64))
    assert refused(p) == "cannot map GGUF file: cannot mmap an empty file"


def _unsigned_and_truncated_fields() -> list[tuple[str, bytes, str]]:
    """Each field the reader names when it runs out of bytes, and the unsigned ones with every bit set."""
    g, g1 = G(), G(1)
    k = G().bytes(n_kv=1) + g.s("k")  # the key `k` ends at offset 33
    t = G().bytes(n_tensors=1)
    return [
        (
            "v1 metadata count",
            b"GGUF" + struct.pack("<I", 1) + g1.n(0) + b"\0\0",
            "truncated or hostile GGUF: metadata count needs 4 bytes at offset 12, only 2 remain",
        ),
        (
            "eight bytes",
            b"GGUF" + struct.pack("<I", 3),
            "truncated or hostile GGUF: tensor count needs 8 bytes at offset 8, only 0 remain",
        ),
        (
            "string length",
            G().kv("k", "STRING", b"\0\0").bytes(),
            "truncated or hostile GGUF: `k` needs 8 bytes at offset 37, only 2 remain",
        ),
        (
            "array type",
            G().kv("k", "ARRAY", b"\0\0").bytes(),
            "truncated or hostile GGUF: `k` array type needs 4 bytes at offset 37, only 2 remain",
        ),
        (
            "array length",
            G().kv("k", "ARRAY", struct.pack("<I", 0) + b"\0\0").bytes(),
            "truncated or hostile GGUF: `k` array length needs 8 bytes at offset 41, only 2 remain",
        ),
        (
            "tensor name",
            t + g.n(100) + b"t" * 30,
            "truncated or hostile GGUF: tensor name #0 string of 100 bytes needs 100 bytes at offset 32, "
            "only 30 remain",
        ),
        ("value type", k + b"\xff\xff\xff\xff" + b"\0" * 8, "corrupt GGUF: `k` has unknown value type 4294967295"),
        (
            "array element type",
            G().kv("k", "ARRAY", b"\xff\xff\xff\xff" + g.n(0)).bytes(),
            "corrupt GGUF: `k` array has unknown element type 4294967295",
        ),
        (
            "dimension count",
            t + g.s("t") + b"\xff\xff\xff\xff" + b"\0" * 20,
            "corrupt GGUF: tensor `t` has 4294967295 dimensions; candle 0.11.0 accepts at most 4",
        ),
    ]


@pytest.mark.parametrize(
    "data,message",
    [(d, m) for _, d, m in _unsigned_and_truncated_fields()],
    ids=[c[0] for c in _unsigned_and_truncated_fields()],
)
def test_fields_are_named_when_truncated_and_read_unsigned(data: bytes, message: str, tmp_path: Path) -> None:
    assert refused(write(tmp_path, data)) == message


@pytest.mark.parametrize("version,length", [(1, 2**32 - 1), (3, 2**64 - 1)])
def test_skipped_string_lengths_are_unsigned(version: int, length: int, tmp_path: Path) -> None:
    g = G(version)
    n = gguf_header.KEEP_ARRAY + 1
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(length) + b"\0" * 16
    data = G(version).kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes()
    assert (
        refused(write(tmp_path, data))
        == f"truncated or hostile GGUF: `tok`[{n - 1}] string length {length} runs past the end of the file"
    )


def test_a_skipped_string_of_exactly_the_cap_is_allowed(tmp_path: Path) -> None:
    """The last of a long (skipped) string array is 2**30 bytes: a hole in a sparse file, never read."""
    cap = gguf_header.GGUF_MAX_STRING_LENGTH
    g = G()
    n = gguf_header.KEEP_ARRAY + 1
    body = b"".join(g.s("x") for _ in range(n - 1)) + g.n(cap)
    head = G().kv("tok", "ARRAY", struct.pack("<I", VT["STRING"]) + g.n(n) + body).bytes()
    p = tmp_path / "big.gguf"
    with open(p, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + cap)
    assert read_gguf(p).metadata["tok"] == GgufValue("ARRAY", None, "STRING", n)


@pytest.mark.parametrize("what", ["tensor", "metadata"])
def test_a_count_of_exactly_the_cap_goes_on_to_the_size_check(what: str, tmp_path: Path) -> None:
    cap = gguf_header.GGUF_MAX_ARRAY_ELEMENTS
    data = G().bytes(n_tensors=cap) if what == "tensor" else G().bytes(n_kv=cap)
    need = cap * (8 + 4 + 4 + 8) if what == "tensor" else cap * (8 + 4 + 1)
    nt, nk = (cap, 0) if what == "tensor" else (0, cap)
    assert refused(write(tmp_path, data)) == (
        f"truncated or hostile GGUF: header declares {nt} tensors and {nk} metadata entries, needs at least {need} "
        "bytes, only 0 remain"
    )


def test_a_tensor_of_four_dimensions_is_read(tmp_path: Path) -> None:
    g = G().tensor("t", (1, 2, 3, 4), 99, 0)
    assert read_gguf(write(tmp_path, g.bytes())).tensors["t"].shape == (4, 3, 2, 1)


@pytest.mark.parametrize("vtype", ["U8", "U16", "U32", "I8", "I16", "I32", "F32", "U64", "I64"])
@pytest.mark.parametrize("alignment", [16, 64])
def test_alignment_is_read_from_every_small_integer_type(vtype: str, alignment: int, tmp_path: Path) -> None:
    """The header is padded to 1 more than a multiple of 64, so 16, 32 (the default) and 64 each
    put the data somewhere else. candle 0.11.0 takes U8, U16, U32 and non-negative I8, I16, I32
    (gguf_file.rs:551-559); any other type falls back to 32."""
    fmts = {
        "U8": "<B",
        "U16": "<H",
        "U32": "<I",
        "I8": "<b",
        "I16": "<h",
        "I32": "<i",
        "F32": "<f",
        "U64": "<Q",
        "I64": "<q",
    }
    value = struct.pack(fmts[vtype], float(alignment) if vtype == "F32" else alignment)
    pad = 0
    while len(G().kv("general.alignment", vtype, value).kv("p" * pad, "U8", b"\0").bytes()) % 64 != 1:
        pad += 1
    head = G().kv("general.alignment", vtype, value).kv("p" * pad, "U8", b"\0").bytes()
    used = alignment if vtype in ("U8", "U16", "U32", "I8", "I16", "I32") else 32
    assert read_gguf(write(tmp_path, head)).data_offset == len(head) - 1 + used
