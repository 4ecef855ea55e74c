"""The tokenizer record's cache: keyed by every non-weight file's bytes and the prompt, checked
like verify's other caches, never holding a tokenizer transformers could not load."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.verify.reference import tokenizer_cache as tokcache

RECORD = {
    "class": "TokenizersBackend",
    "attributes": {"bos_token": "<s>"},
    "calls": {'["encode", "a", true]': {"value": [1, 2]}},
}


@pytest.fixture()
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "model"
    d.mkdir()
    (d / "tokenizer.json").write_text('{"model": {}}')
    (d / "tokenizer_config.json").write_text("{}")
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "model.safetensors").write_bytes(b"\x00" * 16)
    return d


def test_a_stored_record_is_read_back(model: Path) -> None:
    c = tokcache.for_dir(model, None, None, True)
    assert c is not None and c.get() is None
    c.put(RECORD)
    assert tokcache.for_dir(model, None, None, True).get() == RECORD  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "edit", ["tokenizer.json", "tokenizer_config.json", "config.json", "chat_template.jinja", "prompt"]
)
def test_any_tokenizer_input_is_a_new_key(model: Path, edit: str) -> None:
    before = tokcache.record_key(model, None, None)
    if edit == "prompt":
        assert tokcache.record_key(model, "Hello", None) != before
        assert tokcache.record_key(model, None, "Hello") != before
        return
    (model / edit).write_text((model / edit).read_text() + " " if (model / edit).exists() else "{{ messages }}")
    assert tokcache.record_key(model, None, None) != before


def test_the_weights_are_not_read(model: Path) -> None:
    before = tokcache.record_key(model, None, None)
    (model / "model.safetensors").write_bytes(b"\x01" * 16)
    assert tokcache.record_key(model, None, None) == before


def test_damage_reads_as_absent_and_a_wrong_shape_is_ignored(model: Path) -> None:
    c = tokcache.for_dir(model, None, None, True)
    assert c is not None
    c.put(RECORD)
    blob = c.path.read_bytes()
    c.path.write_bytes(blob[:-10])
    assert c.get() is None and not c.path.exists()
    c.put({"class": "X", "attributes": {}, "calls": {"k": {"value": 1, "extra": 2}}})
    assert c.get() is None


def test_an_error_is_not_kept_and_no_cache_means_none(model: Path) -> None:
    c = tokcache.for_dir(model, None, None, True)
    assert tokcache.through(c, lambda: {"error": "sentencepiece is not installed"}) == {
        "error": "sentencepiece is not installed"
    }
    assert c is not None and c.get() is None
    assert tokcache.through(c, lambda: RECORD) == RECORD and c.get() == RECORD
    assert tokcache.through(c, lambda: pytest.fail("computed again")) == RECORD
    assert tokcache.for_dir(model, None, None, False) is None
