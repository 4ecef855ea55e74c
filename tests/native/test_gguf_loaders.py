"""The GGUF rules' crash predictions against candle's own loaders (the wheel's release).

Each case is a converter-written GGUF (`fixtures.gguf_writer` over a family fixture) with one thing
missing, or a hand-made MoE file; lint predicts the text candle fails with (`Probe.expect`), and
`portkit_native.GgufRunner(path, loader=...)` (the loader `general.architecture` routes the file to)
must fail with it. The untouched files are the negative control: they load and run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFValueType

import portkit_native as pn
from fixtures.families import family_fixture
from fixtures.gguf_writer import write_gguf
from fixtures.proof import GLM4_QUARTER, PHI_MHA, SMOLLM3_128, family_dir
from portkit.lint import lint_paths
from portkit.model.gguf_header import read_gguf
from portkit.semantics.gguf import architecture_of, loader_for
from portkit.settings import Settings
from tests.unit.rule_cases import mixtral_gguf

IDS = [5, 17, 33, 2, 88, 41]


def _write(family: str, overrides: dict | None = None, **kw) -> Callable[[Path], Path]:
    """The converter's GGUF of a family's legacy fixture (`overrides`: over the family's base model)."""

    def make(tmp: Path) -> Path:
        d = family_dir(family, "legacy", overrides) if overrides else family_fixture(family, "legacy")
        return write_gguf(d, tmp / f"{family}.gguf", **kw)

    return make


def _mixtral_merged(tmp: Path) -> Path:
    d, _ = mixtral_gguf(merged=True)(tmp / "mixtral")
    return next(d.glob("*.gguf"))


# (code, file maker): lint must predict the failure and candle must fail with that text
CRASHES: list[tuple[str, Callable[[Path], Path]]] = [
    ("PK417", _write("phi3", drop_tensors=["output.weight"])),
    ("PK418", _write("qwen2", drop_tensors=["blk.1.attn_q.bias"])),
    ("PK401", _write("qwen3", drop_keys=["freq_base"])),
    ("PK401", _write("gemma3", drop_keys=["gemma3.attention.sliding_window"])),
    ("PK401", _write("phi3", drop_keys=["feed_forward_length"])),
    ("PK401", _write("qwen2", override={"qwen2.block_count": (2, GGUFValueType.UINT64)})),
    ("PK419", _mixtral_merged),
    ("PK411", _write("gemma3", drop_tensors=["blk.3.post_ffw_norm.weight"])),
    ("PK411", _write("qwen3", drop_tensors=["blk.1.attn_k_norm.weight"])),
    ("PK411", _write("qwen3", override={"qwen3.block_count": 3})),
    ("PK411", _write("phi3", drop_tensors=["blk.1.ffn_down.weight"])),
    ("PK411", _write("qwen2", drop_tensors=["blk.0.ffn_gate.weight"])),
    ("PK420", _write("phi3", override={"phi3.rope.dimension_count": 8})),  # fails at the first forward
    ("PK420", _write("phi3", override={"phi3.rope.dimension_count": 32})),
    ("PK422", _write("phi")),  # attn_q/attn_k/attn_v, as llama.cpp's converter writes PhiForCausalLM
    ("PK424", _write("phi", fuse_qkv=True)),  # 2 kv heads of 4 in one attn_qkv: fails at the first forward
    ("PK426", _write("smollm3")),  # 16-wide heads: no 128-row chunk at all
    ("PK426", _write("smollm3", {**SMOLLM3_128, "num_attention_heads": 3, "num_key_value_heads": 3})),  # short
]


def _load(path: Path):
    return pn.GgufRunner(str(path), device="cpu", loader=loader_for(architecture_of(read_gguf(path))))


@pytest.mark.parametrize("code,make", CRASHES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CRASHES)])
def test_crash_prediction_matches_candle(code: str, make: Callable[[Path], Path], tmp_path: Path) -> None:
    path = make(tmp_path)
    r = lint_paths([path], Settings(select=[code], preview=True, respect_pyproject=False))
    assert not r.errors, r.errors
    expects = [f.probe.shown_expect() for f in r.findings if f.code == code]
    assert expects and expects[0], f"{code}: lint predicted no failure for {path.name}"
    with pytest.raises((pn.CandleError, pn.CandlePanic)) as e:
        _load(path).last_logits(IDS)
    assert expects[0] in str(e.value), f"{code}: lint predicted {expects[0]!r}; candle said {e.value}"


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "gemma3", "phi3", "mistral"])
def test_converter_files_load_in_their_loader(family: str, tmp_path: Path) -> None:
    """The negative control: the same files, nothing dropped, load and produce finite logits."""
    path = write_gguf(family_fixture(family, "legacy"), tmp_path / f"{family}.gguf")
    logits = np.asarray(_load(path).last_logits(IDS))
    assert logits.shape == (256,) and np.isfinite(logits).all()


# the files candle's quantized_phi, quantized_glm4 and quantized_smollm3 read: phi-2's first layout (fused
# attn_qkv, every head in K and V), GLM-4 as converted, SmolLM3 with 128-wide heads
LOADING = {
    "phi": _write("phi", PHI_MHA, fuse_qkv=True),
    "glm4_new": _write("glm4_new"),
    "smollm3": _write("smollm3", SMOLLM3_128),
}


@pytest.mark.parametrize("family", sorted(LOADING))
def test_the_newer_loaders_read_their_files(family: str, tmp_path: Path) -> None:
    """The negative control of PK422, PK424 and PK426: the layouts they do not flag load and run."""
    path = LOADING[family](tmp_path)
    r = lint_paths([path], Settings(select=["PK422", "PK424", "PK426"], respect_pyproject=False))
    assert r.findings == []
    logits = np.asarray(_load(path).last_logits(IDS))
    assert logits.shape == (256,) and np.isfinite(logits).all()


def test_smollm3_loader_prints_to_stderr_not_stdout(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """candle's quantized_smollm3 prints its progress with `println!`; the runner sends it to stderr, so that a
    `--format json` report on stdout stays JSON."""
    path = LOADING["smollm3"](tmp_path)
    capfd.readouterr()
    _load(path)
    out, err = capfd.readouterr()
    assert out == "" and "decoder layers" in err


def test_per_expert_mixtral_file_loads(tmp_path: Path) -> None:
    d, _ = mixtral_gguf(merged=False)(tmp_path / "m")
    _load(next(d.glob("*.gguf")))  # zeros, but every tensor candle asks for is there


def _logits(path: Path) -> np.ndarray:
    return np.asarray(_load(path).last_logits(IDS), dtype=np.float64)


# (rule, family, variant, writer kwargs of a file candle must read identically, of one it must not):
# each silent rule's mechanism, shown on candle itself. Equal: the key or tensor is never read (or
# the default is what the rule says); different: the key the rule names is the one candle reads.
MECHANISMS = [
    # PK412: absent general.dtype == F16 (1); F32 (0) changes the RoPE tables
    ("PK412", "qwen3", "legacy", {"override": {"general.dtype": 1}}, {"override": {"general.dtype": 0}}),
    # PK414: freq_base_swa is not read: the sliding layers use the default 10000 until local_freq_base is written
    (
        "PK414",
        "gemma3",
        "legacy",
        {"override": {"gemma3.rope.local_freq_base": 10000.0}},
        {"override": {"gemma3.rope.local_freq_base": 50000.0}},
    ),
    # PK415: phi3.rope.freq_base is never read (hard-coded 10000); the control changes what is read
    (
        "PK415",
        "phi3",
        "legacy",
        {"override": {"phi3.rope.freq_base": 10000.0}},
        {"override": {"phi3.attention.layer_norm_rms_epsilon": 0.5}},
    ),
    # PK416: the LongRoPE factors and attn_factor are never read
    (
        "PK416",
        "phi3",
        "longrope",
        {
            "drop_tensors": ["rope_factors_long.weight", "rope_factors_short.weight"],
            "drop_keys": ["phi3.rope.scaling.attn_factor"],
        },
        {"override": {"phi3.attention.layer_norm_rms_epsilon": 0.5}},
    ),
    # PK425: glm4.rope.dimension_count is never read (half of each head rotated); the control changes the base
    (
        "PK425",
        "glm4_new",
        ("legacy", GLM4_QUARTER),
        {"override": {"glm4.rope.dimension_count": 8}},
        {"override": {"glm4.rope.freq_base": 10000.0}},
    ),
    # PK428: output.weight is never read (the LM head is the embedding); the control changes the epsilon
    (
        "PK428",
        "smollm3",
        ("legacy", {**SMOLLM3_128, "tie_word_embeddings": False}),
        {"drop_tensors": ["output.weight"]},
        {"override": {"smollm3.attention.layer_norm_rms_epsilon": 0.5}},
    ),
]


@pytest.mark.parametrize("code,family,variant,same,other", MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_silent_rule_mechanism_in_candle(
    code: str, family: str, variant: str | tuple[str, dict], same: dict, other: dict, tmp_path: Path
) -> None:
    d = family_dir(family, *variant) if isinstance(variant, tuple) else family_fixture(family, variant)
    base = write_gguf(d, tmp_path / "as-converted.gguf")
    assert code in {
        f.code for f in lint_paths([base], Settings(select=[code], preview=True, respect_pyproject=False)).findings
    }
    a = _logits(base)
    b = _logits(write_gguf(d, tmp_path / "same.gguf", **same))
    c = _logits(write_gguf(d, tmp_path / "other.gguf", **other))
    assert np.array_equal(a, b), (
        f"{code}: candle read what the rule says it ignores (max |diff| {np.abs(a - b).max():.3g})"
    )
    assert np.abs(a - c).max() > 1e-4, (
        f"{code}: the control edit changed nothing (max |diff| {np.abs(a - c).max():.3g})"
    )


def test_gemma3_gguf_is_transformers_with_silu(tmp_path: Path) -> None:
    """PK413 and PK414 against transformers: with the sliding layers' base written where candle
    reads it, candle's quantized_gemma3 computes Gemma 3 with a SiLU MLP: it matches transformers
    run with `hidden_activation="silu"` and not the real model (GELU-tanh); the file as converted
    (base only in `freq_base_swa`) matches neither."""
    from fixtures.families import reference_last_logits

    d = family_fixture("gemma3", "legacy")
    fixed = _logits(write_gguf(d, tmp_path / "local.gguf", override={"gemma3.rope.local_freq_base": 50000.0}))
    as_converted = _logits(write_gguf(d, tmp_path / "converted.gguf"))
    gelu = np.asarray(reference_last_logits(d, IDS), dtype=np.float64)
    silu = np.asarray(reference_last_logits(d, IDS, hidden_activation="silu"), dtype=np.float64)
    tol = 1e-4
    assert np.abs(fixed - silu).max() < tol, (
        f"candle vs transformers(silu): {np.abs(fixed - silu).max():.3g} (tol {tol})"
    )
    assert np.abs(fixed - gelu).max() > 100 * tol, f"candle vs transformers: {np.abs(fixed - gelu).max():.3g}"
    assert np.abs(as_converted - silu).max() > 100 * tol, (
        f"as converted vs transformers(silu): {np.abs(as_converted - silu).max():.3g}"
    )


def test_gemma3_gguf_window_is_one_wider_in_prefill_and_absent_in_decode(tmp_path: Path) -> None:
    """PK421 on candle: with a 4-key window a 12-token prefill is transformers' with a 5-key window
    (SiLU MLP, PK413); decoding one token at a time is the same as with no window at all."""
    from fixtures.families import reference_last_logits

    d = family_fixture("gemma3", "legacy")
    ids = [5, 17, 33, 2, 88, 41, 60, 9, 71, 23, 50, 14]
    local = {"gemma3.rope.local_freq_base": 50000.0}
    w4 = write_gguf(d, tmp_path / "w4.gguf", override={**local, "gemma3.attention.sliding_window": 4})
    wide = write_gguf(d, tmp_path / "wide.gguf", override={**local, "gemma3.attention.sliding_window": 1000})
    assert "PK421" in {f.code for f in lint_paths([w4], Settings(select=["PK421"], respect_pyproject=False)).findings}
    prefill = np.asarray(_load(w4).last_logits(ids), dtype=np.float64)
    hf5 = np.asarray(reference_last_logits(d, ids, hidden_activation="silu", sliding_window=5), dtype=np.float64)
    hf4 = np.asarray(reference_last_logits(d, ids, hidden_activation="silu", sliding_window=4), dtype=np.float64)
    assert np.abs(prefill - hf5).max() < 1e-4, (
        f"candle W=4 prefill vs transformers W=5: {np.abs(prefill - hf5).max():.3g}"
    )
    assert np.abs(prefill - hf4).max() > 1e-3, (
        f"candle W=4 prefill vs transformers W=4: {np.abs(prefill - hf4).max():.3g}"
    )
    decode_w4 = np.asarray(_load(w4).teacher_forced_logits(ids, 1), dtype=np.float64)
    decode_wide = np.asarray(_load(wide).teacher_forced_logits(ids, 1), dtype=np.float64)
    assert np.array_equal(decode_w4, decode_wide), (
        f"decode with W=4 vs no window: {np.abs(decode_w4 - decode_wide).max():.3g}"
    )
    assert np.abs(np.asarray(_load(wide).last_logits(ids)) - prefill).max() > 1e-3  # the window does act in prefill


@pytest.mark.parametrize(
    "family,override",
    [("qwen2", {}), ("mistral", {}), ("qwen3", {"general.dtype": 0}), ("glm4_new", {})],
    ids=["qwen2", "mistral-as-llama", "qwen3-f32-rope", "glm4"],
)
def test_lint_clean_converter_files_agree_with_transformers(family: str, override: dict, tmp_path: Path) -> None:
    """No GGUF finding, and candle's loader computes transformers' model (f32 files, 1e-4): the
    writer lays the files out as candle reads them, and the rules stay quiet when candle agrees."""
    from fixtures.families import reference_last_logits

    d = family_fixture(family, "legacy")
    path = write_gguf(d, tmp_path / f"{family}.gguf", override=override or None)
    r = lint_paths([path], Settings(select=["PK4"], respect_pyproject=False))
    assert [f.code for f in r.findings] == []
    ids = [5, 17, 33, 2, 88, 41, 60, 9, 71, 23, 50, 14]
    got = np.asarray(_load(path).last_logits(ids), dtype=np.float64)
    ref = np.asarray(reference_last_logits(d, ids), dtype=np.float64)
    assert np.abs(got - ref).max() < 1e-4, f"{family}: candle GGUF vs transformers {np.abs(got - ref).max():.3g}"


def test_qwen2_gguf_without_freq_base_runs_at_10000(tmp_path: Path) -> None:
    """PK402 for quantized_qwen2: no `qwen2.rope.freq_base` is exactly 10000, and the probe patch
    (the config's rope_theta) is what changes the logits."""
    d = family_fixture("qwen2", "legacy")
    missing = write_gguf(d, tmp_path / "nofb.gguf", drop_keys=["freq_base"])
    r = lint_paths([missing], Settings(select=["PK402"], respect_pyproject=False))
    assert [f.code for f in r.findings] == ["PK402"]
    a = _logits(missing)
    assert np.array_equal(a, _logits(write_gguf(d, tmp_path / "1e4.gguf", override={"qwen2.rope.freq_base": 10000.0})))
    assert np.abs(a - _logits(write_gguf(d, tmp_path / "1e6.gguf"))).max() > 1e-3


@pytest.mark.parametrize(
    "family,arch,overrides",
    [
        ("qwen2", "qwen2", None),
        ("qwen3", "qwen3", None),
        ("phi3", "phi3", None),
        ("glm4_new", "glm4", None),
        ("smollm3", "smollm3", SMOLLM3_128),
    ],
    ids=["qwen2", "qwen3", "phi3", "glm4", "smollm3"],
)
def test_tokens_past_context_length_fail_as_predicted(
    family: str, arch: str, overrides: dict | None, tmp_path: Path
) -> None:
    """PK405 for the loaders whose RoPE table has `{arch}.context_length` rows."""
    from portkit.target import Target

    path = _write(family, overrides, override={f"{arch}.context_length": 16})(tmp_path)
    ids = list(range(3, 23))  # 20 positions
    r = lint_paths([path], Settings(select=["PK405"], respect_pyproject=False, target=Target(max_tokens=len(ids))))
    [finding] = r.findings
    with pytest.raises(pn.CandleError) as e:
        _load(path).last_logits(ids)
    assert finding.probe.expect in str(e.value)
    _load(path).last_logits(ids[:16])  # within the table: runs
    assert (
        lint_paths([path], Settings(select=["PK405"], respect_pyproject=False, target=Target(max_tokens=16))).findings
        == []
    )


@pytest.mark.parametrize("family,code", [("glm4_new", "PK323"), ("smollm3", "PK324")])
def test_a_batch_fails_as_predicted_and_each_row_runs(family: str, code: str, tmp_path: Path) -> None:
    """PK323 and PK324 on the wheel's release: lint's text is candle's message for a batch of two; one
    row at a time runs."""
    from portkit.target import Target

    path = LOADING[family](tmp_path)
    r = lint_paths([path], Settings(select=[code], respect_pyproject=False, target=Target(batch=2)))
    [finding] = r.findings
    rows = [IDS, IDS[::-1]]
    with pytest.raises(pn.CandleError) as e:
        _load(path).batch_last_logits(rows)
    assert finding.probe.expect in str(e.value)
    for row in rows:
        assert np.isfinite(np.asarray(_load(path).last_logits(row))).all()
    assert lint_paths([path], Settings(select=[code], respect_pyproject=False, target=Target(batch=1))).findings == []
