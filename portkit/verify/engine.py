"""`portkit verify`: the run itself, from a model directory to a `VerifyReport`.

Order matters for memory: the reference (transformers) runs first and is released before
candle loads, and candle's runners are loaded one at a time, so the peak is about one copy of
the weights plus the runtime, not one per model held.
"""

from __future__ import annotations

import gc
import json
import math
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from portkit import atomicfile
from portkit.families import Family
from portkit.findings import Finding
from portkit.verify import confirm as C
from portkit.verify import cachefiles, runcache
from portkit.verify.compare import TOLERANCES, Tolerance
from portkit.verify.inputs import BadInput, ModelDir, Prompt, parse_tokens, read_model_dir, resolve_prompt
from portkit.verify.runs import Comparison, Reference, RunOutputs, compare_run, describe_patch, from_cache, patched_config, run_candle

DEVICES = ("cpu", "metal", "cuda")
DTYPES = ("f32", "bf16", "f16")
DEFAULT_TOKENS = 8

Progress = Callable[[str], None]


@dataclass
class VerifyOptions:
    model_dir: Path
    device: str = "cpu"
    dtype: str = "f32"
    ids: str | list[int] | None = None
    text: str | None = None
    tokens: int = DEFAULT_TOKENS
    gguf: Path | None = None
    plot: Path | None = None
    use_flash_attn: bool = False
    layers: bool = True  # per-layer capture (a copy of the forward on the runner's tensors)
    lint: bool = True
    #: Testing hook (the negative control): added to one logit of the reference's last prompt
    #: position before any comparison, so the failure goes through the same code path.
    perturb_reference: float | None = None
    reference_mode: str = "streamed"  # streamed (one layer in memory at a time) | whole (from_pretrained, the check)
    cache: bool = True  # the reference's and candle's caches under $PORTKIT_CACHE (--no-cache: off)


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

    @property
    def ok(self) -> bool:
        return self.run.failure is None and self.comparison is not None and self.comparison.ok


@dataclass
class VerifyReport:
    options: VerifyOptions
    model: ModelDir
    prompt: Prompt
    tolerance: Tolerance
    versions: dict[str, str]
    reference: Reference
    run: RunOutputs
    comparison: Comparison | None
    findings: list[C.Confirmation]
    lint_note: str | None = None
    gguf: GgufSection | None = None
    plot: Path | None = None
    seconds: float = 0.0
    nonfinite: Any = None  # portkit.verify.nonfinite.NonFinite: NaN/inf named, its own verdict
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    family: str = "llama"  # the candle module (portkit.families) candle ran
    layers_note: str | None = None  # why there is no per-layer comparison, when there is none
    runs: list[RunOutputs] = field(default_factory=list)  # every candle run, for `candle_runs`

    @property
    def candle_runs(self) -> dict[str, int]:
        return {"total": len(self.runs), "cached": sum(r.source == "cache" for r in self.runs)}

    @property
    def candle_ok(self) -> bool:
        return self.run.failure is None and self.comparison is not None and self.comparison.ok

    @property
    def confirmed(self) -> list[C.Confirmation]:
        return [f for f in self.all_findings if f.confirmed]

    @property
    def all_findings(self) -> list[C.Confirmation]:
        return self.findings + (self.gguf.findings if self.gguf else [])

    @property
    def exit_code(self) -> int:
        if self.nonfinite is not None:
            from portkit.verify.nonfinite import EXIT_CODE

            return EXIT_CODE
        ok = self.candle_ok and not self.confirmed and (self.gguf is None or self.gguf.ok)
        return 0 if ok else 1


def _versions(pn: Any) -> dict[str, str]:
    out = {"candle": str(pn.build_info().get("candle_version", "?"))}
    for pkg in ("portkit", "transformers", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def check_device(pn: Any, device: str) -> None:
    """The native wheel's own message for a device it was not built with (exit 2), before any
    model is loaded."""
    try:
        pn.check_device(device)
    except (pn.DeviceUnavailableError, ValueError) as e:
        raise BadInput(str(e).splitlines()[0]) from None


def _validate(opts: VerifyOptions) -> None:
    if opts.device not in DEVICES:
        raise BadInput(f"--device must be one of {', '.join(DEVICES)}, got {opts.device!r}")
    if opts.dtype not in DTYPES:
        raise BadInput(f"--dtype must be one of {', '.join(DTYPES)}, got {opts.dtype!r}")
    if opts.reference_mode not in ("streamed", "whole"):
        raise BadInput(f"--reference must be streamed or whole, got {opts.reference_mode!r}")
    if opts.gguf is not None and not Path(opts.gguf).is_file():
        raise BadInput(f"--gguf {opts.gguf}: no such file")
    if opts.plot is not None:
        if not opts.layers:
            raise BadInput("--plot draws the per-layer errors: it cannot be combined with --no-layers")
        if Path(opts.plot).suffix.lower() != ".png":
            raise BadInput(f"--plot {opts.plot}: the plot is a PNG (give a path ending in .png)")
        if not Path(opts.plot).resolve().parent.is_dir():
            raise BadInput(f"--plot {opts.plot}: the directory does not exist")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise BadInput("--plot needs matplotlib: pip install 'portkit[plot]'") from None


class _Patched:
    """Patched candle runs, memoised by the patch (one load each, never two held at once)."""

    def __init__(self, fn: Callable[[dict[str, Any]], tuple[RunOutputs, Comparison | None]]) -> None:
        self.fn = fn
        self.cache: dict[str, tuple[RunOutputs, Comparison | None]] = {}

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        key = json.dumps(patch, sort_keys=True, default=str)
        if key not in self.cache:
            self.cache[key] = self.fn(patch)
        return self.cache[key]

    def runs(self) -> list[RunOutputs]:
        return [r for r, _ in self.cache.values()]


def _lint(model_dir: Path, gguf: Path | None, settings_args: dict[str, Any], progress: Progress) -> tuple[list[Finding], list[Finding]]:
    """(findings on the model dir, findings on the GGUF)."""
    from portkit.verify import lintbridge

    progress("lint: reading configs and headers")
    try:
        settings = lintbridge.make_settings(**settings_args)
        findings, _notes = lintbridge.lint([model_dir], settings)
        hf = [f for f in findings if not f.filename.endswith(".gguf")]
        gg = lintbridge.lint_gguf_beside(model_dir, gguf, settings) if gguf is not None else []
        return hf, gg
    except lintbridge.LintInputError as e:
        raise BadInput(f"lint: {e}") from None


def model_family(model: ModelDir) -> Family:
    """The candle module the checkpoint loads into (a config naming no model_type or
    architectures is llama, as lint reads it); one line and exit 2 for a model_type candle
    0.11.0 has no module for."""
    from portkit.families import BY_NAME, UNCOVERED_CANDLE_MODULES, detect

    fam = detect(model.config)
    if fam is not None:
        return fam
    if "model_type" not in model.config and "architectures" not in model.config:
        return BY_NAME["llama"]
    mt = model.config.get("model_type", (model.config.get("architectures") or ["?"])[0])
    if mt in UNCOVERED_CANDLE_MODULES:
        raise BadInput(f"model_type `{mt}`: portkit does not verify candle's `{UNCOVERED_CANDLE_MODULES[mt]}` module yet")
    raise BadInput(f"model_type `{mt}`: candle 0.11.0 has no module for it, so there is nothing to verify")


def verify(opts: VerifyOptions, progress: Progress = lambda _s: None) -> VerifyReport:
    t_start = time.perf_counter()
    _validate(opts)
    model = read_model_dir(opts.model_dir)
    family = model_family(model)
    prompt = resolve_prompt(model, opts.ids, opts.text)
    tokens = parse_tokens(opts.tokens)
    tol = TOLERANCES[opts.dtype]

    from portkit.verify.candle import NativeUnavailable, native

    try:
        pn = native()
    except NativeUnavailable as e:
        raise BadInput(str(e)) from None
    check_device(pn, opts.device)

    from portkit.verify.refjob import ReferenceJob

    timings: dict[str, float] = {}
    t_phase = time.perf_counter()
    from portkit.families import sublayers

    # the sub-layers candle's copy records too (the localisation inside the first bad layer)
    subs = sublayers.of(family) if opts.layers and family.capture else ()
    job = ReferenceJob(model, list(prompt.ids), tokens, mode=opts.reference_mode, use_cache=opts.cache, progress=progress, sublayers=subs)
    try:
        lint_note: str | None = None
        if opts.lint:
            hf_findings, gguf_findings = _lint(
                model.root,
                Path(opts.gguf) if opts.gguf else None,
                dict(
                    device=opts.device,
                    dtype=opts.dtype,
                    use_flash_attn=opts.use_flash_attn,
                    max_tokens=len(prompt.ids) + tokens,
                    build=pn.build_info(),
                ),
                progress,
            )
        else:
            hf_findings, gguf_findings, lint_note = [], [], "lint skipped (--no-lint)"
        timings["load"] = time.perf_counter() - t_phase
    except BaseException:
        job.cancel()
        raise
    ran = f"the {len(prompt.ids)}-token prompt and {tokens} generated tokens"

    def load_with(config_text: str) -> Callable[[], Any]:
        from portkit.verify.candle import load_family, load_llama

        if family.name == "llama":
            return lambda: load_llama(
                model.weight_files, config_text, dtype=opts.dtype, device=opts.device, use_flash_attn=opts.use_flash_attn
            )
        return lambda: load_family(family.name, model.weight_files, config_text, dtype=opts.dtype, device=opts.device)

    def cached(config_text: str, forced: list[int] | None, capture: bool) -> runcache.RunCache | None:
        if not runcache.cacheable(opts.device, opts.cache):
            return None
        return runcache.RunCache(
            runcache.run_key(
                loader=family.name,
                device=opts.device,
                dtype=opts.dtype,
                flash_attn=opts.use_flash_attn and family.name == "llama",
                config_text=config_text,
                files=job.fingerprints,
                prompt=prompt.ids,
                forced=forced,
                tokens=tokens,
                capture=capture,
            ),
            tokens=tokens,
            vocab=model.vocab_size,
        )

    layers_note = None if opts.layers else "not compared (--no-layers)"
    if opts.layers and not family.capture:
        layers_note = f"per-layer: not available for {family.name}"
    progress(f"candle {family.name}: loading ({opts.device}, {opts.dtype})")
    capture = opts.layers and family.capture
    run = run_candle(
        load_with(model.config_text),
        prompt.ids,
        None,  # candle generates first; the reference then runs one forward over its tokens
        tokens,
        label="as written",
        capture=capture,
        on_stage=lambda s: progress(f"candle: {s}"),
        cache=cached(model.config_text, None, capture),
    )
    gc.collect()
    timings["candle"] = time.perf_counter() - t_phase - timings["load"]
    t_phase = time.perf_counter()
    try:
        # candle's own tokens when it generated them all; else the reference generates its own
        forced = run.greedy if run.greedy is not None and len(run.greedy) == tokens else None
        reference = job.result(forced, opts.perturb_reference)
    except BaseException:
        job.cancel()
        raise
    timings["reference"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()
    comparison = compare_run(reference, run, tol) if run.failure is None else None

    def patched(patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        progress(f"candle with {describe_patch(patch)}")
        text = patched_config(model.config_text, patch)
        r = run_candle(load_with(text), prompt.ids, reference.inputs, tokens, label=describe_patch(patch), cache=cached(text, reference.inputs, False))
        gc.collect()
        return r, (compare_run(reference, r, tol) if r.failure is None else None)

    from portkit.verify.nonfinite import analyse

    nonfinite = analyse(reference.layers, reference.rows, run.layers, run.rows, reference.nonfinite_weights)
    timings["compare"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()
    patched_runs = _Patched(patched)
    subject = C.Subject(as_read=run, as_read_cmp=comparison, run_patched=patched_runs)
    confirmations = C.confirm_all(hf_findings, subject, ran)
    from portkit.verify.attribution import length_notes

    confirmations = length_notes(confirmations, len(prompt.ids) + tokens)
    timings["findings"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()

    gguf_section = None
    if opts.gguf is not None:
        gguf_section = verify_gguf(Path(opts.gguf), model, reference, tokens, opts.device, gguf_findings, progress, ran, use_cache=opts.cache)
        if lint_note:
            gguf_section.lint_note = lint_note
        timings["gguf"] = time.perf_counter() - t_phase

    plot_path = None
    if opts.plot is not None and comparison is not None and comparison.layers is not None:
        from portkit.verify.plot import plot_layers

        progress("plotting the per-layer errors")
        plot_path = plot_layers(
            comparison.layers,
            Path(opts.plot),
            title=f"candle 0.11.0 {opts.device} {opts.dtype} vs transformers eager f32, per layer",
            subtitle=model.root.name,
        )

    return VerifyReport(
        options=opts,
        model=model,
        prompt=prompt,
        tolerance=tol,
        versions=_versions(pn),
        reference=reference,
        run=run,
        comparison=comparison,
        findings=confirmations,
        lint_note=lint_note,
        gguf=gguf_section,
        plot=plot_path,
        seconds=time.perf_counter() - t_start,
        nonfinite=nonfinite,
        timings={k: round(v, 3) for k, v in timings.items()},
        family=family.name,
        layers_note=layers_note,
        runs=[run, *patched_runs.runs(), *(gguf_section.runs if gguf_section else [])],
    )


# --------------------------------------------------------------------------- GGUF

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
    from portkit.semantics import transformers_view

    theta = transformers_view(model.config).rope_theta
    return float(theta) if theta is not None else None


GGUF_RUN_PATCH_KEYS = ("permute_qk",)


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
) -> GgufSection:
    from portkit.verify.candle import load_gguf
    from portkit.verify.gguf_rewrite import read_metadata, rewrite_gguf, weight_types

    try:
        types = weight_types(path)
        meta = read_metadata(path)
    except Exception as e:  # the gguf package's parse errors: bad input
        raise BadInput(f"{path}: not a readable GGUF: {' '.join(str(e).split())[:200]}") from None
    tol = gguf_tolerance(types)
    loader = gguf_loader(meta)

    fingerprint = cachefiles.fingerprints([path]) if runcache.cacheable(device, use_cache) else []

    def cache_for(edit: dict[str, Any] | None) -> runcache.RunCache | None:
        if not runcache.cacheable(device, use_cache):
            return None
        key = runcache.run_key(
            loader=f"gguf:{loader}",
            device=device,
            dtype="as stored",
            config_text=None,
            files=fingerprint,
            prompt=reference.prompt,
            forced=reference.inputs,
            tokens=tokens,
            capture=False,
            edit=edit,
        )
        return runcache.RunCache(key, tokens=tokens)

    def judged(r: RunOutputs) -> tuple[RunOutputs, Comparison | None]:
        return r, (compare_run(reference, r, tol) if r.failure is None else None)

    def run_file(p: Path, label: str, cache: runcache.RunCache | None) -> tuple[RunOutputs, Comparison | None]:
        r = run_candle(lambda: load_gguf(p, device=device, loader=loader), reference.prompt, reference.inputs, tokens, label=label, cache=cache)
        gc.collect()
        return judged(r)

    progress(f"candle {loader}: {path.name}")
    run, cmp = run_file(path, "gguf as written", cache_for(None))
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

    patched_runs = _Patched(patched)
    theta = _reference_theta(model)

    subject = C.Subject(
        as_read=run, as_read_cmp=cmp, run_patched=patched_runs, what="the GGUF in candle",
        patch_word="",
        unfixable="no metadata edit candle reads can fix this",
    )
    confirmations = C.confirm_all(findings, subject, ran)
    from portkit.verify.attribution import reference_side

    # findings no GGUF edit can undo: judged by transformers with and without their effect
    confirmations = reference_side(confirmations, model, reference, run, tol.name, tokens, progress)

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
        if "rope_freqs.weight" in _tensor_names(path):
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
    )


def gguf_loader(meta: dict[str, Any]) -> str:
    """The candle loader for a GGUF, by `general.architecture`: quantized_llama for an
    architecture candle has no loader of its own (it then fails with candle's own message,
    which verify reports)."""
    from portkit.families import GGUF_LOADERS

    return GGUF_LOADERS.get(str(meta.get("general.architecture", "llama")), "quantized_llama")


def _tensor_names(path: Path) -> set[str]:
    import gguf

    return {t.name for t in gguf.GGUFReader(str(path)).tensors}


def max_or_nan(xs: list[float]) -> float:
    return max(xs) if xs else math.nan
