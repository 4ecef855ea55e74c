"""verify's GGUF section (`--gguf FILE`): the file through the candle loader its architecture
selects, against the same reference, each finding's counterfactual as a rewritten GGUF, and what
repairs the file whatever lint said."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from portkit import atomicfile
from portkit.findings import Finding
from portkit.verify import cachefiles, runcache
from portkit.verify import confirm as C
from portkit.verify.compare import TOLERANCES, Tolerance
from portkit.verify.inputs import BadInput, ModelDir
from portkit.verify.runs import (
    Comparison,
    PatchedRuns,
    Reference,
    RunOutputs,
    compare_run,
    describe_patch,
    from_cache,
    run_candle,
)

Progress = Callable[[str], None]


@dataclass
class GgufSection:
    path: Path
    loader: str  # the candle quantized_* module that read it
    weight_types: dict[str, int]
    tolerance: Tolerance
    run: RunOutputs
    comparison: Comparison | None
    findings: list[C.Confirmation] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    lint_note: str | None = None
    runs: list[RunOutputs] = field(default_factory=list)  # the file as written and each edit
    explanation: Any = None  # portkit.verify.explain.Explanation: what accounts for the GGUF's mismatch

    @property
    def ok(self) -> bool:
        return self.run.failure is None and self.comparison is not None and self.comparison.ok


_EIGHT_BIT = {"Q8_0", "Q8_1", "Q8_K"}


def gguf_tolerance(types: dict[str, int]) -> Tolerance:
    """By the coarsest 2-D weight type in the file: F32 -> f32 (1e-4 on logits); F16/BF16 ->
    half precision; 8-bit blocks -> q8_0; anything coarser -> q4_k (argmax with margins)."""
    names = set(types) or {"F32"}
    if names <= {"F32"}:
        return TOLERANCES["f32"]
    if names <= {"F32", "F16"}:
        return TOLERANCES["f16"]
    if names <= {"F32", "F16", "BF16"}:
        return TOLERANCES["bf16"]
    if names <= {"F32", "F16", "BF16"} | _EIGHT_BIT:
        return TOLERANCES["q8_0"]
    return TOLERANCES["q4_k"]


def _reference_theta(model: ModelDir) -> float | None:
    from portkit.families import detect_or_default
    from portkit.semantics import family_transformers_view

    family = detect_or_default(model.config)
    theta = family_transformers_view(family.name if family is not None else None, model.config).get("rope_theta")
    return float(theta) if theta is not None else None


GGUF_RUN_PATCH_KEYS = ("permute_qk",)


class GgufFile:
    """The GGUF as candle's loader reads it, and its runs on one prompt and the tokens fed after
    it. Made (and its file as written run) as soon as those tokens are known, candle's own
    greedy tokens, which is before the reference: the run then overlaps transformers'."""

    def __init__(
        self, path: Path, prompt: list[int], inputs: list[int], tokens: int, device: str, *, use_cache: bool = True, layers: bool = True
    ) -> None:
        """`layers`: record the per-layer values of the file as written where they are judged."""
        from portkit.verify.gguf_rewrite import read_metadata, weight_types

        self.path, self.prompt, self.inputs, self.tokens, self.device = path, list(prompt), list(inputs), tokens, device
        header = _header(path)
        if header is not None:
            self.types, self.meta, self.tensor_names = header
        else:
            try:
                self.types = weight_types(path)
                self.meta = read_metadata(path)
            except Exception as e:  # the gguf package's parse errors: bad input
                raise BadInput(f"{path}: not a readable GGUF: {' '.join(str(e).split())[:200]}") from None
            self.tensor_names = None
        self.tol = gguf_tolerance(self.types)
        self.loader = gguf_loader(self.meta)
        from portkit.verify.candle import native

        self.layers = layers
        # per-layer values only where they are judged: a quantized file's are noise by design
        self.capture = layers and self.tol.layer_rtol is not None and self.loader in native().gguf_capture_loaders()
        self.cacheable = runcache.cacheable(device, use_cache)
        self.fingerprint = cachefiles.fingerprints([path]) if self.cacheable else []
        self._as_written: RunOutputs | None = None

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
        from portkit.verify.candle import load_gguf

        r = run_candle(
            lambda: load_gguf(p, device=self.device, loader=self.loader), self.prompt, self.inputs, self.tokens, label=label, cache=cache, capture=captured
        )
        gc.collect()
        return r

    def as_written(self, progress: Progress) -> RunOutputs:
        if self._as_written is None:
            progress(f"candle {self.loader}: {self.path.name}")
            self._as_written = self.run(self.path, "gguf as written", self.cache_for(None, self.capture), self.capture)
        return self._as_written

    def runs_on(self, reference: Reference) -> bool:
        return self.prompt == list(reference.prompt) and self.inputs == list(reference.inputs)


def start_gguf(
    path: Path, prompt: list[int], inputs: list[int], tokens: int, device: str, progress: Progress, *, use_cache: bool = True, layers: bool = True
) -> GgufFile | BadInput:
    """The file read and run as written on `inputs`, before the reference is known; a file that
    cannot be read is its BadInput, raised where verify_gguf raises it."""
    try:
        f = GgufFile(path, prompt, inputs, tokens, device, use_cache=use_cache, layers=layers)
    except BadInput as e:
        return e
    f.as_written(progress)
    return f


def verify_gguf(
    path: Path,
    model: ModelDir,
    reference: Reference,
    tokens: int,
    device: str,
    findings: list[Finding],
    progress: Progress,
    ran: str,
    *,
    use_cache: bool = True,
    as_candle: Callable[[dict[str, Any]], Reference] | None = None,
    layers: bool = True,
    started: GgufFile | BadInput | None = None,
) -> GgufSection:
    """`as_candle`: transformers as candle computes (`attribution.AsCandleRuns`, shared with the
    HF section), for the findings no GGUF edit can undo; None: they are judged without it.
    `layers`: the per-layer values of the file as written, where its loader has a copy of the
    forward that records them and the file is judged per layer (F32). `started`: `start_gguf`'s,
    when it ran on the reference's inputs (else the file is read and run here)."""
    from portkit.verify.gguf_rewrite import rewrite_gguf

    if isinstance(started, BadInput):
        raise started
    if started is not None and started.runs_on(reference) and started.layers == layers:
        gf = started
    else:
        gf = GgufFile(path, reference.prompt, reference.inputs, tokens, device, use_cache=use_cache, layers=layers)
    types, meta, tol, loader, cache_for, capture = gf.types, gf.meta, gf.tol, gf.loader, gf.cache_for, gf.capture

    def judged(r: RunOutputs) -> tuple[RunOutputs, Comparison | None]:
        return r, (compare_run(reference, r, tol) if r.failure is None else None)

    def run_file(p: Path, label: str, cache: runcache.RunCache | None) -> tuple[RunOutputs, Comparison | None]:
        return judged(gf.run(p, label, cache))

    run, cmp = judged(gf.as_written(progress))
    tmpdir = atomicfile.scratch_dir("portkit-verify-gguf-")  # a killed verify's is removed by the next
    n = [0]

    def patched(patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        n[0] += 1
        label = describe_patch(patch)
        progress(f"candle {loader} with {label}")
        cache = cache_for(patch)
        hit = from_cache(cache, label)
        if hit is not None:  # no edited copy to write
            return judged(hit)
        meta_patch = {k: v for k, v in patch.items() if k not in GGUF_RUN_PATCH_KEYS and v is not None}
        drop = tuple(k for k, v in patch.items() if v is None)
        out = tmpdir / f"patched-{n[0]}.gguf"
        try:
            rewrite_gguf(path, out, set_meta=meta_patch, drop_meta=drop, permute_qk=bool(patch.get("permute_qk")))
            return run_file(out, label, cache)
        finally:
            out.unlink(missing_ok=True)

    patched_runs = PatchedRuns(patched)
    theta = _reference_theta(model)

    def against(ref: Reference, r: RunOutputs) -> Comparison | None:
        return compare_run(ref, r, tol) if r.failure is None else None

    # findings no GGUF edit can undo: judged against transformers as candle computes
    subject = C.Subject(
        as_read=run, as_read_cmp=cmp, run_patched=patched_runs, what="the GGUF in candle",
        patch_word="",
        unfixable="no metadata edit candle reads can fix this",
        reference_as=as_candle, compare=against, reference=reference,
    )
    confirmations, numeric_subject = C.confirm_section(findings, subject, ran)
    from portkit.verify.attribution import scan_lengths
    from portkit.verify.explain import explain

    confirmations = scan_lengths(confirmations, findings, model, reference, tokens, progress)
    no_layers = None if capture else (
        f"per-layer: not recorded for {loader} GGUFs" if layers and tol.layer_rtol is not None else f"per-layer: not judged for a {tol.name} file"
    )
    if not layers:
        no_layers = "per-layer: not compared (--no-layers)"
    explanation = explain(cmp, run, confirmations, findings, numeric_subject, no_layers)

    # What repairs the file, whatever lint said: each counterfactual alone, when the GGUF differs.
    diagnosis: list[str] = []
    if loader == "quantized_llama" and run.failure is None and cmp is not None and not cmp.ok:
        candidates: list[dict[str, Any]] = [{"permute_qk": True}]
        fb_key = "llama.rope.freq_base"  # candle reads this key whatever the architecture
        if theta is not None and meta.get(fb_key) != theta:
            candidates.append({fb_key: theta})
        for cand in candidates:
            r, c = patched_runs(cand)
            # printed only when it explains something: agreement, or at least half the distance gone
            if c is not None and cmp is not None and (c.ok or c.distance() <= C.IMPROVEMENT * cmp.distance()):
                verdict = "agrees" if c.ok else "closer"
                diagnosis.append(f"with {describe_patch(cand)}: {verdict} ({c.headline()})")
        if "rope_freqs.weight" in (gf.tensor_names if gf.tensor_names is not None else _tensor_names(path)):
            diagnosis.append("rope_freqs.weight is present: candle's quantized_llama never reads it (no GGUF edit fixes that)")
    try:
        tmpdir.rmdir()
    except OSError:
        pass
    return GgufSection(
        path=path,
        loader=loader,
        weight_types=types,
        tolerance=tol,
        run=run,
        comparison=cmp,
        findings=confirmations,
        diagnosis=diagnosis,
        runs=[run, *patched_runs.runs()],
        explanation=explanation,
    )


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


def _tensor_names(path: Path) -> set[str]:
    import gguf

    return {t.name for t in gguf.GGUFReader(str(path)).tensors}
