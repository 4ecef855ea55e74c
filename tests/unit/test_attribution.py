"""Reference-side counterfactuals, judged on numbers whose truth the test sets: transformers as
written (the reference), transformers as candle computes (the finding's `Probe.as_candle` edit)
and candle are logit tables; the effect is as written vs as candle, the noise candle vs as
candle. CONFIRMED when candle agrees with transformers as candle computes, or the distance at
least halves with the effect over the noise; NOT-REPRODUCED with both numbers when the effect
is within the noise, and then the prompt length from which it exceeds it (the length scan)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from portkit.findings import Finding, declared_probe
from portkit.rules import as_candle as AC
from portkit.verify.candle.run import RunOutputs
from portkit.verify.judge import attribution
from portkit.verify.judge.checks import TOLERANCES
from portkit.verify.judge.comparison import compare_run
from portkit.verify.judge.confirm import Subject, confirm_numeric
from portkit.verify.reference import as_candle
from portkit.verify.reference.as_candle import edited_config
from portkit.verify.reference.result import Reference

F32 = TOLERANCES["f32"]
VOCAB = 8
ROWS = np.tile(np.linspace(0.0, 7.0, VOCAB, dtype=np.float32), (4, 1))  # argmax 7 everywhere, margin 1
EFFECT_AT, NOISE_AT = 0, 1  # the logits the finding's effect and the noise move (never the argmax)
CONFIG = {
    "model_type": "llama",
    "rope_theta": 500000.0,
    "max_position_embeddings": 64,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
EDIT = AC.edit("no llama3 rope scaling", config=AC.rope(CONFIG, plain=True))


def _finding(edit: dict[str, Any] | None = EDIT) -> Finding:
    return Finding(
        code="PK404",
        name="rope-freqs-ignored",
        message="m",
        filename="f.gguf",
        severity="error",
        probe=declared_probe("numeric", "PK404", as_candle=edit),
    )


def _world(effect: float, noise: float) -> tuple[Subject, list[dict[str, Any]]]:
    """transformers as candle computes = the reference + `effect` on one logit; candle = that +
    `noise` on another."""
    ref = Reference(prompt=list(range(16)), greedy=[7, 7, 7, 7], rows=ROWS.copy(), forced=[7, 7, 7, 7])
    as_candle_rows = ROWS.copy()
    as_candle_rows[:, EFFECT_AT] += np.float32(effect)
    candle_rows = as_candle_rows.copy()
    candle_rows[:, NOISE_AT] += np.float32(noise)
    run = RunOutputs(label="gguf", rows=candle_rows, last=candle_rows[0], greedy=[7, 7, 7, 7])
    asked: list[dict[str, Any]] = []

    def reference_as(edit: dict[str, Any]) -> Reference:
        asked.append(edit)
        return Reference(prompt=ref.prompt, greedy=[7, 7, 7, 7], rows=as_candle_rows, forced=ref.forced)

    subject = Subject(
        as_read=run,
        as_read_cmp=compare_run(ref, run, F32),
        run_patched=lambda p: (run, compare_run(ref, run, F32)),
        what="the GGUF in candle",
        patch_word="",
        reference_as=reference_as,
        compare=lambda r, o: compare_run(r, o, F32),
        reference=ref,
    )
    return subject, asked


def test_agreement_with_transformers_as_candle_computes_confirms_with_both_distances() -> None:
    s, asked = _world(effect=3.0, noise=0.0)
    c = confirm_numeric(_finding(), s, {})
    assert c.verdict == "CONFIRMED", c.evidence
    assert asked == [EDIT]
    assert c.evidence.startswith(
        "logits differ 3 (tol 1e-4); against transformers with no llama3 rope scaling (rope_scaling removed), as "
        "candle computes, 0"
    )
    assert c.evidence.endswith("the finding explains the difference")
    side = c.details["reference_side"]
    assert side["as_written"] == pytest.approx(3.0) and side["as_candle"] == 0.0
    assert side["effect"] == pytest.approx(3.0) and side["noise"] == 0.0
    assert c.details["as_candle"] == EDIT


def test_an_effect_over_the_noise_that_halves_the_distance_is_confirmed() -> None:
    s, _ = _world(effect=3.0, noise=0.4)
    c = confirm_numeric(_finding(), s, {})
    assert c.verdict == "CONFIRMED" and c.evidence.endswith("(a difference remains that is not this finding's)"), (
        c.evidence
    )
    assert c.details["reference_side"]["noise"] == pytest.approx(0.4, abs=1e-6)


def test_an_effect_within_the_noise_is_not_reproduced_then_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    s, _ = _world(effect=0.05, noise=0.4)
    (c,) = [confirm_numeric(_finding(), s, {})]
    assert c.verdict == "NOT-REPRODUCED", c.evidence
    assert "transformers as written and as candle computes differ 0.05, within the f32 noise 0.4" in c.evidence
    assert c.details["reference_side"]["under_noise"] is True
    ramp = np.linspace(0.0, 1.0, 64, dtype=np.float32)  # exceeds 0.4 from position 26 on
    calls = []

    class Scan:
        def __init__(self, by_position: np.ndarray) -> None:
            self.by_position = by_position

        def effect_by_position(self, edit: dict[str, Any], scan_len: int) -> np.ndarray:
            calls.append((edit, scan_len))
            return self.by_position

    (scanned,) = attribution.scan_lengths(
        [c], [_finding()], Scan(ramp), CONFIG["max_position_embeddings"], lambda _s: None
    )
    assert calls == [(EDIT, 64)]  # capped by max_position_embeddings
    assert scanned.details["reference_side"]["reproduces_from"] == attribution.first_length_over(ramp, 0.4) == 27
    assert scanned.evidence.endswith("; it exceeds the noise from a 27-token prompt")
    # an effect that never exceeds it says how far the scan looked
    (flat,) = attribution.scan_lengths(
        [c], [_finding()], Scan(np.full(64, 0.1, np.float32)), CONFIG["max_position_embeddings"], lambda _s: None
    )
    assert flat.evidence.endswith("it stays under the noise up to 64 tokens")


def test_only_findings_within_the_noise_are_scanned() -> None:
    s, _ = _world(effect=3.0, noise=0.0)
    c = confirm_numeric(_finding(), s, {})

    class NoScan:
        def effect_by_position(self, edit: dict[str, Any], scan_len: int) -> np.ndarray:
            pytest.fail("no scan")

    assert attribution.scan_lengths(
        [c], [_finding()], NoScan(), CONFIG["max_position_embeddings"], lambda _s: None
    ) == [c]


def test_the_reference_side_scans_with_transformers_as_candle_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """AsCandleRuns' scan is `reference_as_candle` over the scan's length, on the reference's
    inputs, without the sub-layers (the key the scan's cache entry had)."""
    s, _ = _world(effect=0.05, noise=0.4)
    calls = []

    def fake(model, reference, tokens, edit, scan_len, progress, sublayers=(), session=None):
        calls.append((edit, scan_len, tokens, tuple(sublayers)))
        return as_candle.AsCandle(reference, np.zeros(scan_len, np.float32))

    monkeypatch.setattr(as_candle, "reference_as_candle", fake)
    runs = as_candle.AsCandleRuns(SimpleNamespace(config=CONFIG), s.reference, 4, lambda _s: None, ["self_attn"])
    assert runs.effect_by_position(EDIT, 64).shape == (64,)
    assert calls == [(EDIT, 64, 4, ())]


def test_without_a_reference_to_rerun_the_edit_is_not_used() -> None:
    """A subject without reference-side runs (none available) judges the finding as before."""
    s, asked = _world(effect=3.0, noise=0.0)
    s.reference_as = None
    c = confirm_numeric(_finding(), s, {})
    assert asked == [] and c.verdict == "CONFIRMED" and c.evidence.endswith("no config edit can fix this")


def test_a_reference_that_cannot_run_as_candle_is_not_reached() -> None:
    s, _ = _world(effect=3.0, noise=0.0)

    def refuse(edit: dict[str, Any]) -> Reference:
        raise ValueError("transformers could not load it: unknown rope_type")

    s.reference_as = refuse
    c = confirm_numeric(_finding(), s, {})
    assert c.verdict == "NOT-REACHED" and c.evidence.endswith(
        "transformers as candle computes does not run: transformers could not load it: unknown rope_type"
    )


# --------------------------------------------------------------------------- the edits


def test_rope_edits_go_where_the_config_keeps_its_rope_settings() -> None:
    # transformers 5's layout: it ignores a top-level rope_theta once rope_parameters is there
    t5 = {
        "rope_parameters": {
            "rope_type": "longrope",
            "rope_theta": 1e5,
            "long_factor": [1.0],
            "partial_rotary_factor": 0.75,
        }
    }
    assert AC.rope(t5, plain=True) == {
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e5, "partial_rotary_factor": 0.75}
    }
    assert AC.rope(t5, theta=1e4) == {"rope_parameters.rope_theta": 1e4}
    # both at once (PK415 and PK416 on one phi3 GGUF): the object replaced first, then the key set
    both = {**AC.rope(t5, plain=True), **AC.rope(t5, theta=1e4)}
    cfg = json.loads(edited_config(json.dumps(t5), both))
    assert cfg["rope_parameters"] == {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.75}
    # the legacy layout: top-level keys transformers 5 reads into rope_parameters
    assert AC.rope(CONFIG, plain=True) == {"rope_scaling": None}
    assert AC.rope(CONFIG, theta=1e4) == {"rope_theta": 1e4}
    assert AC.rope(None, theta=1e4, plain=True) == {"rope_scaling": None, "rope_theta": 1e4}
    # gemma3's per-layer-type parameters: each one
    g3 = {
        "rope_parameters": {
            "full_attention": {"rope_theta": 1e6, "rope_type": "linear", "factor": 8.0},
            "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"},
        }
    }
    assert AC.rope(g3, plain=True) == {
        "rope_parameters.full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "rope_parameters.sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    }


def test_edited_config_sets_nested_keys_and_removes_with_none() -> None:
    text = json.dumps({"a": 1, "rope_parameters": {"rope_theta": 5.0, "factor": 2.0}})
    out = json.loads(edited_config(text, {"rope_parameters.factor": None, "a": None, "b.c": 3}))
    assert out == {"rope_parameters": {"rope_theta": 5.0}, "b": {"c": 3}}
    assert AC.edit("x", tensors=["t.bias"]) == {"what": "x", "tensors": {"t.bias": "zero"}}


# --------------------------------------------------------------------------- length notes


def test_length_notes_say_whether_the_run_reached_the_length() -> None:
    from portkit.verify.judge.confirm import Confirmation

    def conf(code: str, message: str) -> Confirmation:
        return Confirmation(
            code=code,
            name="n",
            severity="warning",
            message=message,
            filename="f",
            probe_kind="numeric",
            verdict="NOT-REPRODUCED",
            evidence="e",
            details={},
        )

    (short,) = attribution.length_notes([conf("PK109", "... (the effect appears only past 4096 tokens)")], 24)
    assert short.details["appears_past"] == 4096 and short.details["tokens_covered"] == 24
    assert "appears only past 4096 tokens and this run covered 24" in short.evidence
    (long,) = attribution.length_notes(
        [conf("PK109", "... (the effect appears past 4 tokens, and --max-tokens 24 reaches it)")], 24
    )
    assert long.evidence.endswith("(the effect appears past 4 tokens; this run covered 24)")
    plain = conf("PK101", "no length")
    assert attribution.length_notes([plain], 24) == [plain]  # no length named: untouched
