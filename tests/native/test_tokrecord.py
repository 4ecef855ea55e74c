"""The tokens section answered from `portkit.verify.reference.tokenizer`'s record (what verify does: the
record is made in the reference's process) equals the section computed on transformers' own
tokenizer, on every tokenizer shape, with its lint findings confirmed; a call the record lacks
raises, and a text or chat prompt's ids come out the same; the same for the chat-template check
on every template of fixtures.chat_templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.chat_templates import TEMPLATES, write_chat_template
from fixtures.tokenizer_shapes import SHAPES, shape_dir
from portkit.verify.reference import tokenizer as tokrecord
from portkit.verify.sections.tokenize import prompt_ids


def _lint_findings(d: Path) -> list:
    from portkit.lint import lint_paths

    return [f for f in lint_paths([str(d)]).findings if f.code.startswith("PK5")]


@pytest.mark.parametrize("variant", ["trigger", "clean"])
@pytest.mark.parametrize("shape", SHAPES)
def test_recorded_section_equals_the_live_one(shape: str, variant: str) -> None:
    from portkit.verify.sections.tokens import tokenizer_section

    d = shape_dir(shape, variant)
    findings = _lint_findings(d)
    live = tokenizer_section(d, findings)
    rec = tokrecord.recorded(tokrecord.record(d))
    replayed = tokenizer_section(d, findings, transformers=lambda: rec)
    assert live is not None and replayed is not None
    assert replayed.to_json() == live.to_json()
    assert live.encodes, "the section compared nothing: the shape would not test the record"
    if variant == "trigger":
        assert live.findings, "no finding judged: the confirmations' calls would go untested"


@pytest.mark.parametrize("variant", ["trigger", "clean"])
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_recorded_chat_template_check_equals_the_live_one(name: str, variant: str, tmp_path: Path) -> None:
    """The chat-template check (portkit.verify.sections.chat_templates, inside the tokens section) asks
    transformers' tokenizer for its renders and their counterfactuals' (an edited template): the
    record holds every one of them."""
    from portkit.verify.sections.tokens import tokenizer_section

    d = write_chat_template(tmp_path / "t", name, variant)
    findings = _lint_findings(d)
    live = tokenizer_section(d, findings)
    rec = tokrecord.recorded(tokrecord.record(d))
    replayed = tokenizer_section(d, findings, transformers=lambda: rec)
    assert live is not None and live.templates is not None and replayed is not None
    assert replayed.to_json() == live.to_json()
    if variant == "trigger" and TEMPLATES[name][2]:
        assert [c.code for c in live.findings if c.probe_kind == "template"] == [TEMPLATES[name][2]]


@pytest.mark.parametrize("prompt", [{"text": " Hello world"}, {"chat": "Hi!"}])
def test_prompt_ids_from_the_record(prompt: dict) -> None:
    d = shape_dir("phi3", "trigger")
    live = prompt_ids(d, **prompt)
    rec = tokrecord.recorded(tokrecord.record(d, **prompt))
    assert rec[1] is None
    assert prompt_ids(d, **prompt, transformers=rec) == live


def test_a_call_not_recorded_raises_naming_it() -> None:
    tok, _ = tokrecord.recorded(tokrecord.record(shape_dir("phi3", "clean")))
    with pytest.raises(tokrecord.NotRecorded, match="encode"):
        tok.encode("a text the record never saw", add_special_tokens=True)


def test_a_tokenizer_transformers_refuses_is_its_error(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    tok, err = tokrecord.recorded(tokrecord.record(tmp_path))
    assert tok is None and err and "transformers could not load the tokenizer" in err
