"""Every rule: a fixture that triggers it and one that does not; docs; the code table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portkit.candle_release import RELEASES
from portkit.lint import lint_paths
from portkit.rules import CODES, DOC_HEADINGS, RULES, selected
from portkit.settings import Settings
from portkit.target import Target
from tests.unit.rule_cases import CASES, CLEAN_VARIANTS, VARIANTS, healthy


def run(d: Path, target: dict[str, Any], select: list[str] | None = None) -> list[Any]:
    s = Settings(select=select, target=Target(**target), preview=True, respect_pyproject=False)
    r = lint_paths([d], s)
    assert not r.errors, r.errors
    return r.findings


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_triggers(code: str, tmp_path: Path) -> None:
    d, target = CASES[code][0](tmp_path / "m")
    found = [f for f in run(d, target) if f.code == code]
    assert found, f"{code} did not trigger"
    for f in found:
        assert f.name == RULES[code].name
        assert f.message and not f.message.endswith(".")
        assert f.probe is not None and f.probe.kind == RULES[code].probe_kind


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_clean(code: str, tmp_path: Path) -> None:
    d, target = CASES[code][1](tmp_path / "m")
    assert [f.message for f in run(d, target) if f.code == code] == []


@pytest.mark.parametrize("code,builder,text", VARIANTS, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(VARIANTS)])
def test_rule_variants(code: str, builder: Any, text: str, tmp_path: Path) -> None:
    d, target = builder(tmp_path / "m")
    msgs = [f.message for f in run(d, target) if f.code == code]
    assert any(text in m for m in msgs), msgs


@pytest.mark.parametrize("code,builder", CLEAN_VARIANTS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CLEAN_VARIANTS)])
def test_rule_clean_variants(code: str, builder: Any, tmp_path: Path) -> None:
    d, target = builder(tmp_path / "m")
    assert [f.message for f in run(d, target) if f.code == code] == []


def test_every_code_has_cases() -> None:
    live = {c for c, (_, st) in CODES.items() if st != "removed"}
    assert live == set(CASES)


def test_healthy_model_is_clean(tmp_path: Path) -> None:
    d = healthy(tmp_path / "m")
    assert run(d, {}) == []


def test_code_table_matches_rules() -> None:
    assert set(RULES) == {c for c, (_, st) in CODES.items() if st != "removed"}
    for code, rule in RULES.items():
        assert rule.code == code
        assert rule.name == CODES[code][0]
        assert (
            rule.group
            == {"1": "config", "2": "weights", "3": "runtime", "4": "gguf", "5": "tokenizer", "6": "embedding"}[code[2]]
        )
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_doc_has_every_heading(code: str) -> None:
    doc = RULES[code].doc()
    for h in DOC_HEADINGS:
        assert f"\n{h}\n" in f"\n{doc}\n", f"{code} doc lacks {h!r}"
    cited = doc.split("## Candle source", 1)[1]
    # the source of a release the fact was read in (0.11.0's for most; a fact of older releases cites theirs)
    assert any(f"{r}/src/" in cited for r in RELEASES), f"{code}: cite candle file:line"
    assert RULES[code].fix_title and not RULES[code].fix_title.endswith(".")


def test_select_ignore_prefixes() -> None:
    codes = lambda sel, ign=None, preview=False: {r.code for r in selected(sel, ign, preview)}  # noqa: E731
    assert codes(["PK1"]) == {c for c in RULES if c.startswith("PK1")}
    assert codes(["PK10"]) == {c for c in RULES if c.startswith("PK10")}
    assert codes(None, ["PK1", "PK2", "PK3", "PK5", "PK6"]) == {c for c in RULES if c.startswith("PK4")}
    assert "PK101" not in codes(["PK1"], ["PK101"])
    assert codes(["PK101"], ["PK1"]) == {"PK101"}  # the more specific selector wins
    assert "PK304" not in codes(None)  # preview
    assert "PK304" in codes(["PK304"])
    assert "PK304" in codes(None, preview=True)


def test_generated_rule_docs_are_current() -> None:
    from portkit.docs import pages

    root = Path(__file__).resolve().parents[2] / "docs" / "rules"
    for name, text in pages().items():
        assert (root / name).read_text() == text, f"docs/rules/{name} is stale: run `python -m portkit.docs docs/rules`"


@pytest.mark.parametrize("model_type", ["falcon_mamba", "olmo"])
def test_a_model_type_without_a_checked_module_gets_one_finding(model_type: str, tmp_path: Path) -> None:
    """No llama (or other family) facts about a config candle would not read with that module:
    weights, a bf16 CPU target (PK301: 0.11.0) and a long sequence would each trigger a rule otherwise."""
    from fixtures import skeleton as sk

    d = sk.write_model(tmp_path / "m", {**sk.config("tf4"), "model_type": model_type})
    found = run(d, {"dtype": "bf16", "max_tokens": 100_000, "candle": "0.11.0"})
    assert [f.code for f in found] == ["PK114"], [f.message for f in found]
    # negative control: the same files as llama get the runtime findings
    d2 = sk.write_model(tmp_path / "l", sk.config("tf4"))
    assert {"PK301", "PK306"} <= {f.code for f in run(d2, {"dtype": "bf16", "max_tokens": 100_000, "candle": "0.11.0"})}


def test_no_error_rule_is_static_only_and_every_static_rule_says_why() -> None:
    """Every error-severity rule has a probe verify runs (numeric, crash or tokens); what is left
    static-only is reported NOT-PROBED with its rule's own reason, not the base class's."""
    from portkit.rule_table import rows
    from portkit.rules.base import Rule

    table = rows()
    assert [r["code"] for r in table if r["severity"] == "error" and r["probe"] == "static-only"] == []
    for code, rule in RULES.items():
        if rule.probe_kind == "static-only":
            assert rule.not_probed != Rule.not_probed and not rule.not_probed.endswith("."), code


def test_reference_side_probes_are_declared_as_data() -> None:
    """A numeric probe with no candle-side patch carries how transformers computes what candle
    computes (`Probe.as_candle`), a config or tensor edit with words, for the rules that have one."""
    from portkit.findings import CandleEdit

    p = CandleEdit(id="PK413", as_candle={"what": "SiLU in the MLP", "config": {"hidden_activation": "silu"}})
    assert p.to_json() == {
        "kind": "numeric",
        "id": "PK413",
        "patch": None,
        "expect": None,
        "as_candle": {"what": "SiLU in the MLP", "config": {"hidden_activation": "silu"}},
    }
