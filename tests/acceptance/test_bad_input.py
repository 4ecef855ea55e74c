"""Item 7: bad input gives one clear line on stderr and exit 2; never a traceback; bounded memory.

Fixed cases first, then hypothesis properties that mutate configs, safetensors headers and
GGUF headers and assert exactly that contract (in process, for speed).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import skeleton as sk
from portkit.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["lint", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_contract(rc: int, err: str) -> None:
    assert rc in (0, 1, 2)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    if rc == 2:
        assert lines and all(line.startswith(("portkit: error: ", "portkit: note: ")) for line in lines), err
        assert sum(line.startswith("portkit: error: ") for line in lines) == 1, err
    else:
        assert not any(line.startswith("portkit: error: ") for line in lines), err


# ------------------------------------------------------------------ fixed cases


def _cfg_text(text: str) -> Callable[[Path], Path]:
    def b(d: Path) -> Path:
        sk.write_model(d, sk.config("tf4"))
        (d / "config.json").write_text(text)
        return d

    return b


def _cfg(**kw: Any) -> Callable[[Path], Path]:
    return _cfg_text(json.dumps(sk.config("tf4", **kw)))


def _hostile_safetensors(d: Path) -> Path:
    sk.write_json(d / "config.json", sk.config("tf4"))
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 2**60) + b'{"a":1}')
    return d


def _truncated_safetensors(d: Path) -> Path:
    sk.write_model(d, sk.config("tf4"))
    p = d / "model.safetensors"
    os.truncate(p, 100)
    return d


def _gguf(rest: bytes, n_tensors: int = 0, n_kv: int = 1) -> Callable[[Path], Path]:
    def b(d: Path) -> Path:
        d.mkdir(parents=True, exist_ok=True)
        (d / "m.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + rest)
        return d

    return b


def _no_config(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "README.md").write_text("hi")
    return d


def _pickle_only(d: Path) -> Path:
    sk.write_json(d / "config.json", sk.config("tf4"))
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04\x95")
    return d


def _symlink_loop(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "config.json").symlink_to(d / "config.json")
    return d


BAD: dict[str, tuple[Callable[[Path], Path], str]] = {
    "invalid-json": (_cfg_text('{"hidden_size": 64,'), "invalid JSON"),
    "not-an-object": (_cfg_text("[1, 2]"), "not a JSON object"),
    "wrong-type": (_cfg(hidden_size="64"), "transformers refuses this config"),
    "float-for-int": (_cfg(max_position_embeddings=128.5), "transformers refuses"),
    "nan": (_cfg_text(json.dumps(sk.config("tf4", rms_norm_eps=float("nan")))), "`NaN` is not valid JSON"),
    "inf": (_cfg_text(json.dumps(sk.config("tf4", rope_theta=float("inf")))), "`Infinity` is not valid JSON"),
    "overflowing-number": (_cfg_text(json.dumps(sk.config("tf4")).replace("100000.0", "1e999")), "out of range"),
    "huge-int": (_cfg(vocab_size=10**30), "not a usable size"),
    "huge-layers": (_cfg(num_hidden_layers=2**40), "not a usable layer count"),
    "negative-size": (_cfg(hidden_size=-64), "not a usable size"),
    "huge-theta": (_cfg(rope_theta=1e300), "not a usable RoPE base"),
    "very-long-int": (_cfg_text('{"hidden_size": ' + "9" * 5000 + "}"), "invalid JSON"),
    "deep-nesting": (_cfg_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}"), "nesting"),
    "not-utf8": (_cfg_text("{}"), "not UTF-8"),
    "hostile-safetensors": (_hostile_safetensors, "exceeds portkit's cap"),
    "truncated-safetensors": (_truncated_safetensors, "truncated safetensors"),
    "gguf-huge-string": (_gguf(struct.pack("<Q", 2**62) + b"\0" * 64), "string length"),
    "gguf-huge-array": (_gguf(struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 2**40) + b"\0" * 64), "array"),
    "gguf-huge-counts": (_gguf(b"\0" * 64, n_tensors=2**33, n_kv=2**33), "hostile GGUF"),
    "gguf-truncated": (_gguf(b"", n_kv=3), "needs at least"),
    "no-config": (_no_config, "no config.json"),
    "pickle-only": (_pickle_only, "pickle-only"),
    "symlink-loop": (_symlink_loop, "symlink loop"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_exit_2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build, what = BAD[name]
    d = build(tmp_path / "m")
    if name == "not-utf8":
        (d / "config.json").write_bytes(b'{"a": "\xff\xfe"}')
    rc, out, err = run(capsys, str(d))
    assert rc == 2, (rc, out, err)
    assert_contract(rc, err)
    assert what in err, err
    assert err.count("portkit: error:") == 1


def test_symlink_loop_as_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    rc, _, err = run(capsys, str(tmp_path / "a"))
    assert rc == 2 and "symlink loop" in err and err.count("\n") == 1


def test_one_bad_dir_does_not_hide_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = sk.write_model(tmp_path / "good", sk.config("tf5"))
    bad = _no_config(tmp_path / "bad")
    rc, out, err = run(capsys, str(good), str(bad))
    assert rc == 2 and "PK101" in out and err.count("portkit: error:") == 1


def test_hostile_inputs_use_bounded_memory(tmp_path: Path) -> None:
    dirs = []
    for name, (build, _) in BAD.items():
        if name != "not-utf8":
            dirs.append(str(build(tmp_path / name)))
    prog = (
        "import resource, sys\n"
        "from portkit.cli import main\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "for d in sys.argv[1:]:\n"
        "    main(['lint', d])\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    r = subprocess.run([sys.executable, "-c", prog, *dirs], capture_output=True, text=True, cwd=ROOT, timeout=120)
    grown_mb = int(r.stdout.strip().splitlines()[-1])
    assert grown_mb < 200, f"peak RSS grew by {grown_mb} MB"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr and "out of memory" not in r.stderr


# ------------------------------------------------------------------ properties

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=10,
)
KEYS = st.sampled_from(
    list(sk.config("tf4"))
    + ["rope_parameters", "head_dim", "partial_rotary_factor", "sliding_window", "rope_theta", "rope_scaling", "zzz"]
)
PROP = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="portkit-prop-"))


@PROP
@given(
    edits=st.lists(st.tuples(KEYS, st.one_of(JSON, st.just("__DELETE__"))), max_size=4),
    style=st.sampled_from(["tf4", "tf5"]),
)
def test_property_mutated_config(edits: list[tuple[str, Any]], style: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = _scratch()
    try:
        cfg = sk.config(style)
        for k, v in edits:
            if v == "__DELETE__":
                cfg.pop(k, None)
            else:
                cfg[k] = v
        sk.write_model(d / "m", sk.config("tf4"), weights=True)
        (d / "m" / "config.json").write_text(json.dumps(cfg))
        rc, _, err = run(capsys, str(d / "m"), "--preview", "--dtype", "bf16", "--max-tokens", "99999")
        assert_contract(rc, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@PROP
@given(data=st.data())
def test_property_mutated_config_bytes(data: st.DataObject, capsys: pytest.CaptureFixture[str]) -> None:
    d = _scratch()
    try:
        text = bytearray(json.dumps(sk.config("tf5", scaling=sk.LLAMA3_SCALING), indent=2).encode())
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(text) - 1))
            text[i] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(text)))
        sk.write_model(d / "m", sk.config("tf4"))
        (d / "m" / "config.json").write_bytes(bytes(text[:cut]) if data.draw(st.booleans()) else bytes(text))
        rc, _, err = run(capsys, str(d / "m"))
        assert_contract(rc, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@PROP
@given(data=st.data())
def test_property_mutated_safetensors_header(data: st.DataObject, capsys: pytest.CaptureFixture[str]) -> None:
    d = _scratch()
    try:
        m = sk.write_model(d / "m", sk.config("tf4"))
        p = m / "model.safetensors"
        raw = bytearray(p.read_bytes()[:4096])
        (n,) = struct.unpack("<Q", raw[:8])
        with open(p, "r+b") as f:
            if data.draw(st.booleans()):
                f.write(struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1))))
            for _ in range(data.draw(st.integers(0, 6))):
                i = data.draw(st.integers(0, 8 + n - 1))
                f.seek(i)
                f.write(bytes([data.draw(st.integers(0, 255))]))
        if data.draw(st.booleans()):
            os.truncate(p, data.draw(st.integers(0, p.stat().st_size)))
        rc, _, err = run(capsys, str(m))
        assert_contract(rc, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@PROP
@given(data=st.data())
def test_property_mutated_gguf_header(data: st.DataObject, capsys: pytest.CaptureFixture[str]) -> None:
    d = _scratch()
    try:
        cfg = sk.config("tf4")
        md = {**sk.llama_metadata(cfg), "tokenizer.ggml.tokens": ["<s>", "</s>", "a"], "general.alignment": 32}
        p = sk.write_gguf(d / "m" / "m.gguf", md, sk.gguf_tensors(cfg, "Q8_0"))
        header_end = 24 + 4096
        with open(p, "r+b") as f:
            if data.draw(st.booleans()):
                f.seek(data.draw(st.sampled_from([8, 16])))
                f.write(struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1))))
            for _ in range(data.draw(st.integers(0, 8))):
                f.seek(data.draw(st.integers(0, min(header_end, p.stat().st_size - 1))))
                f.write(bytes([data.draw(st.integers(0, 255))]))
        if data.draw(st.booleans()):
            os.truncate(p, data.draw(st.integers(0, p.stat().st_size)))
        rc, _, err = run(capsys, str(d / "m"))
        assert_contract(rc, err)
    finally:
        shutil.rmtree(d, ignore_errors=True)
