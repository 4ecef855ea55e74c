"""`portkit compare REF CANDIDATE`: verify's comparisons (`portkit.verify.compare`) on two dumps.

What is compared is what the candidate holds, each against the reference's same tensor:

- `logits`: the last position (`[vocab]`, or the last row of `[T, vocab]`) against the
  tolerance's absolute bound; with every position, teacher-forced argmax per position (both
  sides read the reference's ids) with the reference's top-2 margin where they differ;
- `greedy`: the first token where the continuations fork, with the reference's margin there
  (from its `greedy.logits`);
- `embeddings`, `layer.N`, `norm` (and `logits`): relative error per value, the first one
  over the tolerance named;
- `layer.N.<sub-layer>`: relative error per value, reported; inside the first layer over the
  tolerance, the first sub-layer over it is the first bad name, with its error per position
  and what the pattern points to (`portkit.verify.localise`).

A candidate that cannot be compared is bad input (exit 2, one line): a name the reference
lacks, a shape other than the reference's, ids other than the reference's, nothing in common.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from portkit.porting.dumpfile import GREEDY_LOGITS, DumpFile, describe_names, is_per_layer, is_sublayer
from portkit.verify.compare import TOLERANCES, Tolerance, compare_greedy, compare_layers, compare_logits, compare_steps
from portkit.verify.inputs import BadInput
from portkit.verify.localise import localise
from portkit.verify.runs import Comparison

DTYPES = tuple(TOLERANCES)  # f32 f16 bf16 q8_0 q4_k
_STORED_TOLERANCE = {"F16": "f16", "BF16": "bf16"}


@dataclass
class CompareResult:
    reference: DumpFile
    candidate: DumpFile
    tolerance: Tolerance
    comparison: Comparison
    compared: list[str]
    notes: list[str]

    @property
    def exit_code(self) -> int:
        return 0 if self.comparison.ok else 1

    @property
    def first_bad(self) -> str | None:
        """Where the divergence starts: the first bad sub-layer of the first layer over the
        tolerance (the layer itself without sub-layers), else the first failing check."""
        c = self.comparison
        if c.localisation is not None:
            return c.localisation.name
        if c.layers is not None and c.layers_judged and c.layers.first_over:
            return c.layers.first_over
        for name, check in (("logits", c.last), ("logits", c.steps), ("greedy", c.greedy)):
            if check is not None and not check.ok:
                return name
        return None


def _last_row(arr: np.ndarray) -> np.ndarray:
    """`logits` as the last position: [vocab], [1, vocab] or the last row of [T, vocab]."""
    return arr[-1] if arr.ndim == 2 else arr


def _teacher_forced_rows(R: dict[str, np.ndarray], C: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every position where both sides read the same inputs: the prompt's, then (when the
    candidate kept `greedy.logits`) the generated positions up to where the greedy tokens fork
    (row k decided token k from the prompt and tokens 0..k-1; row 0 is the prompt's last)."""
    ref_rows, got_rows = R["logits"], C["logits"]
    if GREEDY_LOGITS in C and GREEDY_LOGITS in R and "greedy" in R:
        a, b = R["greedy"], C["greedy"]
        n = min(len(a), len(b))
        shared = int(np.argmax(a[:n] != b[:n])) if np.any(a[:n] != b[:n]) else n
        last = min(shared, len(R[GREEDY_LOGITS]) - 1, len(C[GREEDY_LOGITS]) - 1)
        if last >= 1:
            ref_rows = np.concatenate([ref_rows, R[GREEDY_LOGITS][1 : last + 1]])
            got_rows = np.concatenate([got_rows, C[GREEDY_LOGITS][1 : last + 1]])
    return ref_rows, got_rows


def _check_logits_shape(cand: DumpFile, ref: np.ndarray, got: np.ndarray) -> None:
    vocab = ref.shape[-1]
    full = got.ndim == 2 and ref.ndim == 2 and got.shape == ref.shape
    # the last position only, or every position against a reference that kept only the last
    last = got.shape in ((vocab,), (1, vocab)) or (ref.ndim == 1 and got.ndim == 2 and got.shape[1] == vocab)
    if not (full or last):
        want = f"{list(ref.shape)} or [{vocab}] (the last position)" if ref.ndim == 2 else f"[{vocab}]"
        raise BadInput(f"{cand.path}: `logits` has shape {list(got.shape)}, the reference's is {want}")


def _check_no_gap(ref: DumpFile, cand: DumpFile) -> None:
    """Layers may be a subset, but not one with a hole: a skipped `put` would move the
    first bad layer."""
    ref_layers = [n for n in ref.tensors if n.startswith("layer.") and not is_sublayer(n)]
    have = [i for i, n in enumerate(ref_layers) if n in cand.tensors]
    if have:
        missing = [ref_layers[i] for i in range(have[0], have[-1] + 1) if ref_layers[i] not in cand.tensors]
        if missing:
            raise BadInput(
                f"{cand.path}: {missing[0]} is missing between {ref_layers[have[0]]} and {ref_layers[have[-1]]}: "
                "dump every layer in the range (or leave the layers out)"
            )


def validate(ref: DumpFile, cand: DumpFile) -> None:
    """Every candidate tensor is one the reference has, with a shape it can be compared at."""
    if not cand.tensors:
        raise BadInput(f"{cand.path}: the candidate holds no tensors")
    if "ids" in cand.tensors and "ids" in ref.tensors and not np.array_equal(cand.tensors["ids"], ref.tensors["ids"]):
        def head(a: np.ndarray) -> str:
            return ",".join(str(int(i)) for i in a[:8]) + (",..." if a.size > 8 else "")

        raise BadInput(
            f"{cand.path}: ids differ from the reference's ({head(cand.tensors['ids'])} vs {head(ref.tensors['ids'])}): "
            "dump the candidate on the reference's prompt"
        )
    for name, got in cand.tensors.items():
        if name == "ids" and name not in ref.tensors:
            continue  # a JSON dump (`{"logits": [...], "greedy": [...]}`) keeps no ids: nothing to check them against
        if name not in ref.tensors:
            have = describe_names(list(ref.tensors))
            raise BadInput(f"{cand.path}: tensor `{name}` is not in the reference {ref.path} (it has {have})")
        want = ref.tensors[name]
        if name == GREEDY_LOGITS:
            n = cand.tensors["greedy"].shape[0] if "greedy" in cand.tensors else None
            if got.ndim != 2 or got.shape[1] != want.shape[1] or got.shape[0] != n:
                raise BadInput(
                    f"{cand.path}: `{GREEDY_LOGITS}` has shape {list(got.shape)}, expected [{n if n is not None else 'N'}, {want.shape[1]}]"
                    + (" (one row per `greedy` token)" if n is not None else " with the `greedy` tokens it chose")
                )
        elif name == "logits":
            _check_logits_shape(cand, want, got)
        elif name == "greedy":
            if got.ndim != 1 or got.size == 0:
                raise BadInput(f"{cand.path}: `greedy` has shape {list(got.shape)}, expected [N] token ids (N >= 1)")
        elif got.shape != want.shape:
            raise BadInput(f"{cand.path}: `{name}` has shape {list(got.shape)}, the reference's is {list(want.shape)}")
    _check_no_gap(ref, cand)
    if set(cand.tensors) <= {"ids"}:
        raise BadInput(f"{cand.path}: nothing to compare (only ids)")


def pick_tolerance(dtype: str, ref: DumpFile) -> tuple[Tolerance, list[str]]:
    """`--dtype`'s tolerance, loosened to the reference's own storage when that is coarser."""
    if dtype not in TOLERANCES:
        raise BadInput(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    stored = {_STORED_TOLERANCE[d] for d in ref.dtypes.values() if d in _STORED_TOLERANCE}
    if dtype == "f32" and stored:
        coarse = "bf16" if "bf16" in stored else "f16"
        note = f"the reference is stored in {coarse}: judged with the {coarse} tolerance, not f32's"
        return TOLERANCES[coarse], [note]
    return TOLERANCES[dtype], []


def compare_dumps(ref: DumpFile, cand: DumpFile, dtype: str = "f32") -> CompareResult:
    validate(ref, cand)
    tol, notes = pick_tolerance(dtype, ref)
    R, C = ref.tensors, cand.tensors
    cmp = Comparison(tolerance=tol)
    # per layer: the reference's order, what the candidate has; logits at the shape it has
    ref_layers = {n: R[n] for n in R if n in C and is_per_layer(n)}
    got_layers = {n: C[n] for n in ref_layers}
    if "logits" in C:
        ref_logits, got_logits = R["logits"], C["logits"]
        cmp.last = compare_logits(_last_row(ref_logits), _last_row(got_logits), tol.logits_atol)
        every_position = got_logits.ndim == 2 and got_logits.shape == ref_logits.shape
        if every_position:
            ref_rows, got_rows = _teacher_forced_rows(R, C)
            cmp.steps = compare_steps(ref_rows, got_rows, near_tie=tol.near_tie, atol=tol.logits_atol)
        ref_layers["logits"] = ref_logits if every_position else _last_row(ref_logits)
        got_layers["logits"] = got_logits if every_position else _last_row(got_logits)
    if "greedy" in C and "greedy" in R:
        n = min(len(R["greedy"]), len(C["greedy"]))
        if len(C["greedy"]) != len(R["greedy"]):
            notes.append(f"greedy: the first {n} tokens compared (reference {len(R['greedy'])}, candidate {len(C['greedy'])})")
        steps = R.get(GREEDY_LOGITS)
        cmp.greedy = compare_greedy(
            [int(t) for t in R["greedy"][:n]],
            [int(t) for t in C["greedy"][:n]],
            step_rows=steps if steps is not None and len(steps) >= n else None,
            near_tie=tol.near_tie,
        )
    if ref_layers:
        cmp.layers_judged = tol.layer_rtol is not None
        cmp.layers = compare_layers(ref_layers, got_layers, tol.layer_rtol if tol.layer_rtol is not None else math.inf)
        if cmp.layers_judged:
            cmp.localisation = localise(cmp.layers, ref_layers, got_layers, available=list(R), no_sublayers_hint=_layers_only_hint(ref))
    compared = [n for n in C if n != "ids"]
    return CompareResult(ref, cand, tol, cmp, compared, notes)


def _layers_only_hint(ref: DumpFile) -> str:
    """For a reference without sub-layers: how to get them."""
    from portkit.families import BY_NAME, sublayers

    names = sublayers.of(BY_NAME.get(ref.metadata.get("family", "")))
    return (
        "the reference holds no sub-layers (written with --layers-only): write it again without, "
        f"and dump the layer's {', '.join(names)}"
    )


def check_plot_path(plot: Path) -> None:
    if plot.suffix.lower() != ".png":
        raise BadInput(f"--plot {plot}: the plot is a PNG (give a path ending in .png)")
    if not plot.resolve().parent.is_dir():
        raise BadInput(f"--plot {plot}: the directory does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput("--plot needs matplotlib: pip install 'portkit[plot]'") from None
