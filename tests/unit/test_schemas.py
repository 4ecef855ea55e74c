"""JSON Schemas: current on disk, and in agreement with the views and the reporters."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from fixtures import skeleton as sk
from portkit.families import BY_NAME
from portkit.lint import lint_paths
from portkit.model.gguf_header import read_gguf
from portkit.report.json_ import JsonReporter
from portkit.report.sarif import SarifReporter
from portkit.schemas import SCHEMAS, dumps, gguf_metadata_json
from portkit.semantics import gguf_view
from portkit.settings import Settings
from portkit.target import Target
from tests.unit.config_corpus import CORPUS
from tests.unit.rule_cases import CASES

candle_view = BY_NAME["llama"].view  # candle's llama reading, the schema's subject

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas"

# What JSON Schema cannot express and serde_json checks (see portkit/schemas.py):
# duplicate known keys, number literals that overflow a double, NaN/Infinity literals,
# serde's positional (array) form of a struct and the `{"variant": null}` form of an enum.
SCHEMA_BLIND = {
    "theta-dup",
    "scaling-dup-factor",
    "theta-1e400",
    "eos-1e400",
    "nan-literal",
    "infinity-literal",
    "top-level-array",
    "scaling-seq",
    "scaling-type-map-unit",
    "hidden-minus-zero",
    "unknown-key-1e400",
}


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def _serde_like() -> type:
    """A validator whose `integer` is serde's: an integer literal (2.0 is a float)."""
    checker = Draft202012Validator.TYPE_CHECKER.redefine_many(
        {
            "integer": lambda c, v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda c, v: isinstance(v, (int, float)) and not isinstance(v, bool),
        }
    )
    return jsonschema.validators.extend(Draft202012Validator, type_checker=checker)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_files_are_current(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.schema.json"
    assert path.read_text() == dumps(name), f"stale {path}: run `python -m portkit.schemas --write schemas`"
    Draft202012Validator.check_schema(json.loads(path.read_text()))


@pytest.mark.parametrize("name", sorted(n for n in set(CORPUS) - SCHEMA_BLIND if _parses(CORPUS[n])))
def test_candle_schema_agrees_with_candle_view(name: str) -> None:
    validator = _serde_like()(SCHEMAS["candle-llama-config"]())
    value = json.loads(CORPUS[name])
    valid = validator.is_valid(value)
    view = candle_view(CORPUS[name])
    assert valid == view.ok, f"schema says {valid}, candle_view says {view.refused or 'ok'}"


def test_schema_blind_spots_are_real() -> None:
    for name in SCHEMA_BLIND:
        assert name in CORPUS
    assert not candle_view(CORPUS["theta-dup"]).ok


@pytest.mark.parametrize("code", sorted(c for c in CASES if c.startswith("PK4")))
def test_gguf_schema_agrees_with_gguf_view(code: str, tmp_path: Path) -> None:
    validator = Draft202012Validator(SCHEMAS["gguf-llama-metadata"]())
    for which in (0, 1):
        d, _ = CASES[code][which](tmp_path / f"m{which}")
        for f in sorted(d.glob("*.gguf")):
            g = read_gguf(f)
            view = gguf_view(g)
            md_ok = not view.missing_keys and not view.wrong_type_keys
            assert validator.is_valid(gguf_metadata_json(g)) == md_ok


def _report(tmp_path: Path):  # type: ignore[no-untyped-def]
    d = sk.write_model(tmp_path / "m", sk.config("tf5", scaling=sk.LLAMA3_SCALING), drop=["lm_head.weight"])
    sk.write_gguf(d / "m.gguf", sk.llama_metadata(sk.config("tf4")), sk.gguf_tensors(sk.config("tf4"), rope_freqs=True))
    return lint_paths([d], Settings(target=Target(dtype="bf16"), respect_pyproject=False))


def test_json_report_validates(tmp_path: Path) -> None:
    r = _report(tmp_path)
    assert len({f.code for f in r.findings}) >= 4
    out = io.StringIO()
    JsonReporter().write(r, out)
    data = json.loads(out.getvalue())
    Draft202012Validator(SCHEMAS["lint-report"]()).validate(data)
    for f in data:
        assert set(f) >= {"code", "name", "message", "fix", "filename", "location", "severity", "url"}


@pytest.mark.parametrize("code", sorted(CASES))
def test_every_rules_json_validates(code: str, tmp_path: Path) -> None:
    """Findings are plain dataclasses (no validation when built): the schema is the check that
    every rule writes the published shape (types, enums, no extra keys)."""
    d, target = CASES[code][0](tmp_path / "m")
    r = lint_paths([d], Settings(target=Target(**target), preview=True, respect_pyproject=False))
    assert any(f.code == code for f in r.findings)
    out = io.StringIO()
    JsonReporter().write(r, out)
    data = json.loads(out.getvalue())
    validator = Draft202012Validator(SCHEMAS["lint-report"]())
    for f in data:
        errors = sorted(validator.iter_errors([f]), key=str)
        assert not errors, f"{f['code']}: {errors[0].message}"
        assert list(f) == [
            "code",
            "name",
            "message",
            "fix",
            "help",
            "filename",
            "location",
            "severity",
            "url",
            "transformers_value",
            "candle_value",
            "probe",
        ]


def test_sarif_validates_against_the_oasis_schema(tmp_path: Path) -> None:
    schema = json.loads((SCHEMA_DIR / "sarif-schema-2.1.0.json").read_text())
    assert schema["id"].endswith("/sarif-schema-2.1.0.json") and "oasis-open.org" in schema["id"]
    r = _report(tmp_path)
    out = io.StringIO()
    SarifReporter(cwd=tmp_path).write(r, out)
    log = json.loads(out.getvalue())
    Draft4Validator(schema, format_checker=Draft4Validator.FORMAT_CHECKER).validate(log)
    run = log["runs"][0]
    ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert all("## What it does" in rule["fullDescription"]["text"] for rule in run["tool"]["driver"]["rules"])
    for res in run["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
    assert math.isfinite(len(run["results"])) and run["results"]
