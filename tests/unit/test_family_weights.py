"""Each family's expected-tensor table (`portkit.families.<name>.expected_tensors`) against facts read
off candle 0.11.0's source, and the weights rules on every family. The tables themselves are held
to candle's own requests in tests/native/test_family_weights_oracle.py; these tests pin the facts
the rules' messages rely on, without the native wheel."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from fixtures import skeleton as sk
from portkit.families import BY_NAME, FAMILIES
from portkit.lint import lint_paths
from portkit.rules import RULES
from portkit.settings import Settings
from tests.unit.rule_cases import family_config, family_tensors

COVERED = [f.name for f in FAMILIES]


def table(family: str, available: frozenset[str] = frozenset(), **overrides: Any) -> dict[str, tuple[int, ...]]:
    cfg = family_config(family, **overrides)
    view = BY_NAME[family].view(cfg)
    assert view.ok, view.refused
    return importlib.import_module(f"portkit.families.{family}").expected_tensors(view.values, available)


def lint(d: Path) -> list[Any]:
    r = lint_paths([d], Settings(select=["PK2"], preview=True, respect_pyproject=False))
    assert not r.errors, r.errors
    return r.findings


def test_every_family_has_a_table() -> None:
    for fam in COVERED:
        t = table(fam)
        assert t["model.embed_tokens.weight"] == (256, 64), fam
        assert all(all(d > 0 for d in s) for s in t.values()), fam
        assert next(iter(t)) == "model.embed_tokens.weight", f"{fam}: candle builds the embedding first"


@pytest.mark.parametrize(
    "family,lm_head",
    [
        # (family, reads lm_head.weight with the legacy tiny config): the module's own lm_head logic
        ("llama", True),  # tie_word_embeddings false in the legacy llama config
        ("mistral", True),
        ("mixtral", True),
        ("stable_lm", True),
        ("granite", True),
        ("gemma", False),
        ("gemma2", False),
        ("gemma3", False),
        ("starcoder2", False),
    ],
)
def test_lm_head_logic(family: str, lm_head: bool) -> None:
    assert ("lm_head.weight" in table(family)) is lm_head


def test_lm_head_follows_the_tie_flag_where_candle_reads_it() -> None:
    for fam in ("qwen3", "qwen3_moe", "phi3", "olmo2", "llama"):
        assert "lm_head.weight" in table(fam, tie_word_embeddings=False), fam
        assert "lm_head.weight" not in table(fam, tie_word_embeddings=True), fam
    for fam in ("mistral", "mixtral", "stable_lm", "granite"):  # always lm_head, whatever the flag
        assert "lm_head.weight" in table(fam, tie_word_embeddings=True), fam
    for fam in ("gemma", "starcoder2"):  # never
        assert "lm_head.weight" not in table(fam, tie_word_embeddings=False), fam


def test_qwen2_probes_the_file_not_the_flag() -> None:
    assert "lm_head.weight" not in table("qwen2", tie_word_embeddings=False)
    assert table("qwen2", frozenset({"lm_head.weight"}), tie_word_embeddings=True)["lm_head.weight"] == (256, 64)


def test_biases_and_norms_per_module() -> None:
    q2 = table("qwen2")  # qwen2.rs:136-139: q/k/v with bias, o without
    assert q2["model.layers.0.self_attn.q_proj.bias"] == (64,) and q2["model.layers.0.self_attn.k_proj.bias"] == (32,)
    assert "model.layers.0.self_attn.o_proj.bias" not in q2
    q3 = table("qwen3", attention_bias=True)  # qwen3.rs:135-161: all four, per-head norms
    assert q3["model.layers.0.self_attn.o_proj.bias"] == (64,)
    assert q3["model.layers.0.self_attn.q_norm.weight"] == (16,) == q3["model.layers.0.self_attn.k_norm.weight"]
    o2 = table("olmo2")  # olmo2.rs:132-133: q_norm over hidden, k_norm over kv*head_dim
    assert o2["model.layers.0.self_attn.q_norm.weight"] == (64,) and o2["model.layers.0.self_attn.k_norm.weight"] == (
        32,
    )
    assert (
        "model.layers.0.input_layernorm.weight" not in o2 and "model.layers.0.post_feedforward_layernorm.weight" in o2
    )
    sc = table("starcoder2", use_bias=True)  # LayerNorm weight + bias, c_fc/c_proj
    assert sc["model.norm.bias"] == (64,) and sc["model.layers.1.mlp.c_fc.bias"] == (128,)
    assert not any(
        ".bias" in n for n in table("starcoder2", use_bias=False) if "layernorm" not in n and "norm." not in n
    )
    sl = table("stable_lm", use_qkv_bias=True)  # stable_lm.rs:206-215: o_proj never has one
    assert "model.layers.0.self_attn.v_proj.bias" in sl and "model.layers.0.self_attn.o_proj.bias" not in sl
    assert not any("q_layernorm" in n for n in sl)
    g2 = table("gemma2")
    assert (
        "model.layers.0.pre_feedforward_layernorm.weight" in g2 and "model.layers.0.self_attn.q_norm.weight" not in g2
    )
    assert "model.layers.5.self_attn.q_norm.weight" in table("gemma3")
    assert not any(n.endswith(".bias") for n in table("granite", attention_bias=True, mlp_bias=True))


def test_fused_and_expert_layouts() -> None:
    p3 = table("phi3")  # phi3.rs:184-187, 278-281
    assert p3["model.layers.0.self_attn.qkv_proj.weight"] == (4 * 16 + 2 * 2 * 16, 64)
    assert p3["model.layers.0.mlp.gate_up_proj.weight"] == (256, 64)
    mx = table("mixtral")
    assert mx["model.layers.0.block_sparse_moe.gate.weight"][1] == 64
    experts = {n.split(".")[5] for n in mx if ".experts." in n}
    assert len(experts) == mixtral_experts() and "model.layers.0.block_sparse_moe.experts.0.w2.weight" in mx
    moe = family_config("qwen3_moe")
    qm = table("qwen3_moe", decoder_sparse_step=2)  # only layer 1 ((1 + 1) % 2 == 0) is sparse
    assert "model.layers.0.mlp.gate_proj.weight" in qm and "model.layers.0.mlp.gate.weight" not in qm
    assert qm["model.layers.1.mlp.experts.0.down_proj.weight"] == (64, moe["moe_intermediate_size"])


def mixtral_experts() -> int:
    return int(family_config("mixtral")["num_local_experts"])


def test_granite_and_llama_load_lm_head_before_the_layers() -> None:
    for fam in ("granite", "llama"):  # granite.rs:447-451, llama.rs:516-525
        assert list(table(fam))[:3] == ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"]
    assert list(table("mistral"))[-2:] == ["model.norm.weight", "lm_head.weight"]


def test_every_weights_rule_speaks_about_every_family() -> None:
    for code, rule in RULES.items():
        if code.startswith("PK2"):
            assert set(rule.families) == set(COVERED), code


@pytest.mark.parametrize("family", COVERED)
def test_candle_loadable_checkpoint_is_clean_and_sharded_too(family: str, tmp_path: Path) -> None:
    cfg = family_config(family)
    tensors = family_tensors(cfg)
    single = sk.write_model(tmp_path / "single", cfg, tensors=tensors)
    sharded = sk.write_model(tmp_path / "sharded", cfg, tensors=tensors, shards=3)
    assert lint(single) == [] and lint(sharded) == []
    # a negative control on the same files: one tensor gone is found in both layouts
    last_layer = [n for n in tensors if n.startswith("model.layers.1.")][-1]
    for root, shards in ((tmp_path / "single-bad", 1), (tmp_path / "sharded-bad", 3)):
        d = sk.write_model(root, cfg, tensors=tensors, shards=shards, drop=[last_layer])
        found = [f for f in lint(d) if f.code == "PK201"]
        assert found and f"cannot find tensor {last_layer}" == found[0].probe.expect, (family, found)


def test_untied_starcoder2_head_is_an_error_tied_a_warning(tmp_path: Path) -> None:
    extra = {"lm_head.weight": (256, 64)}
    untied = family_config("starcoder2", tie_word_embeddings=False)
    tied = family_config("starcoder2", tie_word_embeddings=True)
    [f] = [
        f
        for f in lint(sk.write_model(tmp_path / "u", untied, tensors=family_tensors(untied), extra=extra))
        if f.code == "PK202"
    ]
    assert f.severity == "error" and f.transformers_value == "read"
    [f] = [
        f
        for f in lint(sk.write_model(tmp_path / "t", tied, tensors=family_tensors(tied), extra=extra))
        if f.code == "PK202"
    ]
    assert f.severity == "warning"


def test_missing_tensor_expect_is_candles_first_failure(tmp_path: Path) -> None:
    # mistral loads the layers before model.norm: with both gone candle names the layer tensor first
    cfg = family_config("mistral")
    d = sk.write_model(
        tmp_path / "m",
        cfg,
        tensors=family_tensors(cfg),
        drop=["model.norm.weight", "model.layers.0.mlp.up_proj.weight"],
    )
    found = [f for f in lint(d) if f.code == "PK201"]
    assert len(found) == 2 and {f.probe.expect for f in found} == {
        "cannot find tensor model.layers.0.mlp.up_proj.weight"
    }


def test_uncovered_model_type_gets_no_weights_findings(tmp_path: Path) -> None:
    cfg = {**family_config("mistral"), "model_type": "falcon", "architectures": ["FalconForCausalLM"]}
    d = sk.write_model(tmp_path / "m", cfg, tensors={"transformer.h.0.weight": (4,)})
    assert lint(d) == []


# candle 0.11.0's own requests (`portkit_native.requested_tensors`, every name present) for the
# native oracle's config variants, recorded so this suite holds every table to candle name for
# name, shape for shape, in load order, without the wheel. tests/native/test_family_weights_oracle.py
# checks the recording against live candle (and rewrites it with PORTKIT_RECORD_TABLES=1).
RECORDED = json.loads((Path(__file__).with_name("family_tensor_tables.json")).read_text())


@pytest.mark.parametrize("key", list(RECORDED))
def test_table_equals_candles_recorded_requests(key: str) -> None:
    family = key.split("/", 1)[0]
    entry = RECORDED[key]
    got = [[n, list(s)] for n, s in table(family, frozenset({"lm_head.weight"}), **entry["overrides"]).items()]
    want = entry["requests"]
    assert [n for n, _ in got] == [n for n, _ in want], f"{key}: names or load order differ"
    assert got == want, f"{key}: shapes differ: " + str([(a, b) for a, b in zip(got, want, strict=False) if a != b][:3])


def test_the_recording_covers_every_family() -> None:
    assert {k.split("/", 1)[0] for k in RECORDED} == set(COVERED)
