"""What each family's candle mirror (`portkit.families.<name>`, `FamilyView`) makes of a config,
value by value, without the native wheel.

Every expected value here was read off candle 0.11.0 (`portkit_native.candle_config(text,
family=...)` gives the same; tests/native/test_family_config_oracle.py holds the mirrors to it
over a wide corpus). These cases are the ones that corpus reaches only with the native wheel:
serde's exact messages for `candle_nn::Activation`, the derived `head_dim` where the hidden size
does not divide evenly or there are no heads, granite's `into_config`, and what `FamilyView`
reports around a refusal.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from portkit.families import BY_NAME
from portkit.families.view import FamilyView
from tests.unit.family_configs import LEGACY, T5

EXPECTED_ONE_OF = (
    "expected one of `gelu`, `gelu_new`, `newgelu`, `relu`, `relu2`, `relu6`, `silu`, `sigmoid`, `hardsigmoid`, "
    "`swiglu`, `swish`, `mish`, `hardswish`, `elu`, `leakyrelu`, `gelu_pytorch_tanh`, `gelupytorchtanh`"
)


def view(family: str, **overrides: Any) -> FamilyView:
    base = dict(LEGACY[family])
    if family == "mixtral":  # the hub config's null window is refused by candle's usize; the flag is required
        base.update(sliding_window=128, use_flash_attn=False)
    return BY_NAME[family].view(json.dumps({**base, **overrides}))


# --------------------------------------------------------------------------- candle_nn::Activation


@pytest.mark.parametrize(
    "written,parsed",
    [
        ("gelu", "gelu"),
        ("gelu_new", "gelu_new"),
        ("newgelu", "gelu_new"),  # the variant's own name, reported by the alias transformers uses
        ("gelu_pytorch_tanh", "gelu_pytorch_tanh"),
        ("gelupytorchtanh", "gelu_pytorch_tanh"),
        ("relu2", "relu2"),
        ("swiglu", "swiglu"),
        ({"elu": 0.5}, {"elu": 0.5}),  # newtype variants: an object with the f64
        ({"leakyrelu": 0.1}, {"leakyrelu": 0.1}),
        ({"gelu": None}, "gelu"),  # a unit variant as an object: its content is `()`, read from null
        ({"gelu_new": None}, "gelu_new"),
    ],
)
def test_activations_candle_accepts(written: Any, parsed: Any) -> None:
    v = view("mistral", hidden_act=written)
    assert v.ok, v.refused
    assert v.values["hidden_act"] == parsed


@pytest.mark.parametrize(
    "written,message",
    [
        ("bogus", f"unknown variant `bogus`, {EXPECTED_ONE_OF}"),
        ({"bogus": None}, f"unknown variant `bogus`, {EXPECTED_ONE_OF}"),
        ("elu", "invalid type: unit variant, expected newtype variant"),
        ("leakyrelu", "invalid type: unit variant, expected newtype variant"),
        ({"gelu": 1}, "invalid type: integer `1`, expected unit"),
        ({"elu": "x"}, 'invalid type: string "x", expected f64'),
        ({"silu": None, "relu": None}, "expected value"),  # an enum object has exactly one key
        (None, "expected value"),
        (5, "expected value"),
        ([], "expected value"),
    ],
)
def test_activations_candle_refuses_with_its_message(written: Any, message: str) -> None:
    v = view("mistral", hidden_act=written)
    assert (v.ok, v.refused, v.refused_at) == (False, message, ["hidden_act"])
    assert v.values == {} and v.missing_field() is None


# --------------------------------------------------------------------------- derived values

DERIVED_HEAD_DIM = ["mistral", "mixtral", "phi3", "granite", "qwen2", "olmo2", "stable_lm", "starcoder2"]


@pytest.mark.parametrize("family", DERIVED_HEAD_DIM)
def test_head_dim_is_hidden_size_floor_divided_by_heads(family: str) -> None:
    """66 / 4: candle's usize division gives 16, not 16.5; with no heads the view has no
    head_dim, as the native one reports (candle itself would divide by zero building the model)."""
    extra = {"head_dim": None} if family == "mistral" else {}
    v = view(family, hidden_size=66, num_attention_heads=4, **extra)
    assert v.ok, v.refused
    assert v.values["head_dim"] == 16 and type(v.values["head_dim"]) is int
    zero = view(family, hidden_size=64, num_attention_heads=0, **extra)
    assert zero.ok, zero.refused
    assert zero.values["head_dim"] is None


def test_mistral_keeps_a_written_head_dim() -> None:
    v = view("mistral", hidden_size=64, num_attention_heads=4, head_dim=32)
    assert v.values["head_dim"] == 32


def test_granite_into_config() -> None:
    """`num_key_value_heads` defaults to the heads (granite.rs:56-58), flash attention is off
    (`into_config(false)`), `rope_theta` is an f32 with default 10000."""
    base = {k: v for k, v in LEGACY["granite"].items() if k not in ("num_key_value_heads", "rope_theta")}
    v = BY_NAME["granite"].view(json.dumps(base))
    assert v.ok, v.refused
    assert v.values["num_key_value_heads"] == base["num_attention_heads"]
    assert v.values["use_flash_attn"] is False and v.values["rope_theta"] == 10000.0
    assert view("granite", num_key_value_heads=1).values["num_key_value_heads"] == 1


# --------------------------------------------------------------------------- FamilyView


def test_a_view_records_the_keys_config_json_writes() -> None:
    v = view("qwen2")
    assert v.ok and v.written == frozenset(LEGACY["qwen2"])
    assert v.get("num_hidden_layers") == LEGACY["qwen2"]["num_hidden_layers"] and v.get("nope", 7) == 7
    # parsed JSON as well as text
    assert BY_NAME["qwen2"].view(LEGACY["qwen2"]).values == v.values
    assert BY_NAME["qwen2"].view(LEGACY["qwen2"]).written == v.written


def test_a_missing_field_is_named_and_a_nested_refusal_is_not_one() -> None:
    cfg = {k: v for k, v in T5["mistral"].items() if k != "rope_theta"}
    v = BY_NAME["mistral"].view(json.dumps(cfg))
    assert (v.ok, v.refused, v.refused_at, v.missing_field()) == (False, "missing field `rope_theta`", [], "rope_theta")
    nested = view("phi3", rope_scaling={"short_factor": [1.0], "long_factor": [1.0]})
    assert nested.refused == "missing field `type`" and nested.refused_at == ["rope_scaling"]
    assert nested.missing_field() is None
    assert view("mistral").missing_field() is None


def test_the_llama_view_is_candles_llama_config() -> None:
    cfg = dict(LEGACY["llama"])
    v = BY_NAME["llama"].view(json.dumps(cfg))
    assert v.ok and v.family == "llama"
    # into_config(false): kv heads, head_dim, tie and use_flash_attn filled in (llama.rs:56-85)
    assert v.values == {
        k: cfg[k]
        for k in (
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "rms_norm_eps",
            "rope_theta",
            "bos_token_id",
            "eos_token_id",
            "max_position_embeddings",
            "tie_word_embeddings",
        )
    } | {"head_dim": cfg["hidden_size"] // cfg["num_attention_heads"], "rope_scaling": None, "use_flash_attn": False}
    assert "rope_theta" in v.written  # a top-level rope_theta: candle read it
    t5 = BY_NAME["llama"].view(json.dumps(T5["llama"]))
    assert "rope_theta" not in t5.written  # rope_theta only in rope_parameters: candle's default
    bad = BY_NAME["llama"].view(json.dumps({**cfg, "hidden_size": "64"}))
    assert (bad.ok, bad.family, bad.refused_at) == (False, "llama", ["hidden_size"])
    assert bad.refused == 'invalid type: string "64", expected usize'


def test_a_view_names_its_family_and_the_struct_candle_expected() -> None:
    assert view("gemma").family == "gemma"
    bad = BY_NAME["gemma"].view("5")
    assert (bad.family, bad.refused, bad.refused_at) == (
        "gemma",
        "invalid type: integer `5`, expected struct Config",
        [],
    )
    granite = BY_NAME["granite"].view("5")
    assert granite.refused == "invalid type: integer `5`, expected struct GraniteConfig"


def test_a_positional_config_is_read_and_writes_no_keys() -> None:
    """serde reads a struct from a JSON array too, field by field in declaration order (candle
    accepts this gemma config); an array has no keys, so `written` is empty."""
    import portkit.families.gemma as gemma

    values = [LEGACY["gemma"].get(f.name) for f in gemma.FIELDS]
    v = BY_NAME["gemma"].view(json.dumps(values))
    assert v.ok, v.refused
    assert v.written == frozenset() and v.values["hidden_size"] == 64 and v.values["max_position_embeddings"] == 128
