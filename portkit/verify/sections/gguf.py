"""verify's GGUF section (`--gguf FILE`): the file through the candle loader its architecture
selects, against the same reference, each finding's counterfactual as a rewritten GGUF, and what
repairs the file whatever lint said."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from portkit import atomicfile
from portkit.findings import Finding
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.gguf import GgufFile, tensor_names
from portkit.verify.candle.run import PatchedRuns, RunOutputs, from_cache
from portkit.verify.errors import BadInput
from portkit.verify.judge.checks import TOLERANCES, Tolerance
from portkit.verify.judge.comparison import Comparison, compare_run
from portkit.verify.judge.confirm import IMPROVEMENT, Confirmation, Subject, confirm_section, describe_patch
from portkit.verify.model_dir import ModelDir
from portkit.verify.reference.result import Reference

Progress = Callable[[str], None]


@dataclass
class GgufSection:
    path: Path
    loader: str  # the candle quantized_* module that read it
    weight_types: dict[str, int]
    tolerance: Tolerance
    run: RunOutputs
    comparison: Comparison | None
    findings: list[Confirmation] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    lint_note: str | None = None
    runs: list[RunOutputs] = field(default_factory=list)  # the file as written and each edit
    explanation: Any = None  # portkit.verify.judge.explain.Explanation: what accounts for the GGUF's mismatch

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


def capture_wanted(gf: GgufFile, layers: bool) -> bool:
    """Per-layer values only where they are judged (a quantized file's are noise by design) and
    the loader records them."""
    return layers and gguf_tolerance(gf.types).layer_rtol is not None and gf.can_capture()


def start_gguf(
    path: Path, prompt: list[int], inputs: list[int], tokens: int, device: str, progress: Progress, *, use_cache: bool = True, layers: bool = True
) -> GgufFile | BadInput:
    """The file read and run as written on `inputs`, before the reference is known; a file that
    cannot be read is its BadInput, raised where verify_gguf raises it."""
    try:
        f = GgufFile(path, prompt, inputs, tokens, device, use_cache=use_cache)
    except BadInput as e:
        return e
    f.as_written(progress, capture_wanted(f, layers))
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
    from portkit.verify.candle.gguf_edit import rewrite_gguf

    if isinstance(started, BadInput):
        raise started
    gf = started
    if gf is None or not gf.runs_on(reference.prompt, reference.inputs) or gf.captured != capture_wanted(gf, layers):
        gf = GgufFile(path, reference.prompt, reference.inputs, tokens, device, use_cache=use_cache)
    types, meta, loader, cache_for = gf.types, gf.meta, gf.loader, gf.cache_for
    tol, capture = gguf_tolerance(types), capture_wanted(gf, layers)

    def judged(r: RunOutputs) -> tuple[RunOutputs, Comparison | None]:
        return r, (compare_run(reference, r, tol) if r.failure is None else None)

    def run_file(p: Path, label: str, cache: runcache.RunCache | None) -> tuple[RunOutputs, Comparison | None]:
        return judged(gf.run(p, label, cache))

    run, cmp = judged(gf.as_written(progress, capture))
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
    subject = Subject(
        as_read=run, as_read_cmp=cmp, run_patched=patched_runs, what="the GGUF in candle",
        patch_word="",
        unfixable="no metadata edit candle reads can fix this",
        reference_as=as_candle, compare=against, reference=reference,
    )
    confirmations, numeric_subject = confirm_section(findings, subject, ran)
    from portkit.verify.judge.attribution import scan_lengths
    from portkit.verify.judge.explain import explain

    confirmations = scan_lengths(confirmations, findings, as_candle, model.config.get("max_position_embeddings"), progress)
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
            if c is not None and cmp is not None and (c.ok or c.distance() <= IMPROVEMENT * cmp.distance()):
                verdict = "agrees" if c.ok else "closer"
                diagnosis.append(f"with {describe_patch(cand)}: {verdict} ({c.headline()})")
        if "rope_freqs.weight" in (gf.tensor_names if gf.tensor_names is not None else tensor_names(path)):
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


