"""The reference's rows for a continuation and a batch (`portkit verify --turns`, `--batch N`).

Computed by the same transformers model as the prompt's rows, in the same child, when verify's
request carries `extra` (the child's protocol, `portkit.verify.reference.child`):

    "extra": {"fed": [int], "segment": [int] | null, "rows": [[int]] | null, "sampling": {...}}

- `segment`: the continuation. Row k - 1 of "turn" ([len(segment), vocab]) is transformers'
  logits after prompt + fed + segment[:k] (teacher-forced on the concatenated sequence): one
  forward over it, or, where transformers' cache applies a sliding window the plain forward
  would not, generate()'s arithmetic fed one token at a time (as the prompt's rows).
- `rows`: the batch. "batch" ([N, L, vocab]) holds every position of each row alone (a batch of
  equal-length rows with an all-ones attention mask is each row alone, causally).
- `sampling` (when asked): generate()'s distributions on the prompt's step rows, computed in
  `compute.forward_reference` (`portkit.verify.reference.sampling`).

The arrays travel as `extra.<name>` entries of the result's layers (and of the reference cache's
entry); `split` takes them back out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from portkit.verify.reference.result import BATCH, TURN

PREFIX = "extra."


def compute(
    model: Any,
    prompt: Sequence[int],
    extra: Mapping[str, Any],
    window: int | None,
    progress: Callable[[str], None],
) -> dict[str, np.ndarray]:
    """`extra`'s arrays from `model` (a streamed or whole reference model), named `extra.<name>`;
    `window`: the sliding window transformers' cache applies (`compute._cache_window`)."""
    prompt = [int(t) for t in prompt]
    out: dict[str, np.ndarray] = {}
    segment = [int(t) for t in (extra.get("segment") or [])]
    if segment:
        fed = [int(t) for t in extra.get("fed") or []]
        seq = prompt + fed + segment
        if window is not None and window < len(seq):
            progress(f"reference: the second turn, prefill and {len(fed) + len(segment)} cached steps")
            res, _ = model.decode(prompt, fed + segment, len(fed) + len(segment) + 1)
            rows = res.logits[len(fed) + 1 :]
        else:
            progress(f"reference: the second turn, one forward over {len(seq)} tokens")
            logits = model.forward(seq, capture=False).logits
            start = len(prompt) + len(fed)
            rows = logits[start : start + len(segment)]
        out[PREFIX + TURN] = np.asarray(rows, dtype=np.float32).copy()
    batch = [[int(t) for t in r] for r in (extra.get("rows") or [])]
    if batch:
        progress(f"reference: each of the {len(batch)} batch rows alone")
        out[PREFIX + BATCH] = np.stack(
            [np.asarray(model.forward(r, capture=False).logits, dtype=np.float32) for r in batch]
        )
    return out


def split(layers: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(the per-layer values, the extra arrays by name) of a result's layers."""
    kept = {k: v for k, v in layers.items() if not k.startswith(PREFIX)}
    extra = {k.removeprefix(PREFIX): v for k, v in layers.items() if k.startswith(PREFIX)}
    return kept, extra


def request(
    fed: Sequence[int] | None,
    segment: Sequence[int] | None,
    rows: Sequence[Sequence[int]] | None,
    sampling: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The request's `extra` (None when there is nothing to compute: the report is then the plain
    one); `sampling`: generate()'s distributions on the step rows (`portkit.verify.reference.sampling`)."""
    seg = [int(t) for t in segment] if segment and fed is not None else None
    batch = [[int(t) for t in r] for r in rows] if rows else None
    if seg is None and batch is None and sampling is None:
        return None
    out: dict[str, Any] = {
        "fed": [int(t) for t in fed] if seg is not None and fed is not None else [],
        "segment": seg,
        "rows": batch,
    }
    if sampling is not None:  # only then: the paths' request stays as it was
        out["sampling"] = dict(sampling)
    return out
