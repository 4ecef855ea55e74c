"""What transformers computes for verify, in the process that imports it (the reference's child,
`portkit.verify.reference.child`, or verify's own with PORTKIT_VERIFY_REFERENCE=inprocess).

- `forward_reference`: the reference on the prompt and the tokens fed after it (candle's greedy
  tokens: one forward; else its own greedy generation), with the prefill's layers and a second
  turn's or a batch's rows when asked (`portkit.verify.reference.extra`);
- `as_candle_reference`: transformers as candle computes (a finding's `CandleEdit.as_candle` edit), with
  the effect by position when asked;
- `reference_greedy`: the reference's own tokens as far as one forward over candle's decides them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify.errors import one_line

#: The name an as-candle reference's effect-by-position travels under with its layers.
EFFECT = "as_candle_effect"
#: The prefix the truth's arrays travel under with the layers (`truth_deltas`): `truth.rows`, `truth.layer.3`, ...
TRUTH = "truth."


class ReferenceFailed(RuntimeError):
    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass
class ReferenceOutputs:
    """What transformers computed for one request (or a cache entry holds): its greedy tokens,
    the [max(tokens, 1), vocab] step rows, the prefill's per-layer values, the checkpoint tensors
    holding NaN/inf. An as-candle run has no tokens of its own; its effect by position travels
    among its layers (`EFFECT`)."""

    greedy: list[int]
    rows: np.ndarray
    layers: dict[str, np.ndarray]
    nonfinite_weights: list[str]


def forward_reference(
    model_dir: Path,
    files: Sequence[Path],
    prompt: Sequence[int],
    forced: Sequence[int] | None,
    tokens: int,
    mode: str,
    progress: Callable[[str], None],
    sublayers: Sequence[str] = (),
    extra: dict[str, Any] | None = None,
    truth: bool = False,
    refeed: Mapping[int, np.ndarray] | None = None,
) -> ReferenceOutputs:
    """In this process: the reference's tokens, [max(tokens, 1), vocab] step rows, prefill layers
    with `sublayers`' outputs in each decoder layer, checkpoint tensors holding NaN/inf.
    `extra`: a continuation's and a batch's rows too, as `extra.*` layers (`portkit.verify.reference.extra`).
    `truth`: the same forward in f64 too, as `truth.*` layers (`truth_deltas`): what verify
    measures both f32 sides' error against. `refeed`: decoder layer index -> candle's input to it
    ([prompt, hidden]): each such layer also run on it, in both forwards, as `refeed.layer.N[.path]`
    (`models.refeed_hooks`; the one-forward path only).

    With `forced` (candle's greedy tokens): one forward over prompt + forced[: tokens - 1]; row k
    is the reference's logits where token k is decided, on exactly candle's inputs, and the
    reference's tokens are its argmax up to and including the first step where it picks another
    token than candle (its greedy generation is the same up to there; past it, it is unknown).
    Without: the reference generates, one forward per token.
    """
    from portkit.verify.reference.models import StreamedModel, WholeModel
    from portkit.verify.reference.runtime import ReferenceLoadError, ReferenceUnavailable

    prompt = list(prompt)
    progress(f"reference: loading transformers ({mode}, eager, f32, cpu)")
    try:
        if mode == "streamed":
            model: Any = StreamedModel(Path(model_dir), [Path(f) for f in files], progress)
        else:
            model = WholeModel(Path(model_dir))
    except ReferenceLoadError as e:
        raise ReferenceFailed("load", str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    except ReferenceUnavailable as e:
        raise ReferenceFailed("unavailable", str(e)) from None
    except ReferenceFailed:
        raise
    except Exception as e:  # transformers refused the checkpoint: its text, one line
        raise ReferenceFailed("load", f"transformers could not load {model_dir}: {one_line(e)}") from None
    n_rows = max(tokens, 1)
    try:
        if forced is not None:
            rows, layers = _forced_rows(model, prompt, forced, tokens, sublayers, progress, "reference", refeed)
            greedy = reference_greedy(rows, list(forced[:tokens])) if tokens else []
        else:
            # candle gave no tokens: generate()'s arithmetic, the reference's own tokens
            progress(f"reference: prefill and {n_rows - 1} cached steps")
            res, greedy = model.decode(prompt, None, tokens, sublayers=sublayers)
            rows = res.logits
            layers = {k: v.copy() for k, v in res.layers.items()}
            layers["logits"] = rows[0].copy()
        bad = model.nonfinite
        if extra:
            from portkit.verify.reference import extra as refextra

            layers.update(refextra.compute(model, prompt, extra, _cache_window(model), progress))
            if extra.get("sampling") is not None:  # generate()'s sampler on these rows (PK510)
                from portkit.verify.reference import sampling

                fed_rows = list(forced) if forced is not None else greedy
                layers.update(sampling.compute(Path(model_dir), prompt, fed_rows, rows, extra["sampling"], progress))
        if truth:
            del model  # one model's weights at a time: the f64 one is twice the f32 one
            fed = list(forced) if forced is not None else greedy
            try:
                layers.update(
                    truth_deltas(
                        rows,
                        layers,
                        *truth_forward(
                            model_dir,
                            files,
                            prompt,
                            fed,
                            tokens,
                            sublayers,
                            progress,
                            refeed if forced is not None else None,
                        ),
                    )
                )
            except Exception as e:  # no f64 kernel for an op (torch's grouped MoE matmul): the fallback constants judge
                progress(truth_not_computed(e))
    except Exception as e:  # transformers' own failure on this checkpoint
        raise ReferenceFailed("run", f"transformers could not run {model_dir}: {one_line(e)}") from None
    return ReferenceOutputs(
        greedy=greedy, rows=rows.astype(np.float32, copy=False), layers=layers, nonfinite_weights=list(bad)
    )


def truth_forward(
    model_dir: Path,
    files: Sequence[Path],
    prompt: list[int],
    fed: Sequence[int],
    tokens: int,
    sublayers: Sequence[str],
    progress: Callable[[str], None],
    refeed: Mapping[int, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """transformers in f64 on the f32 reference's inputs (streamed like it, one f64 decoder layer
    at a time): its rows and layers, in f64; `truth_deltas` turns them into the f32 reference's
    own error, which a correct f32 candle is about as far from the truth as (docs/verify.md,
    "Tolerances"). Its own request too (`requests.TruthRequest`): `portkit verify A B` sends it
    once candle's runs are over, so that candle's weights and the f64 model are never held at once."""
    from portkit.verify.reference.models import StreamedModel

    # streamed, one f64 layer at a time: loaded whole it took 0.41 s against 0.83 s on the 135M
    # checkpoint, but doubled verify's peak memory (2519 MiB against 1428; bench/verify_bench.py --real)
    model = StreamedModel(
        Path(model_dir), [Path(f) for f in files], progress, scan_nonfinite=False, precision="float64"
    )
    return _forced_rows(model, prompt, fed, tokens, sublayers, progress, "truth (transformers in f64)", refeed)


def truth_deltas(
    rows: np.ndarray, layers: Mapping[str, np.ndarray], rows64: np.ndarray, layers64: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """`truth.<name>` = f64 value - f32 value for the rows and every layer both runs have. Kept as
    the difference, in f32, so the caches keep one dtype and the truth is exact to f32's
    precision of the (small) difference."""
    out = {TRUTH + "rows": (rows64[: len(rows)] - rows).astype(np.float32)}
    for name, value in layers.items():
        if name in layers64 and layers64[name].shape == value.shape:
            out[TRUTH + name] = (layers64[name] - value).astype(np.float32)
    return out


def truth_not_computed(e: BaseException) -> str:
    """The progress line of a truth transformers could not compute (verify goes on without it)."""
    return f"truth (transformers in f64): not computed, {one_line(e)}"


def as_candle_reference(
    model_dir: Path,
    files: Sequence[Path],
    config_text: str,
    tensor_edits: Mapping[str, str],
    prompt: Sequence[int],
    forced: Sequence[int],
    tokens: int,
    scan_len: int,
    progress: Callable[[str], None],
    sublayers: Sequence[str] = (),
    rope_table: str | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """A reference-side counterfactual: transformers, streamed, on `config_text` (the
    checkpoint's config with a finding's edit) with `tensor_edits` applied to the checkpoint's
    tensors as they load (`CandleEdit.as_candle`), and with `rope_table` ("f16", "bf16") the RoPE table
    candle builds in that dtype (`rope_table.patch_rotary`), on the reference's inputs: what
    candle computes, when the finding is right.

    Returns (its rows, [max(tokens, 1), vocab] on prompt + forced, as the reference's; its
    prefill layers with `sublayers`, as `forward_reference`'s; with `scan_len`, the effect by
    position: max over the vocab of |as written - with the edit| at every position of one
    forward over `scan_len` tokens, the prompt repeated, so verify can say from which prompt
    length the effect exceeds the noise of the dtype or quantization; else empty).
    """
    from portkit.verify.reference.models import StreamedModel

    prompt, n_rows = list(prompt), max(tokens, 1)
    try:
        edited = StreamedModel(
            Path(model_dir),
            [Path(f) for f in files],
            progress,
            config_text=config_text,
            tensor_edits=tensor_edits,
            rope_table=rope_table,
        )
        as_written = StreamedModel(Path(model_dir), [Path(f) for f in files], progress) if scan_len > 0 else None
    except Exception as e:
        raise ReferenceFailed(
            "load", f"transformers could not load {model_dir} as candle computes it: {one_line(e)}"
        ) from None
    try:
        rows, layers = _forced_rows(edited, prompt, forced, tokens, sublayers, progress, "reference as candle computes")
        effect = np.zeros(0, dtype=np.float32)
        if as_written is not None:
            scan = [prompt[i % len(prompt)] for i in range(max(scan_len, len(prompt)))]
            progress(f"reference as written and as candle computes over {len(scan)} tokens")
            a = as_written.forward(scan, capture=False).logits
            b = edited.forward(scan, capture=False).logits
            effect = np.abs(a.astype(np.float64) - b).max(axis=1).astype(np.float32)
    except Exception as e:
        raise ReferenceFailed(
            "run", f"transformers could not run {model_dir} as candle computes it: {one_line(e)}"
        ) from None
    return rows[:n_rows].astype(np.float32), layers, effect


def _forced_rows(
    model: Any,
    prompt: list[int],
    forced: Sequence[int],
    tokens: int,
    sublayers: Sequence[str],
    progress: Callable[[str], None],
    what: str,
    refeed: Mapping[int, np.ndarray] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(rows, prefill layers) on prompt + forced: one forward, or generate()'s arithmetic (a
    prefill, then cached steps) where its sliding-window KV cache would make them differ.
    `refeed`: `forward_reference`'s, on the one-forward path."""
    n_rows = max(tokens, 1)
    window = _cache_window(model)
    if not (window is not None and window < len(prompt) + n_rows - 1):
        ids = prompt + list(forced[: max(tokens - 1, 0)])
        progress(f"{what}: one forward over {len(ids)} tokens")
        model.refeed = refeed
        try:
            res = model.forward(ids, sublayers=sublayers)
        finally:
            model.refeed = None
        rows = res.logits[len(prompt) - 1 : len(prompt) - 1 + n_rows].copy()
        layers = {k: v[: len(prompt)].copy() for k, v in res.layers.items()}
    else:
        progress(f"{what}: prefill and {n_rows - 1} cached steps")
        res, _fed = model.decode(prompt, forced, tokens, sublayers=sublayers)
        rows = res.logits
        layers = {k: v.copy() for k, v in res.layers.items()}
    layers["logits"] = rows[0].copy()
    return rows, layers


def _cache_window(model: Any) -> int | None:
    """The `sliding_window` transformers' cache applies in generate() (None: none)."""
    cfg = model.model.config.get_text_config()
    w = getattr(cfg, "sliding_window", None)
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def reference_greedy(rows: np.ndarray, forced: Sequence[int]) -> list[int]:
    """The reference's greedy tokens as far as one forward over `forced` decides them: its
    argmax at each step while it agrees with `forced`, then its own pick at the first step where
    it does not (NaN rows decide nothing: the tokens stop there)."""
    out: list[int] = []
    for k, tok in enumerate(forced):
        row = rows[k]
        if not np.isfinite(row).all():
            break
        pick = int(row.argmax())
        out.append(pick)
        if pick != int(tok):
            break
    return out
