"""PK519's mirror of the normalizers (`portkit.semantics.tokenizer.normalized_form`) against the crate of the wheel
(tokenizers 0.23.2, candle 0.11.1's): a `normalized: true` added token's `id_to_token` is the form the crate's
normalizer made of it, which is what its `decode` reads."""

from __future__ import annotations

import json

import pytest

import portkit_native as pn
from portkit.semantics.tokenizer import normalized_form

TOKENS = ["<s>", "<|im_end|>", "[CLS]", " <pad> ", "É<x>", "Ａｂ<tok>", "e\u0301<y>"]
NORMALIZERS = [
    None,
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    },
    {"type": "Lowercase"},
    {"type": "NFC"},
    {"type": "NFD"},
    {"type": "NFKC"},
    {"type": "NFKD"},
    {"type": "Strip", "strip_left": True, "strip_right": False},
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
]


def _crate_forms(normalizer: object) -> list[str | None]:
    added = [
        {
            "id": i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": True,
            "special": True,
        }
        for i, c in enumerate(TOKENS, start=1)
    ]
    tj = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"},
    }
    tok = pn.Tokenizer.from_str(json.dumps(tj))
    return [tok.id_to_token(i) for i in range(1, len(TOKENS) + 1)]


@pytest.mark.parametrize("normalizer", NORMALIZERS, ids=lambda n: json.dumps(n)[:60])
def test_the_mirror_gives_the_form_the_crate_decodes(normalizer: object) -> None:
    assert pn.build_info()["tokenizers_version"] == "0.23.2"
    assert [normalized_form(normalizer, c) for c in TOKENS] == _crate_forms(normalizer)


def test_a_step_not_mirrored_claims_nothing() -> None:
    """Negative control: the crate changes the token under a `Regex` Replace portkit does not mirror, and the mirror
    says None rather than a guess."""
    regex = {"type": "Replace", "pattern": {"Regex": "<"}, "content": "["}
    assert _crate_forms(regex)[0] == "[s>" and normalized_form(regex, "<s>") is None
