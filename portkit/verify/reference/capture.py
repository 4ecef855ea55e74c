"""What the reference records of a forward, by hooks on transformers' own modules: the
embeddings, each decoder layer and every sub-layer inside it, the final norm (what the head
reads), a MoE router's choice; and the refeed, a layer run again on candle's input. Where each
module is: `anatomy`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def _host(tensor: Any) -> np.ndarray:
    """A captured tensor as numpy: f64 stays f64 (the truth run, `precision="float64"`), every
    other dtype as f32."""
    t = tensor.detach()
    return (t if str(t.dtype) == "torch.float64" else t.float()).numpy().copy()


def _decoder_layers(model: Any) -> tuple[str, Any]:
    """(dotted path, ModuleList) of the decoder layers (`anatomy.decoder_layers`)."""
    from portkit.verify.reference.anatomy import decoder_layers

    return decoder_layers(model)


def capture_hooks(
    model: Any,
    outs: dict[str, np.ndarray],
    layers: Sequence[Any] | None = None,
    sublayers: Sequence[str] = (),
) -> list[Any]:
    """Forward hooks storing the embeddings, every decoder layer's and the final norm's outputs
    (first call only), named as `portkit_native.capture` names them; with `sublayers`
    (attribute paths inside a decoder layer, `portkit.families.sublayers`), each one's output
    too, as `layer.N.<path>` [T, features] (a path the layer lacks is skipped: stablelm's
    parallel residual has no post_attention_layernorm). Where each one is: `anatomy`."""
    from portkit.families.sublayers import EVERY_MODULE
    from portkit.verify.reference.anatomy import module_paths

    if layers is None:
        layers = _decoder_layers(model)[1]

    def keep(name: str) -> Kept:
        return Kept(outs, name, first_only=True)

    hooks = [model.get_input_embeddings().register_forward_hook(keep("embeddings"))]
    for i, layer in enumerate(layers):
        for path in module_paths(layer) if EVERY_MODULE in sublayers else sublayers:
            try:
                sub = layer.get_submodule(path)
            except AttributeError:
                continue
            hooks.append(sub.register_forward_hook(keep(f"layer.{i}.{path}")))
        hooks.append(layer.register_forward_hook(keep(f"layer.{i}")))
    head = model.get_output_embeddings()
    if head is not None:  # an encoder (`AutoModel`) has none
        hooks.append(head.register_forward_pre_hook(HeadInput(outs)))
    return hooks


def _rows(output: Any) -> Any:
    """A module's output as `[positions, ...]` (batch 1): the first element of a tuple or model
    output, its batch row when it has one (`[1, T, F]`), as is when the module flattened the
    positions itself (a router's `[T, experts]`); None when it holds no tensor."""
    import torch

    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    tensor = output[0] if isinstance(output, tuple | list) and output else output
    if not isinstance(tensor, torch.Tensor) or tensor.ndim == 0:
        return None
    return tensor[0] if tensor.ndim >= 2 and tensor.shape[0] == 1 else tensor


#: a router's choice, beside its logits: `layer.N.<router>.chosen` [T, top_k]
CHOSEN = "chosen"


def _chosen_experts(output: Any) -> Any:
    """The experts a MoE router chose per token (transformers' routers return their logits, the
    weights and the chosen indices): the integer tensor of its tuple, each token's ascending
    (the set chosen, whatever order a port lists it in); None for any other output."""
    import torch

    if not isinstance(output, tuple):
        return None
    found = [t for t in output[1:] if isinstance(t, torch.Tensor) and not t.is_floating_point() and t.ndim >= 1]
    if len(found) != 1:
        return None
    rows = _rows((found[0],))
    return None if rows is None or not rows.numel() else rows.sort(dim=-1).values


@dataclass(frozen=True, eq=False)
class HeadInput:
    """A forward pre-hook on the head (`get_output_embeddings()`) that keeps its input as `norm`
    (first call only): the final norm's output, in every causal LM of transformers' mapping
    (Llama's `model.norm`, phi's `final_layernorm`, GPT-2's `ln_f`: 155 of 155 built tiny, checked
    against the norm module's own output when this was written)."""

    outs: dict[str, np.ndarray]

    def __call__(self, _module: Any, args: Any) -> None:
        rows = _rows(args)
        if "norm" not in self.outs and rows is not None:
            self.outs["norm"] = _host(rows)


#: The prefix of the values a decoder layer gives on candle's input (`refeed_hooks`).
REFEED = "refeed."


def refeed_hooks(
    layers: Sequence[Any], inputs: Mapping[int, np.ndarray], outs: dict[str, np.ndarray], sublayers: Sequence[str] = ()
) -> list[Any]:
    """Forward hooks that run decoder layer i again, right after its own forward and with its own
    arguments (masks, position embeddings), on `inputs[i]` ([P, hidden]: candle's input to it,
    its previous layer's output) in the first P positions: the layer's output, and each of
    `sublayers`' inside it, on candle's input, as `refeed.layer.i[.path]` [T, features] in `outs`.
    Causal attention keeps the first P positions independent of the rest. The error candle's
    layer i adds is then its output's distance from this, with nothing carried in. Registered
    before the hooks that put a streamed layer's weights back on the meta device."""

    return [
        layer.register_forward_hook(Refed(outs, i, np.ascontiguousarray(inputs[i]), tuple(sublayers)), with_kwargs=True)
        for i, layer in enumerate(layers)
        if i in inputs
    ]


@dataclass(frozen=True, eq=False)
class Kept:
    """A forward hook that keeps a module's output (its first row, on the host) as `outs[name]`;
    `first_only`: the first call's (a module called again, by a refeed, keeps its own)."""

    outs: dict[str, np.ndarray]
    name: str
    first_only: bool = False

    def __call__(self, _module: Any, _args: Any, output: Any) -> None:
        if self.first_only and self.name in self.outs:
            return
        rows = _rows(output)
        if rows is not None and rows.numel():
            self.outs[self.name] = _host(rows)
        chosen = _chosen_experts(output)
        if chosen is not None:
            self.outs[f"{self.name}.{CHOSEN}"] = _host(chosen)


@dataclass(frozen=True, eq=False)
class Refed:
    """A forward hook that runs decoder layer `index` again with its own arguments, on `fed` in the
    first positions, keeping its output and its `sublayers`' (`refeed_hooks`)."""

    outs: dict[str, np.ndarray]
    index: int
    fed: np.ndarray
    sublayers: tuple[str, ...]

    def __call__(self, module: Any, args: Any, kwargs: Any, _output: Any) -> None:
        import torch

        x = args[0] if args else kwargs["hidden_states"]
        x = x.clone()
        x[0, : self.fed.shape[0]] = torch.from_numpy(self.fed).to(x.dtype)
        name = f"{REFEED}layer.{self.index}"
        inner = []
        for path in self.sublayers:
            try:
                inner.append(module.get_submodule(path).register_forward_hook(Kept(self.outs, f"{name}.{path}")))
            except AttributeError:
                continue
        try:
            out = module.forward(x, *args[1:], **{k: v for k, v in kwargs.items() if k != "hidden_states"})
        finally:
            for h in inner:
                h.remove()
        Kept(self.outs, name)(module, None, out)
