"""`portkit reference` on an encoder (`AutoModel`: BERT, RoBERTa, ModernBERT, ...): the values
a port of it computes, without a head to decode with.

The layout is the causal one less what needs a head: `ids`, `embeddings` (what enters the first
layer: the embedding block's output, positions and token types added and normalised), `layer.N` and every
sub-layer inside it (as transformers names its modules: `attention.self.query`), `norm` where
the model normalises after its last layer (ModernBERT's `final_norm`: the model's output, when
it is not the last layer's), and `truth.*` (transformers in f64 less each f32 value: compare's
floors). transformers runs as for a causal LM: its own model class (`AutoModel`), eager
attention, CPU, offline, `trust_remote_code=False`, safetensors only; whole (an encoder fits in
memory where anyone would run one), every position attending to every other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from portkit.porting.dumpfile import TRUTH
from portkit.verify.errors import BadInput, one_line


def is_encoder(config: dict[str, Any]) -> bool:
    """config.json names only architectures that do not decode (`BertModel`, `XLMRobertaModel`,
    `BertForMaskedLM`: none is a class of transformers' causal-LM mapping, nor a conditional
    generation model) and does not say `is_decoder`."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # no verify extra: the causal path says so, in its one line
        return False
    decoding = {n for v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values() for n in ((v,) if isinstance(v, str) else v)}
    archs = [a for a in config.get("architectures") or () if isinstance(a, str)]
    return (
        bool(archs)
        and config.get("is_decoder") is not True
        and not any(a in decoding or "ForConditionalGeneration" in a for a in archs)
    )


def encoder_values(model_dir: Path, ids: Sequence[int], progress: Callable[[str], None]) -> dict[str, np.ndarray]:
    """Every value of the layout above, f32 (ids int64), with the f64 truth of each."""
    progress("loading transformers (encoder, AutoModel, eager, f32, cpu)")
    values = _forward(model_dir, ids, "float32")
    progress("transformers in f64 (the truth the floors are measured against)")
    try:
        truth = _forward(model_dir, ids, "float64")
    except BadInput as e:  # the f32 values stand, without floors
        progress(f"no f64 truth: {e}")
        truth = {}
    out: dict[str, np.ndarray] = {"ids": np.asarray(list(ids), dtype=np.int64), **values}
    out.update({TRUTH + k: (v - values[k]).astype(np.float32) for k, v in truth.items() if k in values})
    return out


class _FirstLayerInput:
    """A forward pre-hook keeping the first layer's input as `embeddings` (first call only)."""

    def __init__(self, outs: dict[str, np.ndarray]) -> None:
        self.outs = outs
        self.seen = False

    def __call__(self, _module: Any, args: Any, kwargs: Any) -> None:
        if self.seen:
            return
        self.seen = True
        x = (args[0] if args else kwargs["hidden_states"])[0].detach()
        self.outs["embeddings"] = (x if str(x.dtype) == "torch.float64" else x.float()).numpy().copy()


def _forward(model_dir: Path, ids: Sequence[int], precision: str) -> dict[str, np.ndarray]:
    from portkit.families.sublayers import EVERY_MODULE
    from portkit.verify.reference.anatomy import decoder_layers
    from portkit.verify.reference.capture import capture_hooks
    from portkit.verify.reference.runtime import ReferenceUnavailable, _import_torch

    try:
        torch, transformers = _import_torch()
    except ReferenceUnavailable as e:
        raise BadInput(str(e)) from None
    try:
        model = transformers.AutoModel.from_pretrained(
            str(model_dir),
            dtype=getattr(torch, precision),
            attn_implementation="eager",
            trust_remote_code=False,
            local_files_only=True,
            use_safetensors=True,
        ).eval()
    except Exception as e:  # transformers refused the checkpoint: its text, one line
        raise BadInput(f"transformers could not load {model_dir} as an encoder: {one_line(e)}") from None
    outs: dict[str, np.ndarray] = {}
    hooks = capture_hooks(model, outs, sublayers=(EVERY_MODULE,))
    # an encoder's embedding block (positions, token types, its norm) is part of the port:
    # `embeddings` is what enters the first layer, not the token embedding's rows
    hooks.append(decoder_layers(model)[1][0].register_forward_pre_hook(_FirstLayerInput(outs), with_kwargs=True))
    try:
        with torch.inference_mode():
            res = model(input_ids=torch.tensor([list(ids)], dtype=torch.long))
    except Exception as e:  # transformers' own failure on this checkpoint
        raise BadInput(f"transformers could not run {model_dir} ({precision}): {one_line(e)}") from None
    finally:
        for h in hooks:
            h.remove()
    last = max((int(k.split(".")[1]) for k in outs if k.count(".") == 1 and k.startswith("layer.")), default=None)
    final = res.last_hidden_state[0].detach()
    final = (final if precision == "float64" else final.float()).numpy().copy()
    if last is None or not np.array_equal(final, outs[f"layer.{last}"]):
        outs["norm"] = final
    return outs
