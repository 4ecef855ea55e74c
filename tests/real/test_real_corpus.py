"""The verdict on any ordinary prompt: the real corpus (tests/real/corpus.py, 33 prompts of code,
chat markup, JSON, numbers and five languages, 7 to 60 tokens) on the fixed SmolLM2, 20 tokens
each. A healthy f32 candle agrees on every one, judged against the floor measured in the run
(transformers in f64), at whatever thread count the suite runs (docs/measurements.md, "Floors",
has the margins at 1, 2 and 4). Negative control: one reference logit + 1e-3 is a MISMATCH at
the last position on each of the issue's prompts."""

from __future__ import annotations

import pytest

from portkit.verify.judge.floor import FACTOR
from tests.real.corpus import CORPUS, ISSUE_PROMPTS

TOKENS = 20


@pytest.mark.parametrize("prompt", CORPUS, ids=range(len(CORPUS)))
def test_a_healthy_candle_agrees_on_every_prompt(real_verify, prompt):
    rep = real_verify("fixed", text=prompt, tokens=TOKENS)
    c = rep.comparison
    assert rep.exit_code == 0, (c.headline(), rep.explanation.summary if rep.explanation else None)
    assert c.measured and c.last.floor is not None and c.steps.floor is not None
    assert c.layers.measured and c.layers.max_ratio is not None


@pytest.mark.parametrize("prompt", ISSUE_PROMPTS, ids=range(len(ISSUE_PROMPTS)))
def test_negative_control_one_reference_logit_plus_1e3_is_a_mismatch(real_verify, prompt):
    rep = real_verify("fixed", text=prompt, tokens=TOKENS, perturb_reference=1e-3)
    c = rep.comparison
    assert rep.exit_code == 1 and not c.last.ok and c.last.floor.ratio > FACTOR
    # the perturbation is in the logits only: no layer is blamed
    assert c.layers.ok and c.localisation is None
