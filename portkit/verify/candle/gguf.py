"""A GGUF as candle's loader reads it: its header (weight types, metadata, tensor names, the
loader its architecture selects) and its runs on one prompt and the tokens fed after it, each
cached like candle's other runs. verify's GGUF section (`portkit.verify.sections.gguf`) judges them."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from portkit.verify import cachefiles
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.run import RunOutputs, run_candle
from portkit.verify.errors import BadInput, one_line

Progress = Callable[[str], None]


class GgufFile:
    """The GGUF as candle's loader reads it, and its runs on one prompt and the tokens fed after
    it. Made (and its file as written run) as soon as those tokens are known, candle's own
    greedy tokens, which is before the reference: the run then overlaps transformers'."""

    def __init__(
        self, path: Path, prompt: list[int], inputs: list[int], tokens: int, device: str, *, use_cache: bool = True
    ) -> None:
        from portkit.verify.candle.gguf_edit import read_metadata, weight_types

        self.path, self.prompt, self.inputs, self.tokens, self.device = path, list(prompt), list(inputs), tokens, device
        header = _header(path)
        self.tensor_names: set[str] | None
        if header is not None:
            self.types, self.meta, self.tensor_names = header
        else:
            try:
                self.types = weight_types(path)
                self.meta = read_metadata(path)
            except Exception as e:  # the gguf package's parse errors: bad input
                raise BadInput(f"{path}: not a readable GGUF: {one_line(e, 200)}") from None
            self.tensor_names = None
        self.loader = gguf_loader(self.meta)
        self.cacheable = runcache.cacheable(device, use_cache)
        self.fingerprint = cachefiles.fingerprints([path]) if self.cacheable else []
        self._as_written: RunOutputs | None = None
        self.captured: bool | None = None  # whether the run as written recorded the per-layer values

    def can_capture(self) -> bool:
        """The loader has a copy of its forward that records the per-layer values."""
        from portkit.verify.candle.native import native

        return self.loader in native().gguf_capture_loaders()

    def cache_for(self, edit: dict[str, Any] | None, captured: bool = False) -> runcache.RunCache | None:
        if not self.cacheable:
            return None
        key = runcache.run_key(
            loader=f"gguf:{self.loader}",
            device=self.device,
            dtype="as stored",
            config_text=None,
            files=self.fingerprint,
            prompt=self.prompt,
            forced=self.inputs,
            tokens=self.tokens,
            capture=captured,
            edit=edit,
        )
        return runcache.RunCache(key, tokens=self.tokens)

    def run(self, p: Path, label: str, cache: runcache.RunCache | None, captured: bool = False) -> RunOutputs:
        from portkit.verify.candle.native import load_gguf

        r = run_candle(
            lambda: load_gguf(p, device=self.device, loader=self.loader),
            self.prompt,
            self.inputs,
            self.tokens,
            label=label,
            cache=cache,
            capture=captured,
        )
        gc.collect()
        return r

    def as_written(self, progress: Progress, capture: bool) -> RunOutputs:
        """The file as written (once), recording the per-layer values with `capture`."""
        if self._as_written is None:
            progress(f"candle {self.loader}: {self.path.name}")
            self._as_written = self.run(self.path, "gguf as written", self.cache_for(None, capture), capture)
            self.captured = capture
        return self._as_written

    def runs_on(self, prompt: list[int], inputs: list[int]) -> bool:
        return self.prompt == list(prompt) and self.inputs == list(inputs)


def gguf_loader(meta: dict[str, Any]) -> str:
    """The candle loader for a GGUF, by `general.architecture`: quantized_llama for an
    architecture candle has no loader of its own (it then fails with candle's own message,
    which verify reports)."""
    from portkit.semantics.gguf import loader_for

    return loader_for(str(meta.get("general.architecture", "")))


def _header(path: Path) -> tuple[dict[str, int], dict[str, Any], set[str]] | None:
    """(2-D weight types, metadata, tensor names) from portkit's bounded header reader: the
    gguf package's `GGUFReader` builds numpy views of every field, 4 s a call on SmolLM2's
    49,152-token vocabulary. The metadata holds every value but the arrays too long to keep
    (the tokenizer's: read by nothing here). None where the gguf package's answer could differ
    (a file the reader refuses, whose error text is the gguf package's; a tensor type it has no
    name for; a string it did not keep): the caller then asks the gguf package."""
    from portkit.errors import InputError
    from portkit.model.gguf_header import GGML_TYPES, read_gguf

    try:
        g = read_gguf(path)
    except InputError:
        return None
    types: dict[str, int] = {}
    for t in g.tensors.values():
        if t.type_id not in GGML_TYPES:
            return None
        if len(t.dims) >= 2:
            types[t.type_name] = types.get(t.type_name, 0) + 1

    def plain(v: Any) -> Any:
        if v.type == "ARRAY":
            return None if v.value is None else [plain(x) for x in v.value]
        if v.type == "STRING" and v.value is None:
            raise LookupError
        return v.value

    meta: dict[str, Any] = {}
    try:
        for k, v in g.metadata.items():
            if not (v.type == "ARRAY" and v.value is None):
                meta[k] = plain(v)
    except LookupError:
        return None
    return types, meta, set(g.tensors)


def tensor_names(path: Path) -> set[str]:
    """Every tensor's name, as the gguf package reads the file."""
    import gguf

    return {t.name for t in gguf.GGUFReader(str(path)).tensors}
