"""candle on the HF checkpoint: the family's runner on config.json as written or patched, on the
prompt, each run cached like the reference (`portkit.verify.candle.cache`)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

from portkit.verify.candle import cache as runcache
from portkit.verify.candle.run import RunOutputs, patched_config, run_candle
from portkit.verify.model_dir import ModelDir


@dataclass(frozen=True)
class CheckpointRuns:
    model: ModelDir
    family: Any  # portkit.families.Family: the candle module that runs it
    prompt: Sequence[int]
    tokens: int
    device: str
    dtype: str
    use_flash_attn: bool
    use_cache: bool
    fingerprints: Sequence[dict[str, object]]  # the weight files' (the reference's job computed them)

    def loader(self, config_text: str) -> Callable[[], Any]:
        """Loads the family's runner on `config_text` (called by `run_candle`, once per run)."""
        from portkit.verify.candle.native import load_runner

        return partial(
            load_runner,
            self.family,
            self.model.weight_files,
            config_text,
            dtype=self.dtype,
            device=self.device,
            use_flash_attn=self.use_flash_attn,
        )

    def weights_kept(self, keep: bool) -> AbstractContextManager[object]:
        """With `keep`, the runs within share the tensors the first one loads (`native.weights_kept`)."""
        from portkit.verify.candle.native import weights_kept

        return weights_kept(self.model.weight_files) if keep else nullcontext()

    def cache_for(self, config_text: str, forced: Sequence[int] | None, capture: bool) -> runcache.RunCache | None:
        if not runcache.cacheable(self.device, self.use_cache):
            return None
        key = runcache.run_key(
            loader=self.family.name,
            device=self.device,
            dtype=self.dtype,
            flash_attn=self.use_flash_attn and self.family.flash_attn,
            config_text=config_text,
            files=list(self.fingerprints),
            prompt=list(self.prompt),
            forced=None if forced is None else list(forced),
            tokens=self.tokens,
            capture=capture,
        )
        return runcache.RunCache(key, tokens=self.tokens, vocab=self.model.vocab_size)

    def as_written(self, capture: bool, progress: Callable[[str], None]) -> RunOutputs:
        """The config as written; candle generates first (the reference then runs one forward
        over its tokens)."""
        progress(f"candle {self.family.name}: loading ({self.device}, {self.dtype})")
        text = self.model.config_text
        run = run_candle(
            self.loader(text),
            self.prompt,
            None,
            self.tokens,
            label="as written",
            capture=capture,
            on_stage=lambda s: progress(f"candle: {s}"),
            cache=self.cache_for(text, None, capture),
        )
        gc.collect()
        return run

    def patched(self, patch: dict[str, Any], inputs: Sequence[int], label: str) -> RunOutputs:
        """config.json with `patch`, teacher-forced on `inputs`."""
        text = patched_config(self.model.config_text, patch)
        run = run_candle(
            self.loader(text), self.prompt, inputs, self.tokens, label=label, cache=self.cache_for(text, inputs, False)
        )
        gc.collect()
        return run
