"""`portkit verify --turns` and `--batch N`, as a user runs them: the docs table, the JSON schema,
the negative controls, the plain report without them, and the bad input that stops before any load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixtures.chat_paths import CASES, block, verify_case
from fixtures.families import family_fixture
from fixtures.seams import reference_perturbed
from portkit.verify.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "verify-report.schema.json").read_text())


@pytest.fixture(autouse=True)
def _reference_in_process(monkeypatch):
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")


def _run(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_docs_table_is_current() -> None:
    from fixtures.chat_paths import END, START
    from fixtures.doc_tables import assert_current

    doc = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
    assert_current(doc, block(), START, END, "run `python -m fixtures.chat_paths --write docs/verify.md`")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}|{c.options()}")
def test_each_bug_is_confirmed_and_its_twin_agrees(case) -> None:
    """Done-when of the issue, case by case: lint predicts exactly the case's path findings,
    verify confirms each (CRASH-CONFIRMED or CONFIRMED), and a clean twin agrees with nothing
    predicted."""
    rep = verify_case(case)
    found = rep.paths.findings if rep.paths is not None else []
    assert sorted(f.code for f in found) == sorted(case.codes)
    assert all(f.confirmed for f in found), [(f.code, f.verdict, f.evidence) for f in found]
    if case.twin:
        assert rep.exit_code == 0, (
            rep.comparison.headline() if rep.comparison else None,
            [(c.path.name, c.headline()) for s in (rep.paths.sections if rep.paths else []) for c in s.checks],
        )


def test_json_follows_the_schema_and_the_plain_report_is_unchanged(capsys) -> None:
    d = family_fixture("qwen2", "legacy")
    code, out, _ = _run(capsys, d, "--dtype", "f16", "--turns", "--batch", "2", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert code == 1 and doc["verdict"] == "mismatch"
    sec = doc["paths"]["sections"][0]
    turn = next(c for c in sec["checks"] if c["path"] == "turns")
    assert turn["run"]["failure"]["stage"] == "continuation"
    assert "dtype mismatch in cat, lhs: F16, rhs: F32" in turn["run"]["failure"]["message"]
    assert {f["code"]: f["verdict"] for f in sec["findings"]} == {"PK309": "CRASH-CONFIRMED", "PK312": "CONFIRMED"}
    assert len(doc["paths"]["segment"]) == 8 and doc["paths"]["fed"] == doc["reference"]["forced"]
    # the defaults (and an explicit --batch 1) run nothing new: no `paths` key, the same keys as before
    code1, plain, _ = _run(capsys, d, "--format", "json")
    code2, one, _ = _run(capsys, d, "--batch", "1", "--turns", "1", "--format", "json")
    a, b = json.loads(plain), json.loads(one)
    jsonschema.validate(a, SCHEMA)
    assert "paths" not in a and set(a) == set(b)
    assert code1 == code2 == 0 and a["candle_runs"] == b["candle_runs"] and a["comparison"] == b["comparison"]


def test_text_report_names_the_second_turn_and_the_batch(capsys) -> None:
    code, out, _ = _run(capsys, family_fixture("olmo2", "legacy"), "--dtype", "f16", "--turns", "--batch", "2")
    assert code == 1
    assert (
        "second turn (candle): a second turn of 8 tokens at offset 24, after the 16-token prompt and 8 generated" in out
    )
    assert "candle error at continuation: dtype mismatch in cat, lhs: F16, rhs: F32" in out
    assert "batch (candle): 2 rows of 16 tokens in one forward" in out
    assert "PK309 continuation-mask-in-model-dtype  CRASH-CONFIRMED" in out
    assert "verdict: MISMATCH: the second turn failed in candle" in out


@pytest.mark.parametrize("flags", [("--turns",), ("--batch", "2")])
def test_negative_control_the_paths_say_mismatch(capsys, flags) -> None:
    """1e-3 added to one reference logit of the path's rows: the clean twin must mismatch."""
    with reference_perturbed(1e-3):
        code, out, _ = _run(capsys, family_fixture("qwen2", "legacy"), *flags, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["paths"]["ok"] is False
    check = doc["paths"]["sections"][0]["checks"][0]
    assert check["ok"] is False and check["vs_control"]["ok"] is True  # candle against itself still agrees
    assert 9e-4 < check["vs_reference"]["last_max_abs_diff"] < 2e-3


def _subprocess(*argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "portkit.verify", *map(str, argv)], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "argv,line",
    [
        (("--batch", "0"), "portkit: error: --batch must be at least 1, got 0"),
        (("--turns", "0"), "portkit: error: --turns must be at least 1, got 0"),
        (
            ("--turns", "3"),
            "portkit: error: --turns 3: verify measures one continuation, a second turn (--turns 2, or --turns alone)",
        ),
        (
            ("--batch", "5000"),
            "portkit: error: --batch 5000 is more rows than verify runs in one forward (at most 4096)",
        ),
        (
            ("--turns", "--tokens", "110"),
            "portkit: error: --turns: the second turn ends at position 134 (16 prompt + 110 generated + 8 tokens), "
            "past "
            "max_position_embeddings=128, the rows of candle's cos/sin table; use a shorter prompt or fewer --tokens",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2_subprocess(argv, line) -> None:
    p = _subprocess(family_fixture("qwen2", "legacy"), *argv)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == line and p.stdout == ""


def test_a_batch_that_cannot_fit_is_refused_before_any_load(monkeypatch) -> None:
    from portkit.verify.candle import native as candle
    from portkit.verify.errors import BadInput
    from portkit.verify.pipeline import VerifyOptions, verify
    from portkit.verify.sections import batch

    monkeypatch.setattr(batch, "available_bytes", lambda: 2**20)

    def no_load(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(candle, "load_runner", no_load)
    with pytest.raises(
        BadInput,
        match=r"--batch 64: 64 rows of 16 tokens need about \d+ MiB .* more than the 1 MiB available; use a smaller "
        r"--batch",
    ):
        verify(VerifyOptions(model_dir=family_fixture("qwen2", "legacy"), batch=64))


def test_a_batch_that_cannot_fit_is_exit_2_on_one_line(capsys, monkeypatch) -> None:
    from portkit.verify.sections import batch

    monkeypatch.setattr(batch, "available_bytes", lambda: 2**20)
    code, out, err = _run(capsys, family_fixture("qwen2", "legacy"), "--batch", "64")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("portkit: error: --batch 64: 64 rows of 16 tokens need about")
