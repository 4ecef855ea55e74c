"""One section's judging, the same for the HF checkpoint and for a GGUF: every finding's verdict
(crash findings chained, then the numeric ones), the length scan of reference-side findings
under the noise, the note for findings whose effect appears only past a length, and what
accounts for the section's mismatch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from portkit.verify.judge.attribution import EffectScan, length_notes, scan_lengths
from portkit.verify.judge.confirm import Subject, confirm_section
from portkit.verify.judge.explain import Explanation, explain
from portkit.verify.judge.verdicts import Confirmation


@dataclass(frozen=True)
class SectionVerdicts:
    findings: list[Confirmation]
    explanation: Explanation | None


def judge_section(
    findings: Sequence[Any],
    subject: Subject,
    *,
    ran: str,
    covered: int,
    scan: EffectScan | None,
    max_positions: Any,
    no_layers: str | None,
    progress: Callable[[str], None],
) -> SectionVerdicts:
    """`ran`: what the run as read did, in words; `covered`: the tokens it covered (prompt and
    generated); `scan`: transformers as candle computes over longer prompts (None: not
    available); `no_layers`: why the section has no per-layer values, when it has none."""
    confirmations, numeric_subject = confirm_section(findings, subject, ran)
    confirmations = scan_lengths(confirmations, findings, scan, max_positions, progress)
    confirmations = length_notes(confirmations, covered)
    explanation = explain(subject.as_read_cmp, subject.as_read, confirmations, findings, numeric_subject, no_layers)
    return SectionVerdicts(confirmations, explanation)
