"""One policy for matching a crash probe's expected text (`verdicts.fails_as_predicted`): case
aside, and any failure where the probe names no text. The tokens section once matched with a
case-sensitive `in`, so the crate's "Missing field" never confirmed a probe expecting "missing
field", while the decoder's crash chain confirmed the same pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.findings import ExpectedCrash, Finding
from portkit.verify.judge.verdicts import fails_as_predicted, predicts
from portkit.verify.sections.tokens import TokenizerSection, _confirm


def _crash(expect: str | None) -> Finding:
    return Finding(code="PK530", name="n", message="m", filename="tokenizer.json", severity="error",
                   probe=ExpectedCrash(id="PK530", expect=expect, run="tokens"))  # fmt: skip


@pytest.mark.parametrize(
    ("expect", "message", "confirmed"),
    [
        ("missing field `type`", "Missing field `type` at line 3", True),
        ("missing field `type`", "missing field `type` at line 3", True),
        (None, "anything at all", True),
        ("", "anything at all", True),
        ("unknown variant", "missing field `type`", False),
    ],
)
def test_the_tokens_section_matches_a_crash_as_the_crash_chain_does(expect, message, confirmed):
    sec = TokenizerSection(path=Path("tokenizer.json"), crate_error=message)
    (c,) = _confirm([_crash(expect)], sec, None, None, None)
    assert (c.verdict == "CRASH-CONFIRMED") is confirmed, c.evidence
    # the decoder's chain: a specific text by `predicts`, a probe without one by any failure
    assert fails_as_predicted(expect, message) is confirmed
    assert predicts(expect, message) is (confirmed and bool(expect))
