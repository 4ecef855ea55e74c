"""Where verify's reference comes from: the cache, or transformers in a child (or this process).

Started before lint: when the cache has no entry for this checkpoint and prompt, the child
(`refproc --serve`) starts at once and imports torch while verify lints and runs candle; it gets
its request once candle's greedy tokens are known. When an entry is likely (same checkpoint,
prompt and token count) no child starts, and a hit never imports torch.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

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



def reference_effect(
    model: ModelDir,
    reference: Reference,
    tokens: int,
    without_config: str,
    scan_len: int,
    progress: Progress,
) -> tuple[np.ndarray, np.ndarray]:
    """transformers without a finding's effect (`refproc.effect_reference`), from the cache when
    it has it: (rows on the reference's inputs, effect by position over `scan_len` tokens)."""
    forced = reference.inputs
    cache = None
    if reference.use_cache:
        key = refcache.model_key(without_config, model.weight_files, f"effect-{scan_len}", fingerprints=reference.fingerprints)
        cache = refcache.RefCache(key, reference.prompt, tokens, vocab=model.vocab_size)
        hit = cache.get(forced)
        if hit is not None and "effect" in hit.layers:
            return hit.rows, hit.layers["effect"]
    req = dict(
        kind="effect",
        model_dir=str(model.root),
        files=[str(p) for p in model.weight_files],
        without_config=without_config,
        prompt=reference.prompt,
        forced=forced,
        tokens=tokens,
        scan_len=scan_len,
    )
    try:
        if reference_in_child():
            child = refproc.ServedReference(progress)
            child.request(req)
            _, rows, layers, _ = child.result()
            effect = layers["effect"]
        else:
            rows, effect = refproc.effect_reference(
                model.root, model.weight_files, without_config, reference.prompt, forced, tokens, scan_len, progress
            )
    except refproc.ReferenceFailed as e:
        raise BadInput(str(e)) from None
    if cache is not None:
        cache.put(forced, refcache.CachedReference(greedy=[], rows=rows, layers={"effect": effect}, nonfinite_weights=[]))
    return rows, effect
