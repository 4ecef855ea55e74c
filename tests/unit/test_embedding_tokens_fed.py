"""PK506's judgement on what each side feeds (portkit.verify.embedding.confirm): CONFIRMED only
when the saved padding/truncation is the whole difference between the crate's ids and
sentence-transformers'; the negative controls say NOT-REPRODUCED."""

from __future__ import annotations

from portkit.verify.embedding.confirm import _confirm_saved_padding
from portkit.verify.embedding.tokens import FedRow, TokensFed

IDENT = {
    "code": "PK506",
    "name": "padding-saved-in-tokenizer",
    "severity": "warning",
    "message": "m",
    "filename": "tokenizer.json",
    "probe_kind": "static-only",
}
REF = [101, 7592, 2088, 102]
PADDED = REF + [0] * 124


def _verdict(rows):
    return _confirm_saved_padding(IDENT, TokensFed({"padding": {}, "truncation": {}}, rows))


def test_padding_that_is_the_whole_difference_is_confirmed():
    c = _verdict([FedRow("Hello world", REF, PADDED, REF)])
    assert c.verdict == "CONFIRMED" and "128 ids" in c.evidence and "feeds 4" in c.evidence


def test_settings_that_change_nothing_are_not_reproduced():
    assert _verdict([FedRow("Hello world", REF, REF, REF)]).verdict == "NOT-REPRODUCED"


def test_another_difference_beside_the_padding_is_not_reproduced():
    other = [101, 7592, 2089, 102]
    c = _verdict([FedRow("Hello world", REF, other + [0] * 124, other)])
    assert c.verdict == "NOT-REPRODUCED" and "another difference" in c.evidence
