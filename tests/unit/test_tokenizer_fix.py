"""portkit.tokenizer_fix: the edit each tokenizer finding gets (from its rule,
`TokenizerRule.tokenizer_changes`), the text it writes, and each reason the plan's check refuses
an edit.

The acceptance tests (tests/acceptance/test_verify_tokens.py) prove the written files give
transformers' ids; these pin the edits themselves, value by value, so an edit that drops a
key (PK506's `truncation`, or its `padding`) fails here and not only through the plan's own
check.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from fixtures import skeleton as sk
from fixtures.tokenizer_shapes import write_tokenizer
from portkit import tokenizer_fix as tfix
from portkit.errors import InputError
from portkit.model import load_model
from portkit.model.tokenizer_edit import apply_changes
from portkit.rules import RULES
from tests.unit.tokenizer_cases import _bad_merge, _set, shape

METASPACE_FIRST = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}

#: each triggering shape's edits, as fix writes them (None: refused, the finding remains)
EDITS: dict[str, dict[str, dict[str, Any] | None]] = {
    "llama2": {
        # the Llama class's pipeline: its prepend scheme ("first"), not the probe's (which keeps the crate's "always")
        "PK501": {"normalizer": None, "pre_tokenizer": METASPACE_FIRST},
        "PK502": {"pre_tokenizer": METASPACE_FIRST},
        "PK505": {"added_tokens[<unk>].normalized": False, "added_tokens[<s>].normalized": False},
        # candle 0.11.1's crate decodes them as `▁<unk>`, `▁<s>`: the same edit
        "PK519": {"added_tokens[<unk>].normalized": False, "added_tokens[<s>].normalized": False},
    },
    "qwen2": {
        "PK501": {"normalizer": {"type": "NFC"}},
        "PK508": None,
    },  # the normalizer alone: its finding edits no pre-tokenizer
    "smollm": {"PK503": {"pre_tokenizer": BYTE_LEVEL}, "PK506": {"padding": None, "truncation": None}},
    "gemma": {
        "PK501": {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}},
        "PK504": {
            "decoder": {
                "type": "Sequence",
                "decoders": [
                    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                    {"type": "ByteFallback"},
                    {"type": "Fuse"},
                ],
            }
        },
        "PK508": None,
        "PK509": None,
    },
    "neox": {
        "PK511": {
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {},
            }
        }
    },
    "llama3": {"PK508": None, "PK509": None, "PK510": None},
}


def _facts(d: Path) -> Any:
    return load_model(d)


def changes_for(finding: Any, ctx: Any) -> dict[str, Any] | None:
    """What the finding's rule has fix write into tokenizer.json (None: no tokenizer.json edit)."""
    return RULES[finding.code].tokenizer_changes(finding, ctx)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(EDITS))
def test_each_finding_gets_the_edit_transformers_builds(name: str, tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", name, "trigger")
    found, ctx = tfix.findings(_facts(d))
    assert sorted(f.code for f in found) == sorted(EDITS[name])
    for f in found:
        want = EDITS[name][f.code]
        assert changes_for(f, ctx) == want, f.code
    p = tfix.plan(d)
    assert p is not None and p.path == d / "tokenizer.json"
    assert [(e.finding.code, e.changes, e.refused is None) for e in p.edits] == [
        (f.code, EDITS[name][f.code] or {}, EDITS[name][f.code] is not None) for f in found
    ]


def test_pk501_keeps_its_probes_prepend_scheme_out_of_the_fix(tmp_path: Path) -> None:
    """The probe measures PK501 alone (the crate's "always" kept); fix writes the class's "first"."""
    d = write_tokenizer(tmp_path / "m", "llama2", "trigger")
    found, ctx = tfix.findings(_facts(d))
    (pk501,) = [f for f in found if f.code == "PK501"]
    assert pk501.fix is not None and pk501.fix.edits["pre_tokenizer"]["prepend_scheme"] == "always"
    assert changes_for(pk501, ctx)["pre_tokenizer"] == METASPACE_FIRST
    # without a pre-tokenizer in its own edit, PK501 writes the normalizer alone
    alone = dataclasses.replace(pk501, fix=dataclasses.replace(pk501.fix, edits={"normalizer": None}))
    assert changes_for(alone, ctx) == {"normalizer": None}
    assert changes_for(dataclasses.replace(pk501, fix=None), ctx) == {"normalizer": None}


# ------------------------------------------------------------------ PK506: padding and truncation, both


@pytest.mark.parametrize(
    "saved,edit",
    [
        ("both", None),
        ("padding only", _set(truncation=None)),
        ("truncation only", _set(padding=None)),
    ],
    ids=["both", "padding-only", "truncation-only"],  # no spaces: mutmut passes test ids on a command line
)
def test_pk506_sets_padding_and_truncation_to_null_whichever_is_saved(saved: str, edit: Any, tmp_path: Path) -> None:
    d, _ = shape("smollm", tokenizer=edit)(tmp_path / "m")
    old_text = (d / "tokenizer.json").read_text(encoding="utf-8")
    old = json.loads(old_text)
    assert (old["padding"] is not None, old["truncation"] is not None) == {
        "both": (True, True),
        "padding only": (True, False),
        "truncation only": (False, True),
    }[saved]
    found, ctx = tfix.findings(_facts(d))
    (pk506,) = [f for f in found if f.code == "PK506"]
    assert changes_for(pk506, ctx) == {"padding": None, "truncation": None}
    p = tfix.plan(d)
    assert p is not None and p.new_text is not None
    new = json.loads(p.new_text)
    assert new["padding"] is None and new["truncation"] is None
    assert list(new) == list(old) and {
        k: v for k, v in new.items() if k not in ("padding", "truncation", "pre_tokenizer")
    } == {k: v for k, v in old.items() if k not in ("padding", "truncation", "pre_tokenizer")}
    # every byte outside the edited values is kept: the text is the old one with these three values replaced
    tj = load_model(d).tokenizer.tokenizer  # type: ignore[union-attr]
    assert p.new_text == apply_changes(tj, {"pre_tokenizer": BYTE_LEVEL, "padding": None, "truncation": None})
    assert '"padding": null,' in p.new_text and '"truncation": null,' in p.new_text
    assert [f.code for f in p.fixed] == ["PK503", "PK506"] and p.remaining == []


# ------------------------------------------------------------------ refused findings and plans without edits


def test_refused_findings_say_why(tmp_path: Path) -> None:
    d, _ = shape("llama2", tokenizer=_bad_merge)(tmp_path / "m")
    p = tfix.plan(d)
    assert p is not None and p.new_text is None and not p.changed
    pk507 = next(e for e in p.edits if e.finding.code == "PK507")
    assert (
        pk507.refused
        == f"the tokenizers crate cannot load tokenizer.json ({pk507.finding.candle_value}): regenerate it with the "
        "`tokenizers` library"
    )
    assert "Merges text file invalid at line 6" in pk507.refused
    d3 = write_tokenizer(tmp_path / "l3", "llama3", "trigger")
    p3 = tfix.plan(d3)
    assert p3 is not None and p3.new_text is None and p3.changes == {}
    for e in p3.edits:
        assert e.refused == f"not a tokenizer.json edit: {e.finding.help}" and e.changes == {}


def test_a_finding_no_tokenizer_edit_fixes_gets_none_and_is_refused(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "llama3", "trigger")
    found, ctx = tfix.findings(_facts(d))
    pk508 = next(f for f in found if f.code == "PK508")
    assert changes_for(pk508, ctx) is None
    e = tfix.edit(pk508, ctx)
    assert not e.safe and e.changes == {} and e.refused == f"not a tokenizer.json edit: {pk508.help}"


def test_a_tokenizer_rule_says_it_fixes_exactly_when_it_has_an_edit() -> None:
    """`fix_availability` (what `portkit rules` and the docs say) agrees with whether the rule
    overrides `tokenizer_changes` (what `portkit fix` does)."""
    from portkit.rules.tokenizer.base import TokenizerRule

    tok = {c: r for c, r in RULES.items() if r.group == "tokenizer"}
    assert all(isinstance(r, TokenizerRule) for r in tok.values())
    edits = {c for c, r in tok.items() if type(r).tokenizer_changes is not TokenizerRule.tokenizer_changes}
    assert edits == {c for c, r in tok.items() if r.fix_availability != "none"}
    assert edits == {"PK501", "PK502", "PK503", "PK504", "PK505", "PK506", "PK511", "PK519"}


def test_clean_directories_and_directories_without_tokenizer_json_plan_nothing(tmp_path: Path) -> None:
    clean = write_tokenizer(tmp_path / "clean", "llama2", "clean")
    p = tfix.plan(clean)
    assert p is not None and p.edits == [] and p.new_text is None
    model = sk.write_model(tmp_path / "model", sk.config("tf4"), weights=False)
    assert tfix.plan(model) is None
    (model / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizer"}')
    assert load_model(model).tokenizer is not None and tfix.plan(model) is None


def test_plan_uses_the_facts_it_is_given(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "smollm", "trigger")
    p = tfix.plan(tmp_path / "no-such-dir", _facts(d))
    assert (
        p is not None
        and p.path == d / "tokenizer.json"
        and p.changes == {"pre_tokenizer": BYTE_LEVEL, "padding": None, "truncation": None}
    )


def test_edited_facts_read_the_new_text_and_keep_the_rest(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "smollm", "trigger")
    facts = _facts(d)
    tj = facts.tokenizer.tokenizer
    new_text = apply_changes(tj, {"padding": None})
    new = tfix.edited_facts(facts, new_text)
    assert new.tokenizer.tokenizer.text == new_text and new.tokenizer.tokenizer.path == tj.path
    assert new.tokenizer.tokenizer.value["padding"] is None and tj.value["padding"] is not None
    assert new.tokenizer.config == facts.tokenizer.config and new.config == facts.config
    assert facts.tokenizer.tokenizer is tj  # the original is not changed


# ------------------------------------------------------------------ the plan's check: each refusal


def _check(d: Path, changes: dict[str, Any]) -> None:
    facts = _facts(d)
    _, ctx = tfix.findings(facts)
    tfix._check(facts, ctx, apply_changes(facts.tokenizer.tokenizer, changes))


def test_check_refuses_an_edit_the_crate_cannot_load(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "smollm", "trigger")
    with pytest.raises(InputError) as e:
        _check(d, {"normalizer": {"type": "Bogus"}})
    assert e.value.path == str(d / "tokenizer.json")
    assert (
        e.value.what.startswith("refusing to fix: the crate would refuse the edited file (")
        and "NormalizerUntagged" in e.value.what
    )


def test_check_refuses_an_edit_that_changes_the_class_transformers_picks(tmp_path: Path) -> None:
    # a LlamaTokenizer declared over a file with a ByteLevel step loads as is (TokenizersBackend)
    d = write_tokenizer(tmp_path / "m", "llama2", "trigger")
    with pytest.raises(InputError) as e:
        _check(d, {"decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}})
    assert (
        e.value.what
        == "refusing to fix: transformers would pick `TokenizersBackend` instead of `LlamaTokenizer` for the edited "
        "file"
    )
    assert e.value.path == str(d / "tokenizer.json")


@pytest.mark.parametrize(
    "part,value",
    [
        ("normalizer", {"type": "NFC"}),
        ("pre_tokenizer", {"type": "Whitespace"}),
        ("decoder", {"type": "Fuse"}),
        ("post_processor", None),
    ],
)
def test_check_refuses_an_edit_that_changes_what_transformers_builds(part: str, value: Any, tmp_path: Path) -> None:
    # llama3's class loads tokenizer.json as is: every part it builds is the file's
    d = write_tokenizer(tmp_path / "m", "llama3", "trigger")
    assert json.loads((d / "tokenizer.json").read_text())[part] != value
    with pytest.raises(InputError) as e:
        _check(d, {part: value})
    assert e.value.what == f"refusing to fix: the edit would change the {part} transformers builds"
    assert e.value.path == str(d / "tokenizer.json")


def test_check_refuses_an_edit_after_which_a_fixable_rule_still_fires(tmp_path: Path) -> None:
    d = write_tokenizer(tmp_path / "m", "llama2", "trigger")
    with pytest.raises(InputError) as e:
        _check(d, {"added_tokens[<s>].normalized": False})
    assert e.value.what == "refusing to fix: PK501, PK502, PK505, PK519 would still fire after the edit"
    assert e.value.path == str(d / "tokenizer.json")
    s = write_tokenizer(tmp_path / "s", "smollm", "trigger")
    for kept in ("padding", "truncation"):  # one of the two left as saved is still PK506
        with pytest.raises(InputError) as e:
            _check(s, {"pre_tokenizer": BYTE_LEVEL, ({"padding", "truncation"} - {kept}).pop(): None})
        assert e.value.what == "refusing to fix: PK506 would still fire after the edit"
    _check(s, {"pre_tokenizer": BYTE_LEVEL, "padding": None, "truncation": None})  # the whole edit passes
