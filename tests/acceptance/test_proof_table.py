"""The proof of each finding on its fixture (fixtures/proof.py), as docs/verify.md's table shows it:
the verdict of every finding, the findings the verdict line names (or "unexplained" with the layer
and sub-layer where the planted fault starts), and the negative control: the same findings' probes
on the twin without the fault give NOT-REPRODUCED.

- PK413 (quantized_gemma3's SiLU), PK415 (quantized_phi3's rope base), PK416 (LongRoPE ignored),
  PK105/PK202 (biases candle drops), PK107 (candle's SiLU): CONFIRMED by transformers run as
  candle computes, which agrees with candle within f32's tolerance where transformers as
  written does not;
- three PK110 on one gemma3 config: three CRASH-CONFIRMED, chained, each with candle's own text;
- a fault no rule knows: "unexplained", with the first bad layer and sub-layer.
"""

from __future__ import annotations

import pytest

from fixtures.proof import CASES, Outcome, markdown, run_case

BY_NAME = {c.name: c for c in CASES}


@pytest.fixture(scope="module", autouse=True)
def _reference_in_process():
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    yield
    mp.undo()


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return {}


def outcome(outcomes: dict[str, Outcome], name: str) -> Outcome:
    if name not in outcomes:
        outcomes[name] = run_case(BY_NAME[name])
    return outcomes[name]


def _shown(o: Outcome) -> str:
    return "\n".join(f"{f.code} {f.verdict}: {f.evidence}" for f in o.section(o.report)[0]) + f"\n{o.explanation}"


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_each_finding_gets_its_verdict_and_the_verdict_names_the_cause(name: str, outcomes: dict[str, Outcome]) -> None:
    o = outcome(outcomes, name)
    case, shown = o.case, _shown(o)
    got: dict[str, list[str]] = {}
    for f in o.findings:
        got.setdefault(f.code, []).append(f.verdict)
    assert got == {k: list(v) for k, v in case.expect.items()}, shown
    e = o.explanation
    assert e is not None, shown  # every case is a mismatch or a failure
    if case.explained_by is None:
        assert not e.explained and e.summary.startswith("unexplained"), shown
        if case.expect:  # part explained: named, and the rest localised against transformers as candle computes
            assert e.summary.startswith(f"unexplained beyond {', '.join(case.expect)}:"), shown
        assert e.localisation is not None and e.localisation.layer == case.where, shown
        assert e.localisation.name.startswith(case.where + "."), shown  # the sub-layer, not just the layer
        assert o.report.exit_code == 1
    else:
        assert e.explained and e.by == list(case.explained_by), shown
        assert e.summary.startswith("explained by " + ", ".join(case.explained_by)), shown
    assert "something else" not in shown


@pytest.mark.parametrize("name", [c.name for c in CASES if c.control is not None])
def test_the_same_probe_on_the_twin_without_the_fault_is_not_reproduced(
    name: str, outcomes: dict[str, Outcome]
) -> None:
    o = outcome(outcomes, name)
    control = o.control_findings
    assert sorted(f.code for f in control) == sorted(c for c, v in o.case.expect.items() for _ in v), _shown(o)
    assert all(f.verdict == "NOT-REPRODUCED" for f in control), [(f.code, f.verdict, f.evidence) for f in control]
    assert o.control.exit_code == 0, _shown(o)


def test_reference_side_findings_report_both_distances(outcomes: dict[str, Outcome]) -> None:
    """ "GGUF vs transformers 0.948; vs transformers with SiLU 5e-06": the evidence and details
    carry the distance as written and as candle computes."""
    o = outcome(outcomes, "gemma3-silu")
    (pk413,) = o.findings
    side = pk413.details["reference_side"]
    assert side["as_written"] > 0.5 and side["as_candle"] < 1e-4 and side["effect"] > 0.5, side
    assert pk413.evidence.endswith("the finding explains the difference")
    assert 'against transformers with SiLU in the MLP (hidden_activation="silu"), as candle computes' in pk413.evidence
    # the verdict line names PK413 as the cause
    assert "the GGUF differs from transformers: explained by PK413" in o.report.verdict()[1]


def test_the_table_is_what_the_docs_show(outcomes: dict[str, Outcome]) -> None:
    from pathlib import Path

    table = markdown([outcome(outcomes, c.name) for c in CASES])
    docs = (Path(__file__).resolve().parents[2] / "docs" / "verify.md").read_text(encoding="utf-8")
    # the verdict columns (the distances are measured, so the docs keep them as last generated)
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert f"| {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |" in docs, line
