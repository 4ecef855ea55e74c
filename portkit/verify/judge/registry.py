"""Which confirmer judges each probe, by the run it needs: the contract between the rules and
verify, written once (the way ruff maps each violation to one checker).

A rule's finding carries a typed probe (`portkit.findings`) and the run of verify it needs
(`Probe.run`); `portkit.verify.lint.route` hands it to that run, and the confirmer named here
judges it there. Every (run, probe class) pair a rule can emit has exactly one confirmer;
`tests/unit/test_confirmer_registry.py` holds every rule to it and resolves every name, so a
rule whose probe no confirmer reads fails the suite instead of being reported NOT-PROBED.

The confirmer depends on the run as well as the class: an expected crash on the prompt is
chained with the other crashes (each repaired for the next), on a tokens run it is the crate's
refusal of tokenizer.json, on an embedding run the load's or the first text's failure.
"""

from __future__ import annotations

from portkit.findings import (
    CandleEdit,
    CandleProgram,
    ExpectedCrash,
    NotProbed,
    Probe,
    ProbeRun,
    ReferenceEdit,
    SamplingDifference,
    TemplateEnvironments,
    TokenizerEdit,
)

_ON_A_FORWARD: dict[type[Probe], str] = {
    CandleEdit: "portkit.verify.judge.confirm:confirm_numeric",
    ExpectedCrash: "portkit.verify.judge.confirm:crash_chain",
    NotProbed: "portkit.verify.judge.confirm:confirm_static",
}
_ON_A_PATH: dict[type[Probe], str] = {
    CandleEdit: "portkit.verify.judge.pathcheck:confirm",
    ExpectedCrash: "portkit.verify.judge.pathcheck:confirm",
    NotProbed: "portkit.verify.judge.confirm:confirm_static",
}

#: run -> probe class -> "module:function" of its confirmer
CONFIRMERS: dict[ProbeRun, dict[type[Probe], str]] = {
    "prompt": _ON_A_FORWARD,
    "turns": _ON_A_PATH,
    "batch": _ON_A_PATH,
    "padded-batch": _ON_A_PATH,
    "tokens": {
        TokenizerEdit: "portkit.verify.sections.tokens:_confirm",
        ExpectedCrash: "portkit.verify.sections.tokens:_confirm",
        TemplateEnvironments: "portkit.verify.sections.chat_templates:confirm",
        NotProbed: "portkit.verify.judge.confirm:confirm_static",
    },
    "sampling": {SamplingDifference: "portkit.verify.sections.sampling:_judge"},
    "embedding": {
        CandleProgram: "portkit.verify.embedding.confirm:confirm_embedding",
        ReferenceEdit: "portkit.verify.embedding.confirm:confirm_embedding",
        CandleEdit: "portkit.verify.embedding.confirm:confirm_embedding",
        ExpectedCrash: "portkit.verify.embedding.confirm:confirm_embedding",
        NotProbed: "portkit.verify.embedding.confirm:confirm_embedding",
    },
}


def confirmer(probe: Probe) -> str | None:
    """The confirmer of `probe` on its run (None: no confirmer reads it there)."""
    return CONFIRMERS.get(probe.run, {}).get(type(probe))
