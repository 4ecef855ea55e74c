"""`portkit verify` on an embedding model, as one flat run (`EmbeddingRun.execute`): lint, the
reference (sentence-transformers, f32 and f64), candle's module on each text alone, on one padded
batch as a correct program calls it, then the counterfactual programs (no mask passed, pooling
over pads, half precision) and the counterfactual references (sentence-transformers run again as
candle reads the config: PK616, PK617) that confirm or refute the lint findings."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from portkit.encoders import BY_NAME, SUBLAYERS
from portkit.findings import CandleProgram, ReferenceEdit
from portkit.verify.candle.native import crate_versions
from portkit.verify.embedding import corpus
from portkit.verify.embedding.candle import CandleSide, candle_attempt, right_padded, row_sides, run_encoder
from portkit.verify.embedding.judge import BatchCheck, check_alone, check_batch, check_row
from portkit.verify.embedding.reference import EmbeddingReference, load_reference
from portkit.verify.embedding.report import (
    WRONG_MODULE,
    Counterfactual,
    EmbeddingReport,
    ReferenceCounterfactual,
)
from portkit.verify.embedding.tokens import tokens_fed
from portkit.verify.errors import BadInput
from portkit.verify.judge.verdicts import Confirmation

Progress = Callable[[str], None]


def _patched_dir(model_dir: Path, patch: dict[str, Any], into: Path) -> Path:
    """`model_dir` with config.json patched: every other entry a symlink, so no weight is copied."""
    import json

    for entry in model_dir.iterdir():
        if entry.name != "config.json":
            (into / entry.name).symlink_to(entry.resolve())
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    (into / "config.json").write_text(json.dumps({**cfg, **patch}, indent=2), encoding="utf-8")
    return into


def _native() -> Any:
    from portkit.verify.candle.native import native_for_run

    pn = native_for_run()
    if not hasattr(pn, "encoder_capture_families"):
        raise BadInput("the installed portkit_native has no EncoderRunner: rebuild it (make native)")
    return pn


@dataclass
class EmbeddingRun:
    opts: Any
    family: str
    progress: Progress
    lint: Callable[[], list[Any]]  # lint's findings on the model directory (the pipeline runs lint)
    timings: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        try:
            return fn()
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t

    def execute(self, t_start: float) -> EmbeddingReport:
        from portkit.verify.model_dir import read_model_dir

        opts = self.opts
        model = read_model_dir(opts.model_dir)
        pn = _native()
        findings, note = (self.timed("lint", self.lint), None) if opts.lint else ([], "lint skipped (--no-lint)")
        self.progress("sentence-transformers: f32 reference and f64 truth")
        texts = [t for t, _ in corpus.TEXTS]
        captured = bool(opts.layers) and self.family in pn.encoder_capture_families()
        subs = SUBLAYERS.get(self.family, ()) if captured else ()
        ref = self.timed("reference", lambda: load_reference(Path(opts.model_dir), texts, sublayers=subs))
        tagged = list(zip(ref.texts, (tag for _, tag in corpus.TEXTS), strict=False))
        fed = self.timed(
            "tokens", lambda: tokens_fed(Path(opts.model_dir), ref.texts, [e.ids[0].tolist() for e in ref.single])
        )
        self.progress(f"candle: {self.family}")
        files = [str(p) for p in model.weight_files]
        runner, failure = candle_attempt(
            lambda: self.timed(
                "candle load",
                lambda: pn.EncoderRunner(self.family, files, model.config_text, dtype=opts.dtype, device=opts.device),
            )
        )
        if runner is None:  # candle's load error, or its panic
            report = EmbeddingReport(
                opts, self.family, ref, [], None, [], [], load_failure=failure, lint_note=note, tokens=fed
            )
            report.findings = self.judge_findings(findings, report)
            return self.finish(report, t_start)
        capture = captured
        singles_run = [
            self.timed("candle", partial(run_encoder, runner, self.family, e, ref.steps, capture=capture))
            for e in ref.single
        ]
        singles = [
            check_row(t, tag, e.mask[0], got, r, tr)
            for (t, tag), e, got, r, tr in zip(tagged, ref.single, singles_run, ref.reference, ref.truth, strict=False)
        ]
        batch = None
        cfs: list[Counterfactual] = []
        if ref.batch_reference is not None and ref.batch_truth is not None and BY_NAME[self.family].decoder:
            batch, cfs = self.decoder_batches(runner, ref, tagged, singles_run)
        elif ref.batch_reference is not None and ref.batch_truth is not None:

            def judged(program: Any = runner, family: str = self.family, **kw: Any) -> tuple[CandleSide, BatchCheck]:
                cap = capture and not kw and program is runner
                got = self.timed(
                    "candle", lambda: run_encoder(program, family, ref.batch, ref.steps, capture=cap, **kw)
                )
                return got, check_batch(tagged, ref.batch.mask, got, ref.batch_reference, ref.batch_truth, singles_run)

            _, batch = judged()
            self.progress("counterfactuals: a program that passes no mask, one that pools over pads")
            programs: tuple[tuple[str, str, dict[str, Any]], ...] = (
                ("no-mask", "a program that passes candle's forward no padding mask", {"mask_passed": False}),
                ("pool-over-pads", "a program that pools over every position, pads included", {"pool_over_pads": True}),
            )
            for name, what, kw in programs:
                got, chk = judged(**kw)
                cfs.append(Counterfactual(name, what, chk, failure=got.failure))
            if "bert-module" in _programs(
                findings
            ):  # PK620: the checkpoint through bert.rs, as candle's bert example loads it
                what = (
                    "a program that loads the checkpoint with bert.rs (`BertModel::load`), which counts positions "
                    "from 0"
                )
                bert, failure = candle_attempt(
                    lambda: self.timed(
                        "candle load",
                        lambda: pn.EncoderRunner(
                            WRONG_MODULE, files, model.config_text, dtype=opts.dtype, device=opts.device
                        ),
                    )
                )
                if bert is None:  # bert.rs refuses it: no such program runs
                    cfs.append(Counterfactual("bert-module", what, None, failure=failure))
                else:
                    got, chk = judged(bert, WRONG_MODULE)
                    cfs.append(Counterfactual("bert-module", what, chk, failure=got.failure))
        report = EmbeddingReport(opts, self.family, ref, singles, batch, cfs, [], lint_note=note, tokens=fed)
        report.references = [
            self.reference_counterfactual(patch, tagged, singles_run) for patch in _reference_patches(findings)
        ]
        report.findings = self.judge_findings(findings, report)
        return self.finish(report, t_start)

    def decoder_batches(
        self, runner: Any, ref: EmbeddingReference, tagged: list[tuple[str, str]], singles_run: list[CandleSide]
    ) -> tuple[BatchCheck, list[Counterfactual]]:
        """A decoder's base model (qwen3.rs `Model::forward(input, offset)`) takes no padding mask
        and attends causally: the correct batch pads on the right and pools each row's last token,
        its rows judged against the same text alone. The counterfactuals: the batch as the tokenizer
        pads it (Qwen3-Embedding's pads on the left), and one model kept across the texts."""
        assert ref.batch_reference is not None and ref.batch_truth is not None  # the caller's condition
        lengths = [int(e.ids.shape[1]) for e in ref.single]
        enc = right_padded(ref.single, _pad_id(ref.batch))
        got = self.timed("candle", lambda: run_encoder(runner, self.family, enc, ref.steps, capture=False))
        batch = check_alone(
            tagged,
            ref.single,
            row_sides(got, lengths),
            ref.reference,
            ref.truth,
            singles_run,
            seq=int(enc.mask.shape[1]),
        )
        self.progress("counterfactuals: the batch as the tokenizer pads it, one model for every text")
        side = "left" if int(ref.batch.mask[:, 0].min()) == 0 else "right"
        left = self.timed("candle", lambda: run_encoder(runner, self.family, ref.batch, ref.steps, capture=False))
        cfs = [
            Counterfactual(
                "tokenizer-padded-batch",
                "a program that runs the batch as the tokenizer pads it (on "
                f"the {side}) through candle's forward, which takes no padding mask",
                check_batch(tagged, ref.batch.mask, left, ref.batch_reference, ref.batch_truth, singles_run),
                failure=left.failure,
            )
        ]
        over = self.timed(
            "candle", lambda: run_encoder(runner, self.family, enc, ref.steps, capture=False, pool_over_pads=True)
        )
        cfs.append(
            Counterfactual(
                "pool-over-pads",
                "a program that pools the right-padded batch over every position, pads included",
                check_alone(
                    tagged,
                    ref.single,
                    row_sides(over, lengths),
                    ref.reference,
                    ref.truth,
                    singles_run,
                    seq=int(enc.mask.shape[1]),
                ),
                failure=over.failure,
            )
        )
        kept = [
            self.timed("candle", partial(run_encoder, runner, self.family, e, ref.steps, capture=False, one_model=True))
            for e in ref.single
        ]
        cfs.append(
            Counterfactual(
                "one-model",
                "a program that loads "
                f"`{BY_NAME[self.family].module}::{BY_NAME[self.family].model}` once and embeds the texts one after "
                "another (its KV cache keeps each)",
                check_alone(tagged, ref.single, kept, ref.reference, ref.truth, singles_run, seq=max(lengths)),
                failure=next((k.failure for k in kept if k.failure), None),
                padded=False,
            )
        )
        return batch, cfs

    def reference_counterfactual(
        self, patch: dict[str, Any], tagged: list[tuple[str, str]], singles_run: list[CandleSide]
    ) -> ReferenceCounterfactual:
        import tempfile

        name = "reference: " + ", ".join(f"{k}={v}" for k, v in patch.items())
        self.progress(f"counterfactual {name}")
        with tempfile.TemporaryDirectory(prefix="portkit-reference-") as tmp:
            try:
                texts = [t for t, _ in corpus.TEXTS]
                alt = self.timed(
                    "reference",
                    lambda: load_reference(
                        _patched_dir(Path(self.opts.model_dir), patch, Path(tmp)), texts, batch=False
                    ),
                )
            except BadInput as e:
                return ReferenceCounterfactual(name, patch, [], failure=str(e))
        rows = [
            check_row(t, tag, e.mask[0], got, r, tr)
            for (t, tag), e, got, r, tr in zip(tagged, alt.single, singles_run, alt.reference, alt.truth, strict=False)
        ]
        return ReferenceCounterfactual(name, patch, rows)

    def judge_findings(self, findings: list[Any], report: EmbeddingReport) -> list[Confirmation]:
        from portkit.verify.embedding.confirm import confirm_embedding

        return [confirm_embedding(f, report, findings) for f in findings]

    def finish(self, report: EmbeddingReport, t_start: float) -> EmbeddingReport:
        import portkit_native as pn

        report.versions = {**crate_versions(pn), **report.reference.versions}
        report.timings = dict(self.timings)
        report.seconds = time.perf_counter() - t_start
        return report


def _pad_id(batch: Any) -> int:
    """The id the tokenizer pads with, as sentence-transformers' batch holds it (0 when nothing is padded)."""
    pads = batch.ids[batch.mask == 0]
    return int(pads[0]) if pads.size else 0


def _programs(findings: list[Any]) -> set[str]:
    """The counterfactual programs lint's findings ask for (`CandleProgram`)."""
    return {f.probe.program for f in findings if isinstance(f.probe, CandleProgram)}


def _reference_patches(findings: list[Any]) -> list[dict[str, Any]]:
    """The distinct config patches lint's findings ask the reference to be run with."""
    out: list[dict[str, Any]] = []
    for f in findings:
        if isinstance(f.probe, ReferenceEdit) and f.probe.config not in out:
            out.append(f.probe.config)
    return out


def verify_embedding(
    opts: Any, family: str, progress: Progress, lint: Callable[[], list[Any]], t_start: float
) -> EmbeddingReport:
    return EmbeddingRun(opts, family, progress, lint).execute(t_start)
