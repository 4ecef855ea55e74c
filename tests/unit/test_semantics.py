"""The views: serde details of candle's parse, transformers' rope precedence, GGUF reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit.families import BY_NAME
from portkit.lint import lint_paths
from portkit.model.gguf_header import read_gguf
from portkit.semantics import family_transformers_view, gguf_view
from portkit.semantics.serde import rust_float
from portkit.semantics.transformers import FamilyTransformersView, llama3_inv_freq_factors
from portkit.settings import Settings
from tests.unit.config_corpus import CORPUS

llama_view = BY_NAME["llama"].view


@pytest.mark.parametrize(
    "x,s",
    [
        (64.0, "64.0"),
        (2.5, "2.5"),
        (1e-05, "0.00001"),
        (1e-06, "1e-6"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (1.8446744073709552e19, "1.8446744073709552e+19"),
        (-0.0, "-0.0"),
        (6.62607015e-34, "6.62607015e-34"),
    ],
)
def test_rust_float_is_serde_jsons_rendering(x: float, s: str) -> None:
    assert rust_float(x) == s


@pytest.mark.parametrize(
    "name,refused",
    [
        ("healthy-tf4", None),
        ("theta-null", "invalid type: null, expected f32"),
        ("hidden-float-integral", "invalid type: floating point `64.0`, expected usize"),
        ("hidden-negative", "invalid value: integer `-64`, expected usize"),
        ("max-pos-missing", "missing field `max_position_embeddings`"),
        ("bos-beyond-u32", "invalid value: integer `4294967296`, expected u32"),
        ("tie-int", "invalid type: integer `1`, expected a boolean"),
        ("eos-negative", "data did not match any variant of untagged enum LlamaEosToks"),
        ("scaling-legacy-linear", "missing field `low_freq_factor`"),
        ("scaling-linear-rope-type", "unknown variant `linear`, expected `llama3` or `default`"),
        ("theta-dup", "duplicate field `rope_theta`"),
        ("theta-1e400", "number out of range"),
        ("nan-literal", "expected value"),
        ("rms-int", None),
        ("kv-null", None),
        ("tie-null", None),
        ("eos-list", None),
        ("scaling-default-type", None),
    ],
)
def test_llama_view_serde(name: str, refused: str | None) -> None:
    assert llama_view(CORPUS[name]).refused == refused


def test_llama_view_values() -> None:
    v = llama_view(CORPUS["healthy-tf5"])
    assert v.get("rope_theta") == 10000.0 and "rope_theta" not in v.written
    assert llama_view(CORPUS["theta-int"]).get("rope_theta") == 500000.0
    assert llama_view(CORPUS["kv-absent"]).get("num_key_value_heads") == 4
    assert llama_view(CORPUS["tie-null"]).get("tie_word_embeddings") is False
    assert llama_view(CORPUS["heads-zero"]).get("head_dim") is None
    s = llama_view(CORPUS["scaling-default-type"])
    assert s.get("rope_scaling") is not None and s.get("rope_scaling")["rope_type"] == "default"
    assert llama_view(CORPUS["theta-huge"]).get("rope_theta") is None  # f32 infinity -> JSON null


def test_transformers_rope_precedence() -> None:
    def view(cfg: dict[str, object]) -> FamilyTransformersView:
        return family_transformers_view("llama", cfg)

    v = view(sk.config("tf4", rope_parameters={"rope_theta": 1e6, "rope_type": "default"}))
    assert v.get("rope_theta") == 1e6 and v.sources["rope_theta"] == ("rope_parameters", "rope_theta")
    v = view(
        sk.config(
            "tf4",
            rope_scaling={"type": "linear", "factor": 2.0},
            rope_parameters={"rope_type": "default", "rope_theta": 5.0},
        )
    )
    assert v.rope_type == "linear" and v.rope_source == "rope_scaling" and v.get("rope_theta") == 100000.0
    v = view({k: x for k, x in sk.config("tf4").items() if k != "rope_theta"})
    assert v.get("rope_theta") == 10000.0 and v.sources["rope_theta"] == ()  # the class default
    v = view(
        sk.config(
            "tf4", scaling={k: x for k, x in sk.LLAMA3_SCALING.items() if k != "original_max_position_embeddings"}
        )
    )
    assert v.rope_parameters["original_max_position_embeddings"] == 128  # max_position_embeddings
    assert view(sk.config("tf4", rms_norm_eps=1)).refused  # strict: float field, int value


def test_llama3_factors_match_transformers_shape() -> None:
    v = family_transformers_view(
        "llama",
        sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING, hidden_size=2048, num_attention_heads=16),
    )
    f = llama3_inv_freq_factors(v)
    assert f is not None and len(f) == 64 and f[0] == 1.0 and f[-1] == 8.0
    assert all(1.0 <= x <= 8.0 for x in f)


def test_gguf_view_strict_types_and_defaults(tmp_path: Path) -> None:
    cfg = sk.config("tf4")
    md = {**sk.llama_metadata(cfg, freq_base=sk.typed("F64", 5e5)), "llama.block_count": sk.typed("U64", 2)}
    v = gguf_view(read_gguf(sk.write_gguf(tmp_path / "a.gguf", md, sk.gguf_tensors(cfg))))
    assert v.refused == "not a u32 U64(2)"
    assert v.freq_base == 10000.0 and v.freq_base_source == "default-wrong-type"
    v = gguf_view(read_gguf(sk.write_gguf(tmp_path / "b.gguf", sk.llama_metadata(cfg), sk.gguf_tensors(cfg, "Q8_0"))))
    assert v.refused is None and v.head_dim == 16 and not v.rope_is_neox and v.freq_base == 100000.0


def test_lint_of_an_8b_shaped_sharded_skeleton(tmp_path: Path) -> None:
    """Headers only: four sparse shards of an 8B shape lint like the tiny model. How long it
    takes is bench/lint_bench.py's to measure, never a test's to assert."""
    d = sk.write_model(tmp_path / "m", sk.config("tf5", **sk.SHAPE_8B), shards=4)
    r = lint_paths([d], Settings(respect_pyproject=False))
    assert {f.code for f in r.findings} == {"PK101"}
