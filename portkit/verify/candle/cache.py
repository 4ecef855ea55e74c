"""candle's outputs of one verify run, cached: an unchanged re-verify does not run candle again.

candle's numbers are a function of the native wheel's machine code, the machine it runs on and
the run's inputs. The key holds all three:

- the wheel: the SHA-256 of portkit_native's extension module and its Python wrapper (a rebuild
  that changes one byte is a new key);
- the machine: architecture, CPU model, and candle's CPU thread count as candle computes it
  (`portkit_native.cpu_threads()`) and `CANDLE_NUM_THREADS`, because a kernel may split its sums
  by thread;
- the run: the candle module or GGUF loader, device, dtype, flash-attn, the config text candle
  parsed (a counterfactual's patched text), each weight file's fingerprint
  (`cachefiles.fingerprints`, the ones the reference's key holds), a GGUF edit, the prompt, the tokens fed after it, the
  token
  count and whether per-layer values were captured;
- the source of every portkit module that drives the run (`CODE_ROOTS` and what they import,
  `portkit.verify.code_closure`).

Only CPU runs are cached: the key cannot name a GPU (the wheel has no device model to report),
and on a GPU candle is the fast side; the reference is cached on every device. Only completed
runs are stored: a failure is quick to reproduce, and one the machine caused (out
of memory) must not outlive it. Entries live under `$PORTKIT_CACHE/candle/`, checked and bounded
like the reference's (`portkit.verify.cachefiles`); `--no-cache` neither reads nor writes them.
The report says which side came from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify import cachefiles, code_closure

FORMAT = 1
MAGIC = b"portkit-candle-run-v2\n"
SUFFIX = ".run"
#: where the run starts: the source of every portkit module these import keys an entry (`portkit.verify.code_closure`)
CODE_ROOTS = ("portkit.verify.candle.run", "portkit.verify.candle.native", "portkit.verify.candle.gguf_edit")


def cache_root() -> Path:
    return cachefiles.cache_base() / "candle"


def cacheable(device: str, use_cache: bool) -> bool:
    """Whether a run on `device` is read from and written to the cache (CPU only; not with --no-cache)."""
    return use_cache and device == "cpu"


@functools.lru_cache(maxsize=1)
def wheel_digest() -> str:
    import importlib

    import portkit_native

    _native = importlib.import_module("portkit_native._native")  # the compiled module: no stub to type it

    h = hashlib.sha256()
    for f in (_native.__file__, portkit_native.__file__):
        h.update(Path(str(f)).read_bytes())
    return h.hexdigest()


def _cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def candle_threads() -> int:
    """The thread count candle's CPU kernels split work into, as candle-core computes it
    (`RAYON_NUM_THREADS` when a positive integer, else the physical cores)."""
    from portkit.verify.candle.native import native

    return int(native().cpu_threads())


def machine() -> dict[str, Any]:
    return {
        "arch": platform.machine(),
        "system": platform.system(),
        "cpu": _cpu_model(),
        "threads": candle_threads(),
        # candle-core sizes a second pool by this one (utils.rs:335)
        "candle_num_threads": os.environ.get("CANDLE_NUM_THREADS"),
    }


def run_key(
    *,
    loader: str,
    device: str,
    dtype: str,
    config_text: str | None,
    files: Sequence[dict[str, Any]],
    prompt: Sequence[int],
    forced: Sequence[int] | None,
    tokens: int,
    capture: bool,
    flash_attn: bool = False,
    edit: dict[str, Any] | None = None,
) -> str:
    return cachefiles.digest(
        {
            "format": FORMAT,
            "wheel": wheel_digest(),
            "machine": machine(),
            "loader": loader,
            "device": device,
            "dtype": dtype,
            "flash_attn": flash_attn,
            "config": None if config_text is None else hashlib.sha256(config_text.encode()).hexdigest(),
            "files": list(files),
            "edit": edit,
            "prompt": [int(t) for t in prompt],
            "forced": None if forced is None else [int(t) for t in forced],
            "tokens": int(tokens),
            "capture": capture,
            "code": code_closure.code_digest(CODE_ROOTS),
        }
    )


@dataclass
class CachedRun:
    greedy: list[int]
    rows: np.ndarray
    layers: dict[str, np.ndarray] | None


class RunCache:
    def __init__(
        self, key: str, root: Path | None = None, *, tokens: int | None = None, vocab: int | None = None
    ) -> None:
        self.root = root or cache_root()
        self.path = self.root / key[:2] / f"{key}{SUFFIX}"
        # what an entry of this run must hold (its key has them; None: not checked)
        self.tokens, self.vocab = tokens, vocab

    def get(self) -> CachedRun | None:
        entry = cachefiles.read_entry(self.path, MAGIC)
        if entry is None:
            return None
        meta, arrays = entry
        try:
            layers = cachefiles.layers_of(arrays)
            hit = CachedRun(
                greedy=[int(t) for t in meta["greedy"]],
                rows=arrays["rows"],
                layers=layers if meta["captured"] else None,
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        tokens = (
            self.tokens if self.tokens is not None else max(len(hit.greedy), hit.rows.shape[0] if hit.rows.ndim else 0)
        )
        if not cachefiles.plausible(
            hit.greedy, hit.rows, hit.layers or {}, tokens=tokens, vocab=self.vocab, captured=hit.layers is not None
        ):
            return None
        return hit

    def put(self, greedy: Sequence[int], rows: np.ndarray, layers: dict[str, np.ndarray] | None) -> None:
        meta = {"greedy": [int(t) for t in greedy], "captured": layers is not None}
        arrays = cachefiles.rows_and_layers(rows, layers or {})
        cachefiles.write_entry(self.path, cachefiles.encode(MAGIC, meta, arrays), self.root, SUFFIX)
