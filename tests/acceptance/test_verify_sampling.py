"""Issue 35's "done when" for sampling, on the tiny Llama whose generation_config.json samples as
Llama 3's does (`llama3-sampling`: do_sample, temperature 0.6, top_p 0.9, no top_k).

- lint names generate()'s implicit top_k=50;
- verify measures the distance for `LogitsProcessor::new(seed, Some(0.6), Some(0.9))` (over the
  bound, PK510 CONFIRMED) and for the call portkit advises (within it), and a stated program is
  judged: the advised one agrees, candle-examples' defaults exit 1;
- negative control: generate()'s distribution with a thousandth of its mass moved makes the
  advised program differ.

Assertions are distances against the section's bound and counts of tokens, never this CPU's floats.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from portkit.verify.pipeline import VerifyOptions, verify
from portkit.verify.report.json_ import to_json
from portkit.verify.sections.sampling import BOUND, verify_sampling

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "verify-report.schema.json").read_text())
ADVISED = "sampling=TopP, temperature=0.6, top_p=0.9, top_k_renormalised=50"


@pytest.fixture(scope="module")
def model(fixture_dir) -> Path:
    return fixture_dir("llama3-sampling")


@pytest.fixture(scope="module")
def run(model: Path):
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    cache: dict[str | None, object] = {}

    def go(sampler: str | None = None):
        if sampler not in cache:
            cache[sampler] = verify(VerifyOptions(model_dir=model, sampler=sampler))
        return cache[sampler]

    yield go
    mp.undo()


def test_lint_names_the_implicit_top_k(model: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "portkit", "lint", str(model), "--format", "json", "--select", "PK510"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    (f,) = json.loads(out.stdout)
    assert "fills `top_k`=50" in f["message"] and "LogitsProcessor::new(seed, Some(0.6), Some(0.9))" in f["message"]
    assert "keep_top_k_renormalised(prs, 50)" in f["help"]
    assert f["probe"]["kind"] == "sampling"


def test_verify_measures_the_plain_call_and_the_advised_one(run) -> None:
    rep = run()
    s = rep.sampling
    assert s is not None and s.stated is None
    assert s.program.call.startswith("LogitsProcessor::new(seed, Some(0.6), Some(0.9))")
    assert s.program.worst > BOUND
    assert s.advised.worst <= BOUND and sum(s.advised.only_candle) + sum(s.advised.only_generate) == 0
    (f,) = s.findings
    assert (f.code, f.verdict, f.details["difference"]) == ("PK510", "CONFIRMED", "top_k")
    assert rep.exit_code == 0  # a guessed program is reported, not a mismatch
    doc = to_json(rep)
    jsonschema.validate(doc, SCHEMA)
    assert (
        doc["sampling"]["program"]["worst_distance"] > BOUND
        and doc["sampling"]["findings"][0]["verdict"] == "CONFIRMED"
    )


def test_the_advised_program_stated_agrees(run) -> None:
    rep = run(ADVISED)
    assert rep.sampling.program.same and rep.sampling.ok and not rep.sampling.findings
    assert rep.exit_code == 0


def test_candle_examples_defaults_are_a_mismatch(run) -> None:
    rep = run("candle-examples")
    s = rep.sampling
    assert not s.ok and rep.exit_code == 1
    assert {f.details["difference"]: f.verdict for f in s.findings} == {
        "greedy": "CONFIRMED",
        "repetition_penalty": "CONFIRMED",
    }
    assert "the stated sampler draws from another distribution" in rep.verdict()[1]
    jsonschema.validate(to_json(rep), SCHEMA)


def test_negative_control_a_moved_thousandth_is_a_mismatch(run, model: Path) -> None:
    import portkit_native

    rep = run(ADVISED)
    ref = rep.reference
    probs = ref.extra["sampling"].astype(np.float64)
    k = int(np.argmax(probs.max(axis=1) < 1.0))  # a step that samples from more than one token
    top = np.argsort(-probs[k])[:2]
    probs[k, top[0]] -= 1e-3
    probs[k, top[1]] += 1e-3
    moved = dataclasses.replace(ref, extra={**ref.extra, "sampling": probs})
    section = verify_sampling(model, moved, [], ADVISED, portkit_native)
    assert not section.ok and section.program.worst_step == k


def test_text_report_has_the_sampling_section(model: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "portkit", "verify", str(model)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "sampling: generate() draws with temperature=0.6, top_k=50 (generate()'s default), top_p=0.9" in out.stdout
    assert (
        "the call portkit advises: LogitsProcessor::from_sampling(seed, Sampling::TopP { p: 0.9, temperature: 0.6 })"
        in out.stdout
    )


def test_an_unreadable_sampler_is_exit_2(model: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "portkit", "verify", str(model), "--sampler", "temperature=hot"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "not a number" in out.stderr, out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "portkit", "lint", str(model), "--sampler", "colour=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "unknown key" in out.stderr, out.stderr
