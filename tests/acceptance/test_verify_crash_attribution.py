"""A crash is confirmed only by the failure the finding predicts, on a real candle run.

head-dim-mismatch with `max_position_embeddings` 8 under a 16-id prompt has two reasons to
fail in candle: q_proj's shape at load (PK104, and PK206 per projection, all predicting
layer 0's q_proj, the first tensor candle checks) and the 8-row cos/sin table at the first
forward (PK306, `narrow invalid args`). candle stops at load, so PK306 was never reached:
it must not be CRASH-CONFIRMED with q_proj's message as evidence (the planted bug:
confirming any failure whatever its text).
"""

from __future__ import annotations

import json
import shutil

import pytest

from portkit.verify.pipeline import VerifyOptions, verify

Q_PROJ = "shape mismatch for model.layers.0.self_attn.q_proj.weight"


@pytest.fixture(scope="module")
def report(fixture_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("two-crashes") / "m"
    shutil.copytree(fixture_dir("head-dim-mismatch"), d)  # the cache is shared: edit a copy
    cfg = json.loads((d / "config.json").read_text())
    cfg["max_position_embeddings"] = 8
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    try:
        yield verify(VerifyOptions(model_dir=d, tokens=2, layers=False))
    finally:
        mp.undo()


def _shown(report) -> str:
    return "\n".join(
        f"{f.code} {f.verdict}: {f.evidence} (expect {f.details.get('expect')!r})" for f in report.all_findings
    )


def test_a_failure_never_reached_is_not_confirmed_by_an_earlier_one(report) -> None:
    shown = _shown(report)
    assert report.run.failure is not None and Q_PROJ in report.run.failure.message, shown
    by_code: dict[str, set[str]] = {}
    for f in report.all_findings:
        by_code.setdefault(f.code, set()).add(f.verdict)
    assert by_code.get("PK104") == {"CRASH-CONFIRMED"} and by_code.get("PK206") == {"CRASH-CONFIRMED"}, shown
    (pk306,) = [f for f in report.all_findings if f.code == "PK306"]
    assert pk306.details["expect"] == "narrow invalid args", shown
    assert pk306.verdict == "NOT-REACHED" and not pk306.confirmed, shown
    assert pk306.evidence == "not reached: candle stopped earlier, at the failure PK104 predicts", shown


def test_every_crash_confirmation_quotes_its_own_prediction(report) -> None:
    for f in report.all_findings:
        if f.verdict == "CRASH-CONFIRMED":
            expect = f.details.get("expect")
            assert expect and expect.lower() in f.details["failure"]["message"].lower(), f"{f.code}: {f.evidence}"
