"""Where verify's reference comes from: the cache, or transformers in a child (or this process).

Started before lint: when the cache has no entry for this checkpoint and prompt, the child
(`refproc --serve`) starts at once and imports torch while verify lints and runs candle; it gets
its request once candle's greedy tokens are known. When an entry is likely (same checkpoint,
prompt and token count) no child starts, and a hit never imports torch.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from portkit.verify import cachefiles, refcache, refextra, refproc
from portkit.verify.inputs import BadInput, ModelDir
from portkit.verify.runs import Reference

Progress = Callable[[str], None]

#: Up to this many bytes of weights the torch child starts before lint (its import overlaps
#: lint and candle); above, it starts once candle is done, so torch's ~0.5 GiB never adds to
#: candle's peak (which holds the weights at the run's dtype plus the file's mapped pages).
EARLY_START_MAX_BYTES = 512 * 2**20


def reference_in_child() -> bool:
    """A child process unless PORTKIT_VERIFY_REFERENCE=inprocess (the test suite's setting, to
    import torch once; the numbers are the same)."""
    return os.environ.get("PORTKIT_VERIFY_REFERENCE", "child") != "inprocess"


class ReferenceJob:
    def __init__(
        self, model: ModelDir, prompt: Sequence[int], tokens: int, *, mode: str, use_cache: bool, progress: Progress, sublayers: Sequence[str] = ()
    ) -> None:
        """`sublayers`: paths inside each decoder layer whose outputs the prefill records too
        (`portkit.families.sublayers`), as `layer.N.<path>`."""
        self.model, self.prompt, self.tokens, self.mode, self.progress = model, list(prompt), tokens, mode, progress
        self.sublayers = list(sublayers)
        self.cache: refcache.RefCache | None = None
        #: the weight files' fingerprints (with the cache on), which candle's run cache keys on too
        self.fingerprints: list[dict[str, object]] = []
        if use_cache:
            progress("reference cache: fingerprinting the checkpoint")
            self.fingerprints = cachefiles.fingerprints(model.weight_files)
            key = refcache.model_key(model.config_text, model.weight_files, mode, fingerprints=self.fingerprints, sublayers=self.sublayers)
            self.cache = refcache.RefCache(key, self.prompt, tokens, vocab=model.vocab_size)
        self.child: refproc.ServedReference | None = None
        small = sum(p.stat().st_size for p in model.weight_files) <= EARLY_START_MAX_BYTES
        if reference_in_child() and small and (self.cache is None or not self.cache.likely()):
            self.child = refproc.ServedReference(progress)
        self.seconds = 0.0

    def result(self, forced: Sequence[int] | None, perturb: float | None, extra: dict[str, Any] | None = None) -> Reference:
        """`extra`: a continuation's and a batch's inputs (`refextra.request`), whose rows the
        reference then computes too (`Reference.extra`)."""
        t0 = time.perf_counter()
        forced = None if forced is None else list(forced)
        source = "computed"
        hit = self.cache.get(forced, extra) if self.cache is not None else None
        if hit is not None:
            self.cancel()
            self.progress("reference: from the cache")
            greedy, rows, layers, bad = hit.greedy, hit.rows, hit.layers, hit.nonfinite_weights
            source = "cache"
        else:
            greedy, rows, layers, bad = self._compute(forced, extra)
            if self.cache is not None:
                self.cache.put(forced, refcache.CachedReference(greedy=greedy, rows=rows, layers=layers, nonfinite_weights=bad), extra)
        self.seconds = time.perf_counter() - t0
        layers, extra_rows = refextra.split(layers)
        if perturb:
            rows = rows.copy()
            rows[0, 0] += np.float32(perturb)
            extra_rows = refextra.perturbed(extra_rows, perturb)
        return Reference(
            prompt=self.prompt,
            greedy=greedy,
            rows=rows,
            layers=layers,
            forced=forced,
            nonfinite_weights=bad,
            mode=self.mode,
            source=source,
            use_cache=self.cache is not None,
            fingerprints=self.fingerprints if self.cache is not None else None,
            extra=extra_rows,
        )

    def _compute(self, forced: list[int] | None, extra: dict[str, Any] | None = None) -> tuple[list[int], np.ndarray, dict[str, np.ndarray], list[str]]:
        req = dict(
            model_dir=str(self.model.root),
            files=[str(p) for p in self.model.weight_files],
            mode=self.mode,
            prompt=self.prompt,
            forced=forced,
            tokens=self.tokens,
            sublayers=self.sublayers,
        )
        if extra is not None:  # only then: the plain request stays as it was
            req["extra"] = extra
        try:
            if not reference_in_child():
                return refproc.forward_reference(
                    self.model.root, self.model.weight_files, self.prompt, forced, self.tokens, self.mode, self.progress, self.sublayers, extra
                )
            if self.child is None:
                self.child = refproc.ServedReference(self.progress)
            self.child.request(req)
            return self.child.result()
        except refproc.ReferenceFailed as e:
            raise BadInput(str(e)) from None
        finally:
            self.child = None

    def cancel(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None



@dataclass
class AsCandle:
    """transformers run as candle computes (`Probe.as_candle`), on the reference's inputs."""

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
) -> AsCandle:
    """transformers with a finding's edit (`refproc.as_candle_reference`), from the cache when it
    has it. The cache key is the edited config's bytes, the tensor edits, the scan length and
    what keys the reference itself."""
    from portkit.verify.runs import edited_config

    t0 = time.perf_counter()
    forced = reference.inputs
    config_text = edited_config(model.config_text, as_candle.get("config") or {})
    tensor_edits = dict(as_candle.get("tensors") or {})
    cache = None
    if reference.use_cache:
        key = as_candle_key(model, reference, config_text, tensor_edits, scan_len, sublayers)
        cache = refcache.RefCache(key, reference.prompt, tokens, vocab=model.vocab_size)
        hit = cache.get(forced)
        if hit is not None and refproc.EFFECT in hit.layers:
            layers = dict(hit.layers)
            effect = layers.pop(refproc.EFFECT)
            return AsCandle(_as_reference(reference, hit.rows, layers, tokens), effect, "cache", time.perf_counter() - t0)
    req = dict(
        kind="as-candle",
        model_dir=str(model.root),
        files=[str(p) for p in model.weight_files],
        config_text=config_text,
        tensor_edits=tensor_edits,
        prompt=reference.prompt,
        forced=forced,
        tokens=tokens,
        scan_len=scan_len,
        sublayers=list(sublayers),
    )
    try:
        if reference_in_child():
            child = refproc.ServedReference(progress)
            child.request(req)
            _, rows, layers, _ = child.result()
            effect = layers.pop(refproc.EFFECT)
        else:
            rows, layers, effect = refproc.as_candle_reference(
                model.root, model.weight_files, config_text, tensor_edits, reference.prompt, forced, tokens, scan_len, progress, sublayers
            )
    except refproc.ReferenceFailed as e:
        raise BadInput(str(e)) from None
    if cache is not None:
        cache.put(forced, refcache.CachedReference(greedy=[], rows=rows, layers={**layers, refproc.EFFECT: effect}, nonfinite_weights=[]))
    return AsCandle(_as_reference(reference, rows, layers, tokens), effect, "computed", time.perf_counter() - t0)


def as_candle_key(
    model: ModelDir, reference: Reference, config_text: str, tensor_edits: Mapping[str, str], scan_len: int, sublayers: Sequence[str]
) -> str:
    """The reference cache's key for transformers as candle computes: the edited config, the
    tensor edits, the scan and what keys the reference itself."""
    mode = json.dumps({"as_candle": dict(tensor_edits), "scan": scan_len, "base": reference.mode}, sort_keys=True)
    return refcache.model_key(config_text, model.weight_files, mode, fingerprints=reference.fingerprints, sublayers=sublayers)


def _as_reference(reference: Reference, rows: np.ndarray, layers: dict[str, np.ndarray], tokens: int) -> Reference:
    """The counterfactual's numbers as a `Reference` (its greedy tokens as far as one forward
    over candle's decides them), so every comparison judges candle against it as against the
    reference."""
    forced = reference.inputs
    return Reference(
        prompt=list(reference.prompt),
        greedy=refproc.reference_greedy(rows, forced[:tokens]) if tokens else [],
        rows=rows,
        layers=layers,
        forced=list(forced),
        mode=reference.mode,
        source="as-candle",
        use_cache=reference.use_cache,
        fingerprints=reference.fingerprints,
    )
