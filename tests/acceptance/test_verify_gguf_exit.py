"""verify's exit status counts the GGUF's comparison on its own (issue 20, item 8): a GGUF of
other weights against a healthy checkpoint, with no lint finding to confirm, exits 1.

Every other GGUF test that mismatches also has a CONFIRMED finding, so an exit code that forgot
the GGUF would still have been 1 there; here nothing but the GGUF's numbers differ.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from portkit.cli import main


def test_a_gguf_of_other_weights_exits_1_on_its_own(
    fixture_dir, gguf_file, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from portkit.verify.pipeline import VerifyOptions, verify

    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    model = fixture_dir("healthy-tied")
    other = gguf_file("healthy-tied", seed=1)  # the same config, weights of another seed
    report = verify(VerifyOptions(model_dir=model, gguf=other, tokens=4))
    assert report.candle_ok, "the safetensors side agrees"
    assert report.confirmed == [], [f.finding.code for f in report.confirmed]
    assert report.gguf is not None and report.gguf.run.failure is None and not report.gguf.ok
    assert report.exit_code == 1
    # the command says the same (its cache holds both sides by now)
    assert main(["verify", str(model), "--gguf", str(other), "--tokens", "4", "--format", "json"]) == 1
    capsys.readouterr()
    # the control: the GGUF of these very weights exits 0
    same = gguf_file("healthy-tied", seed=0)
    assert verify(VerifyOptions(model_dir=model, gguf=same, tokens=4)).exit_code == 0


def test_a_gguf_finding_whose_effect_appears_past_a_length_says_what_the_run_covered(
    fixture_dir, gguf_file, tmp_path, monkeypatch
) -> None:
    """The drift bug: the GGUF section judged its findings without the note the HF section adds
    (`attribution.length_notes`): one judging function now serves both."""
    from fixtures.seams import findings_judged
    from portkit.findings import Finding, declared_probe
    from portkit.verify.pipeline import VerifyOptions, verify

    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    other = gguf_file("healthy-tied", seed=1)  # differs, so the numeric probe runs
    windowed = Finding(
        code="PK118",
        name="sliding-window",
        message="the window is dropped; the effect appears only past 4096 tokens",
        filename=str(other),
        severity="warning",
        probe=declared_probe("numeric", "PK118"),
    )
    with findings_judged([windowed], [windowed]):
        report = verify(VerifyOptions(model_dir=fixture_dir("healthy-tied"), gguf=other, tokens=4))
    [hf] = report.findings
    [g] = report.gguf.findings
    note = "(the effect appears only past 4096 tokens and this run covered"
    assert note in hf.evidence and note in g.evidence, (hf.evidence, g.evidence)
    assert g.details["appears_past"] == 4096 and g.details["tokens_covered"] == hf.details["tokens_covered"]
