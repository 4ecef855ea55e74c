"""The reference side: transformers, eager attention, f32, CPU, offline, no remote code.

This is the only module in portkit that imports torch or transformers, and only when called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify.errors import one_line

REFERENCE_THREADS = 2


def _offline() -> None:
    # before transformers is imported: no machine portkit runs on may reach a hub
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _import_torch() -> tuple[Any, Any]:
    _offline()
    try:
        import torch
        import transformers
    except ImportError as e:  # pragma: no cover - exercised by the CLI's error path
        why = f"{e.name} is missing" if e.name else str(e)
        raise ReferenceUnavailable(
            f"the transformers reference needs the verify extra: pip install 'portkit[verify]' ({why})"
        ) from e
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


class ReferenceUnavailable(RuntimeError):
    """torch/transformers are not installed."""


def load_tokenizer(model_dir: Path) -> Any:
    """`AutoTokenizer.from_pretrained(model_dir)` as a transformers user gets it: offline, no
    remote code, the class transformers picks (torch is not needed, nor imported)."""
    _offline()
    try:
        import transformers
    except ImportError as e:  # pragma: no cover - exercised by the CLI's error path
        raise ReferenceUnavailable(
            f"the transformers tokenizer needs the verify extra: pip install 'portkit[verify]' ({e})"
        ) from e
    try:
        return transformers.AutoTokenizer.from_pretrained(
            str(model_dir), local_files_only=True, trust_remote_code=False
        )
    except Exception as e:  # transformers raises many types; report its text unchanged
        raise ReferenceLoadError(f"transformers could not load the tokenizer in {model_dir}: {one_line(e)}") from e


class ReferenceLoadError(RuntimeError):
    """transformers refused the checkpoint."""


@dataclass
class ReferenceModel:
    """A transformers causal LM held for comparisons; every output is a float32 numpy array."""

    model: Any
    torch: Any

    @classmethod
    def load(cls, model_dir: Path, *, threads: int = REFERENCE_THREADS) -> ReferenceModel:
        torch, transformers = _import_torch()
        torch.set_num_threads(threads)
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(model_dir),
                dtype=torch.float32,
                attn_implementation="eager",
                trust_remote_code=False,
                local_files_only=True,
                use_safetensors=True,
            )
        except Exception as e:  # transformers raises many types; report its text unchanged
            raise ReferenceLoadError(f"transformers could not load {model_dir}: {e}") from e
        return cls(model=model.eval(), torch=torch)

    def _ids(self, ids: Sequence[int]) -> Any:
        return self.torch.tensor([list(ids)], dtype=self.torch.long)

    def all_logits(self, ids: Sequence[int]) -> np.ndarray:
        """[T, vocab]: row j is the logits after ids[: j + 1] (one full forward)."""
        with self.torch.inference_mode():
            out = self.model(self._ids(ids), use_cache=False)
        return out.logits[0].float().numpy()

    def last_logits(self, ids: Sequence[int]) -> np.ndarray:
        return self.all_logits(ids)[-1]

    def greedy(self, ids: Sequence[int], n: int) -> list[int]:
        """n greedy tokens; never stops at EOS (candle's runner does not either).

        A full forward per token instead of the KV cache: the cache's keyword changed name within
        transformers 5.x (`past_key_values` -> `cache`), and prompts here are short.
        """
        seq = list(ids)
        for _ in range(n):
            seq.append(int(self.all_logits(seq)[-1].argmax()))
        return seq[len(ids) :]

    def _hooks(self, outs: dict[str, np.ndarray]) -> list[Any]:
        from portkit.verify.reference.capture import capture_hooks

        return capture_hooks(self.model, outs)

    def capture(self, ids: Sequence[int]) -> dict[str, np.ndarray]:
        """Forward hooks on the embeddings, every decoder layer and the final norm, plus the last logits.

        Names match portkit_native.LlamaRunner.capture: embeddings, layer.N, norm, logits.
        """
        layers, logits = self._hooked_forward(ids)
        layers["logits"] = logits[-1].copy()
        return layers

    def _hooked_forward(self, ids: Sequence[int]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        outs: dict[str, np.ndarray] = {}
        hooks = self._hooks(outs)
        try:
            with self.torch.inference_mode():
                res = self.model(self._ids(ids), use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        return outs, res.logits[0].float().numpy()
