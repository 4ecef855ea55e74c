"""verify's run plan changes how it runs, never what it reports: on every acceptance fixture
(tests/acceptance/report_cases.py) the JSON report, minus timings, equals the one the commit
`BASE` writes.

The base's reports are made once per machine, wheel and reference packages: `git archive BASE portkit fixtures` into
`$PORTKIT_CACHE/golden/`, then report_cases.py run with that checkout first on PYTHONPATH (its
own verify, this wheel). Today's run in this process (PORTKIT_VERIFY_REFERENCE=inprocess) for
every case, and in the reference's child process, as the CLI runs it, for the cases that use
every request of its protocol. `BASE` is the last commit whose reports this plan must
reproduce: moved forward when a change to the report itself is merged (f121b02: main with
issues 24, 27 and 28, whose reports changed on purpose; issue 26's run plan merged onto it; e80fa33: f32 judged against
floors measured in the run, issue 32; 7e0fac0: PK510's sampling section, issue 35; 5f4e450: a parameter the checkpoint
lacks drawn with a fixed seed, so the base itself repeats; 0292ebd: PK308's crash repaired with candle's mixtral plus
its missing cast, one more candle run in the mixtral f16 case; 2411285: the phi, qwen2_moe and smollm3 families' cases,
and PK115's patch for a window transformers applies on no layer; 0cce6fa: the glm4_new family's cases; 6e27fd8: the
gemma4 family's cases, after the typed probes, the typed traits and the tokenizer-only run, whose reports equal
0cce6fa's on its 191 cases; 81ace47: per-layer capture for phi, qwen2_moe, smollm3, glm4_new and gemma4, PK115
on gemma4, phi3's PK115 measured against transformers without the window and its PK102 naming the pretraining
length transformers keeps: the 27 cases that changed against 6e27fd8 are those, and no other; e004b45: the wheel
runs candle 0.11.1 and every report's target is 0.11.1 by default (its header, PK301, PK311, PK406's message,
PK519), and the phi qk-layernorm case; 0c3aedc: gemma4's layer_scalar judged by PK202's own counterfactual, not
PK126's: its 8 cases changed against e004b45, and no other; 2a4a1fe: the quantized_phi, quantized_glm4 and
quantized_smollm3 proof cases (phi2-theta, glm4-rotary, smollm3-three), the only three without a report at
0c3aedc: every other case's report equals 0c3aedc's).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.acceptance import report_cases

ROOT = Path(__file__).resolve().parents[2]
BASE = "2a4a1fe"
#: the cases also run with transformers in its own process: a text prompt (the tokenizer request
#: first), a numeric finding's patched runs, a crash, a GGUF with a reference-side counterfactual
#: (as-candle requests), a tokenizer-only directory, the default text prompt, a GGUF recorded per
#: layer and localised against transformers as candle computes, a second turn and a batch (the
#: forward's `extra`), a chat template's renders and their counterfactuals
IN_CHILD = (
    "proof:gemma3-silu-planted",
    "proof:llama-bias",
    "paths:6:gemma3:silu",
    "paths:16:qwen2:legacy",
    "template:descending-range:trigger",
    "variant:rope-theta-in-rope-parameters",
    "variant:head-dim-mismatch",
    "gguf:rope-freqs",
    "gguf:unpermuted",
    "tokens-model:phi3:trigger:chat",
    "tokens-model:gemma:trigger:default",
    "tokens-only:phi3:trigger:text",
    "family:qwen2:t5",
    "variant:llama3-sampling",
)


def _cache() -> Path:
    return Path(os.environ.get("PORTKIT_CACHE") or Path.home() / ".cache" / "portkit")


#: the reference's packages: a newer transformers (a fresh venv takes the newest 5.x) writes its
#: version into every report and may compute other logits, so the base's reports are remade
REFERENCE_PACKAGES = ("transformers", "torch", "tokenizers", "sentence-transformers", "numpy")


def _wheel_machine_and_reference() -> str:
    from portkit.verify.cachefiles import package_version
    from portkit.verify.candle import cache as runcache

    key = [
        runcache.wheel_digest(),
        platform.machine(),
        runcache._cpu_model(),
        [package_version(p) for p in REFERENCE_PACKAGES],
    ]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def golden() -> dict:
    d = _cache() / "golden" / f"{BASE}-{_wheel_machine_and_reference()}"
    reports = d / "reports.json"
    if not reports.is_file():
        try:
            tar = subprocess.run(
                ["git", "-C", str(ROOT), "archive", BASE, "portkit", "fixtures"], capture_output=True, check=True
            ).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            pytest.fail(f"the base commit {BASE} is needed to make its reports: {e}")
        src = d / "src"
        src.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(src, filter="data")
        env = dict(os.environ, PYTHONPATH=str(src), PORTKIT_VERIFY_REFERENCE="inprocess")
        p = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "acceptance" / "report_cases.py"),
                str(reports),
                "--work",
                str(d / "work"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert p.returncode == 0, p.stderr[-2000:]
    return {"reports": json.loads(reports.read_text()), "work": d / "work"}


CASES = {c[0]: c for c in report_cases.cases()}


def _first_difference(a, b, path="") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'today' if k in a else 'the base'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: today {json.dumps(a)[:300]}, the base {json.dumps(b)[:300]}"


def _as_base_lists_versions(today: dict, base: dict) -> dict:
    """`today` with only the `versions` entries the base's report has: a package the report names since
    (the tokenizers crate of the candle release verify runs, issue 53) is no change in what verify found."""
    if isinstance(today.get("versions"), dict) and isinstance(base.get("versions"), dict):
        return {**today, "versions": {k: v for k, v in today["versions"].items() if k in base["versions"]}}
    return today


@pytest.mark.parametrize("name", list(CASES))
def test_same_report_in_process(name: str, golden: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    assert name in golden["reports"], f"{name}: no report of the base (a new case: move BASE forward)"
    base = golden["reports"][name]
    today = _as_base_lists_versions(report_cases.run_case(CASES[name], golden["work"]), base)
    assert today == base, _first_difference(today, base)


@pytest.mark.parametrize("name", IN_CHILD)
def test_same_report_with_transformers_in_its_own_process(
    name: str, golden: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PORTKIT_VERIFY_REFERENCE", raising=False)
    base = golden["reports"][name]
    today = _as_base_lists_versions(report_cases.run_case(CASES[name], golden["work"]), base)
    assert today == base, _first_difference(today, base)


def test_the_comparison_sees_a_changed_number(golden: dict) -> None:
    """The negative control: a report with one logit difference nudged is not the base's."""
    name = "variant:rope-theta-in-rope-parameters"
    doc = json.loads(json.dumps(golden["reports"][name]))
    doc["comparison"]["last_position"]["max_abs_diff"] += 1e-3
    assert doc != golden["reports"][name]
    assert "last_position.max_abs_diff" in _first_difference(doc, golden["reports"][name])


def test_only_a_package_the_base_does_not_name_is_set_aside(golden: dict) -> None:
    """The negative control of `_as_base_lists_versions`: a version the base names still compares."""
    name = "variant:rope-theta-in-rope-parameters"
    base = golden["reports"][name]
    doc = json.loads(json.dumps(base))
    assert "a-later-package" not in base["versions"]
    doc["versions"] = {**doc["versions"], "a-later-package": "0.0.0"}
    assert _as_base_lists_versions(doc, base) == base
    doc["versions"]["candle"] = "0.0.0"
    assert _as_base_lists_versions(doc, base) != base
