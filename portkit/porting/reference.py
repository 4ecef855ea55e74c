"""`portkit reference MODEL_DIR --out ref.safetensors`: transformers' values for a port of your own.

The numbers come from verify's reference models (`portkit.verify.reference.models`: transformers'
own modules, eager attention, f32, CPU, offline, `trust_remote_code=False`) through one
function, `reference_values`. Streamed (one decoder layer's weights in memory at a time) works
on models larger than memory; `auto` keeps the whole model resident when the f32 weights take
under half the available memory (the same loader, every layer loaded once and kept), because
each greedy token is one more pass over every layer and a streamed pass loads the weights
again. The resident values are from_pretrained's bit for bit (tests/native/test_streamed_reference.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from portkit.families import sublayers
from portkit.porting.dumpfile import GREEDY_LOGITS, TRUTH, order_key, write_reference
from portkit.porting.encoder import encoder_values, is_encoder
from portkit.verify.errors import BadInput, one_line
from portkit.verify.model_dir import read_model_dir
from portkit.verify.prompt import Prompt, parse_tokens, resolve_prompt
from portkit.verify.reference.memory import available_memory, f32_weight_bytes

FORMAT = "portkit-reference/1"
STORED_DTYPES = ("f32", "f16", "bf16")
Progress = Callable[[str], None]


MODES = ("auto", "streamed", "whole")
#: torch threads for the cached greedy steps (see `portkit.verify.reference.models.decode`): one-token
#: steps gain nothing from a thread team and, on a shared machine, lose a barrier wait per op
STEP_THREADS = 1


def choose_mode(mode: str, weight_files: Sequence[Path]) -> str:
    """`auto`: whole when the f32 weights take under half the available memory (MemAvailable:
    the other half is left for torch's libraries, activations and the rest of the machine), else
    streamed (one decoder layer in memory at a time, each greedy step streaming the layers
    again). `whole` is `StreamedModel(resident=True)`: the streamed loader, every layer loaded
    once through the same safetensors files and conversion, and kept for the greedy steps."""
    if mode not in MODES:
        raise BadInput(f"--reference must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    free = available_memory()
    return "whole" if free is not None and 2 * f32_weight_bytes(weight_files) < free else "streamed"


def reference_values(
    model_dir: Path,
    weight_files: Sequence[Path],
    ids: Sequence[int],
    tokens: int,
    mode: str = "auto",
    progress: Progress = lambda _s: None,
    sublayers: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """Every tensor of the layout, float32 (ids and greedy int64): ids, embeddings, layer.N,
    norm ([T, hidden]) and logits ([T, vocab]) from the prefill, with `sublayers` (paths inside
    a decoder layer) each `layer.N.<path>` [T, features]; greedy ([tokens]) and greedy.logits
    ([tokens, vocab], row k decided greedy token k) from generate()'s arithmetic (the prefill's
    KV cache, then one cached step per token).

    verify's reference models (`portkit.verify.reference.models`): transformers' own modules, eager,
    f32, CPU, offline, no remote code; streamed (one layer's weights at a time) or whole."""
    from portkit.verify.reference.anatomy import NoDecoderLayers
    from portkit.verify.reference.models import StreamedModel, decode
    from portkit.verify.reference.runtime import ReferenceLoadError, ReferenceUnavailable

    mode = choose_mode(mode, weight_files)
    progress(f"loading transformers ({mode}, eager, f32, cpu)")
    try:
        # the dump has no place for verify's NaN/inf list of weights: its scan is not paid for
        model: Any = StreamedModel(
            model_dir, list(weight_files), progress, resident=mode == "whole", scan_nonfinite=False
        )
    except ReferenceUnavailable as e:
        raise BadInput(str(e)) from None
    except NoDecoderLayers as e:
        raise BadInput(f"portkit reference cannot record {model_dir}: {e}") from None
    except Exception as e:  # transformers refused the checkpoint: its text, one line
        text = (
            str(e).splitlines()[0]
            if isinstance(e, ReferenceLoadError)
            else f"transformers could not load {model_dir}: {e}"
        )
        raise BadInput(text[:400]) from None
    prefill: list[Any] = []

    def run(step_ids: Sequence[int], **kw: Any) -> Any:
        res = model._run(step_ids, **kw)
        if not prefill:  # the prefill's logits cover every prompt position
            prefill.append(res[0])
        return res

    progress(f"transformers: prefill and {max(tokens - 1, 0)} cached greedy steps")
    try:
        steps, greedy = decode(run, list(ids), None, tokens, step_threads=STEP_THREADS, sublayers=sublayers)
    except Exception as e:  # transformers' own failure on this checkpoint
        raise BadInput(f"transformers could not run {model_dir}: {one_line(e)}") from None
    first = prefill[0]
    out: dict[str, np.ndarray] = {"ids": np.asarray(list(ids), dtype=np.int64), **first.layers, "logits": first.logits}
    if tokens:
        out["greedy"] = np.asarray(greedy, dtype=np.int64)
        out[GREEDY_LOGITS] = steps.logits.astype(np.float32, copy=False)
    model = None  # one model's weights at a time: the f64 one is twice the f32 one
    prefill.clear()
    out.update(_truth(model_dir, weight_files, ids, greedy if tokens else [], tokens, out, mode, progress, sublayers))
    order = called_order(first.layers)
    return {k: out[k] for k in sorted(out, key=lambda k: order_key(k, order))}


def called_order(values: dict[str, np.ndarray]) -> list[str]:
    """The sub-layer paths in the order the forward first computed them (the capture keeps each
    value as its module returns), over every layer: the computation order the dump is laid out in."""
    seen: dict[str, None] = {}
    for name in values:
        sub = sublayers.split(name)
        if sub is not None:
            seen.setdefault(sub[1])
    return list(seen)


def _truth(
    model_dir: Path,
    weight_files: Sequence[Path],
    ids: Sequence[int],
    greedy: Sequence[int],
    tokens: int,
    values: dict[str, np.ndarray],
    mode: str,
    progress: Progress,
    sublayers: Sequence[str],
) -> dict[str, np.ndarray]:
    """`truth.<name>`: transformers in f64 on the same inputs (the prompt, then the f32
    reference's own greedy tokens, generate()'s arithmetic as above) less each f32 value, for the
    logits, `greedy.logits` and every per-layer value: the floors `portkit compare` judges an f32
    candidate against (docs/verify.md, "Tolerances"). None when transformers cannot compute the
    model in f64 (XGLM's f32 mask constant overflows there): compare then judges against its fixed
    tolerances, and says the floors were not measured."""
    from portkit.verify.reference.models import StreamedModel, decode

    progress("transformers in f64 (the truth the floors are measured against)")
    try:
        model: Any = StreamedModel(
            model_dir, list(weight_files), progress, resident=mode == "whole", scan_nonfinite=False, precision="float64"
        )
        prefill: list[Any] = []

        def run(step_ids: Sequence[int], **kw: Any) -> Any:
            res = model._run(step_ids, **kw)
            if not prefill:
                prefill.append(res[0])
            return res

        steps, _fed = decode(run, list(ids), list(greedy), tokens, step_threads=STEP_THREADS, sublayers=sublayers)
    except Exception as e:  # transformers' own failure in f64: the f32 values stand, without floors
        progress(f"no f64 truth: transformers could not run {model_dir} in f64: {one_line(e)}")
        return {}
    got = {**prefill[0].layers, "logits": prefill[0].logits}
    if tokens:
        got[GREEDY_LOGITS] = steps.logits
    return {
        TRUTH + k: (np.asarray(v, dtype=np.float64) - values[k]).astype(np.float32)
        for k, v in got.items()
        if k in values and np.shape(v) == np.shape(values[k])
    }


def refuse_multimodal(config: dict[str, Any]) -> None:
    """One line for an encoder-decoder checkpoint, and for one with parts other than its language
    model (a vision tower, an audio encoder: config.json's sub-configs besides `text_config`): the
    reference records a decoder's layers over token ids alone."""
    parts = sorted(
        k
        for k, v in config.items()
        if k != "text_config" and isinstance(v, dict) and isinstance(v.get("model_type"), str)
    )
    kind = config.get("model_type", "this model")
    if config.get("is_encoder_decoder") is True:
        raise BadInput(
            f"{kind} is an encoder-decoder checkpoint: portkit reference records decoder-only causal LMs; its decoder "
            "saved on its own (a *ForCausalLM, is_encoder_decoder false) is one"
        )
    if parts:
        raise BadInput(
            f"{kind} is multimodal ({', '.join(parts)} beside its language model): portkit reference records "
            "decoder-only causal LMs; save its language model on its own (its text_config, as a *ForCausalLM) and "
            "reference that"
        )


def family_name(config: dict[str, Any]) -> str:
    """portkit's family registry when there is one, else config.json's `model_type`."""
    from portkit.families import detect

    fam = detect(config)
    return str(config.get("model_type", "unknown")) if fam is None else str(fam.name)


def family_sublayers(config: dict[str, Any]) -> tuple[str, ...]:
    """The sub-layers recorded per decoder layer: the family's (`SUBLAYERS` in its module: the
    names portkit-dump's ports put), or, for a model_type portkit has no family for, every module
    with weights inside each layer, as transformers names it (`sublayers.EVERY_MODULE`)."""
    from portkit.families import detect

    family = detect(config)
    return (sublayers.EVERY_MODULE,) if family is None else sublayers.of(family)


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def reference_metadata(
    model_dir: Path, config: dict[str, Any], prompt: Prompt, tokens: int, dtype: str, sublayers: Sequence[str] = ()
) -> dict[str, str]:
    return {
        "format": FORMAT,
        "model": str(model_dir.resolve()),
        "family": family_name(config),
        "transformers": _version("transformers"),
        "torch": _version("torch"),
        "portkit": _version("portkit"),
        "runtime": "transformers eager f32 cpu",
        "dtype": dtype,
        # for --chat, `text` is the prompt transformers' chat template rendered (compare shows it)
        "prompt": json.dumps({"ids": list(prompt.ids), "source": prompt.source, "text": prompt.text}),
        "tokens": str(tokens),
        # the sub-layers recorded per decoder layer, in computation order ([] with --layers-only)
        "sublayers": json.dumps(list(sublayers)),
    }


@dataclass
class Written:
    path: Path
    tensors: dict[str, list[int]]
    metadata: dict[str, str]
    bytes: int
    seconds: float
    prompt: Prompt


def write(
    model_dir: Path,
    out: Path,
    *,
    ids: str | None = None,
    text: str | None = None,
    chat: str | None = None,
    tokens: int = 8,
    dtype: str = "f32",
    mode: str = "auto",
    layers_only: bool = False,
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
    refuse_multimodal(model.config)
    prompt = resolve_prompt(model, ids, text, chat)
    tokens = parse_tokens(tokens)
    if is_encoder(model.config):  # no head to decode with: no logits, no greedy tokens
        tokens, mode = 0, "encoder, whole"
        values = encoder_values(model.root, list(prompt.ids), progress)
        if layers_only:
            values = {k: v for k, v in values.items() if not sublayers.is_sublayer(k.removeprefix(TRUTH))}
        order = called_order(values)
        values = {k: values[k] for k in sorted(values, key=lambda k: order_key(k, order))}
    else:
        mode = choose_mode(mode, model.weight_files)
        subs = () if layers_only else family_sublayers(model.config)
        values = reference_values(model.root, model.weight_files, list(prompt.ids), tokens, mode, progress, subs)
    recorded = called_order(values)
    meta = reference_metadata(model.root, model.config, prompt, tokens, dtype, recorded)
    meta["runtime"] = f"transformers eager f32 cpu ({mode})"
    progress(f"writing {out}")
    write_reference(out, values, meta, dtype)
    return Written(
        out, {k: list(v.shape) for k, v in values.items()}, meta, out.stat().st_size, time.perf_counter() - t0, prompt
    )
