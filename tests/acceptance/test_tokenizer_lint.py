"""`portkit lint` where tokenizers live: tokenizer-only directories, tokenizer files as arguments,
and tokenizer files that are bad input (one line, exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from fixtures.tokenizer_shapes import write_tokenizer
from portkit.cli import main


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["lint", "--format", "json", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def codes(out: str) -> list[str]:
    return sorted(f["code"] for f in json.loads(out))


def test_tokenizer_only_directory_gets_the_tokenizer_rules_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama2")
    rc, out, err = lint(capsys, str(d))
    assert rc == 1 and codes(out) == ["PK501", "PK502", "PK505", "PK519"], out + err
    assert all(f["filename"] == str(d / "tokenizer.json") for f in json.loads(out))


def test_a_tokenizer_file_lints_its_models_tokenizer_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", sk.config("tf5"))  # PK101 on config.json
    write_tokenizer(d, "llama2")
    rc, out, _ = lint(capsys, str(d / "tokenizer.json"), str(d / "tokenizer_config.json"))
    assert rc == 1 and codes(out) == ["PK501", "PK502", "PK505", "PK519"], out  # not config.json's PK101
    rc, out, _ = lint(capsys, str(d / "config.json"), str(d / "tokenizer.json"))
    assert codes(out) == ["PK101", "PK501", "PK502", "PK505", "PK519"], out  # the model and its tokenizer, each once
    rc, out, _ = lint(capsys, str(d))
    assert codes(out) == ["PK101", "PK501", "PK502", "PK505", "PK519"], out


def test_a_clean_tokenizer_file_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama3", "clean")
    rc, out, err = lint(capsys, str(d / "tokenizer.json"))
    assert rc == 0 and json.loads(out) == [], out + err


def _bad(capsys: pytest.CaptureFixture[str], d: Path) -> str:
    rc, out, err = lint(capsys, str(d))
    assert rc == 2 and err.count("\n") == 1 and err.startswith("portkit: error: "), (rc, out, err)
    assert "Traceback" not in err
    return err


def test_tokenizer_json_over_64_mib_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama2")
    with open(d / "tokenizer.json", "r+b") as f:
        f.truncate(64 * 1024 * 1024 + 1)  # sparse: nothing is written
    err = _bad(capsys, d)
    assert "tokenizer.json" in err and "67108865 bytes" in err


def test_absurdly_nested_tokenizer_json_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama2")
    text = (d / "tokenizer.json").read_text()
    start = text.index('"normalizer": {')
    end = text.index('"pre_tokenizer"')
    (d / "tokenizer.json").write_text(
        text[:start] + '"normalizer": ' + "[" * 100_000 + "]" * 100_000 + ",\n  " + text[end:]
    )
    assert "nesting deeper than 64 levels" in _bad(capsys, d)


@pytest.mark.parametrize(
    "name,content,what",
    [
        ("tokenizer.json", b'{"version": "1.0", "model": ', "invalid JSON"),
        ("tokenizer.json", b"\xff\xfe{}", "not UTF-8"),
        ("tokenizer.json", b"[1, 2]", "not a JSON object"),
        ("tokenizer_config.json", b"[]", "not a JSON object"),
        ("tokenizer_config.json", b'{"a": NaN}', "invalid JSON"),
    ],
)
def test_unreadable_tokenizer_files_are_bad_input(
    name: str, content: bytes, what: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama2")
    (d / name).write_bytes(content)
    err = _bad(capsys, d)
    assert name in err and what in err


def test_a_dangling_tokenizer_symlink_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "tok", "llama2")
    (d / "tokenizer.json").unlink()
    os.symlink(tmp_path / "nowhere.json", d / "tokenizer.json")
    assert "dangling symlink" in _bad(capsys, d)
