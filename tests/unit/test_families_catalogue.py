"""README's family table is the one the registry and the rules generate."""

from __future__ import annotations

from pathlib import Path

from portkit.rules.catalogue import readme_block

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_family_table_is_current() -> None:
    assert readme_block() in README.read_text(encoding="utf-8"), (
        "run `python -m portkit.rules.catalogue` and paste it into README.md"
    )


def test_table_lists_each_rule_for_the_families_it_names() -> None:
    from portkit.rules import RULES

    block = readme_block()
    row = next(line for line in block.splitlines() if line.startswith("| granite |"))
    assert "PK119" in row  # the granite multipliers rule
    assert "PK118" not in row  # gemma's query_pre_attn_scalar is not about granite
    assert all(RULES[c].group != "gguf" for c in ("PK119",))
