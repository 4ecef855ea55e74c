"""`portkit compare REF CANDIDATE`: verify's comparisons (`portkit.verify.judge.checks`) on two dumps.

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
  and what the pattern points to (`portkit.verify.judge.localise`).

The candidate's `ids` come first: when they are not the reference's (a hand-written prompt
without the template's default system prompt, a stray space), nothing else is compared, and
both are decoded around the first differing token (exit 1). A candidate that cannot be
compared is bad input (exit 2, one line): a name the reference lacks, a shape other than the
reference's, nothing in common.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from portkit.families.sublayers import is_sublayer
from portkit.porting.dumpfile import (
    GREEDY_LOGITS,
    TOKEN_NAMES,
    TRUTH,
    DumpFile,
    describe_names,
    is_per_layer,
    read_dump,
)
from portkit.verify.errors import BadInput, one_line
from portkit.verify.judge.checks import TOLERANCES, Tolerance, compare_greedy, compare_logits, compare_steps
from portkit.verify.judge.comparison import Comparison

DTYPES = tuple(TOLERANCES)  # f32 f16 bf16 q8_0 q4_k
#: a candidate may have generated this many more tokens than the reference (the first
#: len(reference) are compared); a header claiming more is refused before anything is read
MAX_EXTRA_TOKENS = 4096
_STORED_TOLERANCE = {"F16": "f16", "BF16": "bf16"}


#: tokens shown on each side of the first differing id
IDS_CONTEXT = 8


@dataclass
class IdsCheck:
    """The candidate's prompt ids against the reference's, when they differ: both decoded around
    the first differing token by the model's tokenizer.json (the tokenizers crate candle uses)."""

    reference: list[int]
    candidate: list[int]
    first: int  # the first position where they differ (the shorter length when one is a prefix)
    tokenizer: str | None = None  # the tokenizer.json that decoded them
    reference_text: str | None = None  # decoded ids[lo:first + IDS_CONTEXT]
    candidate_text: str | None = None
    start: int = 0  # lo: the first token the texts show
    note: str | None = None  # why there is no decoded text

    def window(self, ids: list[int]) -> list[int]:
        return ids[self.start : self.first + IDS_CONTEXT]

    def to_json(self) -> dict[str, object]:
        return {
            "agree": False,
            "first_difference": self.first,
            "reference": {
                "length": len(self.reference),
                "ids": self.window(self.reference),
                "text": self.reference_text,
            },
            "candidate": {
                "length": len(self.candidate),
                "ids": self.window(self.candidate),
                "text": self.candidate_text,
            },
            "from": self.start,
            "tokenizer": self.tokenizer,
            "note": self.note,
        }


def _tokenizer_for(ref: DumpFile, tokenizer: Path | None) -> tuple[Path | None, str | None]:
    """The tokenizer.json to decode with: `--tokenizer` (a file or a model directory), else the
    reference's model directory (its metadata); (None, why) when there is none."""
    if tokenizer is not None:
        p = Path(tokenizer)
        p = p / "tokenizer.json" if p.is_dir() else p
        return (p, None) if p.is_file() else (None, f"--tokenizer {tokenizer}: no tokenizer.json")
    model = ref.metadata.get("model")
    if not model:
        return None, "the reference names no model directory: pass --tokenizer to decode the ids"
    p = Path(model) / "tokenizer.json"
    return (p, None) if p.is_file() else (None, f"{p} is not there: pass --tokenizer to decode the ids")


def check_ids(ref: DumpFile, cand: DumpFile, tokenizer: Path | None = None) -> IdsCheck | None:
    """None when the candidate holds no ids or the reference's; else where they part, decoded."""
    if "ids" not in cand.tensors or "ids" not in ref.tensors:
        return None
    a, b = [int(i) for i in ref.tensors["ids"]], [int(i) for i in cand.tensors["ids"]]
    if a == b:
        return None
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    check = IdsCheck(a, b, k, start=max(0, k - IDS_CONTEXT))
    path, check.note = _tokenizer_for(ref, tokenizer)
    if path is None:
        return check
    from portkit.verify.errors import TokenizeError
    from portkit.verify.sections.tokenize import crate_tokenizer

    try:
        crate, err = crate_tokenizer(path)
    except TokenizeError as e:
        crate, err = None, str(e)
    if crate is None:
        check.note = f"{path}: {err}"
        return check
    check.tokenizer = str(path)
    try:
        check.reference_text = crate.decode(check.window(a), False)
        check.candidate_text = crate.decode(check.window(b), False)
    except Exception as e:  # noqa: BLE001 - an id outside the vocabulary: the ids alone are shown
        check.reference_text = check.candidate_text = None
        check.note = f"the ids could not be decoded with {path}: {one_line(e, 200)}"
    return check


@dataclass
class CompareResult:
    reference: DumpFile
    candidate: DumpFile
    tolerance: Tolerance
    comparison: Comparison
    compared: list[str]
    notes: list[str]
    ids: IdsCheck | None = None  # set when the candidate's ids are not the reference's: nothing else is compared

    @property
    def exit_code(self) -> int:
        return 0 if self.ids is None and self.comparison.ok else 1

    @property
    def first_bad(self) -> str | None:
        """Where the divergence starts: the prompt's ids, else the first bad sub-layer of the
        first layer over the tolerance (the layer itself without sub-layers), else the first
        failing check."""
        if self.ids is not None:
            return f"ids (token {self.ids.first})"
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
    if GREEDY_LOGITS in C and R.get(GREEDY_LOGITS) is not None and "greedy" in R:
        a, b = R["greedy"], C["greedy"]
        n = min(len(a), len(b))
        shared = int(np.argmax(a[:n] != b[:n])) if np.any(a[:n] != b[:n]) else n
        last = min(shared, len(R[GREEDY_LOGITS]) - 1, len(C[GREEDY_LOGITS]) - 1)
        if last >= 1:
            ref_rows = np.concatenate([ref_rows, R[GREEDY_LOGITS][1 : last + 1]])
            got_rows = np.concatenate([got_rows, C[GREEDY_LOGITS][1 : last + 1]])
    return ref_rows, got_rows


def _check_logits_shape(cand: Path, ref: np.ndarray, got: tuple[int, ...]) -> None:
    vocab = ref.shape[-1]
    full = len(got) == 2 and ref.ndim == 2 and got == ref.shape
    # the last position only, or every position against a reference that kept only the last
    last = got in ((vocab,), (1, vocab)) or (ref.ndim == 1 and len(got) == 2 and got[1] == vocab and got[0] >= 1)
    if not (full or last):
        want = f"{list(ref.shape)} or [{vocab}] (the last position)" if ref.ndim == 2 else f"[{vocab}]"
        raise BadInput(f"{cand}: `logits` has shape {list(got)}, the reference's is {want}")


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


def validate_reference(ref: DumpFile) -> None:
    """The reference is input too (a file anyone can hand over): each tensor compare reads has a
    shape it can be read at, so a hostile reference is one line, as a hostile candidate is."""
    R = ref.tensors

    def bad(what: str) -> BadInput:
        return BadInput(f"{ref.path}: {what}, so it is no reference compare can read")

    if not R:
        raise bad("it holds no tensors")
    logits = R.get("logits")
    if logits is not None and (logits.ndim not in (1, 2) or 0 in logits.shape):
        raise bad(f"`logits` has shape {list(logits.shape)}, not [vocab] or [T, vocab]")
    for name in TOKEN_NAMES:
        if name in R and (R[name].ndim != 1 or R[name].size == 0):
            raise bad(f"`{name}` has shape {list(R[name].shape)}, not [N] token ids")
    if GREEDY_LOGITS in R:
        gl, vocab = R[GREEDY_LOGITS], (logits.shape[-1] if logits is not None else None)
        # a margin is a top-1 minus top-2: at least two logits a row
        if gl.ndim != 2 or gl.shape[0] == 0 or gl.shape[1] < 2 or (vocab is not None and gl.shape[1] != vocab):
            raise bad(
                f"`{GREEDY_LOGITS}` has shape {list(gl.shape)}, not [N, {vocab if vocab is not None else 'vocab'}]"
            )
    for name, arr in R.items():
        if is_per_layer(name) and arr.size == 0:
            raise bad(f"`{name}` has shape {list(arr.shape)}: no values")


def validate_shapes(ref: DumpFile, cand: Path, shapes: dict[str, tuple[int, ...]]) -> None:
    """Every candidate tensor is one the reference has, with a shape it can be compared at: checked
    on the candidate's header, before its data is read (a file cannot make compare read more
    than the reference's size)."""
    if not shapes:
        raise BadInput(f"{cand}: the candidate holds no tensors")
    for name, got in shapes.items():
        if name.startswith(TRUTH) and name in ref.tensors:
            continue  # reference-only (transformers in f64): a copy of the reference carries it, never compared
        if name == "ids" and name not in ref.tensors:
            if len(got) != 1:
                raise BadInput(f"{cand}: `ids` has shape {list(got)}, expected [T] token ids")
            continue  # a JSON dump (`{"logits": [...], "greedy": [...]}`) keeps no ids: nothing to check them against
        if name not in ref.tensors:
            have = describe_names(list(ref.tensors))
            raise BadInput(f"{cand}: tensor `{name}` is not in the reference {ref.path} (it has {have})")
        want = ref.tensors[name]
        if name == GREEDY_LOGITS:
            n = shapes["greedy"][0] if "greedy" in shapes and len(shapes["greedy"]) == 1 else None
            if len(got) != 2 or got[1] != want.shape[1] or got[0] != n:
                raise BadInput(
                    f"{cand}: `{GREEDY_LOGITS}` has shape {list(got)}, expected [{n if n is not None else 'N'}, "
                    f"{want.shape[1]}]"
                    + (" (one row per `greedy` token)" if n is not None else " with the `greedy` tokens it chose")
                )
            if got[0] > want.shape[0]:  # rows past the reference's are never compared, and never read
                raise BadInput(
                    f"{cand}: `{GREEDY_LOGITS}` has {got[0]} rows, more than the reference's {want.shape[0]}: keep the "
                    f"first {want.shape[0]}"
                )
        elif name == "logits":
            _check_logits_shape(cand, want, got)
        elif name == "ids":  # any length: other ids are named as such once read
            if len(got) != 1 or got[0] > len(want) + MAX_EXTRA_TOKENS:
                raise BadInput(f"{cand}: `ids` has shape {list(got)}, the reference's is {list(want.shape)}")
        elif name == "greedy":
            if len(got) != 1 or not 1 <= got[0] <= len(want) + MAX_EXTRA_TOKENS:
                raise BadInput(
                    f"{cand}: `greedy` has shape {list(got)}, expected [N] token ids (1 <= N <= "
                    f"{len(want) + MAX_EXTRA_TOKENS})"
                )
        elif got != want.shape:
            raise BadInput(f"{cand}: `{name}` has shape {list(got)}, the reference's is {list(want.shape)}")


#: JSON text per value a candidate may take (`-1.2345678901234567e-05, ` is 24 characters)
JSON_BYTES_PER_VALUE = 32


def read_candidate(ref: DumpFile, path: Path) -> DumpFile:
    """The candidate, its shapes checked against `ref` before its data is read: memory follows
    the reference's size, never what the candidate's header claims."""
    values = sum(int(a.size) for a in ref.tensors.values()) + MAX_EXTRA_TOKENS
    return read_dump(
        path,
        check=lambda shapes: validate_shapes(ref, path, shapes),
        max_json_bytes=JSON_BYTES_PER_VALUE * values + 2**20,
    )


def validate(ref: DumpFile, cand: DumpFile) -> None:
    """Every candidate tensor is one the reference has, with a shape it can be compared at."""
    validate_reference(ref)
    validate_shapes(ref, cand.path, {k: tuple(v.shape) for k, v in cand.tensors.items()})
    _check_no_gap(ref, cand)


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


def compare_dumps(ref: DumpFile, cand: DumpFile, dtype: str = "f32", tokenizer: Path | None = None) -> CompareResult:
    """The candidate against the reference: its ids first (when they differ, nothing else), then
    every tensor it holds. `tokenizer` decodes differing ids (default: the reference's model's)."""
    # inf - inf and the like: the checks name non-finite values themselves, numpy need not warn
    with np.errstate(invalid="ignore", over="ignore"):
        return _compare_dumps(ref, cand, dtype, tokenizer)


def _compare_dumps(ref: DumpFile, cand: DumpFile, dtype: str, tokenizer: Path | None) -> CompareResult:
    validate(ref, cand)
    tol, notes = pick_tolerance(dtype, ref)
    R, C = ref.tensors, cand.tensors
    # the f64 run `portkit reference` writes beside the f32 one: the floors, at f32 only
    T = {k.removeprefix(TRUTH): v for k, v in R.items() if k.startswith(TRUTH)} if tol.by_floors else {}
    cmp = Comparison(tolerance=tol)
    ids = check_ids(ref, cand, tokenizer)
    if ids is not None:  # another prompt: its logits say nothing about the port
        return CompareResult(ref, cand, tol, cmp, ["ids"], notes, ids)
    if set(C) <= {"ids"}:
        raise BadInput(f"{cand.path}: nothing to compare (only ids, the reference's)")
    # per layer: the reference's order, what the candidate has; logits at the shape it has
    ref_layers = {n: R[n] for n in R if n in C and is_per_layer(n)}
    got_layers = {n: C[n] for n in ref_layers}
    if "logits" in C:
        ref_logits, got_logits = R["logits"], C["logits"]
        truth_logits = (
            T.get("logits") if T.get("logits") is not None and T["logits"].shape == ref_logits.shape else None
        )
        cmp.last = compare_logits(
            _last_row(ref_logits),
            _last_row(got_logits),
            tol.logits_atol,
            _last_row(truth_logits) if truth_logits is not None else None,
        )
        every_position = got_logits.ndim == 2 and got_logits.shape == ref_logits.shape
        if every_position:
            ref_rows, got_rows = _teacher_forced_rows(R, C)
            delta_rows = None
            if truth_logits is not None and (GREEDY_LOGITS not in R or GREEDY_LOGITS in T):
                truth_rows = {k: v for k, v in R.items() if k != GREEDY_LOGITS} | {"logits": truth_logits}
                if GREEDY_LOGITS in T:  # the truth's generated rows (absent: the prompt's alone)
                    truth_rows[GREEDY_LOGITS] = T[GREEDY_LOGITS]
                delta_rows, _ = _teacher_forced_rows(truth_rows, C)
            cmp.steps = compare_steps(ref_rows, got_rows, near_tie=tol.near_tie, atol=tol.logits_atol, delta=delta_rows)
        ref_layers["logits"] = ref_logits if every_position else _last_row(ref_logits)
        got_layers["logits"] = got_logits if every_position else _last_row(got_logits)
    if "greedy" in C and "greedy" in R:
        n = min(len(R["greedy"]), len(C["greedy"]))
        if len(C["greedy"]) != len(R["greedy"]):
            notes.append(
                f"greedy: the first {n} tokens compared (reference {len(R['greedy'])}, candidate {len(C['greedy'])})"
            )
        steps = R.get(GREEDY_LOGITS)
        cmp.greedy = compare_greedy(
            [int(t) for t in R["greedy"][:n]],
            [int(t) for t in C["greedy"][:n]],
            step_rows=steps if steps is not None and len(steps) >= n else None,
            near_tie=tol.near_tie,
        )
    if ref_layers:
        deltas = {n: T[n] for n in ref_layers if n in T and n != "logits"}
        if "logits" in ref_layers and truth_logits is not None:
            deltas["logits"] = (
                truth_logits if ref_layers["logits"].shape == truth_logits.shape else _last_row(truth_logits)
            )
        cmp.judge_layers(
            ref_layers, got_layers, available=list(R), no_sublayers_hint=_layers_only_hint(ref), deltas=deltas or None
        )
    compared = [n for n in C if n != "ids" and not n.startswith(TRUTH)]
    return CompareResult(ref, cand, tol, cmp, compared, notes)


def _layers_only_hint(ref: DumpFile) -> str:
    """For a reference without sub-layers: how to get them."""
    from portkit.families import BY_NAME, sublayers

    family = BY_NAME.get(ref.metadata.get("family", ""))
    names = ", ".join(sublayers.of(family)) if family is not None else "modules"
    return (
        "the reference holds no sub-layers (written with --layers-only): write it again without, "
        f"and dump the layer's {names}"
    )
