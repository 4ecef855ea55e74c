"""`portkit reference MODEL_DIR --out ref.safetensors`: transformers' values for a port of your own.

The numbers come from verify's reference (`portkit.verify.reference.ReferenceModel`:
transformers, eager attention, f32, CPU, offline, `trust_remote_code=False`), through one
function, `reference_values`, which a streamed reference (one decoder layer at a time, for
models larger than memory) can replace without touching the rest.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from portkit.porting.dumpfile import GREEDY_LOGITS, order_key, write_reference
from portkit.verify.inputs import BadInput, Prompt, parse_tokens, read_model_dir, resolve_prompt

FORMAT = "portkit-reference/1"
STORED_DTYPES = ("f32", "f16", "bf16")
Progress = Callable[[str], None]


class _AllPositions:
    """The transformers model, except that `generate()` keeps the prefill's logits at every
    position (`logits_to_keep=0`): a hook on `lm_head` then sees [1, T, vocab] while the same
    single prefill gives the per-layer values and the greedy tokens."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.generate(*args, logits_to_keep=0, **kwargs)


def reference_values(model_dir: Path, ids: Sequence[int], tokens: int, progress: Progress = lambda _s: None) -> dict[str, np.ndarray]:
    """Every tensor of the layout, float32 (ids and greedy int64), from one prefill:
    ids, embeddings, layer.N, norm ([T, hidden]), logits ([T, vocab]), greedy ([tokens]) and
    greedy.logits ([tokens, vocab], row k decided greedy token k)."""
    from portkit.verify.reference import ReferenceLoadError, ReferenceModel, ReferenceUnavailable

    progress("loading transformers (eager, f32, cpu)")
    try:
        ref = ReferenceModel.load(model_dir)
    except ReferenceUnavailable as e:
        raise BadInput(str(e)) from None
    except ReferenceLoadError as e:
        raise BadInput(str(e).splitlines()[0]) from None
    prefill: list[np.ndarray] = []

    def keep_prefill(_module: Any, _args: Any, output: Any) -> None:
        if not prefill:
            prefill.append(output[0].detach().float().numpy().copy())

    progress(f"transformers: {tokens} greedy tokens, hooks on the prefill")
    steps: np.ndarray | None = None
    hook = ref.model.lm_head.register_forward_hook(keep_prefill)
    try:
        if tokens:
            tokens_out, steps, layers = ReferenceModel(_AllPositions(ref.model), ref.torch).generate_with_layers(list(ids), tokens)
        else:
            tokens_out, (_logits, layers) = [], ref.forward_with_layers(list(ids))  # lm_head sees every position
    except Exception as e:  # transformers' own failure on this checkpoint
        raise BadInput(f"transformers could not run {model_dir}: {' '.join(str(e).split())[:300]}") from None
    finally:
        hook.remove()
    logits = prefill[0]
    layers.pop("logits", None)  # the last row only; the layout keeps every position
    out: dict[str, np.ndarray] = {"ids": np.asarray(list(ids), dtype=np.int64), **layers, "logits": logits}
    if steps is not None:
        out["greedy"] = np.asarray(tokens_out, dtype=np.int64)
        out[GREEDY_LOGITS] = steps
    return {k: out[k] for k in sorted(out, key=order_key)}


def family_name(config: dict[str, Any]) -> str:
    """portkit's family registry when there is one, else config.json's `model_type`."""
    fallback = str(config.get("model_type", "unknown"))
    try:
        from portkit.families import detect  # type: ignore[attr-defined]
    except ImportError:  # a portkit without the registry
        return fallback
    fam = detect(config)
    return fallback if fam is None else str(fam.name)


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def reference_metadata(model_dir: Path, config: dict[str, Any], prompt: Prompt, tokens: int, dtype: str) -> dict[str, str]:
    return {
        "format": FORMAT,
        "model": str(model_dir.resolve()),
        "family": family_name(config),
        "transformers": _version("transformers"),
        "torch": _version("torch"),
        "portkit": _version("portkit"),
        "runtime": "transformers eager f32 cpu",
        "dtype": dtype,
        "prompt": json.dumps({"ids": list(prompt.ids), "source": prompt.source, "text": prompt.text}),
        "tokens": str(tokens),
    }


@dataclass
class Written:
    path: Path
    tensors: dict[str, list[int]]
    metadata: dict[str, str]
    bytes: int
    seconds: float


def write(
    model_dir: Path,
    out: Path,
    *,
    ids: str | None = None,
    text: str | None = None,
    tokens: int = 8,
    dtype: str = "f32",
    progress: Progress = lambda _s: None,
) -> Written:
    t0 = time.perf_counter()
    if dtype not in STORED_DTYPES:
        raise BadInput(f"--dtype must be one of {', '.join(STORED_DTYPES)}, got {dtype!r}")
    out = Path(out)
    if not out.resolve().parent.is_dir():
        raise BadInput(f"--out {out}: the directory does not exist")
    if out.is_dir():
        raise BadInput(f"--out {out}: is a directory (give a file name, e.g. ref.safetensors)")
    model = read_model_dir(model_dir)
    prompt = resolve_prompt(model, ids, text)
    tokens = parse_tokens(tokens)
    values = reference_values(model.root, list(prompt.ids), tokens, progress)
    meta = reference_metadata(model.root, model.config, prompt, tokens, dtype)
    progress(f"writing {out}")
    write_reference(out, values, meta, dtype)
    return Written(out, {k: list(v.shape) for k, v in values.items()}, meta, out.stat().st_size, time.perf_counter() - t0)
