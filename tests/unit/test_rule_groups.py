"""Code routes by a rule's declared `group`, never by the digits of its code.

`portkit fix` runs the config rules, a named tokenizer file wants the tokenizer rules' findings,
and the fix report says "config edit" for config findings: each asks `Rule.group`. The code's
hundreds (PK1xx config, ..., PK5xx tokenizer) are the published numbering; this table pins that
the two agree for every registered rule, in both directions, so a rule filed under the wrong
group (or numbered in the wrong hundred) fails here rather than being routed silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portkit.model import ModelTarget
from portkit.rules import GROUPS, RULES

ROOT = Path(__file__).resolve().parents[2]
HUNDREDS = {"config": "PK1", "weights": "PK2", "runtime": "PK3", "gguf": "PK4", "tokenizer": "PK5", "embedding": "PK6"}


@pytest.mark.parametrize("code", sorted(RULES))
def test_a_rules_group_is_its_codes_hundred(code: str) -> None:
    rule = RULES[code]
    assert code.startswith(HUNDREDS[rule.group]), (
        f"{code} is in group {rule.group!r}, numbered outside {HUNDREDS[rule.group]}xx"
    )
    assert GROUPS[code[2]] == rule.group


@pytest.mark.parametrize("group", sorted(HUNDREDS))
def test_every_code_of_a_hundred_is_in_its_group(group: str) -> None:
    """Both directions: the set of rules in `group` is exactly the set numbered in its hundred."""
    in_group = {c for c, r in RULES.items() if r.group == group}
    numbered = {c for c in RULES if c.startswith(HUNDREDS[group])}
    assert in_group == numbered and in_group


def test_no_code_routes_by_its_prefix() -> None:
    """No portkit module decides by `code.startswith("PK…")`: it asks the rule (`Rule.group`)."""
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "portkit").rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"""startswith\(\s*["']PK""", line)
    ]
    assert hits == []


def test_a_named_tokenizer_file_wants_the_tokenizer_rules_findings(tmp_path: Path) -> None:
    t = ModelTarget(root=tmp_path, tokenizer=True)
    gen = str(tmp_path / "generation_config.json")
    assert t.wants(gen, "tokenizer")  # PK508/PK510 point at generation_config.json
    assert not t.wants(gen, "config")  # PK111 there is about the model, not the tokenizer
    assert not t.wants(str(tmp_path / "x.gguf"), "gguf")
    hf = ModelTarget(root=tmp_path, hf_model=True)
    assert hf.wants(gen, "config") and hf.wants(gen, "tokenizer") and not hf.wants(str(tmp_path / "x.gguf"), "gguf")
