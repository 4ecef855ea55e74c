"""`portkit verify`: the run itself, from a model directory to a `VerifyReport`.

The run plan: transformers' process starts first (`reference.session`; it imports torch while this
process reads the model, lints and runs candle as written), the reference's forward is sent once
candle's greedy tokens are known, and the tokens section's tokenizer record after it, so the
findings' counterfactuals run here while it records; a GGUF as written runs right after candle's
HF run, on the same tokens, while transformers computes. Memory: candle's runners are loaded one
at a time and released after each run, and the reference loads its (streamed) weights only once
candle's are released, so the peak is about one copy of the weights plus the runtimes, not one
per model held.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from portkit.families import DEFAULT_FAMILY
from portkit.verify import cachefiles
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.run import PatchedRuns, RunOutputs, patched_config, run_candle
from portkit.verify.errors import BadInput
from portkit.verify.judge.checks import TOLERANCES, Tolerance
from portkit.verify.judge.comparison import Comparison, compare_run
from portkit.verify.judge.confirm import Confirmation, Subject, all_fixes_patch, both_alike, confirm_section, describe_patch, run_of
from portkit.verify.lint import lint_for_verify
from portkit.verify.model_dir import ModelDir, model_family, read_model_dir
from portkit.verify.prompt import Prompt, parse_tokens, resolve_prompt
from portkit.verify.reference import tokenizer_cache
from portkit.verify.reference.compute import ReferenceFailed
from portkit.verify.reference.job import ReferenceJob
from portkit.verify.reference.result import Reference
from portkit.verify.reference.session import ReferenceSession, start_early
from portkit.verify.reference.tokenizer import record, recorded
from portkit.verify.sections import paths
from portkit.verify.sections.gguf import GgufSection, verify_gguf
from portkit.verify.sections.tokens import (
    TokenizerReport,
    TokenizerSection,
    generation_stop,
    has_tokenizer,
    stop_description,
    stop_greedy,
    tokenizer_only,
    tokenizer_section,
    verify_tokenizer_only,
)

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
    chat: str | None = None  # one user message, rendered with the model's chat template
    tokens: int = DEFAULT_TOKENS
    gguf: Path | None = None
    use_flash_attn: bool = False
    layers: bool = True  # per-layer capture (a copy of the forward on the runner's tensors)
    lint: bool = True
    #: Testing hook (the negative control): added to one logit of the reference's last prompt
    #: position before any comparison, so the failure goes through the same code path.
    perturb_reference: float | None = None
    #: Testing hook (the tokenizer section's negative control): one id of candle's first encode
    #: changed by one.
    perturb_candle_tokens: bool = False
    reference_mode: str = "streamed"  # streamed (one layer in memory at a time) | whole (from_pretrained, the check)
    cache: bool = True  # the reference's and candle's caches under $PORTKIT_CACHE (--no-cache: off)
    turns: int = 1  # 2: a second turn on the warm KV cache (`portkit.verify.sections.paths`)
    batch: int = 1  # rows in one forward (`portkit.verify.sections.paths`)


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
    gguf: GgufSection | None = None
    plot: Path | None = None
    seconds: float = 0.0
    nonfinite: Any = None  # portkit.verify.judge.nonfinite.NonFinite: NaN/inf named, its own verdict
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase
    family: str = DEFAULT_FAMILY  # the candle module (portkit.families) candle ran
    layers_note: str | None = None  # why there is no per-layer comparison, when there is none
    tokenizer: TokenizerSection | None = None  # when the directory has tokenizer.json
    greedy_stop: dict[str, Any] | None = None  # where `generate()` stops the reference's greedy tokens
    runs: list[RunOutputs] = field(default_factory=list)  # every candle run, for `candle_runs`
    #: where transformers ran, each side's threads, what overlapped (`ReferenceSession.plan`)
    run_plan: dict[str, Any] | None = None
    explanation: Any = None  # portkit.verify.judge.explain.Explanation: what accounts for candle's mismatch
    as_candle_runs: list[dict[str, Any]] = field(default_factory=list)  # transformers run as candle computes
    paths: Any = None  # portkit.verify.sections.paths.PathsReport, with --turns or --batch

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
        return self.findings + (self.gguf.findings if self.gguf else []) + (self.tokenizer.findings if self.tokenizer else []) + paths

    @property
    def exit_code(self) -> int:
        if self.nonfinite is not None:
            from portkit.verify.judge.nonfinite import EXIT_CODE

            return EXIT_CODE
        # 1 only when a side differs or fails: a finding confirmed where both sides agree (BOS
        # twice on both, PK509) is reported, not a mismatch
        ok = self.candle_ok and (self.gguf is None or self.gguf.ok) and (self.tokenizer is None or self.tokenizer.ok)
        ok = ok and (self.paths is None or self.paths.ok)
        return 0 if ok else 1

    def verdict(self) -> tuple[str, str]:
        """(machine word, human line)."""
        confirmed = self.confirmed
        if self.nonfinite is not None:
            return "non-finite", "NON-FINITE: " + self.nonfinite.line() + " (not a candle-vs-transformers difference)"
        if self.exit_code == 0:
            return "agree", "candle agrees with transformers" + (" (the HF checkpoint and the GGUF)" if self.gguf else "") + both_alike(confirmed)
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
                bits.append("the chat template renders otherwise in " + ", ".join(e for e in t.templates.environments if t.templates.differing(e)))
        if self.run.failure is not None:
            bits.append("candle failed" + _why(self.explanation))
        elif not self.candle_ok:
            bits.append("candle differs from transformers" + _why(self.explanation))
        if self.gguf is not None and not self.gguf.ok:
            bits.append(("the GGUF differs from transformers" if self.gguf.run.failure is None else "the GGUF failed in candle") + _why(self.gguf.explanation))
        if self.paths is not None:
            from portkit.verify.sections.paths import TITLES

            bits += [f"the {TITLES[c.path.name]} {'failed in' if c.path.run.failure else 'differs from transformers in'} {s.subject}" for s in self.paths.sections for c in s.checks if not c.ok]
        if confirmed:
            bits.append(f"{len(confirmed)} finding{'s' if len(confirmed) != 1 else ''} confirmed")
        return "mismatch", "MISMATCH: " + "; ".join(bits)


def _why(explanation: Any) -> str:
    """": explained by PK413 (...)" / ": unexplained: first bad layer.3 at layer.3.mlp (...)"."""
    return f": {explanation.summary}" if explanation is not None else ""


def _versions(pn: Any) -> dict[str, str]:
    return {"candle": str(pn.build_info().get("candle_version", "?")), **{pkg: cachefiles.package_version(pkg) for pkg in ("portkit", "transformers", "torch")}}


def validate(opts: VerifyOptions) -> None:
    """The options' own checks, before anything runs (bad input: exit 2)."""
    if opts.device not in DEVICES:
        raise BadInput(f"--device must be one of {', '.join(DEVICES)}, got {opts.device!r}")
    if opts.dtype not in DTYPES:
        raise BadInput(f"--dtype must be one of {', '.join(DTYPES)}, got {opts.dtype!r}")
    if opts.reference_mode not in ("streamed", "whole"):
        raise BadInput(f"--reference must be streamed or whole, got {opts.reference_mode!r}")
    paths.check_options(opts.turns, opts.batch)
    if opts.gguf is not None and not Path(opts.gguf).is_file():
        raise BadInput(f"--gguf {opts.gguf}: no such file")


def _lint_target(opts: VerifyOptions, prompt_tokens: int, tokens: int, pn: Any = None) -> dict[str, Any]:
    """lint's target for verify's runs (the wheel's build when it is loaded)."""
    return dict(
        device=opts.device,
        dtype=opts.dtype,
        use_flash_attn=opts.use_flash_attn,
        max_tokens=max(prompt_tokens + tokens, 1),
        max_prompt_tokens=max(prompt_tokens, 1),
        build=pn.build_info() if pn is not None else {},
    )


def verify(
    opts: VerifyOptions, progress: Progress = lambda _s: None, *, findings: tuple[list[Any], list[Any]] | None = None
) -> VerifyReport | TokenizerReport:
    """A `VerifyReport`; for a directory with tokenizer files but no model to run, the tokenizer
    section alone (a `TokenizerReport`).

    `findings`: (on the model dir, on the GGUF) to judge instead of lint's: the negative control
    of a probe, a fault's findings judged on its twin without the fault (fixtures/proof_table.py)."""
    t_start = time.perf_counter()
    validate(opts)
    if tokenizer_only(Path(opts.model_dir)):
        root = Path(opts.model_dir)
        # no forward: no prompt length is planned
        target = {**_lint_target(opts, 0, 0), "max_tokens": None, "max_prompt_tokens": None}
        cache = tokenizer_cache.for_dir(root, opts.text, opts.chat, opts.cache)
        return verify_tokenizer_only(
            opts,
            lambda: lint_for_verify(root, None, target, progress)[0],
            progress,
            t_start,
            lambda: recorded(tokenizer_cache.through(cache, lambda: record(root, text=opts.text, chat=opts.chat))),
        )
    model = read_model_dir(opts.model_dir)
    family = model_family(model)
    tok_cache = tokenizer_cache.for_dir(model.root, opts.text, opts.chat, opts.cache) if has_tokenizer(model.root) else None
    tok_record = tok_cache.get() if tok_cache is not None else None
    # verify's one transformers process, started at once when the tokens section needs it (its
    # torch import then overlaps everything below); else once the reference cache misses
    session = ReferenceSession(progress, start=has_tokenizer(model.root) and tok_record is None)
    try:
        return _verify(opts, progress, t_start, model, family, session, tok_cache, tok_record, findings)
    finally:
        session.close()


def _verify(
    opts: VerifyOptions,
    progress: Progress,
    t_start: float,
    model: ModelDir,
    family: Any,
    session: ReferenceSession,
    tok_cache: tokenizer_cache.TokenizerCache | None,
    tok_record: dict[str, Any] | None,
    findings: tuple[list[Any], list[Any]] | None,
) -> VerifyReport:
    tok_ticket: list[Any] = []

    def submit_tokenizer() -> None:
        if tok_record is None and not tok_ticket:
            tok_ticket.append(session.submit(dict(kind="tokenizer", model_dir=str(model.root), text=opts.text, chat=opts.chat)))

    def transformers_tokenizer() -> tuple[Any, str | None]:
        """transformers' tokenizer, as the reference's process recorded it (one request, or the
        tokenizer cache's entry)."""
        nonlocal tok_record
        if tok_record is None:
            submit_tokenizer()
            try:
                doc = session.wait(tok_ticket[0])
            except ReferenceFailed as e:
                return None, str(e)
            if tok_cache is not None and "error" not in doc:
                tok_cache.put(doc)
            tok_record = doc
        return recorded(tok_record)

    prompt = resolve_prompt(model, opts.ids, opts.text, opts.chat, tokenizer=transformers_tokenizer)
    tokens = parse_tokens(opts.tokens)
    tol = TOLERANCES[opts.dtype]
    plan = paths.plan(opts.turns, opts.batch, model, prompt.ids, tokens, padded=family.trait("PADDING_MASK") is not None)

    from portkit.verify.candle.native import NativeUnavailable, check_device, native

    try:
        pn = native()
    except NativeUnavailable as e:
        raise BadInput(str(e)) from None
    check_device(pn, opts.device)

    timings: dict[str, float] = {}
    t_phase = time.perf_counter()
    from portkit.families import sublayers

    # the sub-layers candle's copy records too (the localisation inside the first bad layer)
    subs = sublayers.of(family) if opts.layers and family.capture else ()
    job = ReferenceJob(
        model, list(prompt.ids), tokens, mode=opts.reference_mode, use_cache=opts.cache, progress=progress, sublayers=subs, session=session,
        truth=tol.logits_atol is not None,  # an f32 run is judged against floors measured against transformers in f64
    )
    if not job.likely_cached() and start_early(sum(p.stat().st_size for p in model.weight_files), has_tokenizer(model.root)):
        session.start()
    lint_note: str | None = None
    if findings is not None:
        hf_findings, gguf_findings = list(findings[0]), list(findings[1])
    elif opts.lint:
        hf_findings, gguf_findings = lint_for_verify(
            model.root, Path(opts.gguf) if opts.gguf else None, plan.lint_target(_lint_target(opts, len(prompt.ids), tokens, pn)), progress
        )
    else:
        hf_findings, gguf_findings, lint_note = [], [], "lint skipped (--no-lint)"
    timings["load"] = time.perf_counter() - t_phase
    ran = f"the {len(prompt.ids)}-token prompt and {tokens} generated tokens"
    # each finding to the run its probe needs (its rule's `probe_run`): the tokenizer's are judged
    # on the ids, not by a forward; a second turn's or a batch's on those runs (`sections.paths`)
    tok_findings = [f for f in hf_findings if run_of(f) == "tokens"]
    hf_findings, hf_path_findings = paths.split([f for f in hf_findings if run_of(f) != "tokens"])
    gguf_findings, gguf_path_findings = paths.split(gguf_findings)

    def load_with(config_text: str) -> Callable[[], Any]:
        from portkit.verify.candle.native import load_runner

        return lambda: load_runner(
            family, model.weight_files, config_text, dtype=opts.dtype, device=opts.device, use_flash_attn=opts.use_flash_attn
        )

    def cached(config_text: str, forced: list[int] | None, capture: bool) -> runcache.RunCache | None:
        if not runcache.cacheable(opts.device, opts.cache):
            return None
        return runcache.RunCache(
            runcache.run_key(
                loader=family.name,
                device=opts.device,
                dtype=opts.dtype,
                flash_attn=opts.use_flash_attn and family.flash_attn,
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
    # candle's own tokens when it generated them all; else the reference generates its own
    forced = run.greedy if run.greedy is not None and len(run.greedy) == tokens else None
    extra = plan.reference_request(forced)
    job.submit(forced, extra, run.layers if run.failure is None else None)
    if has_tokenizer(model.root):
        submit_tokenizer()  # computed by the reference's process after the forward, while this one judges
    gguf_started = None
    if opts.gguf is not None and forced is not None:
        # the GGUF runs on the reference's inputs, candle's tokens: known now, so its run as
        # written overlaps transformers' (the reference's own tokens would be known only after)
        from portkit.verify.sections.gguf import start_gguf

        t_gguf = time.perf_counter()
        gguf_started = start_gguf(
            Path(opts.gguf), list(prompt.ids), list(forced), tokens, opts.device, progress, use_cache=opts.cache, layers=opts.layers
        )
        timings["gguf"] = time.perf_counter() - t_gguf

    def candle_with(patch: dict[str, Any], inputs: list[int]) -> RunOutputs:
        progress(f"candle with {describe_patch(patch)}")
        text = patched_config(model.config_text, patch)
        r = run_candle(load_with(text), prompt.ids, inputs, tokens, label=describe_patch(patch), cache=cached(text, inputs, False))
        gc.collect()
        return r

    # while transformers computes, candle's first counterfactual: the reference's inputs are
    # candle's tokens, known now (with a GGUF its run fills this wait instead)
    early: dict[str, RunOutputs] = {}
    fixes = all_fixes_patch(hf_findings) if run.failure is None else None
    t_early = time.perf_counter()
    if fixes and forced is not None and opts.gguf is None and job.computing:
        early[PatchedRuns.key(fixes)] = candle_with(fixes, list(forced))
    timings["findings"] = time.perf_counter() - t_early  # (the phase below adds its own)
    reference = job.result(forced, opts.perturb_reference, extra)
    timings["reference"] = time.perf_counter() - t_phase - timings.get("gguf", 0.0) - timings["findings"]
    t_phase = time.perf_counter()
    stop = generation_stop(model.root)

    def judged(r: RunOutputs, ref: Reference = reference) -> Comparison | None:
        """`r` against the reference (or transformers as candle computes, `ref`), its greedy
        tokens up to where `generate()` stops."""
        return stop_greedy(compare_run(ref, r, tol), ref, r, stop, tol) if r.failure is None else None

    comparison = judged(run)

    def patched(patch: dict[str, Any]) -> tuple[RunOutputs, Comparison | None]:
        r = early.pop(PatchedRuns.key(patch), None) if reference.inputs == forced else None
        if r is None:
            r = candle_with(patch, reference.inputs)
        return r, judged(r)

    from portkit.verify.judge.nonfinite import analyse

    nonfinite = analyse(reference.layers, reference.rows, run.layers, run.rows, reference.nonfinite_weights)
    timings["compare"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()
    patched_runs = PatchedRuns(patched)
    from portkit.verify.judge.attribution import length_notes, scan_lengths
    from portkit.verify.judge.explain import explain
    from portkit.verify.reference.as_candle import AsCandleRuns

    # transformers as candle computes (the findings' reference-side counterfactuals), shared
    # with the GGUF section: the same reference, the same edits
    as_candle = AsCandleRuns(model, reference, tokens, progress, subs)
    subject = Subject(
        as_read=run,
        as_read_cmp=comparison,
        run_patched=patched_runs,
        reference_as=as_candle,
        compare=lambda ref, r: judged(r, ref),
        reference=reference,
    )
    confirmations, numeric_subject = confirm_section(hf_findings, subject, ran)
    confirmations = scan_lengths(confirmations, hf_findings, as_candle, model.config.get("max_position_embeddings"), progress)
    confirmations = length_notes(confirmations, len(prompt.ids) + tokens)
    explanation = explain(comparison, run, confirmations, hf_findings, numeric_subject, layers_note)
    timings["findings"] += time.perf_counter() - t_phase
    t_phase = time.perf_counter()
    tokenizer = tokenizer_section(model.root, tok_findings, progress, perturb_candle=opts.perturb_candle_tokens, transformers=transformers_tokenizer)
    timings["tokens"] = time.perf_counter() - t_phase
    t_phase = time.perf_counter()

    gguf_section = None
    if opts.gguf is not None:
        gguf_section = verify_gguf(
            Path(opts.gguf), model, reference, tokens, opts.device, gguf_findings, progress, ran,
            use_cache=opts.cache, as_candle=as_candle, layers=opts.layers, started=gguf_started,
        )
        if lint_note:
            gguf_section.lint_note = lint_note
        timings["gguf"] = timings.get("gguf", 0.0) + time.perf_counter() - t_phase

    paths_report = None
    if not plan.empty:
        t_paths = time.perf_counter()
        subjects = [paths.Subject("candle", load_with(model.config_text), tol, family.trait("PADDING_MASK") is not None, hf_path_findings)]
        if gguf_section is not None:
            from portkit.verify.candle.native import load_gguf

            g = gguf_section
            subjects.append(paths.Subject("the GGUF in candle", lambda: load_gguf(g.path, device=opts.device, loader=g.loader), g.tolerance, False, gguf_path_findings))
        paths_report = paths.verify_paths(plan, subjects, reference, progress)
        timings["paths"] = time.perf_counter() - t_paths

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
        seconds=time.perf_counter() - t_start,
        nonfinite=nonfinite,
        timings={k: round(v, 3) for k, v in timings.items()},
        family=family.name,
        layers_note=layers_note,
        runs=[run, *patched_runs.runs(), *(gguf_section.runs if gguf_section else []), *(paths_report.runs if paths_report else [])],
        explanation=explanation,
        as_candle_runs=as_candle.runs,
        tokenizer=tokenizer,
        greedy_stop=stop_description(reference, stop),
        run_plan=session.plan(int(pn.cpu_threads())),
        paths=paths_report,
    )
