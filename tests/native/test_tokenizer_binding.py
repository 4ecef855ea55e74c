"""portkit_native.Tokenizer: the `tokenizers` crate the wheel's candle-core (0.11.1) depends on, from Python.

The Python `tokenizers` package wraps the same crate (0.23.3 here, 0.23.2 in candle 0.11.1): on a file it
built the ids, the pieces and the decoded text must be the same; errors carry the crate's text unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import portkit_native as pn

tokenizers = pytest.importorskip("tokenizers")

TEXTS = [
    "Hello world",
    " Hello  world",
    "Hello</s>world <s> again",
    "digits 12345 and 3.14",
    "tabs\tand\nnew lines",
    "émoji 🤗 ünïcode",
    "def f(x):\n    return x",
    "",
]


@pytest.fixture(scope="module")
def llama2_style(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SentencePiece-style BPE: Prepend/Replace normalizer, byte fallback, `<s>` template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors, trainers

    corpus = [
        "Hello world, hello there.",
        "The capital of France is Paris.",
        "def f(x): return x + 1",
        "12345 67890",
    ] * 8
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    )
    tok.add_special_tokens(
        [AddedToken("<s>", normalized=True, special=True), AddedToken("</s>", normalized=False, special=True)]
    )
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_same_ids_as_the_python_package_on_the_same_crate(llama2_style: Path) -> None:
    native = pn.Tokenizer.from_file(llama2_style)
    py = tokenizers.Tokenizer.from_file(str(llama2_style))
    for text in TEXTS:
        for special in (True, False):
            ids, pieces = native.encode_pieces(text, special)
            enc = py.encode(text, add_special_tokens=special)
            assert (ids, pieces) == (enc.ids, enc.tokens), (text, special)
            assert native.encode(text, special) == ids
            for skip in (False, True):
                assert native.decode(ids, skip_special_tokens=skip) == py.decode(ids, skip_special_tokens=skip)
    # 0.23 keeps a `normalized: true` special when skipping specials (added_vocabulary.rs:239-246: its
    # normalized form, `▁<s>`, is not the special it skips); 0.22.2 (candle 0.11.0) drops it
    assert native.decode(native.encode("Hello world")) == "<s> Hello world"
    assert native.decode(native.encode("Hello world"), skip_special_tokens=True) == "<s> Hello world"
    assert native.decode(native.encode("Hello</s>world <s> again", False)) == "Hello</s> world <s> a<unk>ain"


def test_from_str_equals_from_file_and_lookups(llama2_style: Path) -> None:
    a = pn.Tokenizer.from_file(str(llama2_style))
    b = pn.Tokenizer.from_str(llama2_style.read_text(encoding="utf-8"))
    assert a.encode("Hello world") == b.encode("Hello world")
    assert a.encode("Hello world")[0] == a.token_to_id("<s>") == 1
    assert a.id_to_token(1) == "▁<s>" and a.token_to_id("no such token") is None and a.id_to_token(10**6) is None
    assert a.vocab_size() >= a.vocab_size(with_added_tokens=False) > 0


def test_padding_saved_in_the_file_applies_to_every_encode(llama2_style: Path) -> None:
    """What a candle program feeds: `get_ids()` includes the padding tokenizer.json saves."""
    doc = json.loads(llama2_style.read_text(encoding="utf-8"))
    doc["padding"] = {
        "strategy": {"Fixed": 12},
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 2,
        "pad_type_id": 0,
        "pad_token": "</s>",
    }
    ids = pn.Tokenizer.from_str(json.dumps(doc)).encode("Hello")
    assert len(ids) == 12 and ids[-1] == 2


def test_load_errors_keep_the_crates_message(llama2_style: Path, tmp_path: Path) -> None:
    doc = json.loads(llama2_style.read_text(encoding="utf-8"))
    bad = dict(
        doc,
        model=dict(
            doc["model"], merges=[" ".join(m) if isinstance(m, list) else m for m in doc["model"]["merges"]] + ["   "]
        ),
    )
    n = len(doc["model"]["merges"]) + 1
    with pytest.raises(pn.TokenizerError, match=rf"^Merges text file invalid at line {n} at line \d+ column \d+$"):
        pn.Tokenizer.from_str(json.dumps(bad))
    with pytest.raises(
        pn.TokenizerError, match=r"^data did not match any variant of untagged enum ModelUntagged at line 1 column \d+$"
    ):
        pn.Tokenizer.from_str(json.dumps(dict(doc, model=dict(doc["model"], type="Bogus"))))
    with pytest.raises(pn.TokenizerError, match=r"^Unknown tokenizer version '2\.0' at line 1 column \d+$"):
        pn.Tokenizer.from_str(json.dumps(dict(doc, version="2.0")))
    (tmp_path / "t.json").write_text("{not json")
    with pytest.raises(pn.TokenizerError, match=r"^key must be a string at line 1 column 2$"):
        pn.Tokenizer.from_file(tmp_path / "t.json")
    with pytest.raises(FileNotFoundError, match=r"absent\.json: No such file or directory"):
        pn.Tokenizer.from_file(tmp_path / "absent.json")
    assert issubclass(pn.TokenizerError, pn.NativeError) and issubclass(pn.TokenizerError, Exception)
