"""The reference-side counterfactual (PK404): CONFIRMED only when transformers' own effect (with vs
without the llama3 scaling) exceeds the GGUF's noise against transformers without it; otherwise
NOT-REPRODUCED with both numbers and the prompt length from which the effect exceeds the noise.
The reference runs are replaced by arrays whose truth the test sets."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from portkit.verify import attribution, refjob
from portkit.verify.confirm import Confirmation
from portkit.verify.runs import Reference, RunOutputs

VOCAB = 8
ROWS = np.tile(np.linspace(0.0, 7.0, VOCAB, dtype=np.float32), (4, 1))
CONFIG = {"model_type": "llama", "rope_theta": 500000.0, "max_position_embeddings": 64,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}


def _confirmed(code: str = "PK404") -> Confirmation:
    return Confirmation(code=code, name="rope-freqs-ignored", severity="error", message="m", filename="f.gguf",
                        probe_kind="numeric", verdict="CONFIRMED", evidence="the GGUF differs", details={})


def _setup(monkeypatch, effect: float, noise: float, ramp: np.ndarray) -> tuple[list, Reference, RunOutputs]:
    without = ROWS + np.float32(effect)
    calls = []

    def fake(model, reference, tokens, without_config, scan_len, progress):
        calls.append((json.loads(without_config), scan_len))
        return without, (ramp if scan_len else np.zeros(0, np.float32))

    monkeypatch.setattr(refjob, "reference_effect", fake)
    ref = Reference(prompt=list(range(16)), greedy=[7, 7, 7, 7], rows=ROWS.copy(), forced=[7, 7, 7, 7])
    run = RunOutputs(label="gguf", rows=without + np.float32(noise), last=(without + np.float32(noise))[0])
    return calls, ref, run


def _model() -> SimpleNamespace:
    return SimpleNamespace(config=CONFIG, config_text=json.dumps(CONFIG))


def test_effect_under_the_noise_is_not_reproduced(monkeypatch) -> None:
    ramp = np.linspace(0.0, 1.0, 64, dtype=np.float32)  # exceeds 0.4 from position 26 on
    calls, ref, run = _setup(monkeypatch, effect=0.05, noise=0.4, ramp=ramp)
    (c,) = attribution.reference_side([_confirmed()], _model(), ref, run, "q8_0", 4, lambda _s: None)
    assert c.verdict == "NOT-REPRODUCED"
    side = c.details["reference_side"]
    assert side["effect"] == pytest.approx(0.05, abs=1e-6) and side["noise"] == pytest.approx(0.4, abs=1e-6)
    assert side["reproduces_from"] == attribution.first_length_over(ramp, side["noise"]) == 27
    assert "differ 0.05 over 19 tokens; q8_0 noise 0.4" in c.evidence
    assert "from a 27-token prompt" in c.evidence
    # transformers without the effect: the llama3 scaling gone, theta kept; the scan is capped
    # by max_position_embeddings
    assert "rope_scaling" not in calls[0][0] and calls[0][0]["rope_theta"] == 500000.0
    assert [s for _, s in calls] == [0, 64]


def test_effect_over_the_noise_is_confirmed(monkeypatch) -> None:
    calls, ref, run = _setup(monkeypatch, effect=3.0, noise=0.4, ramp=np.zeros(0, np.float32))
    (c,) = attribution.reference_side([_confirmed()], _model(), ref, run, "q8_0", 4, lambda _s: None)
    assert c.verdict == "CONFIRMED" and "the effect explains the divergence" in c.evidence
    assert c.evidence.endswith("the GGUF differs")
    assert [s for _, s in calls] == [0]  # no length scan needed


def test_never_over_the_noise_says_how_far_it_looked(monkeypatch) -> None:
    _, ref, run = _setup(monkeypatch, effect=0.05, noise=0.4, ramp=np.full(64, 0.1, np.float32))
    (c,) = attribution.reference_side([_confirmed()], _model(), ref, run, "q8_0", 4, lambda _s: None)
    assert c.verdict == "NOT-REPRODUCED" and "stays under the noise up to 64 tokens" in c.evidence


def test_other_findings_and_verdicts_are_untouched(monkeypatch) -> None:
    calls, ref, run = _setup(monkeypatch, effect=0.05, noise=0.4, ramp=np.zeros(0, np.float32))
    other = _confirmed("PK410")
    not_rep = _confirmed()
    not_rep.verdict = "NOT-REPRODUCED"
    assert attribution.reference_side([other, not_rep], _model(), ref, run, "q8_0", 4, lambda _s: None) == [other, not_rep]
    assert calls == []


def test_rope_parameters_layout_is_reset_too() -> None:
    cfg = {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e5, "factor": 8.0}}
    assert attribution._without_rope_scaling(cfg) == {"rope_parameters": {"rope_type": "default", "rope_theta": 1e5}}


def test_length_notes_say_whether_the_run_reached_the_length() -> None:
    c = _confirmed("PK109")
    c.message = "... candle attends to every earlier position (the effect appears only past 4096 tokens)"
    c.verdict = "NOT-REPRODUCED"
    (short,) = attribution.length_notes([c], 24)
    assert short.details["appears_past"] == 4096 and short.details["tokens_covered"] == 24
    assert "appears only past 4096 tokens and this run covered 24" in short.evidence
    c2 = _confirmed("PK109")
    c2.message = "... (the effect appears past 4 tokens, and --max-tokens 24 reaches it)"
    (long,) = attribution.length_notes([c2], 24)
    assert long.evidence.endswith("(the effect appears past 4 tokens; this run covered 24)")
    plain = _confirmed("PK101")
    assert attribution.length_notes([plain], 24) == [plain]  # no length named: untouched
