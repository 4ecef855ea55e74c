"""What each side feeds the encoder: sentence-transformers' ids (transformers' tokenizer, truncated
to max_seq_length) against the ids candle's tokenizers crate (the native wheel's `Tokenizer`)
gives a program for the same text, with tokenizer.json as saved and with its `padding` and
`truncation` removed (the counterfactual PK506 names: the crate applies both to every encode)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FedRow:
    text: str
    reference: list[int]  # sentence-transformers' ids
    crate: list[int]  # the crate's, tokenizer.json as saved
    crate_unpadded: list[int]  # the crate's, without tokenizer.json's padding and truncation

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "reference_ids": len(self.reference),
            "crate_ids": len(self.crate),
            "crate_ids_without_padding_truncation": len(self.crate_unpadded),
            "crate_equals_reference": self.crate == self.reference,
            "unpadded_equals_reference": self.crate_unpadded == self.reference,
        }


@dataclass(frozen=True)
class TokensFed:
    saved: dict[str, Any]  # tokenizer.json's `padding` and `truncation` as saved (None: absent)
    rows: list[FedRow]
    failure: str | None = None  # the crate refused the file or a text

    @property
    def saved_changes_ids(self) -> bool:
        return any(r.crate != r.crate_unpadded for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"saved": self.saved, "failure": self.failure, "rows": [r.to_json() for r in self.rows]}


def tokens_fed(root: Path, texts: Sequence[str], reference_ids: Sequence[Sequence[int]]) -> TokensFed | None:
    """None when the directory has no tokenizer.json (a program then brings its own tokenizer)."""
    import portkit_native as pn

    path = root / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        saved = {k: doc.get(k) for k in ("padding", "truncation")}
        plain = pn.Tokenizer.from_str(json.dumps({**doc, "padding": None, "truncation": None}))
        crate = pn.Tokenizer.from_file(str(path))
        rows = [
            FedRow(t, [int(i) for i in ids], list(crate.encode(t)), list(plain.encode(t)))
            for t, ids in zip(texts, reference_ids, strict=False)
        ]
    except (ValueError, OSError, pn.TokenizerError) as e:  # the crate's own refusal: PK507's, judged elsewhere
        return TokensFed({}, [], failure=" ".join(str(e).split())[:300])
    return TokensFed(saved, rows)
