"""verify's GGUF section (`--gguf FILE`): the file through the candle loader its architecture
selects, against the same reference, each finding's counterfactual as a rewritten GGUF, and what
repairs the file whatever lint said."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from portkit import atomicfile
from portkit.findings import Finding
from portkit.semantics.gguf import REQUANTIZES, loader_repairs
from portkit.verify.candle.gguf import GgufFile, tensor_names
from portkit.verify.candle.run import PatchedRuns, RunOutputs, from_cache
from portkit.verify.errors import BadInput
from portkit.verify.judge.attribution import EffectScan
from portkit.verify.judge.checks import TOLERANCES, Tolerance
from portkit.verify.judge.comparison import Comparison, compare_run
from portkit.verify.judge.confirm import Confirmation, Subject, describe_patch
from portkit.verify.judge.section import judge_section
from portkit.verify.judge.verdicts import closer
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


def gguf_tolerance(types: dict[str, int], loader: str = "quantized_llama") -> Tolerance:
    """By the coarsest 2-D weight type the loader computes with: the file's, and what the loader
    re-quantizes to (`REQUANTIZES`). F32 -> f32 (1e-4 on logits); F16/BF16 -> half precision; 8-bit
    blocks -> q8_0; anything coarser -> q4_k (argmax with margins)."""
    names = (set(types) or {"F32"}) | set(REQUANTIZES.get(loader, ()))
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


def capture_wanted(gf: GgufFile, layers: bool) -> bool:
    """Per-layer values only where they are judged (a quantized file's are noise by design) and
    the loader records them."""
    return layers and gguf_tolerance(gf.types, gf.loader).layer_rtol is not None and gf.can_capture()


def start_gguf(
    path: Path,
    prompt: list[int],
    inputs: list[int],
    tokens: int,
    device: str,
    progress: Progress,
    *,
    use_cache: bool = True,
    layers: bool = True,
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
    as_candle: AsCandle | None = None,
    layers: bool = True,
    started: GgufFile | BadInput | None = None,
) -> GgufSection:
    """`as_candle`: transformers as candle computes (`reference.as_candle.AsCandleRuns`, shared
    with the HF section), for the findings no GGUF edit can undo; None: they are judged without
    it. `layers`: the per-layer values of the file as written, where its loader has a copy of
    the forward that records them and the file is judged per layer (F32). `started`:
    `start_gguf`'s, when it ran on the reference's inputs (else the file is read and run here)."""
    if isinstance(started, BadInput):
        raise started
    gf = started
    if gf is None or not gf.runs_on(reference.prompt, reference.inputs) or gf.captured != capture_wanted(gf, layers):
        gf = GgufFile(path, reference.prompt, reference.inputs, tokens, device, use_cache=use_cache)
    tol, capture = gguf_tolerance(gf.types, gf.loader), capture_wanted(gf, layers)
    run = gf.as_written(progress, capture)
    cmp = against(tol, reference, run)
    scratch = atomicfile.scratch_dir("portkit-verify-gguf-")  # a killed verify's is removed by the next
    patched_runs = PatchedRuns(EditedRuns(gf, partial(judged, reference, tol), progress, scratch))
    # findings no GGUF edit can undo: judged against transformers as candle computes
    subject = Subject(
        as_read=run,
        as_read_cmp=cmp,
        run_patched=patched_runs,
        what="the GGUF in candle",
        patch_word="",
        unfixable="no metadata edit candle reads can fix this",
        reference_as=as_candle,
        compare=partial(against, tol),
        reference=reference,
    )
    verdicts = judge_section(
        findings,
        subject,
        ran=ran,
        covered=len(reference.prompt) + tokens,
        scan=as_candle,
        max_positions=model.config.get("max_position_embeddings"),
        no_layers=_no_layers(gf, tol, layers, capture),
        progress=progress,
    )
    diagnosis = repairs(gf, cmp, patched_runs, _reference_theta(model)) if run.failure is None else []
    try:
        scratch.rmdir()
    except OSError:
        pass
    return GgufSection(
        path=path,
        loader=gf.loader,
        weight_types=gf.types,
        tolerance=tol,
        run=run,
        comparison=cmp,
        findings=verdicts.findings,
        diagnosis=diagnosis,
        runs=[run, *patched_runs.runs()],
        explanation=verdicts.explanation,
    )


class AsCandle(EffectScan, Protocol):
    """transformers as candle computes (`reference.as_candle.AsCandleRuns`)."""

    def __call__(self, edit: dict[str, Any]) -> Reference: ...


def judged(reference: Reference, tol: Tolerance, r: RunOutputs) -> tuple[RunOutputs, Comparison | None]:
    return r, against(tol, reference, r)


def against(tol: Tolerance, ref: Reference, r: RunOutputs) -> Comparison | None:
    return compare_run(ref, r, tol) if r.failure is None else None


class EditedRuns:
    """Each counterfactual as an edited copy of the file (metadata set or dropped, the Q/K rows
    permuted), run and judged; `PatchedRuns` memoises them by the patch."""

    def __init__(
        self,
        gf: GgufFile,
        judge: Callable[[RunOutputs], tuple[RunOutputs, Comparison | None]],
        progress: Progress,
        scratch: Path,
    ) -> None:
        self.gf, self.judge, self.progress, self.scratch = gf, judge, progress, scratch
        self.written = 0

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        from portkit.verify.candle.gguf_edit import apply_edit

        label = describe_patch(patch)
        self.progress(f"candle {self.gf.loader} with {label}")
        cache = self.gf.cache_for(patch)
        hit = from_cache(cache, label)
        if hit is not None:  # no edited copy to write
            return self.judge(hit)
        self.written += 1
        out = self.scratch / f"patched-{self.written}.gguf"
        try:
            apply_edit(self.gf.path, out, patch)
            return self.judge(self.gf.run(out, label, cache))
        finally:
            out.unlink(missing_ok=True)


def _no_layers(gf: GgufFile, tol: Tolerance, layers: bool, capture: bool) -> str | None:
    """Why the GGUF section has no per-layer values (None: it has them)."""
    if not layers:
        return "per-layer: not compared (--no-layers)"
    if capture:
        return None
    if tol.layer_rtol is not None:
        return f"per-layer: not recorded for {gf.loader} GGUFs"
    return f"per-layer: not judged for a {tol.name} file"


def repairs(
    gf: GgufFile,
    cmp: Comparison | None,
    run_patched: Callable[[dict[str, Any]], tuple[RunOutputs, Comparison | None]],
    theta: float | None,
) -> list[str]:
    """What repairs the file, whatever lint said: each of its loader's usual repairs alone, when
    the GGUF differs, printed only when it explains something (it agrees, or the distance at
    least halves); and the tensors the loader never reads."""
    if cmp is None or cmp.ok:
        return []
    how = loader_repairs(gf.loader)
    out: list[str] = []
    for cand in how.candidates(gf.meta, theta):
        _, c = run_patched(cand)
        if c is not None and closer(cmp, c):
            out.append(f"with {describe_patch(cand)}: {'agrees' if c.ok else 'closer'} ({c.headline()})")
    names = gf.tensor_names if gf.tensor_names is not None else (tensor_names(gf.path) if how.unread_tensors else set())
    out += [
        f"{t} is present: candle's {gf.loader} never reads it (no GGUF edit fixes that)"
        for t in how.unread_tensors
        if t in names
    ]
    return out
