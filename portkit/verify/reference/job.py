"""Where verify's reference comes from: the cache, or transformers (`portkit.verify.reference.session`).

The job is made once the prompt is known, with the session verify started first: when the cache
has no entry for this checkpoint and prompt, `submit` sends the forward to the session's child
(started at verify's start, its torch import overlapping lint and candle, or then) once candle's
greedy tokens are known. A hit never needs transformers for the reference.

Memory: candle's weights and the reference's are never held at the same time. The child holds
torch's libraries from its start (`session.start_early`), and the reference's weights (the
streamed model: embeddings, lm_head and one decoder layer at a time) only while it computes the
forward, which it starts once verify has sent it, after candle's run is done and its weights
are released; it releases them before its next request, while verify judges.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from portkit.verify import cachefiles
from portkit.verify.errors import BadInput
from portkit.verify.layer_inputs import refeed_digest, refeed_inputs
from portkit.verify.model_dir import ModelDir
from portkit.verify.reference import cache as refcache
from portkit.verify.reference import compute
from portkit.verify.reference import extra as refextra
from portkit.verify.reference.capture import REFEED
from portkit.verify.reference.compute import ReferenceOutputs
from portkit.verify.reference.requests import ForwardRequest, TruthRequest
from portkit.verify.reference.result import Reference, Truth
from portkit.verify.reference.session import ReferenceSession, Ticket

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
        truth: bool = False,
    ) -> None:
        """`sublayers`: paths inside each decoder layer whose outputs the prefill records too
        (`portkit.families.sublayers`), as `layer.N.<path>`. `session`: verify's transformers
        process (a job without one starts its own when it needs transformers). `truth`: the same
        forward in f64 too (`Reference.truth`), for an f32 candle judged against a measured floor:
        on candle's tokens, a request of its own (`requests.TruthRequest`) sent by `send_truth`
        (or `result`) once candle's runs are over, so that the f64 model, the heaviest moment of
        transformers' process, never sits beside candle's weights."""
        self.model, self.prompt, self.tokens, self.mode, self.progress = model, list(prompt), tokens, mode, progress
        self.sublayers = list(sublayers)
        self.truth = truth
        self._truth_req: TruthRequest | None = None  # held back, not sent yet
        self._truth_ticket: Ticket | None = None
        self.cache: refcache.RefCache | None = None
        #: the weight files' fingerprints (with the cache on), which candle's run cache keys on too
        self.fingerprints: list[dict[str, object]] = []
        if use_cache:
            progress("reference cache: fingerprinting the checkpoint")
            self.fingerprints = cachefiles.fingerprints(model.weight_files)
            key = refcache.model_key(
                model.config_text,
                model.weight_files,
                mode,
                fingerprints=self.fingerprints,
                sublayers=self.sublayers,
                truth=truth,
            )
            self.cache = refcache.RefCache(key, self.prompt, tokens, vocab=model.vocab_size)
        self.session = session if session is not None else ReferenceSession(progress, start=False)
        self.own_session = session is None
        self.seconds = 0.0
        self._forced: list[int] | None = None
        self._ticket: Ticket | None = None
        self._extra: dict[str, Any] | None = None
        self._hit: ReferenceOutputs | None = None
        self._submitted = False
        self._refeed: str | None = None

    def likely_cached(self) -> bool:
        """An entry for this checkpoint and prompt exists (a hit if candle's tokens are the same)."""
        return self.cache is not None and self.cache.likely()

    @property
    def computing(self) -> bool:
        """Submitted and sent to transformers (no cache entry): `result` will wait for it."""
        return self._ticket is not None

    def submit(
        self,
        forced: Sequence[int] | None,
        extra: dict[str, Any] | None = None,
        candle_layers: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        """Look the reference up; on a miss, send the forward (on `forced`: candle's tokens).
        `extra`: a continuation's and a batch's inputs (`refextra.request`), whose rows the
        reference then computes too (`Reference.extra`). `candle_layers`: candle's per-layer
        values over the prompt; with the truth, each decoder layer then also runs on candle's
        input to it (`Truth.own`)."""
        self._forced = None if forced is None else list(forced)
        self._extra = extra
        self._submitted = True
        inputs = refeed_inputs(candle_layers) if self.truth and forced is not None and candle_layers else {}
        self._refeed = refeed_digest(candle_layers) if inputs and candle_layers else None
        self._hit = self.cache.get(self._forced, extra, self._refeed) if self.cache is not None else None
        if self._hit is None:
            files = [str(p) for p in self.model.weight_files]
            apart = (
                self.truth and self._forced is not None
            )  # else the truth goes on the reference's own tokens, in the same request
            req = ForwardRequest(
                str(self.model.root),
                files,
                self.mode,
                self.prompt,
                self._forced,
                self.tokens,
                self.sublayers,
                extra,
                self.truth and not apart,
                inputs or None,
            )
            self._ticket = self.session.submit(req)
            if apart:
                assert self._forced is not None
                self._truth_req = TruthRequest(
                    str(self.model.root), files, self.prompt, self._forced, self.tokens, self.sublayers, inputs or None
                )

    def send_truth(self) -> None:
        """The truth held back, sent now (candle has nothing more to run while transformers computes it)."""
        if self._truth_req is not None:
            self._truth_ticket = self.session.submit(self._truth_req)
            self._truth_req = None

    def _with_truth(self, out: ReferenceOutputs, ticket: Ticket) -> ReferenceOutputs:
        """The reference with its truth's differences among its layers, as one request gives them
        (`compute.forward_reference`); without, where transformers could not compute the truth."""
        try:
            f64 = self.session.wait(ticket)
        except compute.ReferenceFailed as e:
            if e.kind != "truth":
                raise
            self.progress(str(e))
            return out
        assert isinstance(f64, ReferenceOutputs)
        return dataclasses.replace(
            out, layers={**out.layers, **compute.truth_deltas(out.rows, out.layers, f64.rows, f64.layers)}
        )

    def result(self, forced: Sequence[int] | None, extra: dict[str, Any] | None = None) -> Reference:
        """The reference `submit` asked for (submitted now with `forced` and `extra` if it was not)."""
        t0 = time.perf_counter()
        if not self._submitted:
            self.submit(forced, extra)
        forced, extra = self._forced, self._extra
        source = "computed"
        if self._hit is not None:
            self.progress("reference: from the cache")
            out = self._hit
            source = "cache"
        else:
            assert self._ticket is not None
            self.send_truth()
            try:
                out = self.session.wait_outputs(self._ticket)
                if self._truth_ticket is not None:
                    out = self._with_truth(out, self._truth_ticket)
            except compute.ReferenceFailed as e:
                raise BadInput(str(e)) from None
            finally:
                if self.own_session:
                    self.session.close()
            if self.cache is not None:
                self.cache.put(forced, out, extra, self._refeed)
        self.seconds = time.perf_counter() - t0
        rows = out.rows
        layers, extra_rows = refextra.split(out.layers)
        layers, truth = split_truth(layers, self._refeed)
        return Reference(
            prompt=self.prompt,
            greedy=out.greedy,
            rows=rows,
            layers=layers,
            forced=forced,
            nonfinite_weights=out.nonfinite_weights,
            mode=self.mode,
            source=source,
            use_cache=self.cache is not None,
            fingerprints=self.fingerprints if self.cache is not None else None,
            extra=extra_rows,
            truth=truth,
        )


def split_truth(
    layers: dict[str, np.ndarray], own_inputs: str | None = None
) -> tuple[dict[str, np.ndarray], Truth | None]:
    """(the f32 layers, the f64 run's differences from them: `compute.truth_deltas`, with the
    layers run on candle's inputs) of a result's layers."""
    kept = {k: v for k, v in layers.items() if not k.startswith((compute.TRUTH, REFEED))}
    fed = {k.removeprefix(REFEED): v for k, v in layers.items() if k.startswith(REFEED)}
    deltas = {k.removeprefix(compute.TRUTH): v for k, v in layers.items() if k.startswith(compute.TRUTH)}
    if "rows" not in deltas:
        return kept, None
    own = {k: (v, deltas.pop(REFEED + k)) for k, v in fed.items() if REFEED + k in deltas}
    return kept, Truth(rows=deltas.pop("rows"), layers=deltas, own=own, own_inputs=own_inputs if own else None)
