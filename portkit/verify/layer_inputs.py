"""Candle's input to each decoder layer, which the reference runs that layer on too (the error a
layer adds, nothing carried in: docs/verify.md, "Tolerances"): taken from candle's per-layer
values, and named by a digest so that the judge uses them only for the run they came from."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np


def refeed_inputs(candle_layers: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Decoder layer index -> candle's input to it: layer N's is layer N-1's output (layer 0's,
    the embeddings, is left out: some families scale them between the capture and the layer)."""
    out = {}
    for name, value in candle_layers.items():
        head, _, rest = name.partition(".")
        if head == "layer" and rest.isdigit():
            out[int(rest) + 1] = np.asarray(value, dtype=np.float32)
    return out


def refeed_digest(candle_layers: Mapping[str, np.ndarray]) -> str:
    """What `Truth.own_inputs` names: the inputs `refeed_inputs` takes from these layers."""
    h = hashlib.sha256()
    for k, v in sorted(refeed_inputs(candle_layers).items()):
        h.update(str(k).encode())
        h.update(np.ascontiguousarray(v, dtype=np.float32).tobytes())
    return h.hexdigest()[:24]
