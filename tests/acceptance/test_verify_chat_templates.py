"""verify's chat-template check end to end: each template of fixtures.chat_templates rendered by
candle-examples and mistral.rs (the native wheel's minijinja) and by transformers' own
`apply_chat_template`, on verify's conversations.

- each triggering template: lint's finding is confirmed (a refusal by the environment's own
  text, another text by its counterfactual), the environments it names differ, the others not;
- each clean twin: every environment renders every conversation it can be given as
  transformers does, and lint finds nothing;
- the negative control: one character changed in transformers' render is a difference;
- verify's JSON carries the section and validates against the schema;
- the measured table in docs/chat-templates.md is what `fixtures.chat_template_table` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from fixtures.chat_template_table import measure
from fixtures.chat_templates import TEMPLATES, write_chat_template
from portkit.verify.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_SCHEMA = json.loads((ROOT / "schemas" / "verify-tokenizer-report.schema.json").read_text())

#: per template: the verdict of its finding, and how many of the conversations each environment renders otherwise
EXPECTED = {
    "python-method": ("CRASH-CONFIRMED", {"candle-examples": 7, "mistral.rs": 0}),
    "generation": ("CRASH-CONFIRMED", {"candle-examples": 7, "mistral.rs": 0}),
    "loop-control": ("CRASH-CONFIRMED", {"candle-examples": 7, "mistral.rs": 7}),
    "reversed": (None, {"candle-examples": 0, "mistral.rs": 0}),
    "descending-range": ("CONFIRMED", {"candle-examples": 0, "mistral.rs": 6}),
    "tojson": ("CONFIRMED", {"candle-examples": 0, "mistral.rs": 2}),
    "strftime": ("CRASH-CONFIRMED", {"candle-examples": 7, "mistral.rs": 0}),
    "whitespace": ("CONFIRMED", {"candle-examples": 7, "mistral.rs": 0}),
}


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_trigger_is_confirmed_and_clean_twin_agrees(name: str, tmp_path: Path) -> None:
    verdict, differing = EXPECTED[name]
    code = TEMPLATES[name][2]
    findings, sec = measure(write_chat_template(tmp_path / "t", name, "trigger"))
    assert [f.code for f in findings] == ([code] if code else [])
    assert {env: len(sec.differing(env)) for env in sec.environments} == differing
    assert [(c.code, c.verdict) for c in sec.findings] == ([(code, verdict)] if code else []), [
        c.evidence for c in sec.findings
    ]
    # an environment the finding does not name renders as transformers does
    named = set(findings[0].probe.environments) if findings else set()
    assert all(differing[env] == 0 for env in sec.environments if env not in named)
    findings, clean = measure(write_chat_template(tmp_path / "c", name, "clean"))
    assert findings == [] and clean.ok, {env: clean.differing(env) for env in clean.environments}
    assert all(len(clean.given(env)) >= 7 for env in clean.environments)


def test_a_refusal_carries_the_environments_own_text(tmp_path: Path) -> None:
    _, sec = measure(write_chat_template(tmp_path / "t", "python-method"))
    first = sec.environments["candle-examples"][0]
    assert (
        first.text is None
        and first.error == "Render error: unknown method: string has no method named strip (in chat:2)"
    )
    ok = sec.environments["mistral.rs"][0]
    assert ok.text == sec.transformers[0].text and ok.ids == sec.transformers[0].ids


def test_candle_examples_is_given_no_tools(tmp_path: Path) -> None:
    _, sec = measure(write_chat_template(tmp_path / "t", "tojson", "clean"))
    tools = [i for i, c in enumerate(sec.conversations) if c.tools]
    assert len(tools) == 2 and all("no `tools`" in (sec.environments["candle-examples"][i].cannot or "") for i in tools)
    assert all(sec.environments["mistral.rs"][i].text == sec.transformers[i].text for i in tools)


def test_negative_control_one_character_changed_is_a_difference(tmp_path: Path) -> None:
    from fixtures.seams import template_render_perturbed
    from portkit.verify.reference.tokenizer import transformers_tokenizer
    from portkit.verify.sections.chat_templates import first_difference, template_section
    from portkit.verify.sections.tokenize import crate_tokenizer

    d = write_chat_template(tmp_path / "c", "python-method", "clean")
    tok, _ = transformers_tokenizer(d)
    crate, _ = crate_tokenizer(d / "tokenizer.json")
    assert template_section(d, tok, crate, []).ok
    with template_render_perturbed():  # the test seam (fixtures/seams.py)
        sec = template_section(d, tok, crate, [])
    assert sec is not None and not sec.ok
    for env in sec.environments:
        assert sec.differing(env) == [0]
        fd = first_difference(sec, env, 0)
        assert fd["offset"] == len(sec.transformers[0].text) - 1 and fd["environment"] != fd["transformers"]


def test_verify_reports_the_section_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    d = write_chat_template(tmp_path / "t", "whitespace")
    code = main([str(d), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, TOKENIZER_SCHEMA)
    sec = doc["tokenizer"]
    assert code == 1 and doc["verdict"] == "mismatch" and sec["differing"] == 0  # the ids agree, the prompt does not
    envs = sec["chat_template"]["environments"]
    assert envs["candle-examples"]["differing"] == 7 and envs["mistral.rs"]["differing"] == 0
    assert envs["candle-examples"]["first"]["environment"] != envs["candle-examples"]["first"]["transformers"]
    assert [(f["code"], f["verdict"]) for f in sec["findings"]] == [("PK518", "CONFIRMED")]
    code = main([str(d)])
    out = capsys.readouterr().out
    assert (
        code == 1
        and "candle-examples  7 of 7 renders differ" in out
        and "mistral.rs       0 of 7 renders differ" in out
    )
    clean = write_chat_template(tmp_path / "c", "whitespace", "clean")
    assert main([str(clean), "--format", "json"]) == 0
    assert (
        json.loads(capsys.readouterr().out)["tokenizer"]["chat_template"]["environments"]["candle-examples"][
            "differing"
        ]
        == 0
    )


def test_the_measured_table_in_the_docs_is_current() -> None:
    from fixtures.chat_template_table import END, START, block
    from fixtures.doc_tables import assert_current

    doc = (ROOT / "docs" / "chat-templates.md").read_text(encoding="utf-8")
    assert_current(
        doc, block(), START, END, "run `python -m fixtures.chat_template_table --write docs/chat-templates.md`"
    )
