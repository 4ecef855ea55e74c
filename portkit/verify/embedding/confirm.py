"""Each lint finding on an embedding model, judged by the run that shows it (`Probe.run`):
"embedding-batch" findings by the counterfactual program the rule names in its probe's patch
(`{"program": "no-mask" | "pool-over-pads"}`) on the padded batch, crash findings by candle's own
load error, static facts as NOT-PROBED with why. The verdict words are the one judge's
(`portkit.verify.judge.verdicts`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from portkit.findings import CandleProgram, ExpectedCrash, NotProbed, ReferenceEdit
from portkit.verify.judge.verdicts import Confirmation, Verdict, fails_as_predicted, identity, predicts

if TYPE_CHECKING:
    from portkit.verify.embedding.report import Counterfactual, EmbeddingReport


def _program_evidence(cf: Counterfactual, report: EmbeddingReport) -> str:
    padded = cf.batch.padded_rows if cf.batch is not None else 0
    correct = report.batch
    base = (
        "the correct program's rows stay within their floors (worst cosine "
        f"{correct.rows and min(r.cosine for r in correct.rows):.6f})"
        if correct
        else ""
    )
    if cf.failure is not None:
        return f"{cf.what}: candle fails: {cf.failure}"
    n = len(cf.batch.rows) if cf.batch else 0
    over = f"over {padded} padded rows of {n}" if cf.padded else f"over {n} texts, each against itself alone"
    return f"{cf.what}: worst cosine {cf.worst_cosine:.6f} to sentence-transformers {over}; {base}"


def confirm_embedding(finding: Any, report: EmbeddingReport, findings: Sequence[Any] = ()) -> Confirmation:
    p = finding.probe
    kind = p.kind if p is not None else "static-only"
    ident = identity(finding, kind)
    if p is None or isinstance(p, NotProbed):
        why = p.reason if p is not None else "a fact about the files: nothing to run"
        return Confirmation(**ident, verdict="NOT-PROBED", evidence=f"not probed: {why}")
    if p.measure == "saved-padding" and report.tokens is not None and report.tokens.failure is None:
        return _confirm_saved_padding(ident, report.tokens)
    if p.run == "tokens":  # a tokenizer finding: the tokens section's, which this run does not make
        return Confirmation(
            **ident,
            verdict="NOT-PROBED",
            evidence="not probed: the embedding run feeds both sides "
            "transformers' ids; `portkit verify` on a directory holding only the tokenizer files compares the two "
            "tokenizers",
        )
    if isinstance(p, ExpectedCrash):
        expect = p.expect or ""
        # the load's failure, or the forward's (a head count that does not divide the width loads and fails on the first
        # text)
        failure = report.load_failure or next((r.failure for r in report.singles if r.failure), None)
        if failure is None:
            return Confirmation(
                **ident, verdict="NOT-REPRODUCED", evidence="candle loaded the checkpoint and ran every text"
            )
        if not fails_as_predicted(expect, failure):
            if any(
                o is not finding and isinstance(o.probe, ExpectedCrash) and predicts(o.probe.expect, failure)
                for o in findings
            ):
                # another finding's failure came first: this one's check never ran
                return Confirmation(
                    **ident,
                    verdict="NOT-REACHED",
                    evidence=f"candle stopped earlier, at another finding's failure: {failure}",
                )
            return Confirmation(
                **ident,
                verdict="NOT-REPRODUCED",
                evidence=f"candle failed otherwise than predicted ({expect!r}): {failure}",
            )
        where = "" if report.load_failure else "its forward on the first text: "
        return Confirmation(**ident, verdict="CRASH-CONFIRMED", evidence=f"candle: {where}{failure}")
    if isinstance(p, ReferenceEdit):
        return _confirm_by_reference(finding, ident, p.config, report)
    if p.measure == "non-finite":
        return _confirm_nonfinite(ident, report)
    program = p.program if isinstance(p, CandleProgram) else None
    cf = next((c for c in report.counterfactuals if c.name == program), None)
    if cf is None:
        if report.load_failure is not None:
            return Confirmation(
                **ident,
                verdict="NOT-REACHED",
                evidence=f"candle stopped before the check could run: {report.load_failure}",
            )
        return Confirmation(
            **ident,
            verdict="NOT-PROBED",
            evidence=f"not probed: verify runs no {program or kind} program on embedding models",
        )
    if report.batch is None or not report.batch.ok and not report.half:
        return Confirmation(
            **ident,
            verdict="NOT-REACHED",
            evidence="the correct program's padded batch already differs: the counterfactual cannot be told apart",
        )
    if any(r.nonfinite or r.failure is not None for r in report.batch.rows):
        # half precision is judged on a cosine bound, which NaN vectors cannot meet or miss
        return Confirmation(
            **ident,
            verdict="NOT-REACHED",
            evidence="the correct program's padded batch is not finite (NaN or inf): the counterfactual cannot be told "
            "apart",
        )
    if cf.batch is None:  # the program never ran (bert.rs refuses the checkpoint): nothing silent to show
        return Confirmation(
            **ident,
            verdict="NOT-REPRODUCED",
            evidence=f"{cf.what}: candle refuses it: {cf.failure}",
            details={"counterfactual": cf.to_json()},
        )
    verdict: Verdict = "CONFIRMED" if cf.differs else "NOT-REPRODUCED"
    return Confirmation(
        **ident, verdict=verdict, evidence=_program_evidence(cf, report), details={"counterfactual": cf.to_json()}
    )


def _confirm_saved_padding(ident: dict[str, Any], fed: Any) -> Confirmation:
    """PK506 on what each side feeds: the crate's ids with tokenizer.json as saved, and without its
    padding and truncation (the counterfactual), against sentence-transformers' ids."""
    first = fed.rows[0] if fed.rows else None
    changed = [r for r in fed.rows if r.crate != r.crate_unpadded]
    if first is None or not changed:
        return Confirmation(
            **ident,
            verdict="NOT-REPRODUCED",
            evidence="the crate gives the same ids with and without tokenizer.json's padding and truncation on every "
            "text of the corpus",
        )
    r = changed[0]
    numbers = (
        f"{len(changed)} of {len(fed.rows)} texts get other ids from the crate as saved: {r.text!r} is "
        f"{len(r.crate)} ids "
        f"(sentence-transformers feeds {len(r.reference)}), {len(r.crate_unpadded)} without the saved padding "
        "and truncation"
    )
    if all(c.crate_unpadded == c.reference for c in changed):
        return Confirmation(**ident, verdict="CONFIRMED", evidence=f"{numbers}, which are sentence-transformers' ids")
    return Confirmation(
        **ident,
        verdict="NOT-REPRODUCED",
        evidence=f"{numbers}, which still differ from sentence-transformers': another difference than the saved "
        "settings",
    )


def _confirm_nonfinite(ident: dict[str, Any], report: EmbeddingReport) -> Confirmation:
    """A finding that candle's vectors are NaN at the run's dtype: its own embeddings say so."""
    if report.load_failure is not None:
        return Confirmation(
            **ident, verdict="NOT-REACHED", evidence=f"candle stopped before the check could run: {report.load_failure}"
        )
    rows = [r for r in report.singles if r.failure is None]
    bad = [r for r in rows if r.nonfinite]
    numbers = f"{len(bad)} of {len(rows)} texts alone have NaN or inf in candle's {report.options.dtype} embedding"
    verdict: Verdict = "CONFIRMED" if rows and len(bad) == len(rows) else "NOT-REPRODUCED"
    return Confirmation(**ident, verdict=verdict, evidence=numbers)


def _confirm_by_reference(
    finding: Any, ident: dict[str, Any], wanted: dict[str, Any], report: EmbeddingReport
) -> Confirmation:
    """A finding about what candle's module computes: the reference run again as candle reads the
    config must agree with candle where the checkpoint as saved does not."""
    cf = next((c for c in report.references if c.patch == wanted), None)
    if report.load_failure is not None:
        return Confirmation(
            **ident, verdict="NOT-REACHED", evidence=f"candle stopped before the check could run: {report.load_failure}"
        )
    if cf is None or cf.failure is not None:
        why = cf.failure if cf is not None else "no counterfactual reference ran"
        return Confirmation(**ident, verdict="NOT-PROBED", evidence=f"not probed: {why}")
    as_saved = max((r.embedding.ratio for r in report.singles if r.embedding is not None), default=float("nan"))
    saved_ok = all(r.ok for r in report.singles)
    what = ", ".join(f"`{k}` {v!r}" for k, v in wanted.items())
    numbers = (
        f"candle's worst text is {as_saved:.3g}x its floor against the checkpoint as saved and "
        f"{cf.worst_ratio:.3g}x against sentence-transformers run with {what}"
    )
    verdict: Verdict
    if not saved_ok and cf.agrees:
        verdict, why = "CONFIRMED", f"{numbers}: that is the whole difference"
    elif saved_ok:
        verdict, why = "NOT-REPRODUCED", f"{numbers}: on this checkpoint the difference stays within the floor"
    else:
        verdict, why = (
            "NOT-REPRODUCED",
            f"{numbers}: candle differs from both, so the activation is not the whole difference",
        )
    return Confirmation(**ident, verdict=verdict, evidence=why, details={"counterfactual_reference": cf.to_json()})
