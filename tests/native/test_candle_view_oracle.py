"""llama's family view (`portkit.families.llama`) against candle's own serde parse (`portkit_native.candle_config`).

Candle is the oracle: when they disagree, the Python mirror is wrong. Every config in the
corpus (healthy, each rule's trigger and clean config, weird-but-valid JSON: EOS lists,
nulls, floats where integers are expected, negative and huge numbers, missing keys, every
rope_scaling shape) must give the same effective values field by field, and candle must
refuse exactly the configs the mirror refuses, with the same serde message.

No importorskip: CI builds the native wheel before the tests, and a missing module must fail
loudly here rather than skip the one test that keeps the mirror honest.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

import portkit_native
from portkit.candle_release import NATIVE
from portkit.families import BY_NAME
from tests.unit.config_corpus import CORPUS
from tests.unit.rule_cases import CASES, VARIANTS

_POS = re.compile(r" at line \d+ column \d+$")


def _rule_configs() -> dict[str, str]:
    """config.json of every rule trigger/clean fixture (built once, read back as text)."""
    out: dict[str, str] = {}
    root = Path(tempfile.mkdtemp(prefix="portkit-oracle-"))
    builders = [(f"{code}-trigger", b[0]) for code, b in CASES.items()] + [
        (f"{code}-clean", b[1]) for code, b in CASES.items()
    ]
    builders += [(f"{code}-variant{i}", b) for i, (code, b, _) in enumerate(VARIANTS)]
    for name, build in builders:
        d, _ = build(root / name)
        cfg = d / "config.json"
        if cfg.exists():
            out[f"rule:{name}"] = cfg.read_text()
    return out


ALL = {**CORPUS, **_rule_configs()}


def _same_float(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def _compare(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    diffs = []
    assert set(mine) == set(theirs), (sorted(mine), sorted(theirs))
    for k in mine:
        a, b = mine[k], theirs[k]
        if k in ("rope_theta", "rms_norm_eps"):
            ok = _same_float(a, b)
        elif k == "rope_scaling" and a is not None and b is not None:
            ok = set(a) == set(b) and all(
                _same_float(a[x], b[x]) if isinstance(a[x], float) or isinstance(b[x], float) else a[x] == b[x]
                for x in a
            )
        else:
            ok = a == b
        if not ok:
            diffs.append(f"{k}: portkit {a!r} != candle {b!r}")
    return diffs


def test_native_module_is_the_candle_oracle() -> None:
    info = portkit_native.build_info()
    assert info["candle_version"] == NATIVE


llama_view = BY_NAME["llama"].view


@pytest.mark.parametrize("name", sorted(ALL))
def test_llama_view_matches_candle(name: str) -> None:
    text = ALL[name]
    view = llama_view(text)
    try:
        theirs = portkit_native.candle_config(text)
    except portkit_native.ConfigError as e:
        msg = _POS.sub("", str(e))
        assert view.refused is not None, f"candle refuses ({msg}); portkit's mirror accepts: {view}"
        assert view.refused == msg, f"refusal message: portkit {view.refused!r} != candle {msg!r}"
        return
    assert view.refused is None, f"portkit's mirror refuses ({view.refused}); candle accepts: {json.dumps(theirs)}"
    diffs = _compare(view.values, theirs)
    assert not diffs, "; ".join(diffs)


def test_corpus_covers_both_outcomes() -> None:
    views = [llama_view(t) for t in ALL.values()]
    assert sum(v.ok for v in views) > 20 and sum(not v.ok for v in views) > 20


# ------------------------------------------------------------------ crash probes


def _crash_cases() -> list[tuple[str, Any, int]]:
    """Trigger fixtures of the rules whose probe is a crash; the others have nothing to run here."""
    from portkit.rules import RULES

    out = [(code, b[0], 0) for code, b in sorted(CASES.items())]
    out += [(code, b, i + 1) for i, (code, b, _) in enumerate(VARIANTS)]
    # the other families' config-only builders (rule_cases.family) are probed in
    # test_family_config_oracle.py; the tokenizer's crash (PK507) is the tokenizers crate's,
    # probed in test_tokenizer_semantics.py; an encoder's (PK612-PK614) in test_encoder_config_oracle.py
    # and test_verify_embedding_families.py, on weights these config-only cases lack; a path rule's text for a cuda or
    # metal target is that
    # backend's (PK313's mask, PK316's Metal message), and this wheel runs on the CPU; a case on another
    # candle release states that release's error, and this wheel runs its own (verify --candle 0.11.0 and
    # fixtures/release_oracle.py judge the others)
    runs = portkit_native.build_info()["candle_version"]
    return [
        c
        for c in out
        if RULES[c[0]].probe_kind == "crash"
        and RULES[c[0]].group not in ("tokenizer", "embedding")
        and getattr(c[1], "family", "llama") == "llama"
        and (RULES[c[0]].probe_run == "prompt" or getattr(c[1], "device", "cpu") == "cpu")
        and getattr(c[1], "candle", None) in (None, runs)
    ]


@pytest.mark.parametrize("code,builder,n", _crash_cases(), ids=[f"{c}-{n}" for c, _, n in _crash_cases()])
def test_crash_probe_expectations_hold_in_candle(code: str, builder: Any, n: int, tmp_path: Path) -> None:
    """Every `crash` finding names the error candle really raises (or the panic it really hits)."""
    from portkit.families import detect_or_default
    from portkit.lint import lint_paths
    from portkit.model.gguf_header import read_gguf
    from portkit.rules import RULES
    from portkit.semantics.gguf import architecture_of, loader_for
    from portkit.settings import Settings
    from portkit.target import Target
    from portkit.verify.candle.native import load_runner

    d, target = builder(tmp_path / "m")
    report = lint_paths([d], Settings(target=Target(**target), preview=True, respect_pyproject=False))
    found = [f for f in report.findings if f.code == code]
    assert found, f"{code}: its trigger fixture produced no finding"
    # A crash rule may downgrade one finding (e.g. PK204 with extra layers: both sides run the
    # first n); then the claim to check is the opposite one: candle runs.
    crash = [f.probe for f in found if f.probe and f.probe.kind == "crash"]
    probes = [p for p in crash if p.expect]
    if code == "PK302" and not portkit_native.build_info().get("accelerate"):
        pytest.skip("PK302 needs candle built with `accelerate` (macOS)")
    dtype, cache = target.get("dtype", "f32"), None
    if code == "PK304":
        dtype, cache = "f16", "f32"  # a half-precision model with an f32 Cache, on the CPU
        # ... so the text to find is the one PK304 predicts for that target, dtype and all
        cpu = lint_paths([d], Settings(target=Target(device="cpu", dtype="f16"), preview=True, respect_pyproject=False))
        crash = [f.probe for f in cpu.findings if f.code == code and f.probe and f.probe.kind == "crash"]
        probes = [p for p in crash if p.expect]
        assert probes, "PK304 predicts no text for cpu/f16"
    tokens = target.get("max_tokens") or (4097 if code == "PK405" else 4)
    run = RULES[code].probe_run  # the run of verify that shows it: the prompt, a second turn, a batch

    def drive(r: Any) -> None:
        ids = [1] * tokens
        if run == "turns":
            r.continuation(ids, [1], [1] * 8)
        elif run == "batch":
            r.batch_last_logits([ids, ids])
        else:
            r.last_logits(ids)

    try:
        if code.startswith("PK4") or getattr(RULES[code], "loaders", None):
            (gguf,) = sorted(d.glob("*.gguf"))
            # the loader the file's general.architecture selects, as verify runs it
            loader = loader_for(architecture_of(read_gguf(gguf)))
            drive(portkit_native.GgufRunner(str(gguf), loader=loader))
        else:
            weights = sorted(str(p) for p in d.glob("*.safetensors"))
            config = (d / "config.json").read_text()
            fam = detect_or_default(json.loads(config))
            assert fam is not None
            runner = load_runner(
                fam, weights, config, dtype=dtype, cache_dtype=cache, use_flash_attn=target.get("use_flash_attn", False)
            )
            drive(runner)
    except portkit_native.NativeError as e:
        assert crash, f"{code}: lint says candle runs this, but candle failed: {str(e)[:400]!r}"
        for p in probes:
            assert p.expect is not None and p.expect in str(e), (
                f"{code}: expected {p.expect!r} in candle's {str(e)[:400]!r}"
            )
        return
    assert not crash, f"{code}: candle ran without the error lint predicts ({[p.expect for p in crash]})"
