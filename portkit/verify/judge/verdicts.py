"""The one judge's rules: the verdict words, and the tests every confirmer applies to say that a
counterfactual explains a difference.

Every probe (numeric on a config or a GGUF, crash, tokens, template, a second turn or a batch)
decides with these, so "closer" means one thing everywhere: at least half the distance gone,
and strictly less (an infinite distance that stays infinite is not closer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from portkit.verify.judge.comparison import Comparison

Verdict = Literal["CONFIRMED", "CRASH-CONFIRMED", "NOT-REPRODUCED", "NOT-REACHED", "NOT-PROBED"]
#: The verdicts that say nothing was shown (the rest confirm the finding).
UNCONFIRMED = ("NOT-REPRODUCED", "NOT-REACHED", "NOT-PROBED")
#: A patched run must at least halve the distance to count as "closer".
IMPROVEMENT = 0.5


@dataclass
class Confirmation:
    code: str
    name: str
    severity: str
    message: str
    filename: str
    probe_kind: str
    verdict: Verdict
    evidence: str  # one line, with the numbers or candle's text
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        return self.verdict not in UNCONFIRMED

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "filename": self.filename,
            "probe": self.probe_kind,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "details": self.details,
        }


def identity(finding: Any, kind: str) -> dict[str, Any]:
    """A verdict's fields that come from its finding (`Confirmation(**identity(f, kind), ...)`)."""
    return dict(
        code=finding.code,
        name=finding.name,
        severity=finding.severity,
        message=finding.message,
        filename=finding.filename,
        probe_kind=kind,
    )


def halved(before: float, after: float) -> bool:
    """`after` is at most half of `before`, and strictly less: a NaN (infinite) distance that
    stays infinite is not halved."""
    return after <= IMPROVEMENT * before and after < before


def fewer(before: int, after: int) -> bool:
    """A counted difference (differing encodes, renders) that the counterfactual reduces."""
    return after < before


def restores_prompt(before: Comparison, fixed: Comparison) -> bool:
    """The patched run agrees at the prompt's last position (judged, f32) where the run
    before the patch did not."""
    b, f = before.last, fixed.last
    return b is not None and f is not None and f.tolerance is not None and f.ok and not b.ok


def explains(before: Comparison, after: Comparison) -> bool:
    """`after` agrees, or at least halves the distance, or restores the prompt's last position."""
    return after.ok or halved(before.distance(), after.distance()) or restores_prompt(before, after)


def closer(before: Comparison, after: Comparison) -> bool:
    """`after` agrees or halves the distance (a repair worth printing; the prompt alone is not)."""
    return after.ok or halved(before.distance(), after.distance())


def predicts(expect: str | None, message: str) -> bool:
    """A crash probe's expected text is in candle's (or the crate's) message, case aside; a probe
    that names no text predicts no particular message."""
    return expect is not None and expect != "" and expect.lower() in message.lower()


def fails_as_predicted(expect: str | None, message: str) -> bool:
    """A failure confirms a crash probe: its expected text is in the message (`predicts`), or it
    names none (any failure does)."""
    return not expect or predicts(expect, message)
