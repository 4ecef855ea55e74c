"""A patch that makes the prompt's forward agree while the cached steps still differ confirms
the finding for the prompt (mistral's sliding window: the prefill keeps sw+1 keys, which a
config edit fixes; decode keeps every key, which none does)."""

from __future__ import annotations

from typing import Any

import numpy as np

from portkit.verify.candle.run import RunOutputs
from portkit.verify.judge.comparison import compare_run
from portkit.verify.judge.confirm import Subject, confirm_numeric
from portkit.verify.judge.verdicts import restores_prompt
from tests.unit.test_confirm_verdicts import F32, REF, ROWS, SHIFTED, numeric


def _run(prompt_shift: float, step_shift: float) -> RunOutputs:
    rows = ROWS.copy()
    rows[0, SHIFTED] += np.float32(prompt_shift)
    rows[1:, SHIFTED] += np.float32(step_shift)
    return RunOutputs(label="candle", last=rows[0], rows=rows, greedy=list(REF.greedy))


def _subject(after_patch: RunOutputs) -> Subject:
    as_read = _run(3.0, 5.0)

    def run_patched(_patch: dict[str, Any]):
        return after_patch, compare_run(REF, after_patch, F32)

    return Subject(as_read=as_read, as_read_cmp=compare_run(REF, as_read, F32), run_patched=run_patched)


def test_prompt_restored_steps_still_differ_is_confirmed_and_says_so() -> None:
    c = confirm_numeric(numeric("PK115", {"sliding_window": 3}), _subject(_run(0.0, 5.0)), {})
    assert c.verdict == "CONFIRMED", c.evidence
    assert "the prompt's last position agrees (0)" in c.evidence
    assert "the generated steps still differ" in c.evidence


def test_patch_that_restores_nothing_stays_not_reproduced() -> None:
    """The negative control: the same steps, but the prompt still differs after the patch."""
    c = confirm_numeric(numeric("PK115", {"sliding_window": 3}), _subject(_run(2.9, 5.0)), {})
    assert c.verdict == "NOT-REPRODUCED", c.evidence


def test_restores_prompt_needs_a_judged_last_position_that_was_wrong() -> None:
    good, bad = compare_run(REF, _run(0.0, 5.0), F32), compare_run(REF, _run(3.0, 5.0), F32)
    assert restores_prompt(bad, good)
    assert not restores_prompt(good, good)  # nothing to restore
    assert not restores_prompt(bad, bad)
