"""transformers run as candle computes: a finding's reference-side counterfactual.

candle hard-codes some behaviours no edit on its side undoes (quantized_gemma3's SiLU,
quantized_phi3's rope base, a bias its module never reads); their rules declare how
transformers must run to compute what candle computes (`CandleEdit.as_candle`: a config edit, a
tensor edit). Here the streamed reference runs so, on the reference's inputs, through verify's
one transformers process (`portkit.verify.reference.session`) and cached like the reference;
`portkit.verify.judge.attribution` and `confirm` judge candle against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from portkit.verify.errors import BadInput
from portkit.verify.model_dir import ModelDir
from portkit.verify.reference import cache as refcache
from portkit.verify.reference import compute
from portkit.verify.reference.requests import AsCandleRequest
from portkit.verify.reference.result import Reference
from portkit.verify.reference.session import ReferenceSession

Progress = Callable[[str], None]


def edited_config(config_text: str, edits: Mapping[str, Any]) -> str:
    """config.json with `CandleEdit.as_candle`'s config edits: a dotted key reaches into nested
    objects (made when missing), None removes the key, and keys apply shortest first, so a
    finding can replace `rope_parameters` while another sets a key inside it."""
    cfg = json.loads(config_text)
    for key in sorted(edits, key=lambda k: k.count(".")):
        *path, last = key.split(".")
        node = cfg
        for part in path:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        if edits[key] is None:
            node.pop(last, None)
        else:
            node[last] = edits[key]
    return json.dumps(cfg, indent=2)


@dataclass
class AsCandle:
    """transformers run as candle computes (`CandleEdit.as_candle`), on the reference's inputs."""

    reference: Reference  # its rows, prefill layers and greedy tokens, as the reference's
    effect_by_position: np.ndarray  # with a scan: max|as written - as candle| per position; else empty
    source: str = "computed"  # computed | cache
    seconds: float = 0.0


def reference_as_candle(
    model: ModelDir,
    reference: Reference,
    tokens: int,
    as_candle: Mapping[str, Any],
    scan_len: int,
    progress: Progress,
    sublayers: Sequence[str] = (),
    session: ReferenceSession | None = None,
) -> AsCandle:
    """transformers with a finding's edit (`compute.as_candle_reference`), from the cache when it
    has it. The cache key is the edited config's bytes, the tensor edits, the scan length and
    what keys the reference itself."""
    t0 = time.perf_counter()
    forced = reference.inputs
    config_text = edited_config(model.config_text, as_candle.get("config") or {})
    tensor_edits = dict(as_candle.get("tensors") or {})
    rope_table = as_candle.get("rope_table")
    cache = None
    if reference.use_cache:
        key = as_candle_key(model, reference, config_text, tensor_edits, scan_len, sublayers, rope_table)
        cache = refcache.RefCache(key, reference.prompt, tokens, vocab=model.vocab_size)
        hit = cache.get(forced)
        if hit is not None and compute.EFFECT in hit.layers:
            layers = dict(hit.layers)
            effect = layers.pop(compute.EFFECT)
            return AsCandle(
                _as_reference(reference, hit.rows, layers, tokens), effect, "cache", time.perf_counter() - t0
            )
    req = AsCandleRequest(
        str(model.root),
        [str(p) for p in model.weight_files],
        config_text,
        tensor_edits,
        list(reference.prompt),
        list(forced),
        tokens,
        scan_len,
        list(sublayers),
        rope_table,
    )
    own = session is None
    used = ReferenceSession(progress, start=False) if session is None else session
    try:
        got = used.wait_outputs(used.submit(req))
        rows, layers = got.rows, dict(got.layers)
        effect = layers.pop(compute.EFFECT)
    except compute.ReferenceFailed as e:
        raise BadInput(str(e)) from None
    finally:
        if own:
            used.close()
    if cache is not None:
        cache.put(
            forced,
            compute.ReferenceOutputs(
                greedy=[], rows=rows, layers={**layers, compute.EFFECT: effect}, nonfinite_weights=[]
            ),
        )
    return AsCandle(_as_reference(reference, rows, layers, tokens), effect, "computed", time.perf_counter() - t0)


def as_candle_key(
    model: ModelDir,
    reference: Reference,
    config_text: str,
    tensor_edits: Mapping[str, str],
    scan_len: int,
    sublayers: Sequence[str],
    rope_table: str | None = None,
) -> str:
    """The reference cache's key for transformers as candle computes: the edited config, the
    tensor edits, candle's RoPE table dtype, the scan and what keys the reference itself."""
    edits: dict[str, Any] = {"as_candle": dict(tensor_edits), "scan": scan_len, "base": reference.mode}
    if rope_table is not None:  # only then: every other key stays as it was
        edits["rope_table"] = rope_table
    mode = json.dumps(edits, sort_keys=True)
    return refcache.model_key(
        config_text, model.weight_files, mode, fingerprints=reference.fingerprints, sublayers=sublayers
    )


def _as_reference(reference: Reference, rows: np.ndarray, layers: dict[str, np.ndarray], tokens: int) -> Reference:
    """The counterfactual's numbers as a `Reference` (its greedy tokens as far as one forward
    over candle's decides them), so every comparison judges candle against it as against the
    reference."""
    forced = reference.inputs
    return Reference(
        prompt=list(reference.prompt),
        greedy=compute.reference_greedy(rows, forced[:tokens]) if tokens else [],
        rows=rows,
        layers=layers,
        forced=list(forced),
        mode=reference.mode,
        source="as-candle",
        use_cache=reference.use_cache,
        fingerprints=reference.fingerprints,
    )


class AsCandleRuns:
    """transformers as candle computes, memoised by the edit (one streamed run each, or its
    cache entry); `runs` keeps each run's words, seconds and source for the report."""

    def __init__(
        self,
        model: Any,
        reference: Reference,
        tokens: int,
        progress: Progress,
        sublayers: Sequence[str] = (),
        *,
        session: ReferenceSession | None = None,
    ) -> None:
        """`session`: verify's transformers process (None: each run starts its own)."""
        self.model, self.reference, self.tokens, self.progress, self.sublayers = (
            model,
            reference,
            tokens,
            progress,
            list(sublayers),
        )
        self.session = session
        self.memo: dict[str, Reference] = {}
        self.runs: list[dict[str, Any]] = []

    def __call__(self, edit: dict[str, Any]) -> Reference:
        key = json.dumps({k: v for k, v in edit.items() if k != "what"}, sort_keys=True, default=str)
        if key not in self.memo:
            self.progress(f"transformers as candle computes: {edit.get('what')}")
            got = reference_as_candle(
                self.model, self.reference, self.tokens, edit, 0, self.progress, self.sublayers, self.session
            )
            self.memo[key] = got.reference
            self.runs.append({"what": edit.get("what"), "seconds": round(got.seconds, 3), "source": got.source})
        return self.memo[key]

    def effect_by_position(self, edit: dict[str, Any], scan_len: int) -> np.ndarray:
        """max|as written - as candle| of transformers' logits at each position of one forward
        over `scan_len` tokens (the prompt repeated): `attribution.scan_lengths`'s scan."""
        return reference_as_candle(
            self.model, self.reference, self.tokens, edit, scan_len, self.progress, session=self.session
        ).effect_by_position
