"""The streamed reference: transformers' own model, one decoder layer's weights in memory at a time.

The model class is the one transformers picks for the checkpoint (`AutoConfig` +
`AutoModelForCausalLM.from_config`, eager, f32, no remote code), built on the meta device. The
modules every position needs (embeddings, final norm, lm_head, rotary and other buffers) are
materialised once; each decoder layer gets a forward-pre-hook that loads its weights (f32) from
the safetensors files with `safe_open` and a forward-hook that puts them back on the meta device.
Then the model's OWN forward runs once (use_cache=False), so every family's quirks (gemma's
embedding scale, softcapping, granite's multipliers, MoE routing) are transformers' code, not
ours. Weights are loaded through transformers' own checkpoint conversion
(`convert_and_load_state_dict_in_model` with the model's conversion mapping: fused MoE experts,
legacy names), the function `from_pretrained` calls, so the streamed values equal the whole-model
values (tests/native/test_streamed_reference.py holds that on every family's fixtures).

Memory: one layer in f32, plus embeddings, lm_head and the activations of one forward. The f32
weights of an f32 checkpoint are views of safetensors' file mapping, as `from_pretrained`'s are;
a layer's pages of it are handed back once the layer has run (`file_pages`). The f64 truth loads
f32 too and widens each layer into the buffers the previous layer left (`_widen`); its embedding
and lm_head stay as stored, widened where a forward reads them (`stored_vocab`).
Each tensor is checked for non-finite values (a decoder layer's as it loads, the others after
the first forward, once the lm_head has read them), so verify can say that the checkpoint itself
holds NaN or inf (and which tensors), from the tensors.

`resident=True` is the same loader for a model that fits in memory (`portkit reference` when the
f32 weights take under half the available memory): every layer is loaded once, through the same
`safe_open` files and the same conversion, in one call, and kept, so that decoding (one pass over
every layer per token) does not load the weights again per token. The values are the streamed
ones (the same tensors into the same modules; tests/native/test_streamed_reference.py holds
resident, streamed and whole-model decoding equal on every family's fixtures).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify.reference.capture import _decoder_layers, _host, capture_hooks, refeed_hooks
from portkit.verify.reference.stored_vocab import vocab_modules, widen_on_read

#: safetensors' dtypes that f32 holds exactly, and torch's name for each
_WIDENS_EXACTLY = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def vocab_dtype(stored: Iterable[str]) -> str:
    """torch's name of the dtype the truth keeps its vocabulary in (`stored_vocab`), from the
    safetensors dtypes of the checkpoint's tensors: the one they all share, else float32 (which
    holds F16 and BF16 exactly; any one of several would round the others' values)."""
    kinds = set(stored)
    return _WIDENS_EXACTLY[next(iter(kinds))] if len(kinds) == 1 else "float32"


@dataclass
class ForwardResult:
    """One forward over `ids`: every position's logits and every layer's output over every position."""

    logits: np.ndarray  # [T, vocab] float32
    layers: dict[str, np.ndarray]  # embeddings, layer.N, norm: [T, hidden] float32
    nonfinite_weights: list[str] = field(default_factory=list)  # checkpoint tensors holding NaN/inf


def _open(safe_open: Any, path: Path) -> Any:
    """safetensors' file mapping, as `from_pretrained` opens the files on Linux: an f32 weight of
    an f32 checkpoint is a view of it, at the address alignment the whole model's weights have (the
    row-times-matrix kernels of a cached step round by alignment: copies into other buffers put
    gemma2's cached steps 3e-6 from from_pretrained's), and nothing is copied to load it (a third
    of a streamed f32 forward's time on the real 135M checkpoint went to copying). The pages a
    streamed layer touched are handed back once it is done (`file_pages`)."""
    try:
        return safe_open(str(path), framework="pt", device="cpu", backend="mmap")
    except TypeError:  # an older safetensors: the mapping is its only way
        return safe_open(str(path), framework="pt", device="cpu")


def _all_finite(torch: Any, p: Any) -> bool:
    """A sum is one cheap pass and is non-finite whenever an element is; only then (or on a
    finite overflow) is the elementwise check paid."""
    with torch.no_grad():
        return bool(torch.isfinite(p.sum())) or bool(torch.isfinite(p).all())


class _ModelRuns:
    """What both reference models do with transformers' model: `forward` (one pass, no KV cache)
    and `decode` (generate()'s arithmetic), each through `_run`, the model's own forward with the
    model's `_hooks` around it."""

    model: Any
    torch: Any
    nonfinite: list[str]
    #: decoder layer index -> candle's input to it: the next plain `forward` also records each
    #: layer on it (`refeed_hooks`; never a cached decode, whose KV cache a second call would grow)
    refeed: Mapping[int, np.ndarray] | None = None

    def forward(self, ids: Sequence[int], *, capture: bool = True, sublayers: Sequence[str] = ()) -> ForwardResult:
        return self._run(
            ids, capture=capture, sublayers=sublayers, use_cache=False, refeed=self.refeed if capture else None
        )[0]

    def decode(
        self,
        prompt: Sequence[int],
        forced: Sequence[int] | None,
        n: int,
        *,
        step_threads: int | None = None,
        sublayers: Sequence[str] = (),
    ) -> tuple[ForwardResult, list[int]]:
        return decode(self._run, prompt, forced, n, step_threads=step_threads, sublayers=sublayers)

    def _hooks(
        self,
        outs: dict[str, np.ndarray],
        capture: bool,
        sublayers: Sequence[str],
        refeed: Mapping[int, np.ndarray] | None = None,
    ) -> list[Any]:
        """The hooks one forward runs with (with `capture`, those that keep values in `outs`;
        with `refeed`, `refeed_hooks`)."""
        raise NotImplementedError

    def _run(
        self,
        ids: Sequence[int],
        *,
        capture: bool,
        sublayers: Sequence[str] = (),
        refeed: Mapping[int, np.ndarray] | None = None,
        **kw: Any,
    ) -> tuple[ForwardResult, Any]:
        torch = self.torch
        outs: dict[str, np.ndarray] = {}
        hooks = self._hooks(outs, capture, sublayers, refeed)
        try:
            with torch.inference_mode():
                res = self.model(torch.tensor([list(ids)], dtype=torch.long), **kw)
        finally:
            for h in hooks:
                h.remove()
        self._after_run()
        return ForwardResult(logits=_host(res.logits[0]), layers=outs, nonfinite_weights=list(self.nonfinite)), res

    def _after_run(self) -> None:
        """What a model does once a forward is through (before its non-finite weights are read)."""


def causal_lm_class(transformers: Any, config: Any) -> Any:
    """`AutoModelForCausalLM`, or for a config class its mapping does not list (the text config
    of emu3 and mllama, whose causal LM transformers maps from the composite model type) the
    transformers class the checkpoint's `architectures` names, when it is transformers' own
    causal LM for this config class (nothing outside transformers is ever imported)."""
    auto = transformers.AutoModelForCausalLM
    if type(config) in auto._model_mapping:
        return auto
    for name in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, name, None) if isinstance(name, str) and name.isidentifier() else None
        if isinstance(cls, type) and getattr(cls, "config_class", None) is type(config) and "ForCausalLM" in name:
            return _FromConfig(cls)
    return auto


@dataclass(frozen=True)
class _FromConfig:
    """A transformers model class with `AutoModelForCausalLM.from_config`'s call."""

    cls: Any

    def from_config(self, config: Any, **kwargs: Any) -> Any:
        kwargs.pop("trust_remote_code", None)
        return self.cls._from_config(config, **kwargs)


def _config(transformers: Any, model_dir: Path, config_text: str | None) -> Any:
    """The checkpoint's config, or `config_text` read the same way (from a directory of its own)."""
    if config_text is None:
        return transformers.AutoConfig.from_pretrained(str(model_dir), local_files_only=True, trust_remote_code=False)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="portkit-config-") as tmp:
        (Path(tmp) / "config.json").write_text(config_text)
        return transformers.AutoConfig.from_pretrained(tmp, local_files_only=True, trust_remote_code=False)


def _checked_edits(tensor_edits: Mapping[str, str], names: set[str]) -> dict[str, str]:
    """The tensor edits, each naming a tensor of the checkpoint and an edit portkit knows (the
    `Q8_0` module edits are `_q8_0_modules`')."""
    from portkit.rules.as_candle import Q8_0, ZERO, parse_affine

    edits = {n: how for n, how in tensor_edits.items() if how != Q8_0}
    unknown = sorted(set(edits) - names)
    if unknown:
        raise ValueError(f"no tensor {unknown[0]} in the checkpoint to edit")
    bad = sorted(n for n, how in edits.items() if how != ZERO and parse_affine(how) is None)
    if bad:
        raise ValueError(f"unknown tensor edit {edits[bad[0]]!r} for {bad[0]}")
    return edits


def _q8_0_modules(torch: Any, model: Any, tensor_edits: Mapping[str, str]) -> None:
    """The `Q8_0` edits: each named Linear computes `x_q8 @ w_q8.T (+ bias)`, its input and weight
    rounded to Q8_0 blocks along the input dimension, as candle's CPU `QMatMul` on a Q8_0 weight does
    (candle-core k_quants.rs `matmul`: the input quantized to the weight's `VecDotType`, Q8_0)."""
    from portkit.rules.as_candle import Q8_0

    names = [n for n, how in tensor_edits.items() if how == Q8_0]
    params = {n for n, _p in model.named_parameters(remove_duplicate=False)}
    unknown = sorted(set(names) - params)
    if unknown:
        raise ValueError(f"no parameter {unknown[0]} in the model to compute in Q8_0")
    for name in names:
        module = model.get_submodule(name.removesuffix(".weight"))
        module.register_forward_hook(partial(_q8_0_linear, torch), with_kwargs=False)


def _q8_0_linear(torch: Any, module: Any, args: tuple[Any, ...], _output: Any) -> Any:
    x = args[0]
    out = _q8_0_round(torch, x) @ _q8_0_round(torch, module.weight).T
    return out if getattr(module, "bias", None) is None else out + module.bias


def _q8_0_round(torch: Any, t: Any) -> Any:
    """`t` through ggml's Q8_0 and back (blocks of 32 along the last dimension), in its dtype."""
    import gguf

    a = t.detach().to("cpu", torch.float32).contiguous().numpy()
    q = gguf.quants.dequantize(gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0)
    return torch.from_numpy(q.reshape(a.shape)).to(t.dtype)


class StreamedModel(_ModelRuns):
    """A transformers causal LM whose decoder layers live on the meta device between uses."""

    def __init__(
        self,
        model_dir: Path,
        weight_files: Sequence[Path],
        progress: Callable[[str], None] = lambda _s: None,
        *,
        config_text: str | None = None,
        resident: bool = False,
        scan_nonfinite: bool = True,
        tensor_edits: Mapping[str, str] | None = None,
        precision: str = "float32",
        rope_table: str | None = None,
    ) -> None:
        """`config_text`: another config.json for the same weights, and `tensor_edits`
        (checkpoint name -> "zero") tensors changed as they load: a reference-side
        counterfactual, transformers as candle computes (`CandleEdit.as_candle`). `resident`: load
        every layer now and keep it (the model must fit in memory). `scan_nonfinite=False`: skip
        the NaN/inf scan of the weights (a pass over every weight) for a caller that does not
        report it; `nonfinite_weights` is then always empty. `precision="float64"`: every weight
        and activation in f64, the truth verify measures both f32 sides against
        (docs/verify.md, "Tolerances"). `rope_table` ("f16", "bf16"): the rotary modules return
        the cos/sin table candle builds in that dtype (`rope_table.patch_rotary`), a counterfactual."""
        from portkit.verify.reference.runtime import _import_torch

        torch, transformers = _import_torch()
        self.torch = torch
        self.dtype = {"float32": torch.float32, "float64": torch.float64}[precision]
        self.progress = progress
        self.model = self._meta_model(transformers, model_dir, config_text, precision, rope_table)
        self._open_files(weight_files, precision, resident, tensor_edits)
        self._group_by_layer()
        self.nonfinite: list[str] = []
        self._resident_unscanned = False
        self.missing: list[str] = []  # parameters the checkpoint lacks: initialised as from_pretrained does
        self._kept: set[tuple[int, str]] = set()
        self.resident = resident
        self.scan_nonfinite = scan_nonfinite
        self._materialise_buffers()
        if resident:  # every group's tensors in one conversion call, as from_pretrained makes it
            self._convert([item for group in self.groups.values() for item in group])
            self._scan(self._resident_params())
        else:
            self._load(None)
        if getattr(self.model.config.get_text_config(), "tie_word_embeddings", False):
            self.model.tie_weights()
        self._init_missing(self.model, skip_prefix=self.layers_path + ".")
        widen_on_read(torch, self.vocab, self.dtype)
        if resident:  # then each layer as its first streamed use finishes it: same init order, same scan order
            for i in range(len(self.layers)):
                self._finish_layer(i)

    def _meta_model(
        self, transformers: Any, model_dir: Path, config_text: str | None, precision: str, rope_table: str | None
    ) -> Any:
        """The model transformers builds for the config, on the meta device (no weights yet)."""
        torch = self.torch
        config = _config(transformers, model_dir, config_text)
        # torch's grouped matmul (transformers' default for MoE experts) has no f64 kernel: the
        # truth computes each expert on its own, the same sums in another order
        experts = {"experts_implementation": "eager"} if precision == "float64" else {}
        with torch.device("meta"):
            model = causal_lm_class(transformers, config).from_config(
                config, attn_implementation="eager", dtype=self.dtype, trust_remote_code=False, **experts
            )
        model = model.eval()
        if rope_table is not None:
            from portkit.verify.reference.rope_table import patch_rotary

            if not patch_rotary(model, rope_table):
                raise ValueError(
                    f"{type(model).__name__} has no rotary module to give candle's {rope_table} RoPE table"
                )
        return model

    def _open_files(
        self, weight_files: Sequence[Path], precision: str, resident: bool, tensor_edits: Mapping[str, str] | None
    ) -> None:
        """The checkpoint's files, mapped, and the dtype each tensor is loaded in."""
        torch, model = self.torch, self.model
        from safetensors import safe_open
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.modeling_utils import LoadStateDictConfig

        from portkit.verify.reference.file_pages import FilePages

        self.files = [_open(safe_open, p) for p in weight_files]
        self.pages = FilePages(zip(weight_files, self.files, strict=False))
        stored = {key: f.get_slice(key).get_dtype() for f in self.files for key in f.keys()}
        # The f64 truth's weights: loaded in f32 (an f32 checkpoint's are views of the mapping) and
        # widened into f64 buffers each layer hands on to the next (`_widen`), where f32 holds
        # the stored values exactly; the same values as converting each tensor to f64, without a
        # gigabyte of fresh pages a forward (the real 135M checkpoint).
        self.widen = (
            precision == "float64"
            and not resident
            and set(stored.values()) <= set(_WIDENS_EXACTLY)
            and not model._get_dtype_plan(self.dtype)
        )
        self.load_dtype = torch.float32 if self.widen else self.dtype
        # and its embedding and lm_head stay as stored, widened where a forward reads them
        # (`stored_vocab`): in one dtype the checkpoint's tensors share, else f32
        self.vocab = vocab_modules(torch, model) if self.widen else []
        self.vocab_dtype = getattr(torch, vocab_dtype(stored.values())) if self.vocab else torch.float32
        # tensors copied as they load (widened, or converted from their stored dtype): their pages
        # are read once loaded; the others are views of the mapping until their layer is dropped
        loaded_as = "F32" if self.load_dtype == torch.float32 else "F64"
        self._copied = {key for key, dtype in stored.items() if self.widen or dtype != loaded_as}
        self._spare: dict[tuple[int, ...], list[Any]] = {}
        self.load_config = LoadStateDictConfig(
            dtype=self.load_dtype,
            dtype_plan=model._get_dtype_plan(self.load_dtype),
            device_map={"": "cpu"},
            weight_mapping=get_model_conversion_mapping(model),  # type: ignore[arg-type]  # transformers' own pair, typed narrower there
        )
        self.tensor_edits = _checked_edits(tensor_edits or {}, {k for f in self.files for k in f.keys()})
        _q8_0_modules(torch, model, tensor_edits or {})

    def _group_by_layer(self) -> None:
        """The checkpoint's keys grouped by the decoder layer they load into (None: always resident)."""
        from portkit.verify.reference.anatomy import layer_key

        self.layers_path, self.layers = _decoder_layers(self.model)
        key_of_layer = layer_key(self.layers_path)
        self.state = LiveState(self.model)
        self.groups: dict[int | None, list[tuple[str, Any]]] = {}
        for f in self.files:
            for key in f.keys():
                found = key_of_layer.findall(key)  # one match: not a list nested in another's layers
                idx = int(found[0]) if len(found) == 1 and int(found[0]) < len(self.layers) else None
                self.groups.setdefault(idx, []).append((key, f))

    def _resident_modules(self) -> list[Any]:
        prefix = self.layers_path + "."
        return [m for n, m in self.model.named_modules() if not (n + ".").startswith(prefix)]

    def _resident_params(self) -> list[tuple[str, Any]]:
        prefix = self.layers_path + "."
        return [(n, p) for n, p in self.model.named_parameters() if not n.startswith(prefix)]

    def _materialise_buffers(self) -> None:
        """Non-persistent buffers (rotary inv_freq, gemma's embed_scale, ...) are never in a
        checkpoint: put them on the CPU and let the model's own `_init_weights` compute them, as
        `from_pretrained` does after loading on the meta device."""
        torch = self.torch
        owners: list[str] = []
        modules = dict(self.model.named_modules())
        for name, mod in modules.items():
            non_persistent: set[str] = getattr(mod, "_non_persistent_buffers_set", set())
            names = [n for n, b in mod._buffers.items() if b is not None and n in non_persistent]
            if not names:
                continue
            for n in names:
                b = mod._buffers[n]
                mod._buffers[n] = torch.empty_like(b, device="cpu")
            owners.append(name)
        # an owner's ancestors first: a model may set its layers' buffers from above (Falcon-H1's
        # model sets each mixer's `mup_vector`), as from_pretrained's walk over every module does
        above = {name.rsplit(".", k)[0] for name in owners for k in range(1, name.count(".") + 1)}
        above |= {""} if owners else set()
        with torch.no_grad():
            for name in sorted(above - set(owners), key=lambda n: n.count(".") if n else -1):
                self.model._init_weights(modules[name])
            for name in owners:
                self.model._init_weights(modules[name])

    def _load(self, idx: int | None) -> None:
        """Load one group's checkpoint tensors (a layer, or None: everything outside the layers)
        through transformers' own conversion, in f32 (the f64 truth: then widened, `_widen`);
        note any non-finite tensor."""
        group = self.groups.get(idx, [])
        modules = list(self._resident_modules() if idx is None else self.layers[idx].modules()) if self.widen else []
        if idx is None and self.vocab:
            modules = [m for m in modules if all(m is not v for v in self.vocab)]
            self._retype_meta(self.vocab, self.vocab_dtype)
        self._retype_meta(modules, self.torch.float32)  # transformers loads into a parameter's own dtype
        self._convert(group)
        self._widen(modules)
        self.pages.release(key for key, _f in group if key in self._copied)
        if idx is None:
            # scanned after the first forward (`_after_run`), when the lm_head has read them: a
            # scan now would read every page of the embeddings, and they would stay resident
            # through the whole forward (113 MiB of the 135M checkpoint) for the 24 rows it looks up
            self._resident_unscanned = True
        else:
            self._finish_layer(idx)

    def _after_run(self) -> None:
        """The resident weights' scan `_load` left: their names first, as the model orders them."""
        if self._resident_unscanned:
            self._resident_unscanned = False
            layers_found = self.nonfinite
            self.nonfinite = []
            self._scan(self._resident_params())
            self.nonfinite += [n for n in layers_found if n not in self.nonfinite]

    def _finish_layer(self, idx: int) -> None:
        """After a layer's tensors are in: its parameters the checkpoint lacks, then the scan."""
        self._init_missing(self.layers[idx], prefix=f"{self.layers_path}.{idx}.")
        self._scan(self.layers[idx].named_parameters(prefix=f"{self.layers_path}.{idx}"))

    def _convert(self, group: list[tuple[str, Any]]) -> None:
        from transformers.core_model_loading import convert_and_load_state_dict_in_model

        if group:
            state = {key: self._edited(key) if key in self.tensor_edits else f.get_slice(key) for key, f in group}
            with self.state.standing_in():
                convert_and_load_state_dict_in_model(model=self.model, state_dict=state, load_config=self.load_config)

    def _retype_meta(self, modules: Any, dtype: Any) -> None:
        """These modules' unloaded floating parameters, on the meta device in `dtype`: transformers
        loads a tensor in the dtype of the parameter it replaces."""
        for mod in modules:
            for n, p in list(mod._parameters.items()):
                if p is not None and p.is_meta and p.is_floating_point() and p.dtype != dtype:
                    mod._parameters[n] = self.torch.nn.Parameter(
                        self.torch.empty_like(p, dtype=dtype), requires_grad=False
                    )

    def _widen(self, modules: Any) -> None:
        """These modules' f32 parameters just loaded, as f64: each copied into a buffer a dropped
        layer left (`_drop`), or a new one."""
        torch = self.torch
        for mod in modules:
            for n, p in list(mod._parameters.items()):
                if p is None or p.is_meta or p.dtype != torch.float32:
                    continue
                spare = self._spare.get(tuple(p.shape))
                buf = spare.pop() if spare else torch.empty(p.shape, dtype=torch.float64)
                buf.copy_(p.detach())
                mod._parameters[n] = torch.nn.Parameter(buf, requires_grad=False)

    def _edited(self, key: str) -> Any:
        """A tensor edit's tensor: zeros of the checkpoint tensor's shape (a tensor candle never
        reads computes as a zero one where it is added), or `w * mul + add` of it (`as_candle.affine`:
        a gain or a constant candle computes with instead)."""
        from portkit.rules.as_candle import parse_affine

        f = next(f for f in self.files if key in f.keys())
        ma = parse_affine(self.tensor_edits[key])
        if ma is None:
            return self.torch.zeros(f.get_slice(key).get_shape(), dtype=self.dtype)
        return f.get_tensor(key).to(self.dtype) * ma[0] + ma[1]

    def _scan(self, params: Any) -> None:
        if not self.scan_nonfinite:
            return
        torch = self.torch
        # One thread: the answer is exact on any thread count (a sum is non-finite whenever an
        # element is, and a finite overflow falls back to the elementwise check), and a team of
        # threads meeting after each of these small sums cost 100 ms a layer on a loaded 2-core
        # machine where one thread takes 0.5 ms.
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for name, p in params:
                if not p.is_meta and p.is_floating_point() and not _all_finite(torch, p):
                    if name not in self.nonfinite:
                        self.nonfinite.append(name)
        finally:
            torch.set_num_threads(threads)

    def _init_missing(self, scope: Any, prefix: str = "", skip_prefix: str | None = None) -> None:
        """What `from_pretrained` does with parameters the checkpoint lacks: the model's own
        `_init_weights` (loaded ones are marked initialised and left alone). They stay resident
        so that every forward sees the same values, as with the whole model."""
        torch = self.torch
        owners = []
        for mname, mod in scope.named_modules(prefix=prefix.rstrip(".")):
            if skip_prefix and (mname + ".").startswith(skip_prefix):
                continue
            names = [n for n, p in mod._parameters.items() if p is not None and p.is_meta]
            for n in names:
                p = mod._parameters[n]
                # drawn in f32 (the f64 truth then holds the f32 reference's values, widened)
                draw = torch.float32 if p.is_floating_point() else p.dtype
                mod._parameters[n] = torch.nn.Parameter(
                    torch.empty_like(p, device="cpu", dtype=draw), requires_grad=False
                )
                self._kept.add((id(mod), n))
                self.missing.append(f"{mname}.{n}" if mname else n)
            if names:
                owners.append((mod, names))
        if owners:
            # from_pretrained draws them from torch's global generator, so two runs (and the f64
            # truth against the f32 reference) would each hold other random weights: a fixed seed
            # per scope makes every run of this model hold the same ones, the caller's RNG untouched
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                torch.manual_seed(zlib.crc32(prefix.encode()))
                for mod, names in owners:
                    self.model._init_weights(mod)
                    for n in names:
                        p = mod._parameters[n]
                        if p.is_floating_point() and p.dtype != self.dtype:
                            mod._parameters[n] = torch.nn.Parameter(p.to(self.dtype), requires_grad=False)

    def _drop(self, idx: int) -> None:
        torch = self.torch
        if idx not in self.groups:  # no checkpoint name says this layer: loaded with the rest, and kept
            return
        for mod in self.layers[idx].modules():
            for n, p in list(mod._parameters.items()):
                if p is not None and not p.is_meta and (id(mod), n) not in self._kept:
                    if self.widen and p.dtype == torch.float64:
                        self._spare.setdefault(tuple(p.shape), []).append(p.detach())
                    mod._parameters[n] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=False)
        self.pages.release(key for key, _f in self.groups.get(idx, []) if key not in self._copied)

    def _hooks(
        self,
        outs: dict[str, np.ndarray],
        capture: bool,
        sublayers: Sequence[str],
        refeed: Mapping[int, np.ndarray] | None = None,
    ) -> list[Any]:
        n = len(self.layers)
        hooks: list[Any] = []

        if not self.resident:  # resident: every layer is loaded already and stays
            for i, layer in enumerate(self.layers):
                hooks.append(layer.register_forward_pre_hook(partial(self._stream_in, i, n)))
        if capture:
            hooks += capture_hooks(self.model, outs, self.layers, sublayers)
        if refeed:
            hooks += refeed_hooks(self.layers, refeed, outs, sublayers)
        # registered after the capture hooks: a layer's output is kept before its weights go
        if not self.resident:
            for i, layer in enumerate(self.layers):
                hooks.append(layer.register_forward_hook(partial(self._stream_out, i)))
        return hooks

    def _stream_in(self, i: int, n: int, _module: Any, _args: Any, _kwargs: Any = None) -> None:
        """Before decoder layer i runs: its weights loaded."""
        self.progress(f"reference: streaming layer {i + 1}/{n}")
        self._load(i)

    def _stream_out(self, i: int, _module: Any, _args: Any, _output: Any) -> None:
        """After decoder layer i ran: its weights back on the meta device."""
        self._drop(i)


class LiveState(Mapping):
    """A model's state dict as transformers' loader reads it, from an index built once.

    `convert_and_load_state_dict_in_model` walks `model.state_dict()` and `model.named_buffers()`
    on every call to learn each parameter's name, dtype and shape; a streamed forward calls it
    once per decoder layer, and the two walks took 0.1 s of each 0.5 s f32 forward of the 135M
    checkpoint. The keys are the model's own `state_dict()` keys, read once; a value is looked up
    when asked, so it is the module's current tensor (meta, or loaded, in its current dtype)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.owners: dict[str, tuple[Any, str]] = {}
        for key in model.state_dict(keep_vars=True):
            path, _, name = key.rpartition(".")
            self.owners[key] = (model.get_submodule(path) if path else model, name)
        self.buffers = list(model.named_buffers())

    def __getitem__(self, key: str) -> Any:
        module, name = self.owners[key]
        try:
            return getattr(module, name)
        except AttributeError:  # a module's extra state: in the keys, no attribute of that name
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.owners)

    def __len__(self) -> int:
        return len(self.owners)

    @contextmanager
    def standing_in(self) -> Iterator[None]:
        """While the loader runs: the model's `state_dict()` and `named_buffers()` answer from here."""
        model = self.model
        model.state_dict = lambda *_a, **_k: self
        model.named_buffers = lambda *_a, **_k: iter(self.buffers)
        try:
            yield
        finally:
            del model.state_dict, model.named_buffers


class WholeModel(_ModelRuns):
    """The check: `from_pretrained` (the whole f32 model in memory), the same single forward."""

    def __init__(self, model_dir: Path) -> None:
        from portkit.verify.reference.runtime import ReferenceModel

        ref = ReferenceModel.load(Path(model_dir))
        self.model, self.torch = ref.model, ref.torch
        self.nonfinite = [
            n for n, p in self.model.named_parameters() if p.is_floating_point() and not _all_finite(self.torch, p)
        ]

    def _hooks(
        self,
        outs: dict[str, np.ndarray],
        capture: bool,
        sublayers: Sequence[str],
        refeed: Mapping[int, np.ndarray] | None = None,
    ) -> list[Any]:
        hooks = capture_hooks(self.model, outs, sublayers=sublayers) if capture else []
        return hooks + (refeed_hooks(_decoder_layers(self.model)[1], refeed, outs, sublayers) if refeed else [])


def decode(
    run: Callable[..., tuple[ForwardResult, Any]],
    prompt: Sequence[int],
    forced: Sequence[int] | None,
    n: int,
    *,
    step_threads: int | None = None,
    sublayers: Sequence[str] = (),
) -> tuple[ForwardResult, list[int]]:
    """generate()'s own arithmetic: a prefill with the KV cache, then one cached step per token
    (`forced`'s tokens, else its own argmax). For configs whose cache differs from the plain
    forward (a `sliding_window` cache on a model whose forward ignores the window).
    Returns (rows as `logits` [max(n, 1), vocab] and the prefill's layers, tokens fed).

    `step_threads`: torch's intra-op threads for the cached steps (the prefill keeps the
    caller's). A one-token step is a row times each weight matrix plus a few tiny ops; a team
    of threads meets at a barrier after every op, and on a loaded machine the wait for a
    descheduled team member costs more than the op (bench/porting_bench.py: 1 thread took a
    third of the CPU of 2 on the 135M shape). No op of a one-token step splits a reduction
    across threads, so the rows are the same numbers (tests hold them equal to the whole
    model's at 2 threads on every family's fixtures)."""
    first, out = run(list(prompt), capture=True, use_cache=True, sublayers=sublayers)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = getattr(out, "past_key_values", None)
    rows = [first.logits[-1]]
    fed: list[int] = []
    key = "cache" if hasattr(out, "cache") else "past_key_values"
    threads_before: int | None = None
    if step_threads is not None and max(n, 1) > 1:
        import torch

        threads_before = torch.get_num_threads()
        torch.set_num_threads(step_threads)
    try:
        for k in range(1, max(n, 1)):
            tok = int(forced[k - 1]) if forced is not None else int(rows[-1].argmax())
            fed.append(tok)
            res, out = run([tok], capture=False, use_cache=True, **{key: cache})
            cache = getattr(out, key, cache)
            rows.append(res.logits[-1])
    finally:
        if threads_before is not None:
            import torch

            torch.set_num_threads(threads_before)
    if forced is None and n:
        fed.append(int(rows[-1].argmax()))
    return ForwardResult(logits=np.stack(rows), layers=first.layers, nonfinite_weights=first.nonfinite_weights), fed
