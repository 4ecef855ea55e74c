"""Honest attribution for findings no file edit can undo: transformers run as candle computes.

candle hard-codes some behaviours that no edit on its side undoes (quantized_gemma3's SiLU,
quantized_phi3's rope base, a bias its module never reads, the llama3 rope factors
quantized_llama ignores). Their rules declare how transformers must run to compute what candle
computes (`CandleEdit.as_candle`: a config edit, a tensor edit); the reference side runs the
streamed reference so, on the reference's inputs (`portkit.verify.reference.as_candle`), and
`confirm` judges candle against it:

- as written: candle (or the GGUF) vs transformers, the distance verify reports;
- as candle computes: candle vs transformers with the edit: within tolerance, the finding
  explains the difference;
- effect: max|as written - as candle| of transformers' own logits over the teacher-forced
  steps; noise: candle vs as candle, what the dtype or quantization alone leaves.

CONFIRMED when candle agrees with transformers as candle computes (or the distance at least
halves and the effect exceeds the noise); NOT-REPRODUCED with both numbers when the effect is
within the noise, and then `scan_lengths` says from which prompt length it exceeds it: one
forward as written and one as candle computes over `SCAN_TOKENS` tokens (the prompt repeated,
the noise taken as constant).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from portkit.verify.judge.confirm import Confirmation, as_candle_of

#: How far the length scan reaches (capped by max_position_embeddings): one streamed forward
#: as written and one as candle computes, only when the effect does not exceed the noise.
SCAN_TOKENS = 512

Progress = Callable[[str], None]


def first_length_over(effect_by_position: np.ndarray, noise: float) -> int | None:
    """The prompt length (1-based) from which the effect exceeds the noise, if it does."""
    over = np.nonzero(effect_by_position > noise)[0]
    return int(over[0]) + 1 if over.size else None


class EffectScan(Protocol):
    """transformers as written and as candle computes over a longer prompt (the reference side's
    `AsCandleRuns`)."""

    def effect_by_position(self, edit: dict[str, Any], scan_len: int) -> np.ndarray: ...


def scan_lengths(
    confirmations: Sequence[Confirmation],
    findings: Sequence[Any],
    scan: EffectScan | None,
    max_positions: Any,
    progress: Progress,
) -> list[Confirmation]:
    """For each reference-side finding whose effect stayed within the noise: the prompt length
    from which it exceeds it (`SCAN_TOKENS` tokens, capped by `max_positions`, the config's
    max_position_embeddings). `scan`: the reference side's runs (None: none, nothing to scan)."""
    by_code = {f.code: f for f in findings}
    out = []
    for c in confirmations:
        side = c.details.get("reference_side") or {}
        finding = by_code.get(c.code)
        edit = as_candle_of(finding) if finding is not None else None
        if not side.get("under_noise") or edit is None or scan is None:
            out.append(c)
            continue
        n = min(SCAN_TOKENS, int(max_positions or SCAN_TOKENS))
        progress(f"{c.code}: the effect by prompt length, up to {n} tokens")
        by_position = scan.effect_by_position(edit, n)
        length = first_length_over(by_position, float(side["noise"]))
        side = {**side, "reproduces_from": length, "scanned": int(by_position.size)}
        where = (
            f"it exceeds the noise from a {length}-token prompt"
            if length is not None
            else f"it stays under the noise up to {by_position.size} tokens"
        )
        out.append(replace(c, evidence=f"{c.evidence}; {where}", details={**c.details, "reference_side": side}))
    return out


_PAST = re.compile(r"the effect appears (?:only )?past (\d+) tokens")


def length_notes(confirmations: Sequence[Confirmation], covered: int) -> list[Confirmation]:
    """Findings whose effect appears only past a length (lint names it: sliding windows, dynamic
    NTK): say the length next to what this run covered, so a NOT-REPRODUCED on a short run reads
    as "not reached", not "not real"."""
    out = []
    for c in confirmations:
        m = _PAST.search(c.message)
        if m is None:
            out.append(c)
            continue
        length = int(m.group(1))
        details = {**c.details, "appears_past": length, "tokens_covered": covered}
        if covered > length:
            note = f"the effect appears past {length} tokens; this run covered {covered}"
        else:
            note = (
                f"the effect appears only past {length} tokens and this run covered {covered}: give a longer --text "
                "or more --tokens to reach it"
            )
        out.append(replace(c, evidence=f"{c.evidence} ({note})", details=details))
    return out
