"""Where a transformers causal LM keeps what the reference records, read from the model itself.

Nothing here is a name guessed for Llama (`model.layers`, `model.norm`): the decoder layers are
the `ModuleList` whose elements are the class transformers itself records hidden states from
(`_can_record_outputs["hidden_states"]`) or keeps whole on one device (`_no_split_modules`); the
embedding is `get_input_embeddings()`; the final norm's output is what the head
(`get_output_embeddings()`) reads (Llama's `model.norm`, phi's `model.final_layernorm`, GPT-2's
`transformer.ln_f`, GPT-NeoX's `gpt_neox.final_layer_norm`).

A checkpoint tensor belongs to decoder layer N when its name holds `<list>.N.`, `<list>` the last
name of the layers' path (`layers`, GPT-2's and BLOOM's `h`, MPT's `blocks`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


class NoDecoderLayers(RuntimeError):
    """The model keeps no single list of decoder layers the reference can stream and record."""


def _element_classes(mod: Any) -> set[type]:
    return {type(m) for m in mod}


def _recorded_layer_class(model: Any) -> type | None:
    """The class transformers records `hidden_states` from (the decoder layer), when it says."""
    recorded = (getattr(model, "_can_record_outputs", None) or {}).get("hidden_states")
    target = getattr(recorded, "target_class", recorded)
    return target if isinstance(target, type) else None


def _lists(model: Any) -> Iterator[tuple[str, Any]]:
    import torch

    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) and any(True for _ in mod.parameters()):
            yield name, mod


def _declared_layers_count(model: Any) -> int | None:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    count = getattr(config, "num_hidden_layers", None)
    return count if isinstance(count, int) else None


def decoder_layers(model: Any) -> tuple[str, Any]:
    """(dotted path, ModuleList) of the decoder layers: the list of transformers' decoder-layer
    class (`_can_record_outputs`, else `_no_split_modules`; for a model that declares neither,
    a list of one class as long as its config's `num_hidden_layers`), the longest when a model
    has several (a vision tower's beside a language model's); `NoDecoderLayers` names the lists
    when none is, or when two of the same length are (a model that runs two stacks in turn)."""
    layer_class = _recorded_layer_class(model)
    no_split = set(getattr(model, "_no_split_modules", None) or ())
    lists = list(_lists(model))
    count = _declared_layers_count(model)

    def is_layers(mod: Any) -> bool:
        classes = _element_classes(mod)
        if layer_class is not None:
            return classes == {layer_class}
        if no_split:
            return {c.__name__ for c in classes} <= no_split
        return len(classes) == 1 and len(mod) == count

    found = [(name, mod) for name, mod in lists if is_layers(mod)]
    what = type(model).__name__
    if not found:
        names = ", ".join(name for name, _ in lists) or "no module list at all"
        raise NoDecoderLayers(f"{what}: no list of decoder layers to stream (its module lists: {names})")
    longest = max(len(mod) for _, mod in found)
    top = [(name, mod) for name, mod in found if len(mod) == longest]
    if len(top) > 1:
        names = ", ".join(name for name, _ in top)
        raise NoDecoderLayers(f"{what}: {len(top)} lists could each be its decoder layers ({names}), not one")
    return top[0]


def layer_key(layers_path: str) -> re.Pattern[str]:
    """Checkpoint names of the tensors of decoder layer N: `...<list>.N.` with `<list>` the last
    name of the layers' path (group 1 is N)."""
    return re.compile(rf"(?:^|\.){re.escape(layers_path.rsplit('.', 1)[-1])}\.(\d+)\.")


def module_paths(layer: Any) -> list[str]:
    """Every module with weights inside a decoder layer, by its path there (`self_attn.q_proj`,
    `mlp.experts`; GPT-2's `attn.c_attn`), in registration order; module lists are containers,
    never called themselves, and their elements are listed."""
    import torch

    containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
    return [
        name
        for name, mod in layer.named_modules()
        if name and not isinstance(mod, containers) and any(True for _ in mod.parameters())
    ]
