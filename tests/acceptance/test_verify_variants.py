"""`portkit verify` on every generated fixture: the verdict each one must get, with its numbers.

Runs in-process through `portkit.verify.pipeline.verify` (the same function the CLI calls), so
torch is imported once for the whole module. Each variant's expected outcome comes from
`fixtures.variants.VARIANTS[...].candle`; the table below names the rule codes that must be
confirmed for it, and the text candle's own error must contain.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from fixtures.seams import controls
from fixtures.variants import VARIANTS
from portkit.verify.pipeline import VerifyOptions, verify
from portkit.verify.report.json_ import to_json

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "verify-report.schema.json").read_text())

#: variant -> {code: verdict} that must appear (other findings may appear too).
VERDICTS: dict[str, dict[str, str]] = {
    "rope-theta-in-rope-parameters": {"PK101": "CONFIRMED"},
    "rope-theta-conflict": {"PK101": "CONFIRMED"},
    "llama3-scaling-in-rope-parameters": {"PK101": "CONFIRMED", "PK102": "CONFIRMED"},
    # dynamic scaling acts only past max_position_embeddings (128): not at this prompt's length
    "dynamic-scaling-in-rope-parameters": {"PK101": "CONFIRMED", "PK102": "NOT-REPRODUCED"},
    "legacy-linear-rope-scaling": {"PK103": "CRASH-CONFIRMED"},
    "head-dim-mismatch": {"PK104": "CRASH-CONFIRMED"},
    # the biases candle drops, named by both rules: each confirmed by transformers as candle computes
    "attention-bias": {"PK105": "CONFIRMED", "PK202": "CONFIRMED"},
    "attention-bias-zero": {"PK105": "NOT-REPRODUCED"},
    "mlp-bias": {"PK106": "CONFIRMED"},
    "hidden-act-gelu": {"PK107": "CONFIRMED"},
    "missing-layer": {"PK204": "CRASH-CONFIRMED"},
    "untied-missing-lm-head": {"PK205": "CRASH-CONFIRMED"},
    "eos-mismatch": {"PK111": "NOT-PROBED"},
    # generate()'s implicit top_k=50 against LogitsProcessor::new(seed, Some(0.6), Some(0.9)): the sampling section
    "llama3-sampling": {"PK510": "CONFIRMED"},
    "short-max-positions": {"PK306": "CRASH-CONFIRMED"},
    "sliding-window": {"PK109": "CONFIRMED"},
}
#: candle's own text that the run's failure must quote.
CANDLE_TEXT = {
    "legacy-linear-rope-scaling": "missing field `low_freq_factor`",
    "head-dim-mismatch": "shape mismatch for model.layers.0.self_attn.q_proj.weight",
    "missing-layer": "llama.rs:524",
    "untied-missing-lm-head": "cannot find tensor lm_head.weight",
    "short-max-positions": "narrow invalid args",
}
#: variants whose effect needs a particular run: bf16 weights run in bf16 only when candle is asked to (on 0.11.0
#: and older that run fails at the first matmul, PK301: test_verify_release.py).
OPTIONS = {"bf16-weights": {"dtype": "bf16"}}


@pytest.fixture(scope="module")
def run_verify(fixture_dir):
    """verify() with transformers in this process (PORTKIT_VERIFY_REFERENCE=inprocess): torch is
    imported once for the module; the reference's numbers and every comparison are the same as
    in the child process the CLI uses by default (tests/acceptance/test_verify_cli.py)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    cache: dict[str, object] = {}

    def go(variant: str, **kw):
        key = variant + json.dumps(kw, sort_keys=True, default=str)
        if key not in cache:
            with controls(kw):  # the negative controls' seams (fixtures.seams)
                cache[key] = verify(VerifyOptions(model_dir=fixture_dir(variant), **kw))
        return cache[key]

    yield go
    mp.undo()


def _verdicts(report) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in report.all_findings:
        out.setdefault(f.code, set()).add(f.verdict)
    return out


def _show(report) -> str:
    lines = [
        f"exit {report.exit_code}; "
        + (report.comparison.headline() if report.comparison else report.run.failure.line())
    ]
    lines += [f"{f.code} {f.verdict}: {f.evidence}" for f in report.all_findings]
    return "\n".join(lines)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_verdict(variant, run_verify):
    v = VARIANTS[variant]
    report = run_verify(variant, **OPTIONS.get(variant, {}))
    shown = _show(report)
    print(shown)
    jsonschema.validate(to_json(report), SCHEMA)
    got = _verdicts(report)
    for code, verdict in VERDICTS.get(variant, {}).items():
        assert verdict in got.get(code, set()), f"{variant}: want {code} {verdict}\n{shown}"

    if v.candle == "same" or variant == "eos-mismatch":
        assert report.exit_code == 0, shown
        assert not report.confirmed, shown
        c = report.comparison
        assert c is not None and c.last.ok, shown
        if OPTIONS.get(variant, {}).get("dtype", "f32") == "f32":  # half precision is judged by argmax
            assert c.last.max_abs_diff < 1e-4 and c.layers.ok, shown
    elif v.candle == "silent":
        assert report.exit_code == 1, shown
        assert any(f.verdict == "CONFIRMED" for f in report.findings), shown
        assert report.comparison is not None and not report.comparison.last.ok, shown
        assert report.comparison.last.max_abs_diff > 0.1, shown  # well past 1e-4: a real effect
    elif v.candle in ("load-error", "panic", "forward-error"):
        assert report.exit_code == 1, shown
        assert report.run.failure is not None, shown
        assert CANDLE_TEXT[variant] in report.run.failure.message, shown
        crash = [f for f in report.findings if f.verdict == "CRASH-CONFIRMED"]
        assert crash and all(CANDLE_TEXT[variant] in f.evidence for f in crash), shown
    elif variant == "llama3-sampling":
        # the forward agrees; the sampler the program is guessed to pass is another (not stated: exit 0)
        assert report.exit_code == 0, shown
        assert report.comparison is not None and report.comparison.ok, shown
        assert report.sampling is not None and not report.sampling.program.same and report.sampling.advised.same, shown
    elif variant == "sliding-window":
        # transformers' prefill ignores the window (the last-position logits agree) but its
        # generate() cache keeps only the last keys; candle attends to everything, so the
        # decode steps and the greedy tokens part.
        assert report.exit_code == 1, shown
        c = report.comparison
        assert c.last.ok and not c.steps.ok, shown
        assert c.greedy.first_divergence is not None and not c.greedy.at_near_tie, shown
    else:  # pragma: no cover - a new variant kind needs its expectation here
        pytest.fail(f"no expectation for {variant} ({v.candle})")


def test_confirmed_numeric_finding_reports_both_runs(run_verify):
    """The heart of verify: the config as written vs the fixed config, both against transformers."""
    report = run_verify("rope-theta-in-rope-parameters")
    (f,) = [f for f in report.findings if f.code == "PK101"]
    assert f.verdict == "CONFIRMED"
    assert f.evidence.startswith("logits differ 4.9"), f.evidence
    assert "(bound " in f.evidence and "with rope_theta=100000 restored, " in f.evidence
    as_read, fixed = f.details["as_read"], f.details["fixed"]
    assert as_read["last_max_abs_diff"] > 1.0 and not as_read["ok"]
    assert fixed["last_max_abs_diff"] < 1e-4 and fixed["ok"]


def test_two_patchable_findings_are_measured_leave_one_out(run_verify):
    report = run_verify("llama3-scaling-in-rope-parameters")
    by = {f.code: f for f in report.findings}
    # rope_theta alone: measured with the scaling fix applied on both sides
    assert "with the other findings' fixes (rope_scaling=" in by["PK101"].evidence
    assert by["PK101"].details["with_other_fixes"]["ok"] is False
    assert by["PK101"].details["fixed"]["ok"] is True


def test_zero_bias_is_not_reproduced_plainly(run_verify):
    report = run_verify("attention-bias-zero")
    (f,) = [f for f in report.findings if f.code == "PK105"]
    assert f.verdict == "NOT-REPRODUCED"
    assert f.evidence.startswith("no measurable effect: candle agrees with transformers")


def test_static_only_finding_is_not_probed_and_says_why(run_verify):
    report = run_verify("eos-mismatch")
    (f,) = [f for f in report.findings if f.code == "PK111"]
    assert f.verdict == "NOT-PROBED" and f.evidence.startswith("not probed: the ids a candle loop stops on")


def test_flash_attn_without_feature_is_crash_confirmed(run_verify):
    report = run_verify("healthy-tied", use_flash_attn=True)
    assert report.exit_code == 1
    assert report.run.failure is not None and report.run.failure.kind == "CandlePanic"
    assert "compile with '--features flash-attn'" in report.run.failure.message
    assert report.run.failure.location and report.run.failure.location.endswith("llama.rs:258")
    got = _verdicts(report)
    assert got.get("PK305") == {"CRASH-CONFIRMED"}, _show(report)


def test_negative_control_perturbed_reference_fails_verify(run_verify):
    """A 1e-3 nudge to one reference logit must make verify fail, through the same comparison path."""
    clean = run_verify("healthy-tied")
    bad = run_verify("healthy-tied", perturb_reference=1e-3)
    assert clean.exit_code == 0
    assert bad.exit_code == 1
    assert not bad.comparison.last.ok and bad.comparison.last.max_abs_diff >= 1e-3 - 1e-4
    assert not bad.comparison.steps.ok  # the same row, teacher-forced
    assert "(bound " in bad.comparison.headline() and "x transformers' own f32 error" in bad.comparison.headline()


def test_f16_is_judged_by_argmax_with_margins(run_verify):
    report = run_verify("healthy-tied", dtype="f16")
    print(_show(report))
    assert report.tolerance.name == "f16" and report.tolerance.logits_atol is None
    c = report.comparison
    assert c.last.max_abs_diff > 1e-4  # half precision is visibly not f32 ...
    assert c.steps.ok and report.exit_code == 0  # ... yet every flip, if any, is a near tie
    assert not c.layers_judged


def test_per_layer_table_and_first_layer_over(run_verify):
    report = run_verify("rope-theta-in-rope-parameters")
    L = report.comparison.layers
    assert [r.name for r in L.layer_rows][:2] == ["embeddings", "layer.0"]
    assert L.rows[0].rel == 0.0  # embeddings are a lookup: identical
    assert L.first_over == "layer.0"  # RoPE enters in the first attention
    assert report.comparison.localisation.name == "layer.0.self_attn"  # after q/k/v, which agree


# ----------------------------------------------------------------------------- GGUF

GGUF_CASES = {
    # (variant, writer kwargs) -> (exit, {code: verdict})
    "f32": (("healthy-tied", {"qtype": "f32"}), (0, {})),
    "q8_0": (("healthy-tied", {"qtype": "q8_0"}), (0, {})),
    "unpermuted": (("healthy-tied", {"qtype": "f32", "permute_qk": False}), (1, {"PK410": "CONFIRMED"})),
    "unpermuted-q8_0": (("healthy-tied", {"qtype": "q8_0", "permute_qk": False}), (1, {"PK410": "CONFIRMED"})),
    "no-freq-base": (("healthy-tied", {"qtype": "f32", "freq_base": False}), (1, {"PK402": "CONFIRMED"})),
    "rope-freqs": (("llama3-scaling-top-level", {"qtype": "f32"}), (1, {"PK404": "CONFIRMED"})),
}


@pytest.mark.parametrize("case", list(GGUF_CASES))
def test_gguf_verdict(case, run_verify, gguf_file):
    (variant, kw), (code, verdicts) = GGUF_CASES[case]
    path = gguf_file(variant, **kw)
    report = run_verify(variant, gguf=path)
    shown = _show(report)
    print(shown)
    jsonschema.validate(to_json(report), SCHEMA)
    assert report.candle_ok, shown  # the HF side of these fixtures is healthy
    g = report.gguf
    assert g is not None and g.run.failure is None
    assert report.exit_code == code, shown
    got = _verdicts(report)
    for c, v in verdicts.items():
        assert v in got.get(c, set()), shown
    if code == 0:
        assert g.ok and not g.findings
        if kw["qtype"] == "q8_0":
            assert g.tolerance.name == "q8_0"
            assert g.comparison.last.max_abs_diff > 1e-3  # quantized: visible, judged by argmax
    if case.startswith("unpermuted"):
        (f,) = [f for f in g.findings if f.code == "PK410"]
        assert "Q/K rows permuted" in f.evidence
        assert f.details["fixed"]["ok"] is True
    if case == "no-freq-base":
        (f,) = [f for f in g.findings if f.code == "PK402"]
        assert "llama.rope.freq_base=100000" in f.evidence and f.details["fixed"]["ok"] is True
