"""What users read cites public sources only: no names of the team's private notes.

README.md, docs/, the package (rule docstrings become the rule pages, SARIF and `explain`;
tolerance reasons go into verify's JSON) and the schemas are scanned, as the issue's grep does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The words of the team's notes: the seed pages, the fact files and the field-report table.
PRIVATE = re.compile(
    r"seeds'|seeds? 00[0-9]|CANDLE-FACTS|CANDLE-FAMILIES|FIELD-REPORTS|TOKENIZER-FACTS|§[0-9]",
    re.IGNORECASE,
)


def user_facing_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "portkit").rglob("*.py"))]
    files += sorted((ROOT / "schemas").glob("*.json"))
    return [f for f in files if f.is_file()]


def test_the_scan_covers_the_rule_pages_and_the_package() -> None:
    names = {f.relative_to(ROOT).as_posix() for f in user_facing_files()}
    assert {
        "README.md",
        "docs/verify.md",
        "docs/measurements.md",
        "docs/rules/PK101.md",
        "portkit/rules/config.py",
    } <= names


def test_the_pattern_catches_what_it_is_for() -> None:
    for text in [
        "(seed 003)",
        "the seeds' JSON dumps",
        "seeds 000, 002",
        'CANDLE-FACTS "layers"',
        "FIELD-REPORTS mode 1",
        "CANDLE-FAMILIES §15.3",
    ]:
        assert PRIVATE.search(text), text
    assert not PRIVATE.search("fixtures are seeded: `--seed N`")
    assert MACHINE_PATH.search("per /work/shared/CANDLE-FAMILIES.md") and not MACHINE_PATH.search(
        "~/.cache/portkit/target"
    )


@pytest.mark.parametrize("path", user_facing_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_private_note_is_cited(path: Path) -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not hits, "cite a public source or docs/measurements.md instead:\n" + "\n".join(hits)


def test_rule_texts_and_tolerance_reasons_are_public() -> None:
    """The strings users get from a running portkit, not only the files: every rule's doc,
    message help and fix title, and verify's tolerance reasons (JSON `reason`)."""
    from portkit.rules import RULES
    from portkit.verify.judge.checks import TOLERANCES

    texts = [r.doc() + r.fix_title for r in RULES.values()] + [t.reason for t in TOLERANCES.values()]
    assert not [t for t in texts if PRIVATE.search(t)]
    assert all("docs/measurements.md" in t.reason for t in TOLERANCES.values())


def test_issue_references_are_urls() -> None:
    """`owner/repo#N` shorthand means nothing outside GitHub's own pages: rule docs link it."""
    from portkit.rules import RULES

    short = re.compile(r"(?<![\w/])[A-Za-z][\w.-]*#\d+")
    bad = {code: short.findall(r.doc()) for code, r in RULES.items() if short.findall(r.doc())}
    assert not bad, bad


MACHINE_PATH = re.compile(r"/work/|/root/")  # the team's checkout and home: nothing committed names them


def repository_text_files() -> list[Path]:
    """Every source, test, fixture, bench and build file: code comments are read too, by people
    who have the repository and not the team's notes."""
    out = []
    for top in ("fixtures", "tests", "bench", "native", ".github", ".ci"):
        for f in sorted((ROOT / top).rglob("*")):
            if (
                f.is_file()
                and f.suffix in {".py", ".rs", ".toml", ".md", ".sh", ".yml", ".yaml", ""}
                and "target" not in f.parts
            ):
                out.append(f)
    return [f for f in out if f != Path(__file__).resolve()] + [ROOT / "Makefile", ROOT / "pyproject.toml"]


def test_no_file_of_the_repository_cites_the_notes_or_a_machine_path() -> None:
    hits = []
    for path in repository_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits += [
            f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for i, line in enumerate(text.splitlines(), 1)
            if PRIVATE.search(line) or MACHINE_PATH.search(line)
        ]
    assert not hits, "cite a public source or docs/ instead, and no machine paths:\n" + "\n".join(hits)
