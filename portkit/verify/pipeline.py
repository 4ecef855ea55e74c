"""`portkit verify`: the run itself, from a model directory to a `VerifyReport`.

The run plan: transformers' process starts first (`reference.session`; it imports torch while this
process reads the model, lints and runs candle as written), the tokens section's tokenizer record
is asked for at once (recorded as soon as the import is done), the reference's forward once
candle's greedy tokens are known; a GGUF as written runs right after candle's
HF run, on the same tokens, while transformers computes; the f64 truth is sent once those runs
are done (`begin`, `VerifyRun.finish`). Memory: candle's runners are loaded one
at a time and released after each run, and the reference loads its (streamed) weights only once
candle's are released, so the peak is about one copy of the weights plus the runtimes, not one
per model held.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from portkit.encoders import detect as detect_encoder
from portkit.encoders import detect_decoder_embedder
from portkit.families import DEFAULT_FAMILY, Family, sublayers
from portkit.findings import Finding
from portkit.verify import cachefiles
from portkit.verify.candle.checkpoint import CheckpointRuns
from portkit.verify.candle.native import crate_versions
from portkit.verify.candle.run import PatchedRuns, RunOutputs
from portkit.verify.embedding.run import EmbeddingReport, verify_embedding
from portkit.verify.errors import BadInput
from portkit.verify.judge.checks import TOLERANCES, Tolerance
from portkit.verify.judge.comparison import Comparison, compare_run
from portkit.verify.judge.confirm import Subject, all_fixes_patch, both_alike, describe_patch
from portkit.verify.judge.explain import Explanation
from portkit.verify.judge.nonfinite import NonFinite, analyse
from portkit.verify.judge.section import judge_section
from portkit.verify.judge.verdicts import Confirmation
from portkit.verify.lint import Routed, lint_for_verify, route
from portkit.verify.model_dir import ModelDir, model_family, read_model_dir
from portkit.verify.options import DEFAULT_TOKENS, DEVICES, DTYPES, VerifyOptions  # noqa: F401  # re-exported: callers import VerifyOptions from here
from portkit.verify.outcome import AGREE, EXIT_AGREE, EXIT_MISMATCH, EXIT_NONFINITE, MISMATCH, NONFINITE
from portkit.verify.prompt import Prompt, parse_tokens, resolve_prompt
from portkit.verify.reference import tokenizer_cache
from portkit.verify.reference.as_candle import AsCandleRuns
from portkit.verify.reference.job import ReferenceJob
from portkit.verify.reference.result import Reference
from portkit.verify.reference.session import ReferenceSession, start_early
from portkit.verify.reference.tokenizer import record, recorded
from portkit.verify.sections import paths
from portkit.verify.sections import sampling as sampling_section
from portkit.verify.sections.gguf import GgufFile, GgufSection, start_gguf, verify_gguf
from portkit.verify.sections.paths import TITLES, PathPlan, PathsReport
from portkit.verify.sections.tokens import (
    TokenizerSection,
    generation_stop,
    has_tokenizer,
    preload_crate,
    stop_description,
    stop_greedy,
    tokenizer_section,
)
from portkit.verify.timings import Timings
from portkit.verify.tokenizer_run import TokenizerReport, tokenizer_only, verify_tokenizer_only

Progress = Callable[[str], None]


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
    findings: list[Confirmation]
    lint_note: str | None = None
    ggufs: list[GgufSection] = field(default_factory=list)  # every --gguf's section, in order
    plot: Path | None = None
    seconds: float = 0.0
    nonfinite: NonFinite | None = None  # NaN/inf named, its own verdict
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    family: str = DEFAULT_FAMILY  # the candle module (portkit.families) candle ran
    layers_note: str | None = None  # why there is no per-layer comparison, when there is none
    tokenizer: TokenizerSection | None = None  # when the directory has tokenizer.json
    greedy_stop: dict[str, Any] | None = None  # where `generate()` stops the reference's greedy tokens
    runs: list[RunOutputs] = field(default_factory=list)  # every candle run, for `candle_runs`
    #: where transformers ran, each side's threads, what overlapped (`ReferenceSession.plan`)
    run_plan: dict[str, Any] | None = None
    explanation: Explanation | None = None  # what accounts for candle's mismatch
    as_candle_runs: list[dict[str, Any]] = field(default_factory=list)  # transformers run as candle computes
    paths: PathsReport | None = None  # with --turns or --batch
    sampling: sampling_section.SamplingSection | None = None  # with a generation_config.json or a stated sampler

    @property
    def reference_runs(self) -> dict[str, Any]:
        """The reference-side counterfactuals run (both sections): how many, from the cache, seconds each."""
        return {
            "total": len(self.as_candle_runs),
            "cached": sum(r["source"] == "cache" for r in self.as_candle_runs),
            "runs": list(self.as_candle_runs),
        }

    @property
    def candle_runs(self) -> dict[str, int]:
        return {"total": len(self.runs), "cached": sum(r.source == "cache" for r in self.runs)}

    @property
    def candle_ok(self) -> bool:
        return self.run.failure is None and self.comparison is not None and self.comparison.ok

    @property
    def confirmed(self) -> list[Confirmation]:
        return [f for f in self.all_findings if f.confirmed]

    @property
    def all_findings(self) -> list[Confirmation]:
        paths = self.paths.findings if self.paths is not None else []
        sampled = self.sampling.findings if self.sampling is not None else []
        ggufs = [f for g in self.ggufs for f in g.findings]
        return self.findings + ggufs + (self.tokenizer.findings if self.tokenizer else []) + paths + sampled

    @property
    def gguf(self) -> GgufSection | None:
        """The first --gguf's section (one --gguf: the only one)."""
        return self.ggufs[0] if self.ggufs else None

    @property
    def exit_code(self) -> int:
        if self.nonfinite is not None:
            return EXIT_NONFINITE
        # 1 only when a side differs or fails: a finding confirmed where both sides agree (BOS
        # twice on both, PK509) is reported, not a mismatch
        ok = self.candle_ok and all(g.ok for g in self.ggufs) and (self.tokenizer is None or self.tokenizer.ok)
        ok = ok and (self.paths is None or self.paths.ok) and (self.sampling is None or self.sampling.ok)
        return EXIT_AGREE if ok else EXIT_MISMATCH

    def verdict(self) -> tuple[str, str]:
        """(machine word, human line)."""
        confirmed = self.confirmed
        if self.nonfinite is not None:
            return NONFINITE, "NON-FINITE: " + self.nonfinite.line() + " (not a candle-vs-transformers difference)"
        if self.exit_code == 0:
            n = len(self.ggufs)
            which = (
                " (the HF checkpoint and the GGUF)" if n == 1 else f" (the HF checkpoint and {n} GGUFs)" if n else ""
            )
            return AGREE, "candle agrees with transformers" + which + both_alike(confirmed)
        bits = []
        if self.tokenizer is not None and not self.tokenizer.ok:
            t = self.tokenizer
            if t.crate_error:
                bits.append("the tokenizers crate cannot load tokenizer.json")
            elif t.differing:
                bits.append(f"candle's tokenizer differs ({len(t.differing)} of {len(t.encodes)} encodes)")
            elif t.decode_differs:
                bits.append(f"candle's tokenizer decodes differently ({len(t.decode_differs)} of {t.decodes} texts)")
            if t.templates is not None and not t.templates.ok:
                bits.append(
                    "the chat template renders otherwise in "
                    + ", ".join(e for e in t.templates.environments if t.templates.differing(e))
                )
        if self.run.failure is not None:
            bits.append("candle failed" + _why(self.explanation))
        elif not self.candle_ok:
            bits.append("candle differs from transformers" + _why(self.explanation))
        for g in self.ggufs:
            if not g.ok:
                name = "the GGUF" if len(self.ggufs) == 1 else f"the GGUF {g.path.name}"
                bits.append(
                    (f"{name} differs from transformers" if g.run.failure is None else f"{name} failed in candle")
                    + _why(g.explanation)
                )
        if self.paths is not None:
            bits += [
                f"the {TITLES[c.path.name]} {'failed in' if c.path.run.failure else 'differs from transformers in'} "
                f"{s.subject}"
                for s in self.paths.sections
                for c in s.checks
                if not c.ok
            ]
        if self.sampling is not None and not self.sampling.ok:
            bits.append(
                "the stated sampler draws from another distribution than generate() (distance "
                f"{self.sampling.program.worst:.3g})"
            )
        if confirmed:
            bits.append(f"{len(confirmed)} finding{'s' if len(confirmed) != 1 else ''} confirmed")
        return MISMATCH, "MISMATCH: " + "; ".join(bits)


def _why(explanation: Explanation | None) -> str:
    """ ": explained by PK413 (...)" / ": unexplained: first bad layer.3 at layer.3.mlp (...)"."""
    return f": {explanation.summary}" if explanation is not None else ""


def _versions(pn: Any) -> dict[str, str]:
    return {
        **crate_versions(pn),
        **{pkg: cachefiles.package_version(pkg) for pkg in ("portkit", "transformers", "torch")},
    }


def validate(opts: VerifyOptions) -> None:
    """The options' own checks, before anything runs (bad input: exit 2)."""
    if opts.device not in DEVICES:
        raise BadInput(f"--device must be one of {', '.join(DEVICES)}, got {opts.device!r}")
    if opts.dtype not in DTYPES:
        raise BadInput(f"--dtype must be one of {', '.join(DTYPES)}, got {opts.dtype!r}")
    if opts.reference_mode not in ("streamed", "whole"):
        raise BadInput(f"--reference must be streamed or whole, got {opts.reference_mode!r}")
    paths.check_options(opts.turns, opts.batch)
    for g in opts.ggufs:
        if not Path(g).is_file():
            raise BadInput(f"--gguf {g}: no such file")


def _release_only() -> dict[str, Any]:
    """The loaded runner's candle release as lint's `build` (a run that has no forward's devices to plan: its
    findings are still about the release it runs); empty when there is no runner, which the run reports itself."""
    from portkit.verify.candle.native import NativeUnavailable, native

    try:
        return {"candle_version": crate_versions(native())["candle"]}
    except NativeUnavailable:
        return {}


def _lint_target(opts: VerifyOptions, prompt_tokens: int, tokens: int, pn: Any = None) -> dict[str, Any]:
    """lint's target for verify's runs (the wheel's build when it is loaded, else the release it runs)."""
    return dict(
        device=opts.device,
        dtype=opts.dtype,
        use_flash_attn=opts.use_flash_attn,
        max_tokens=max(prompt_tokens + tokens, 1),
        max_prompt_tokens=max(prompt_tokens, 1),
        build=pn.build_info() if pn is not None else _release_only(),
        sampler=opts.sampler,
    )


Report = VerifyReport | TokenizerReport | EmbeddingReport


def verify(
    opts: VerifyOptions, progress: Progress = lambda _s: None, session: ReferenceSession | None = None
) -> Report:
    """A `VerifyReport`; for a directory with tokenizer files but no model to run, the tokenizer
    section alone (a `TokenizerReport`); for an encoder's checkpoint (`portkit.encoders`), the
    embedding run against sentence-transformers (an `EmbeddingReport`, docs/embeddings.md).
    `session`: transformers' process shared with other models of the same run (`portkit.verify.targets`;
    left open), else one of its own, closed at the end."""
    return begin(opts, progress, session).finish()


@dataclass(frozen=True)
class Unfinished:
    """A model `begin` ran as far as transformers' answers: `send_truth()` sends the f64 truth it
    held back, `finish()` waits for the answers and gives the report."""

    finish: Callable[[], Report]
    send_truth: Callable[[], None] = lambda: None


def begin(
    opts: VerifyOptions, progress: Progress = lambda _s: None, session: ReferenceSession | None = None
) -> Unfinished:
    """`verify` up to transformers' answers: a decoder's lint, candle's runs and its requests to
    transformers' process now (`VerifyRun.begin`), the wait for the answers and the judging at
    `finish()`. The f64 truth is held back until `send_truth()` (or `finish()`): candle's runs
    (the GGUFs', the first counterfactual's, with a shared `session` the next models',
    `portkit.verify.targets`) go on while transformers computes the f32 reference, never beside
    its f64 model. Any other directory is done now."""
    t_start = time.perf_counter()
    validate(opts)
    if tokenizer_only(Path(opts.model_dir)):
        done: Report = _tokenizer_only(opts, progress, t_start)
        return Unfinished(lambda: done)
    model = read_model_dir(opts.model_dir)
    encoder = detect_encoder(model.config) or detect_decoder_embedder(
        model.config, (Path(opts.model_dir) / "modules.json").is_file()
    )
    if encoder is not None:
        done = _embedding(opts, encoder.name, progress, t_start)
        return Unfinished(lambda: done)
    run = VerifyRun.open(opts, progress, model, session)
    try:
        begun = run.begin(t_start)
    except BaseException:
        if session is None:
            run.session.close()
        raise

    def finish() -> VerifyReport:
        try:
            return run.finish(begun)
        finally:
            if session is None:
                run.session.close()

    return Unfinished(finish, run.job.send_truth)


def _embedding(opts: VerifyOptions, encoder: str, progress: Progress, t_start: float) -> EmbeddingReport:
    """An encoder and its sentence-transformers pipeline (`portkit.verify.embedding`)."""
    if (
        opts.ids is not None
        or opts.text is not None
        or opts.chat is not None
        or opts.gguf is not None
        or opts.turns != 1
        or opts.batch != 1
    ):
        raise BadInput(
            f"{opts.model_dir}: an embedding model is verified on its built-in corpus of texts and one "
            "padded batch of them; --ids, --text, --chat, --gguf, --turns and --batch are for decoders"
        )
    target = _lint_target(opts, 0, 0)
    return verify_embedding(
        opts, encoder, progress, lambda: lint_for_verify(Path(opts.model_dir), (), target, progress)[0], t_start
    )


def _tokenizer_only(opts: VerifyOptions, progress: Progress, t_start: float) -> TokenizerReport:
    root = Path(opts.model_dir)
    # no forward: no prompt length is planned
    target = {**_lint_target(opts, 0, 0), "max_tokens": None, "max_prompt_tokens": None}
    cache = tokenizer_cache.for_dir(root, opts.text, opts.chat, opts.cache)
    return verify_tokenizer_only(
        opts,
        lambda: lint_for_verify(root, (), target, progress)[0],
        progress,
        t_start,
        lambda: recorded(tokenizer_cache.through(cache, lambda: record(root, text=opts.text, chat=opts.chat))),
    )


@dataclass(frozen=True)
class Begun:
    """What `VerifyRun.begin` ran, for its `finish`: lint's findings, candle as written and on
    its tokens the reference was sent, the GGUFs started, the first counterfactual, its seconds."""

    found: Routed
    gguf_found: list[Routed]
    lint_note: str | None
    run: RunOutputs
    forced: list[int] | None
    extra: dict[str, Any] | None
    gguf_started: list[GgufFile | BadInput | None]
    early: dict[str, RunOutputs]
    seconds: float  # from verify's start


@dataclass
class VerifyRun:
    """One verify of a model directory, from its files to the report: made by `open` (the
    prompt, the plan, transformers' process), then `begin` runs the phases up to transformers' answer and
    `finish` the rest, in order."""

    opts: VerifyOptions
    progress: Progress
    model: ModelDir
    family: Family
    session: ReferenceSession  # verify's one transformers process
    tokenizer: tokenizer_cache.TransformersTokenizer  # transformers' tokenizer, as that process records it
    prompt: Prompt
    tokens: int
    tol: Tolerance
    plan: PathPlan
    native: Any  # the portkit_native module
    job: ReferenceJob
    candle: CheckpointRuns
    timings: Timings

    @classmethod
    def open(
        cls, opts: VerifyOptions, progress: Progress, model: ModelDir, shared: ReferenceSession | None = None
    ) -> VerifyRun:
        family = model_family(model)
        tok_cache = (
            tokenizer_cache.for_dir(model.root, opts.text, opts.chat, opts.cache) if has_tokenizer(model.root) else None
        )
        # started at once when the tokens section needs transformers (its torch import then
        # overlaps everything below); else once the reference cache misses
        session = shared.next_target(progress) if shared is not None else ReferenceSession(progress, start=False)
        tokenizer = tokenizer_cache.TransformersTokenizer(session, tok_cache, model.root, opts.text, opts.chat)
        if has_tokenizer(model.root) and tokenizer.record is None:
            tokenizer.send()  # first: the child records it once imported, while candle runs
        try:
            return cls._planned(opts, progress, model, family, session, tokenizer)
        except BaseException:
            if shared is None:
                session.close()
            raise

    @classmethod
    def _planned(
        cls,
        opts: VerifyOptions,
        progress: Progress,
        model: ModelDir,
        family: Family,
        session: ReferenceSession,
        tokenizer: tokenizer_cache.TransformersTokenizer,
    ) -> VerifyRun:
        """The prompt, the plan, the native wheel and the reference's job (the session started
        now when the reference will be computed and the checkpoint is large enough to gain)."""
        from portkit.verify.candle.native import check_device, native_for_run, share_cores_with_reference

        if session.in_child:
            share_cores_with_reference()
        prompt = resolve_prompt(model, opts.ids, opts.text, opts.chat, tokenizer=tokenizer)
        tokens = parse_tokens(opts.tokens)
        tol = TOLERANCES[opts.dtype]
        plan = paths.plan(
            opts.turns, opts.batch, model, prompt.ids, tokens, padded=family.traits.padding_mask is not None
        )
        pn = native_for_run()
        check_device(pn, opts.device)
        job = ReferenceJob(
            model,
            list(prompt.ids),
            tokens,
            mode=opts.reference_mode,
            use_cache=opts.cache,
            progress=progress,
            session=session,
            sublayers=sublayers.of(family) if opts.layers and family.capture else (),  # candle's copy records them too
            truth=tol.logits_atol
            is not None,  # an f32 run is judged against floors measured against transformers in f64
        )
        if not job.likely_cached() and start_early(
            sum(p.stat().st_size for p in model.weight_files), has_tokenizer(model.root)
        ):
            session.start()
        candle = CheckpointRuns(
            model,
            family,
            prompt.ids,
            tokens,
            opts.device,
            opts.dtype,
            opts.use_flash_attn,
            opts.cache,
            job.fingerprints,
        )
        return cls(
            opts, progress, model, family, session, tokenizer, prompt, tokens, tol, plan, pn, job, candle, Timings()
        )

    def begin(self, t_start: float) -> Begun:
        """The phases up to transformers' answer, in the order they run (transformers computes
        in its own process from `send_reference` on, while this one runs the GGUF or a first
        counterfactual, on the tensors of the run as written); `finish` the rest."""
        timed = self.timings.timed
        _ = self.sampler  # a sampler verify cannot read stops it here (exit 2), before anything runs
        with timed("load"):
            found, gguf_found, lint_note = self.lint()
        with self.candle.weights_kept(self.first_patch(found.prompt) is not None):
            with timed("candle"):
                run = self.candle.as_written(self.capture, self.progress)
            forced = (
                run.greedy if run.greedy is not None and len(run.greedy) == self.tokens else None
            )  # else the reference generates its own
            with timed("reference"):
                extra = self.send_reference(run, forced)
                gguf_started = [
                    self.start_gguf(g, forced) for g in self.opts.ggufs
                ]  # each in turn, while transformers computes
                first = self.first_counterfactual(found.prompt, run, forced)
        return Begun(
            found, gguf_found, lint_note, run, forced, extra, gguf_started, first, time.perf_counter() - t_start
        )

    def finish(self, begun: Begun) -> VerifyReport:
        """The reference awaited, then the findings judged and every section run."""
        t_finish = time.perf_counter()
        timed = self.timings.timed
        found, gguf_found, lint_note, run, forced = (
            begun.found,
            begun.gguf_found,
            begun.lint_note,
            begun.run,
            begun.forced,
        )
        with timed("tokens"):  # while transformers computes: the crate's load is off the wait's tail
            crate = preload_crate(self.model.root)
        with timed("reference"):
            reference = self.job.result(forced, begun.extra)
        with timed("compare"):
            judge = Judge(self.tol, generation_stop(self.model.root))
            comparison = judge(run, reference)
            nonfinite = analyse(reference.layers, reference.rows, run.layers, run.rows, reference.nonfinite_weights)
        as_candle = AsCandleRuns(
            self.model, reference, self.tokens, self.progress, self.job.sublayers, session=self.session
        )
        with timed("findings"):
            hf = self.judge_checkpoint(found.prompt, run, comparison, reference, begun.early, judge, as_candle)
        with timed("tokens"):
            tokenizer = tokenizer_section(
                self.model.root, found.tokens, self.progress, transformers=self.tokenizer, preloaded=crate
            )
        ggufs = [
            self.gguf(g, reference, f.prompt, as_candle, s, lint_note)
            for g, f, s in zip(self.opts.ggufs, gguf_found, begun.gguf_started, strict=False)
        ]
        paths_report = self.paths(reference, found.paths, ggufs, [f.paths for f in gguf_found])
        with timed("sampling"):
            sampled = sampling_section.verify_sampling(
                self.model.root, reference, found.sampling, self.sampler, self.native
            )
        return VerifyReport(
            options=self.opts,
            model=self.model,
            prompt=self.prompt,
            tolerance=self.tol,
            versions=_versions(self.native),
            reference=reference,
            run=run,
            comparison=comparison,
            findings=hf.findings,
            lint_note=lint_note,
            ggufs=ggufs,
            seconds=begun.seconds + time.perf_counter() - t_finish,  # this model's own: not another's begun in between
            nonfinite=nonfinite,
            timings=self.timings.rounded(),
            family=self.family.name,
            layers_note=self.layers_note,
            runs=[run, *hf.runs, *(r for g in ggufs for r in g.runs), *(paths_report.runs if paths_report else [])],
            explanation=hf.explanation,
            as_candle_runs=as_candle.runs,
            tokenizer=tokenizer,
            greedy_stop=stop_description(reference, judge.stop),
            run_plan=self.run_plan,
            paths=paths_report,
            sampling=sampled,
        )

    @property
    def run_plan(self) -> dict[str, Any]:
        from portkit.verify.candle.native import quantized_threads

        return self.session.plan(int(self.native.cpu_threads()), quantized_threads() if self.opts.ggufs else None)

    @cached_property
    def sampler(self) -> str | None:
        """The candle program's sampler as stated (--sampler, else [tool.portkit]); None: the plain call."""
        return sampling_section.resolve(self.opts.sampler, self.model.root)

    @property
    def sampler_request(self) -> dict[str, Any] | None:
        return sampling_section.request(self.model.root, self.sampler)

    @property
    def capture(self) -> bool:
        return self.opts.layers and self.family.capture

    @property
    def layers_note(self) -> str | None:
        if not self.opts.layers:
            return "not compared (--no-layers)"
        return None if self.family.capture else f"per-layer: not available for {self.family.name}"

    @property
    def ran(self) -> str:
        return f"the {len(self.prompt.ids)}-token prompt and {self.tokens} generated tokens"

    def lint(self) -> tuple[Routed, list[Routed], str | None]:
        """lint's findings on the model directory and on each GGUF, each to the run its probe needs."""
        opts = self.opts
        if not opts.lint:
            return route([]), [route([]) for _ in opts.ggufs], "lint skipped (--no-lint)"
        target = self.plan.lint_target(_lint_target(opts, len(self.prompt.ids), self.tokens, self.native))
        hf, ggufs = lint_for_verify(self.model.root, opts.ggufs, target, self.progress)
        return route(hf), [route(g) for g in ggufs], None

    def send_reference(self, run: RunOutputs, forced: list[int] | None) -> dict[str, Any] | None:
        """The reference's forward on candle's tokens (and the paths' inputs), computed by the
        reference's process while this one goes on."""
        extra = self.plan.reference_request(forced, self.sampler_request)
        self.job.submit(forced, extra, run.layers if run.failure is None else None)
        return extra

    def start_gguf(self, path: Path, forced: list[int] | None) -> GgufFile | BadInput | None:
        """A GGUF as written on candle's tokens, known now, so that its run overlaps
        transformers' (the reference's own tokens would be known only after)."""
        if forced is None:
            return None
        with self.timings.timed("gguf"):
            o = self.opts
            return start_gguf(
                Path(path),
                list(self.prompt.ids),
                list(forced),
                self.tokens,
                o.device,
                self.progress,
                use_cache=o.cache,
                layers=o.layers,
            )

    def first_patch(self, findings: list[Finding]) -> dict[str, Any] | None:
        """The first counterfactual's patch: every numeric finding's (with a GGUF, its run fills
        the wait instead: None)."""
        fixes = all_fixes_patch(findings)
        return fixes if fixes and self.opts.gguf is None else None

    def first_counterfactual(
        self, findings: list[Finding], run: RunOutputs, forced: list[int] | None
    ) -> dict[str, RunOutputs]:
        """While transformers computes: candle with `first_patch`, the run the findings' probes
        ask for first."""
        with self.timings.timed("findings"):
            fixes = self.first_patch(findings) if run.failure is None else None
            if not fixes or forced is None or not self.job.computing:
                return {}
            self.progress(f"candle with {describe_patch(fixes)}")
            return {PatchedRuns.key(fixes): self.candle.patched(fixes, list(forced), describe_patch(fixes))}

    def judge_checkpoint(
        self,
        findings: list[Finding],
        run: RunOutputs,
        comparison: Comparison | None,
        reference: Reference,
        early: dict[str, RunOutputs],
        judge: Judge,
        as_candle: AsCandleRuns,
    ) -> CheckpointVerdicts:
        """Every finding on the checkpoint judged, and what accounts for candle's mismatch."""
        early_runs = (
            early if reference.inputs == run.greedy else {}
        )  # made on candle's tokens: usable when the reference ran on them
        patched_runs = PatchedRuns(PatchedCheckpoint(self.candle, reference, judge, early_runs, self.progress))
        subject = Subject(
            as_read=run,
            as_read_cmp=comparison,
            run_patched=patched_runs,
            reference_as=as_candle,
            compare=judge.against,
            reference=reference,
        )
        verdicts = judge_section(
            findings,
            subject,
            ran=self.ran,
            covered=len(self.prompt.ids) + self.tokens,
            scan=as_candle,
            max_positions=self.model.config.get("max_position_embeddings"),
            no_layers=self.layers_note,
            progress=self.progress,
        )
        return CheckpointVerdicts(verdicts.findings, verdicts.explanation, patched_runs.runs())

    def gguf(
        self,
        path: Path,
        reference: Reference,
        findings: list[Finding],
        as_candle: AsCandleRuns,
        started: GgufFile | BadInput | None,
        lint_note: str | None,
    ) -> GgufSection:
        o = self.opts
        with self.timings.timed("gguf"):
            section = verify_gguf(
                Path(path),
                self.model,
                reference,
                self.tokens,
                o.device,
                findings,
                self.progress,
                self.ran,
                use_cache=o.cache,
                as_candle=as_candle,
                layers=o.layers,
                started=started,
            )
        if lint_note:
            section.lint_note = lint_note
        return section

    def paths(
        self,
        reference: Reference,
        findings: list[Finding],
        ggufs: list[GgufSection],
        gguf_findings: list[list[Finding]],
    ) -> PathsReport | None:
        """A second turn and a batch (`--turns`, `--batch`), for candle and each GGUF."""
        if self.plan.empty:
            return None
        from portkit.verify.candle.native import load_gguf

        with self.timings.timed("paths"):
            padded = self.family.traits.padding_mask is not None
            subjects = [
                paths.PathSubject("candle", self.candle.loader(self.model.config_text), self.tol, padded, findings)
            ]
            for gguf, found in zip(ggufs, gguf_findings, strict=False):
                load = partial(load_gguf, gguf.path, device=self.opts.device, loader=gguf.loader)
                name = "the GGUF in candle" if len(ggufs) == 1 else f"the GGUF {gguf.path.name} in candle"
                subjects.append(paths.PathSubject(name, load, gguf.tolerance, False, found))
            return paths.verify_paths(self.plan, subjects, reference, self.progress)


@dataclass(frozen=True)
class Judge:
    """A candle run against the reference (or transformers as candle computes), its greedy
    tokens up to where `generate()` stops."""

    tol: Tolerance
    stop: tuple[list[int], str] | None

    def __call__(self, r: RunOutputs, ref: Reference) -> Comparison | None:
        return stop_greedy(compare_run(ref, r, self.tol), ref, r, self.stop, self.tol) if r.failure is None else None

    def against(self, ref: Reference, r: RunOutputs) -> Comparison | None:
        return self(r, ref)


@dataclass(frozen=True)
class PatchedCheckpoint:
    """A finding's candle-side counterfactual: config.json patched, on the reference's inputs,
    judged (the first one may have run while transformers computed: `early`)."""

    candle: CheckpointRuns
    reference: Reference
    judge: Judge
    early: dict[str, RunOutputs]
    progress: Progress

    def __call__(self, patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        r = self.early.get(PatchedRuns.key(patch))
        if r is None:
            self.progress(f"candle with {describe_patch(patch)}")
            r = self.candle.patched(patch, self.reference.inputs, describe_patch(patch))
        return r, self.judge(r, self.reference)


@dataclass(frozen=True)
class CheckpointVerdicts:
    findings: list[Confirmation]
    explanation: Explanation | None
    runs: list[RunOutputs]  # the counterfactuals candle ran
