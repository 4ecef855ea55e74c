"""Texts a new user reads that were wrong: `portkit --help`'s scope, PK402's help and severity,
and `portkit rules` (100 columns, filters, removed codes only with `--all`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from portkit.cli import main
from portkit.families import BY_NAME
from portkit.rules import CODES, RULES
from tests.unit.rule_cases import CASES, VARIANTS
from tests.unit.test_rules import run

PLACEHOLDER = re.compile(r"\{[a-z_]+\}")  # an unformatted str.format field, e.g. `{arch}`


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # --help
        code = int(e.code or 0)
    return code, capsys.readouterr().out


def test_help_names_every_family_not_only_llama(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = cli(capsys, "--help")
    text = " ".join(out.split())
    assert code == 0 and "for Llama checkpoints" not in text
    assert "Hugging Face transformers checkpoints in candle 0.9.1-0.11.1" in text
    missing = [name for name in BY_NAME if not re.search(rf"\b{name}\b", text)]
    assert not missing, f"`portkit --help` does not name {missing}"


TRIGGERS = [(code, b) for code, (b, _) in CASES.items()] + [(code, b) for code, b, _ in VARIANTS]


@pytest.mark.parametrize("code,builder", TRIGGERS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(TRIGGERS)])
def test_no_finding_shows_a_raw_placeholder(code: str, builder, tmp_path: Path) -> None:
    d, target = builder(tmp_path / "m")
    for f in run(d, target):
        assert not PLACEHOLDER.search(f.help or ""), f"{f.code} help: {f.help}"
        assert not PLACEHOLDER.search(f.message), f"{f.code} message: {f.message}"


def test_no_rule_title_or_summary_has_a_placeholder() -> None:
    bad = {c: (r.fix_title, r.summary()) for c, r in RULES.items() if PLACEHOLDER.search(r.fix_title + r.summary())}
    assert not bad, bad


def test_pk402_findings_have_the_rules_severity_and_name_their_key(tmp_path: Path) -> None:
    """With a config.json beside the GGUF, without one, and with a key of the wrong type: every
    finding says what `portkit rules` says (error), and its help names the real key."""
    rule = RULES["PK402"]
    builders = [CASES["PK402"][0]] + [b for c, b, _ in VARIANTS if c == "PK402"]
    assert len(builders) >= 3
    seen = set()
    for i, b in enumerate(builders):
        d, target = b(tmp_path / f"m{i}")
        for f in [f for f in run(d, target) if f.code == "PK402"]:
            assert f.severity == rule.severity == "error", f.message
            key = re.search(r"`(\w+\.rope\.freq_base)`", f.message).group(1)  # type: ignore[union-attr]
            assert f.help == f"Write `{key}` (F32) with the model's rope_theta"
            seen.add(key)
    assert seen == {"llama.rope.freq_base", "qwen2.rope.freq_base"}
    assert "Every finding is an error" in rule.doc()


# ------------------------------------------------------------------ portkit rules


def test_rules_table_fits_100_columns_and_lists_no_family_twice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # the table's width is its own, not the terminal's
    code, out = cli(capsys, "rules")
    lines = out.splitlines()
    assert code == 0 and max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert lines[0].split() == ["code", "fix", "name", "group", "severity", "verify", "status", "families"]
    rows = [line for line in lines if re.match(r"PK\d{3}\b", line)]
    assert len(rows) == sum(1 for _, s in CODES.values() if s != "removed")
    # a rule about every family says so in one word, not with the 14 names
    assert not [row for row in rows if sum(1 for name in BY_NAME if re.search(rf"\b{name}\b", row)) > 4]
    pk101 = next(row for row in rows if row.startswith("PK101"))
    assert pk101.split()[1:3] == ["[*]", "rope-theta-in-rope-parameters"] and pk101.endswith("  all")
    assert "preview" in next(row for row in rows if row.startswith("PK304"))


def test_rules_lists_removed_codes_only_with_all(capsys: pytest.CaptureFixture[str]) -> None:
    removed = [c for c, (_, s) in CODES.items() if s == "removed"]
    assert removed, "the code table keeps a removed code"
    _, out = cli(capsys, "rules")
    assert not [c for c in removed if c in out]
    _, out = cli(capsys, "rules", "--all")
    assert all(re.search(rf"^{c} .*removed", out, re.M) for c in removed)
    assert len(json.loads(cli(capsys, "rules", "--format", "json", "--all")[1])) == len(CODES)
    assert len(json.loads(cli(capsys, "rules", "--format", "json")[1])) == len(CODES) - len(removed)


def test_rules_filters_by_group(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = cli(capsys, "rules", "--group", "runtime")
    codes = re.findall(r"^(PK\d{3})\b", out, re.M)
    assert codes == sorted(c for c, r in RULES.items() if r.group == "runtime") and all(
        c.startswith("PK3") for c in codes
    )


def test_rules_filters_by_family(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = cli(capsys, "rules", "--family", "gemma3", "--format", "json")
    codes = {r["code"] for r in json.loads(out)}
    assert {"PK101", "PK118", "PK121", "PK413", "PK421"} <= codes  # all, gemma-only config, its GGUF loader
    assert not codes & {"PK103", "PK119", "PK403", "PK415"}  # llama-only, granite, quantized_llama, quantized_phi3
    assert cli(capsys, "rules", "--family", "nosuch")[0] == 2
