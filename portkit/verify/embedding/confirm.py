"""Each lint finding on an embedding model, judged by the run that shows it (`Probe.run`):
"embedding-batch" findings by the counterfactual program the rule names in its probe's patch
(`{"program": "no-mask" | "pool-over-pads"}`) on the padded batch, crash findings by candle's own
load error, static facts as NOT-PROBED with why. The verdict words are the one judge's
(`portkit.verify.judge.verdicts`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from portkit.verify.judge.verdicts import Confirmation, identity

if TYPE_CHECKING:
    from portkit.verify.embedding.run import Counterfactual, EmbeddingReport


def _program_evidence(cf: Counterfactual, report: EmbeddingReport) -> str:
    padded = cf.batch.padded_rows if cf.batch is not None else 0
    correct = report.batch
    base = f"the correct program's rows stay within their floors (worst cosine {correct.rows and min(r.cosine for r in correct.rows):.6f})" if correct else ""
    if cf.failure is not None:
        return f"{cf.what}: candle fails: {cf.failure}"
    return f"{cf.what}: worst cosine {cf.worst_cosine:.6f} to sentence-transformers over {padded} padded rows of {len(cf.batch.rows) if cf.batch else 0}; {base}"


def confirm_embedding(finding: Any, report: EmbeddingReport, findings: Sequence[Any] = ()) -> Confirmation:
    p = finding.probe
    kind = p.kind if p is not None else "static-only"
    ident = identity(finding, kind)
    if p is None or kind == "static-only":
        why = (p.reason if p is not None else None) or "a fact about the files: nothing to run"
        return Confirmation(**ident, verdict="NOT-PROBED", evidence=f"not probed: {why}")
    if p.run == "tokens":  # a tokenizer finding: the tokens section's, which this run does not make
        return Confirmation(**ident, verdict="NOT-PROBED", evidence="not probed: the embedding run feeds both sides transformers' ids; "
                            "`portkit verify` on a directory holding only the tokenizer files compares the two tokenizers")  # fmt: skip
    if kind == "crash":
        expect = p.expect or ""
        if report.load_failure is None:
            return Confirmation(**ident, verdict="NOT-REPRODUCED", evidence="candle loaded the checkpoint and ran every text")
        if expect and expect not in report.load_failure:
            if any(o is not finding and o.probe is not None and o.probe.kind == "crash" and o.probe.expect and o.probe.expect in report.load_failure for o in findings):
                # another finding's failure came first: this one's check never ran
                return Confirmation(**ident, verdict="NOT-REACHED", evidence=f"candle stopped earlier, at another finding's failure: {report.load_failure}")
            return Confirmation(**ident, verdict="NOT-REPRODUCED", evidence=f"candle failed otherwise than predicted ({expect!r}): {report.load_failure}")
        return Confirmation(**ident, verdict="CRASH-CONFIRMED", evidence=f"candle: {report.load_failure}")
    program = (p.patch or {}).get("program") if isinstance(p.patch, dict) else None
    cf = next((c for c in report.counterfactuals if c.name == program), None)
    if cf is None:
        if report.load_failure is not None:
            return Confirmation(**ident, verdict="NOT-REACHED", evidence=f"candle stopped before the check could run: {report.load_failure}")
        return Confirmation(**ident, verdict="NOT-PROBED", evidence=f"not probed: verify runs no {program or kind} program on embedding models")
    if report.batch is None or not report.batch.ok and not report.half:
        return Confirmation(**ident, verdict="NOT-REACHED", evidence="the correct program's padded batch already differs: the counterfactual cannot be told apart")
    verdict = "CONFIRMED" if cf.differs else "NOT-REPRODUCED"
    return Confirmation(**ident, verdict=verdict, evidence=_program_evidence(cf, report), details={"counterfactual": cf.to_json()})
