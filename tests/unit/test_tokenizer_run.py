"""The tokenizer-only run (portkit/verify/tokenizer_run.py): what it says of findings it cannot run."""

from __future__ import annotations

from portkit.findings import Finding, SamplingDifference, TokenizerEdit
from portkit.verify.tokenizer_run import sampling_not_probed


def _finding(code: str, probe: object) -> Finding:
    return Finding(code=code, name="n", message=code, filename="generation_config.json", severity="warning",
                   probe=probe)  # type: ignore[arg-type]  # fmt: skip


def test_a_sampling_finding_is_not_probed_without_a_model() -> None:
    sampling = _finding("PK510", SamplingDifference(id="PK510", key="top_k", run="sampling"))
    tokens = _finding("PK503", TokenizerEdit(id="PK503", edit={"pre_tokenizer": None}, run="tokens"))
    (c,) = sampling_not_probed([tokens, sampling])
    assert (c.code, c.verdict) == ("PK510", "NOT-PROBED")
    assert "no model to run" in c.evidence
    assert sampling_not_probed([tokens]) == []
