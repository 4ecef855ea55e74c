"""Honest attribution for findings no file edit can undo: the reference-side counterfactual.

A GGUF finding like `rope_freqs.weight` (PK404) has no repair candle reads, so the candle-side
leave-one-out has nothing to run: "the GGUF differs" alone would confirm it, even when the
difference is quantization noise (a Q8_0 flip at a 0.3 margin). Instead transformers runs with
and without the finding's effect on the same inputs:

- effect: max|with - without| of transformers' logits over the teacher-forced steps;
- noise: max|GGUF - without|, the GGUF against the model it actually computes (candle ignores
  the effect), i.e. what the dtype or quantization alone leaves.

CONFIRMED only when the effect exceeds that noise; otherwise NOT-REPRODUCED with both numbers,
and the prompt length from which the effect exceeds the noise (one forward with and one without
over `SCAN_TOKENS` tokens, the prompt repeated, the noise taken as constant).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from portkit.verify.confirm import Confirmation
from portkit.verify.runs import Reference, RunOutputs, fmt_num

#: How far the length scan reaches (capped by max_position_embeddings): one streamed forward
#: with and one without, only when the effect does not exceed the noise at the run's length.
SCAN_TOKENS = 512


def _without_rope_scaling(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config with default RoPE at the same theta (transformers reads legacy `rope_scaling`
    and `rope_parameters` alike)."""
    out = dict(cfg)
    out.pop("rope_scaling", None)
    rp = out.get("rope_parameters")
    if isinstance(rp, dict):
        theta = rp.get("rope_theta", out.get("rope_theta", 10000.0))
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    return out


#: finding code -> (what the effect is, the config edit that removes it on the transformers side)
EFFECTS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "PK404": ("the llama3 rope scaling candle ignores", _without_rope_scaling),
}


def reference_side(
    confirmations: Sequence[Confirmation],
    model: Any,
    reference: Reference,
    run: RunOutputs,
    tolerance_name: str,
    tokens: int,
    progress: Callable[[str], None],
) -> list[Confirmation]:
    """Re-judge each CONFIRMED finding that has a reference-side counterfactual."""
    out = []
    for c in confirmations:
        spec = EFFECTS.get(c.code)
        if spec is None or c.verdict != "CONFIRMED" or run.rows is None or run.failure is not None:
            out.append(c)
            continue
        out.append(_judge(c, spec, model, reference, run, tolerance_name, tokens, progress))
    return out


def first_length_over(effect_by_position: np.ndarray, noise: float) -> int | None:
    """The prompt length (1-based) from which the effect exceeds the noise, if it does."""
    over = np.nonzero(effect_by_position > noise)[0]
    return int(over[0]) + 1 if over.size else None


def _judge(
    c: Confirmation,
    spec: tuple[str, Callable[[dict[str, Any]], dict[str, Any]]],
    model: Any,
    reference: Reference,
    run: RunOutputs,
    tolerance_name: str,
    tokens: int,
    progress: Callable[[str], None],
) -> Confirmation:
    from portkit.verify.refjob import reference_effect

    what, edit = spec
    without_config = json.dumps(edit(json.loads(model.config_text)), indent=2)
    progress(f"{c.code}: transformers without {what}")
    rows_without, _ = reference_effect(model, reference, tokens, without_config, 0, progress)
    effect = float(np.abs(reference.rows.astype(np.float64) - rows_without).max())
    noise = float(np.abs(run.rows.astype(np.float64) - rows_without).max())
    n = len(reference.prompt) + max(tokens - 1, 0)
    details = dict(c.details)
    details["reference_side"] = {"effect": effect, "noise": noise, "tokens": n, "reproduces_from": None, "scanned": None}
    head = (
        f"{what}: transformers with and without it differ {fmt_num(effect)} over {n} tokens; "
        f"{tolerance_name} noise {fmt_num(noise)} (the GGUF against transformers without it)"
    )
    if effect > noise:
        details["reference_side"]["reproduces_from"] = n
        return replace(c, evidence=f"{head}: the effect explains the divergence; {c.evidence}", details=details)
    scan = min(SCAN_TOKENS, int(model.config.get("max_position_embeddings") or SCAN_TOKENS))
    progress(f"{c.code}: the effect by prompt length, up to {scan} tokens")
    _, by_position = reference_effect(model, reference, tokens, without_config, scan, progress)
    length = first_length_over(by_position, noise)
    details["reference_side"].update(reproduces_from=length, scanned=int(by_position.size))
    where = (
        f"it exceeds the noise from a {length}-token prompt" if length is not None else f"it stays under the noise up to {by_position.size} tokens"
    )
    return replace(
        c,
        verdict="NOT-REPRODUCED",
        evidence=f"{head}: the divergence is {tolerance_name} noise, not this finding at this length; {where}",
        details=details,
    )


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
            note = f"the effect appears only past {length} tokens and this run covered {covered}: give a longer --text or more --tokens to reach it"
        out.append(replace(c, evidence=f"{c.evidence} ({note})", details=details))
    return out
