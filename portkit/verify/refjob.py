"""Where verify's reference comes from: the cache, or transformers (`portkit.verify.refsession`).

The job is made once the prompt is known, with the session verify started first: when the cache
has no entry for this checkpoint and prompt, `submit` sends the forward to the session's child
(started at verify's start, its torch import overlapping lint and candle, or then) once candle's
greedy tokens are known. A hit never needs transformers for the reference.

Memory: candle's weights and the reference's are never held at the same time. The child holds
torch's libraries from its start (`refsession.start_early`), and the reference's weights (the
streamed model: embeddings, lm_head and one decoder layer at a time) only while it computes the
forward, which it starts once verify has sent it, after candle's run is done and its weights
are released; it releases them before its next request, while verify judges.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from portkit.verify import cachefiles, refcache, refextra, refproc
from portkit.verify.inputs import BadInput, ModelDir
from portkit.verify.refsession import ReferenceSession, Ticket
from portkit.verify.runs import Reference

Progress = Callable[[str], None]


class ReferenceJob:
    def __init__(
        self,
        model: ModelDir,
        prompt: Sequence[int],
        tokens: int,
        *,
        mode: str,
        use_cache: bool,
        progress: Progress,
        sublayers: Sequence[str] = (),
        session: ReferenceSession | None = None,
    ) -> None:
        """`sublayers`: paths inside each decoder layer whose outputs the prefill records too
        (`portkit.families.sublayers`), as `layer.N.<path>`. `session`: verify's transformers
        process (a job without one starts its own when it needs transformers)."""
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
        self.session = session if session is not None else ReferenceSession(progress, start=False)
        self.own_session = session is None
        self.seconds = 0.0
        self._forced: list[int] | None = None
        self._ticket: Ticket | None = None
        self._extra: dict[str, Any] | None = None
        self._hit: refcache.CachedReference | None = None
        self._submitted = False

    def likely_cached(self) -> bool:
        """An entry for this checkpoint and prompt exists (a hit if candle's tokens are the same)."""
        return self.cache is not None and self.cache.likely()

    def submit(self, forced: Sequence[int] | None, extra: dict[str, Any] | None = None) -> None:
        """Look the reference up; on a miss, send the forward (on `forced`: candle's tokens).
        `extra`: a continuation's and a batch's inputs (`refextra.request`), whose rows the
        reference then computes too (`Reference.extra`)."""
        self._forced = None if forced is None else list(forced)
        self._extra = extra
        self._submitted = True
        self._hit = self.cache.get(self._forced, extra) if self.cache is not None else None
        if self._hit is None:
            req = dict(
                kind="forward",
                model_dir=str(self.model.root),
                files=[str(p) for p in self.model.weight_files],
                mode=self.mode,
                prompt=self.prompt,
                forced=self._forced,
                tokens=self.tokens,
                sublayers=self.sublayers,
            )
            if extra is not None:  # only then: the plain request stays as it was
                req["extra"] = extra
            self._ticket = self.session.submit(req)

    def result(self, forced: Sequence[int] | None, perturb: float | None, extra: dict[str, Any] | None = None) -> Reference:
        """The reference `submit` asked for (submitted now with `forced` and `extra` if it was not)."""
        t0 = time.perf_counter()
        if not self._submitted:
            self.submit(forced, extra)
        forced, extra = self._forced, self._extra
        source = "computed"
        if self._hit is not None:
            self.progress("reference: from the cache")
            hit = self._hit
            greedy, rows, layers, bad = hit.greedy, hit.rows, hit.layers, hit.nonfinite_weights
            source = "cache"
        else:
            assert self._ticket is not None
            try:
                greedy, rows, layers, bad = self.session.wait(self._ticket)
            except refproc.ReferenceFailed as e:
                raise BadInput(str(e)) from None
            finally:
                if self.own_session:
                    self.session.close()
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
            session=self.session,
            extra=extra_rows,
        )


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
    session = getattr(reference, "session", None)
    own = session is None
    if own:
        session = ReferenceSession(progress, start=False)
    try:
        _, rows, layers, _ = session.wait(session.submit(req))
        effect = layers.pop(refproc.EFFECT)
    except refproc.ReferenceFailed as e:
        raise BadInput(str(e)) from None
    finally:
        if own:
            session.close()
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
        session=getattr(reference, "session", None),
    )
