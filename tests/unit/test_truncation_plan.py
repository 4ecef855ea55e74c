"""PK506 judges a saved truncation against the planned prompt, as PK115 judges a window: it cuts
only texts longer than its `max_length`, so it is an error when the plan reaches past it and a
warning otherwise; padding pads every text, an error whatever the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portkit.verify.corpus import corpus, long_text
from tests.unit.test_rules import run
from tests.unit.tokenizer_cases import _set, shape


def _pk506(tmp_path: Path, target: dict[str, Any], **edit: Any) -> Any:
    d, _ = shape("smollm", tokenizer=_set(**edit))(tmp_path / "m")
    (f,) = [f for f in run(d, target) if f.code == "PK506"]
    return f


@pytest.mark.parametrize(
    ("target", "severity", "tail"),
    [
        (
            {},
            "warning",
            "every encode longer than 48 tokens is cut; no prompt length is planned (`--max-prompt-tokens`)",
        ),
        ({"max_tokens": 200, "max_prompt_tokens": 48}, "warning", "you plan prompts of at most 48 tokens"),
        ({"max_tokens": 49}, "error", "you plan prompts of at most 49 tokens"),
        ({"max_tokens": 20, "max_prompt_tokens": 100}, "error", "you plan prompts of at most 100 tokens"),
    ],
)
def test_truncation_alone_is_judged_against_the_planned_prompt(
    tmp_path: Path, target: dict[str, Any], severity: str, tail: str
) -> None:
    f = _pk506(tmp_path, target, padding=None)
    assert f.severity == severity and f.message.endswith(tail), f.message
    assert "every text gets other ids" not in f.message
    assert f.probe is not None and f.probe.kind == "tokens" and f.probe.edit == {"padding": None, "truncation": None}


def test_padding_is_an_error_whatever_the_plan(tmp_path: Path) -> None:
    f = _pk506(tmp_path, {"max_tokens": 10, "max_prompt_tokens": 10})
    assert f.severity == "error" and f.message.endswith("every text gets other ids"), f.message


def test_the_corpus_holds_one_text_longer_than_a_saved_truncation() -> None:
    plain = corpus([], None)
    longer = corpus([], None, longer_than=48)
    assert len(longer) == len(plain) + 1
    (extra,) = [s for s in longer if "longer-than-truncation" in s.tags]
    assert len(extra.text.split()) > 48 and extra.text == long_text(48)
    # a truncation past what a prompt is likely to be gets no text (it would cost more than it shows)
    assert len(corpus([], None, longer_than=10**6)) == len(plain)
