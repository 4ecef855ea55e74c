"""verify's run plan (docs/verify.md, "The two sides"): what candle runs while transformers
computes. The reference's inputs are candle's own greedy tokens, known once candle ran as
written, so the first counterfactual (every numeric finding's patch at once) runs before verify
waits for transformers, and is not run again when the findings are judged; with a GGUF, the
GGUF's run as written fills that wait instead. Observed through the calls, never through time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.cache import fixture_dir
from fixtures.gguf_writer import write_gguf
from portkit.verify.candle import checkpoint as candle_checkpoint
from portkit.verify.candle import gguf as candle_gguf
from portkit.verify.pipeline import VerifyOptions, verify
from portkit.verify.reference.job import ReferenceJob

WAIT = "wait for the reference"
PATCH = "rope_theta=100000"  # PK101's counterfactual on this fixture


def _calls(monkeypatch: pytest.MonkeyPatch, **kw) -> tuple[list[str], object]:
    log: list[str] = []

    def logged(real):
        def run(*a, label: str, **k):
            log.append(label)
            return real(*a, label=label, **k)

        return run

    monkeypatch.setattr(candle_checkpoint, "run_candle", logged(candle_checkpoint.run_candle))
    monkeypatch.setattr(candle_gguf, "run_candle", logged(candle_gguf.run_candle))
    result = ReferenceJob.result

    def waited(self, *a, **k):
        log.append(WAIT)
        return result(self, *a, **k)

    monkeypatch.setattr(ReferenceJob, "result", waited)
    rep = verify(VerifyOptions(model_dir=fixture_dir("rope-theta-in-rope-parameters"), cache=False, tokens=4, **kw))
    return log, rep


def test_the_first_counterfactual_runs_while_transformers_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    log, rep = _calls(monkeypatch)
    assert log == ["as written", PATCH, WAIT]
    (pk101,) = [f for f in rep.findings if f.code == "PK101"]
    assert pk101.verdict == "CONFIRMED"
    assert [r.label for r in rep.runs] == ["as written", PATCH]  # the early run is the one judged


def test_with_a_gguf_its_run_fills_the_wait_instead(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = write_gguf(fixture_dir("rope-theta-in-rope-parameters"), tmp_path / "model.gguf")
    log, rep = _calls(monkeypatch, gguf=gguf)
    assert log[:3] == ["as written", "gguf as written", WAIT]
    assert log.count(PATCH) == 1 and log.index(PATCH) > log.index(WAIT)


def test_a_healthy_model_runs_no_counterfactual(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    real = candle_checkpoint.run_candle
    monkeypatch.setattr(
        candle_checkpoint, "run_candle", lambda *a, label, **k: (log.append(label), real(*a, label=label, **k))[1]
    )
    verify(VerifyOptions(model_dir=fixture_dir("healthy-tied"), cache=False, tokens=4))
    assert log == ["as written"]
