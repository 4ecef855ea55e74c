"""portkit.model: bounded header readers, key positions, path resolution."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit.errors import InputError
from portkit.model import load_model, model_dirs
from portkit.model.gguf_header import read_gguf
from portkit.model.jsonfile import key_positions, load_json, parse_json_text
from portkit.model.safetensors_header import read_safetensors_header


def test_key_positions_top_level_and_nested() -> None:
    text = (
        '{\n  "a": 1,\n  "rope_parameters": {\n    "rope_theta": 5e5,\n    "x": [ {"deep": 1} ]\n  },\n  "b\\"q": '
        '"s,:{"\n}\n'
    )
    pos = key_positions(text)
    assert pos[("a",)] == (2, 3)
    assert pos[("rope_parameters",)] == (3, 3)
    assert pos[("rope_parameters", "rope_theta")] == (4, 5)
    assert pos[('b"q',)] == (7, 3)
    assert ("rope_parameters", "x", "deep") not in pos  # keys inside arrays are skipped


def test_duplicates_are_recorded_and_last_wins() -> None:
    value, dups = parse_json_text('{"a": 1, "a": 2, "b": {"c": 1, "c": 3}}')
    assert value == {"a": 2, "b": {"c": 3}}
    assert set(dups) == {("a",), ("b", "c")}


@pytest.mark.parametrize(
    "text,what",
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": 1e999}', "out of range"),
        ("[" * 100 + "]" * 100, "nesting"),
        ('{"a": }', "invalid JSON"),
        ("\ufeff{}", "BOM"),
    ],
)
def test_strict_json(text: str, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        parse_json_text(text)


def test_load_json_positions(tmp_path: Path) -> None:
    p = sk.write_json(tmp_path / "config.json", sk.config("tf5"))
    doc = load_json(p)
    assert doc.position("rope_parameters", "rope_theta") is not None
    assert doc.position("rope_parameters", "missing") == doc.position("rope_parameters")


def test_safetensors_header_single_and_sharded(tmp_path: Path) -> None:
    cfg = sk.config("tf4")
    one = load_model(sk.write_model(tmp_path / "one", cfg))
    sharded = load_model(sk.write_model(tmp_path / "sharded", cfg, shards=3))
    assert one.safetensors is not None and sharded.safetensors is not None
    assert set(one.safetensors.tensors) == set(sharded.safetensors.tensors) == set(sk.hf_tensors(cfg))
    assert len(sharded.safetensors.files) == 3 and sharded.safetensors.index is not None
    t = one.safetensors.tensors["model.layers.0.self_attn.k_proj.weight"]
    assert t.shape == (32, 64) and t.dtype == "F32"


def test_sparse_skeleton_is_sparse(tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "big", dict(sk.config("tf4", **sk.SHAPE_8B)), shards=4)
    files = list(d.glob("*.safetensors"))
    logical = sum(f.stat().st_size for f in files)
    assert logical > 10 * 2**30
    assert sum(f.stat().st_blocks * 512 for f in files) < 64 * 2**20


def test_hostile_safetensors_length(tmp_path: Path) -> None:
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", 2**60) + b"{}")
    with pytest.raises(InputError, match="exceeds portkit's cap"):
        read_safetensors_header(p)


def test_truncated_safetensors(tmp_path: Path) -> None:
    p = sk.write_safetensors(tmp_path / "model.safetensors", {"a": (4, 4)})
    data = p.read_bytes()
    p.write_bytes(data[:-10])
    with pytest.raises(InputError, match="truncated"):
        read_safetensors_header(p)
    p.write_bytes(data[:5])
    with pytest.raises(InputError, match="truncated"):
        read_safetensors_header(p)


def test_lfs_pointer_is_skipped_with_a_note(tmp_path: Path) -> None:
    d = tmp_path / "m"
    sk.write_json(d / "config.json", sk.config("tf4"))
    (d / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n")
    f = load_model(d)
    assert f.safetensors is None and f.lfs_pointers and "LFS" in f.notes[0]


def test_gguf_reader_reads_metadata_and_tensors(tmp_path: Path) -> None:
    cfg = sk.config("tf4")
    p = sk.write_gguf(
        tmp_path / "m.gguf",
        {**sk.llama_metadata(cfg), "tokenizer.ggml.tokens": ["a"] * 10000},
        sk.gguf_tensors(cfg, "Q8_0"),
    )
    g = read_gguf(p)
    assert g.metadata["llama.block_count"].value == 2
    assert g.metadata["tokenizer.ggml.tokens"].length == 10000 and g.metadata["tokenizer.ggml.tokens"].value is None
    assert g.tensors["blk.0.attn_q.weight"].shape == (64, 64)
    assert g.tensors["blk.0.attn_q.weight"].type_name == "Q8_0"


def _gguf_header(n_tensors: int, n_kv: int, rest: bytes = b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + rest


@pytest.mark.parametrize(
    "data,what",
    [
        (_gguf_header(2**40, 0), "hostile GGUF: tensor count"),
        (_gguf_header(0, 2**29), "needs at least"),
        (_gguf_header(0, 1, struct.pack("<Q", 2**62) + b"\0" * 16), "string length"),
        (_gguf_header(0, 1, struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 2**29)), "array of"),
        (
            _gguf_header(
                0,
                1,
                struct.pack("<Q", 1)
                + b"k"
                + struct.pack("<IIQ", 9, 8, 5000)
                + struct.pack("<Q", 2**40)
                + b"\0" * 40000,
            ),
            "runs past the end",
        ),
        (_gguf_header(0, 1, struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77) + b"\0" * 8), "unknown value type"),
        (b"GGUF" + struct.pack("<I", 9) + b"\0" * 16, "unsupported GGUF version"),
        (b"NOPE" + b"\0" * 20, "not a GGUF file"),
        (b"GGU", "truncated GGUF"),
    ],
)
def test_hostile_gguf(tmp_path: Path, data: bytes, what: str) -> None:
    p = tmp_path / "x.gguf"
    p.write_bytes(data)
    with pytest.raises(InputError, match=what):
        read_gguf(p)


def test_truncated_gguf_tensor_data(tmp_path: Path) -> None:
    cfg = sk.config("tf4")
    p = sk.write_gguf(tmp_path / "m.gguf", sk.llama_metadata(cfg), sk.gguf_tensors(cfg, "F32"))
    os.truncate(p, p.stat().st_size - 100)
    with pytest.raises(InputError, match="truncated GGUF: tensor"):
        read_gguf(p)


def test_model_dirs_dedupes_files_of_one_dir(tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4"))
    dirs = model_dirs([d / "config.json", d / "model.safetensors", d])
    assert len(dirs) == 1


def test_symlink_loop(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(InputError, match="symlink loop"):
        model_dirs([a])
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").symlink_to(d / "config.json")
    with pytest.raises(InputError, match="symlink loop"):
        load_model(d)


def test_dir_without_config(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no config.json"):
        load_model(tmp_path)


def test_pickle_only_weights_are_never_opened(tmp_path: Path) -> None:
    d = tmp_path / "m"
    sk.write_json(d / "config.json", sk.config("tf4"))
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04 this would run code if unpickled")
    os.chmod(d / "pytorch_model.bin", 0)  # unreadable: opening it would fail loudly
    with pytest.raises(InputError, match="pickle-only"):
        load_model(d)


def test_index_with_path_traversal(tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf4"), shards=2)
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    idx["weight_map"]["x"] = "../../etc/passwd"
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    with pytest.raises(InputError, match="not a file name in this directory"):
        load_model(d)


# ------------------------------------------------------------------ the JSON scanner against plain references

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from portkit.model.jsonfile import MAX_DEPTH, _check_depth_strings  # noqa: E402


def _depth_reference(text: str) -> bool:
    """True when nesting outside strings goes deeper than MAX_DEPTH, one character at a time
    (an unterminated string ends the scan: json.loads reports it)."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                return False
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
        i += 1
    return False


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, MAX_DEPTH + 8), st.lists(st.sampled_from(list('[]{}"\\ a,:\n')), max_size=120).map("".join))
def test_depth_check_matches_a_character_scan(opening: int, rest: str) -> None:
    text = "[" * opening + rest
    try:
        _check_depth_strings(text)
        refused = False
    except ValueError as e:
        assert f"deeper than {MAX_DEPTH}" in str(e)
        refused = True
    assert refused == _depth_reference(text), repr(text)


def _dups_reference(text: str) -> tuple[object, list[tuple[str, ...]]]:
    """Duplicate key paths in document order, from pairs json.loads keeps."""
    out: list[tuple[str, ...]] = []

    def walk(v: object, path: tuple[str, ...]) -> object:
        if isinstance(v, list) and v and isinstance(v[0], tuple) and getattr(v, "pairs", False):
            seen: set[str] = set()
            for k, _ in v:
                if k in seen:
                    out.append(path + (k,))
                seen.add(k)
            return {k: walk(x, path + (k,)) for k, x in dict(v).items()}
        if isinstance(v, list):
            return [walk(x, path) for x in v]
        return v

    class Pairs(list):  # type: ignore[type-arg]
        pairs = True

    def hook(pairs: list[tuple[str, object]]) -> object:
        return Pairs(pairs) if pairs else {}

    return walk(json.loads(text, object_pairs_hook=hook), ()), out


_KEYS = st.sampled_from(["a", "b", 'q"', "é"])
_LEAF = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.text("ab", max_size=2)).map(json.dumps)
_DOC = st.recursive(
    _LEAF,
    lambda kids: st.one_of(
        st.lists(st.tuples(_KEYS, kids), max_size=5).map(
            lambda ps: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in ps) + "}"
        ),
        st.lists(kids, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    ),
    max_leaves=25,
)


@settings(max_examples=1000, deadline=None)
@given(_DOC)
def test_duplicate_keys_match_a_pairs_walk(text: str) -> None:
    value, dups = parse_json_text(text)
    ref_value, ref_dups = _dups_reference(text)
    assert value == ref_value and list(dups) == ref_dups
    assert all(type(d) is dict for d in _dicts(value))  # plain dicts, nothing that remembers


def _dicts(v: object) -> list[object]:
    if isinstance(v, dict):
        return [v] + [d for x in v.values() for d in _dicts(x)]
    if isinstance(v, list):
        return [d for x in v for d in _dicts(x)]
    return []
