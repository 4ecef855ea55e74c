"""PK618's judgement (portkit.verify.embedding.confirm): candle's vectors are NaN at the run's
dtype only when every text alone gives a NaN or inf embedding; a corpus where some texts stay
finite is NOT-REPRODUCED, with the count."""

from __future__ import annotations

from types import SimpleNamespace

from portkit.findings import Finding, declared_probe
from portkit.verify.embedding.confirm import confirm_embedding
from portkit.verify.embedding.judge import RowCheck
from portkit.verify.embedding.report import EmbeddingReport

PK618 = Finding(
    code="PK618",
    name="bert-half-precision-mask-nan",
    message="m",
    filename="config.json",
    severity="error",
    probe=declared_probe("numeric", "PK618", measure="non-finite", run="embedding"),
)


def _report(nonfinite: list[bool], load_failure: str | None = None) -> EmbeddingReport:
    singles = [RowCheck(text=f"text {i}", tag="t", tokens=3, candle_nonfinite=bad) for i, bad in enumerate(nonfinite)]
    return EmbeddingReport(
        options=SimpleNamespace(dtype="f16"),
        family="bert",
        reference=None,
        singles=singles,
        batch=None,  # type: ignore[arg-type]
        counterfactuals=[],
        findings=[],
        load_failure=load_failure,
    )


def test_every_text_nan_is_confirmed() -> None:
    c = confirm_embedding(PK618, _report([True, True, True]))
    assert c.verdict == "CONFIRMED" and "3 of 3 texts" in c.evidence and "f16" in c.evidence


def test_one_finite_text_of_three_is_not_reproduced() -> None:
    """Two texts NaN and one finite: the module does not make every embedding NaN, so the
    finding's claim ("every embedding is NaN") is not what candle did. Confirming on any NaN
    row would say CONFIRMED here."""
    c = confirm_embedding(PK618, _report([True, False, True]))
    assert c.verdict == "NOT-REPRODUCED" and "2 of 3 texts" in c.evidence


def test_no_nan_text_is_not_reproduced_and_failed_texts_do_not_count() -> None:
    assert confirm_embedding(PK618, _report([False, False, False])).verdict == "NOT-REPRODUCED"
    r = _report([True, True, False])
    r.singles[2].failure = "candle failed on this text"  # not a finite embedding: left out of the count
    c = confirm_embedding(PK618, r)
    assert c.verdict == "CONFIRMED" and "2 of 2 texts" in c.evidence
    assert confirm_embedding(PK618, _report([])).verdict == "NOT-REPRODUCED"  # no text ran: nothing shown


def test_a_load_failure_is_not_reached() -> None:
    c = confirm_embedding(PK618, _report([True], load_failure="cannot find tensor"))
    assert c.verdict == "NOT-REACHED" and "cannot find tensor" in c.evidence
