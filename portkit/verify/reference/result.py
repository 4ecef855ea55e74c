"""The reference's numbers, as every comparison reads them: transformers eager f32 CPU on the
prompt and the tokens fed after it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: the names of `Reference.extra`'s arrays (and of their `extra.<name>` entries in a result's layers)
TURN = "turn"
BATCH = "batch"
SAMPLING = "sampling"
SAMPLING_WITHOUT = "sampling.without."


@dataclass(frozen=True)
class Truth:
    """transformers in f64 on the reference's inputs, kept as its difference from the f32
    reference (`reference.compute.truth_deltas`): f64 value = f32 value + delta. The f32
    reference's own error is then `delta`, the floor a correct f32 candle is judged against."""

    rows: np.ndarray  # [steps, vocab]: as `Reference.rows`
    layers: dict[str, np.ndarray]  # as `Reference.layers` (the names the f64 run has too)
    #: decoder layers (and their sub-layers) run on candle's input to them: name -> (the f32
    #: value, the f64 value's difference from it); what candle's layer adds, nothing carried in
    own: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: the digest of candle's layer outputs `own` was fed (`job.refeed_digest`): another run's
    #: layers (a patched config's) are not those inputs
    own_inputs: str | None = None


@dataclass
class Reference:
    """The reference's numbers (transformers eager f32 CPU), computed once per verify run."""

    prompt: list[int]
    greedy: list[int]
    rows: np.ndarray  # [max(len(greedy), 1), vocab]: row k decided greedy token k
    layers: dict[str, np.ndarray] = field(default_factory=dict)  # per layer, over the prompt
    #: The tokens fed after the prompt (candle's greedy tokens; None: the reference's own). Row k
    #: is the reference's logits after prompt + forced[:k]; `greedy` is then the reference's own
    #: choice up to and including its first fork from `forced`.
    forced: list[int] | None = None
    nonfinite_weights: list[str] = field(default_factory=list)  # checkpoint tensors with NaN/inf
    mode: str = "streamed"  # streamed | whole
    source: str = "computed"  # computed | cache
    use_cache: bool = True  # further reference-side runs (counterfactuals) may use the cache
    #: the weight files' `cachefiles.fingerprints`, taken for the cache key (None: not taken):
    #: the counterfactuals' keys reuse them rather than read the checkpoint again
    fingerprints: list[dict[str, object]] | None = None
    #: the arrays verify asked for besides the prompt's (`portkit.verify.reference.extra`), by
    #: name (`TURN`, `BATCH`, `SAMPLING`, `SAMPLING_WITHOUT` + key): read them with the methods below
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    #: transformers in f64 on the same inputs (None: not asked for, or not computable), the truth
    #: an f32 run's error is measured against (docs/verify.md, "Tolerances")
    truth: Truth | None = None

    def turn_rows(self) -> np.ndarray | None:
        """A continuation's rows, [len(segment), vocab] (None: not asked for)."""
        return self.extra.get(TURN)

    def batch_rows(self) -> np.ndarray | None:
        """Every position of each batch row alone, [N, L, vocab] (None: not asked for)."""
        return self.extra.get(BATCH)

    def sampling_distributions(self, without: str | None = None) -> np.ndarray | None:
        """The distributions `generate()` draws from at each step, with generation_config.json's
        values, or `without` one of them (`portkit.verify.reference.sampling`)."""
        return self.extra.get(SAMPLING if without is None else SAMPLING_WITHOUT + without)

    @property
    def last(self) -> np.ndarray:
        return self.rows[0]

    @property
    def inputs(self) -> list[int]:
        """What every candle run is teacher-forced on after the prompt."""
        return list(self.forced) if self.forced is not None else list(self.greedy)

    @property
    def greedy_complete(self) -> bool:
        return self.forced is None or len(self.greedy) >= len(self.forced)
