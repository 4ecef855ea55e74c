"""Each family's Python expected-tensor table equals what candle 0.11.0's module really requests.

`portkit_native.requested_tensors(family, config_json, available)` builds the family's real candle
module over a VarBuilder that records every request (name and shape, in order) and answers only the
names in `available` (all names when None); candle's error or caught panic comes back as text. The
Python side is `portkit.families.<name>.expected_tensors(values, available)`, which the PK2xx rules
compare with checkpoint headers. Both must agree name for name, shape for shape, in load order, and
on where candle stops when a tensor is missing.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

import portkit_native as pn
from portkit.families import BY_NAME, FAMILIES
from portkit.model.safetensors_header import read_safetensors_header
from tests.unit.rule_cases import family_config

# Config variants that change what a module requests: the tie flag, bias flags, MoE layout, head_dim.
CONFIG_VARIANTS: list[tuple[str, str, dict[str, Any]]] = [
    *[(f.name, "legacy", {}) for f in FAMILIES],
    *[
        (f, f"tied={t}", {"tie_word_embeddings": t})
        for f in (
            "llama",
            "mistral",
            "qwen3",
            "qwen3_moe",
            "phi3",
            "olmo2",
            "gemma",
            "starcoder2",
            "stable_lm",
            "granite",
        )
        for t in (True, False)
    ],  # fmt: skip
    ("qwen3", "attention_bias", {"attention_bias": True}),
    ("olmo2", "attention_bias", {"attention_bias": True}),
    ("gemma", "attention_bias", {"attention_bias": True}),
    ("gemma2", "attention_bias", {"attention_bias": True}),
    ("gemma3", "attention_bias", {"attention_bias": True}),
    ("starcoder2", "use_bias=false", {"use_bias": False}),
    ("starcoder2", "use_bias=true", {"use_bias": True}),
    ("stable_lm", "use_qkv_bias", {"use_qkv_bias": True}),
    ("qwen3_moe", "sparse-step-2", {"decoder_sparse_step": 2}),
    ("qwen3_moe", "no-experts", {"num_experts": 0}),
    ("qwen3_moe", "sparse-step-0", {"decoder_sparse_step": 0}),  # candle guards the modulo: every layer dense
    ("qwen3_moe", "sparse-step-3", {"decoder_sparse_step": 3}),  # layer (i + 1) % 3: none of the two is sparse
    ("qwen3_moe", "one-expert", {"num_experts": 1}),
    ("qwen3_moe", "attention_bias", {"attention_bias": True}),
    ("mistral", "head_dim-32", {"head_dim": 32}),
    ("qwen3", "head_dim-32", {"head_dim": 32}),
    ("phi3", "kv-heads-4", {"num_key_value_heads": 4}),
    ("olmo2", "kv-heads-1", {"num_key_value_heads": 1}),
    ("gemma3", "pattern-2", {"sliding_window_pattern": 2}),
    # gemma4: q/k/v/o with biases, untied, and full layers of their own size and kv heads
    ("gemma4", "attention_bias", {"attention_bias": True}),
    ("gemma4", "tied=False", {"tie_word_embeddings": False}),
    ("gemma4", "global-kv-heads-1", {"num_global_key_value_heads": 1, "global_head_dim": 24}),
    ("gemma4", "other-layer-type", {"layer_types": ["sliding_attention", "chunked_attention"]}),  # full, past 2: full
]


def python_table(family: str, config_text: str, available: set[str] | None) -> list[tuple[str, list[int]]]:
    view = BY_NAME[family].view(config_text)
    assert view.ok, view.refused
    mod = importlib.import_module(f"portkit.families.{family}")
    # available None: every name is present, so qwen2's `contains_tensor("lm_head.weight")` is true
    names = {"lm_head.weight"} if available is None else available
    return [(n, list(s)) for n, s in mod.expected_tensors(view.values, frozenset(names)).items()]


def native(family: str, config_text: str, available: set[str] | None) -> tuple[list[tuple[str, list[int]]], str | None]:
    requested, error = pn.requested_tensors(family, config_text, None if available is None else sorted(available))
    return [(n, list(s) if s is not None else None) for n, s in requested], error


def until_first_missing(
    table: list[tuple[str, list[int]]], available: set[str]
) -> tuple[list[tuple[str, list[int]]], str | None]:
    """What candle requests when only `available` exists: up to and including the first absent name."""
    for i, (n, _) in enumerate(table):
        if n not in available:
            return table[: i + 1], n
    return table, None


@pytest.mark.parametrize("family,label,overrides", CONFIG_VARIANTS, ids=[f"{f}-{v}" for f, v, _ in CONFIG_VARIANTS])
def test_table_equals_candle_requests(family: str, label: str, overrides: dict[str, Any]) -> None:
    text = json.dumps(family_config(family, **overrides), indent=2)
    want = python_table(family, text, None)
    got, error = native(family, text, None)
    assert error is None, f"{family}/{label}: candle failed building the module: {error}"
    assert [n for n, _ in got] == [n for n, _ in want], f"{family}/{label}: names or load order differ"
    assert got == want, f"{family}/{label}: shapes differ: " + str(
        [(a, b) for a, b in zip(got, want, strict=False) if a != b][:3]
    )


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_candle_stops_where_the_table_says(family: str) -> None:
    """Negative control: drop one tensor (the middle of the table, then the last) and candle must
    request exactly the prefix up to it and fail naming it; qwen2 only probes for `lm_head.weight`
    and ties instead, without an error."""
    text = json.dumps(family_config(family), indent=2)
    full = python_table(family, text, None)
    for dropped in (full[len(full) // 2][0], full[-1][0]):
        available = {n for n, _ in full} - {dropped}
        want, missing = until_first_missing(python_table(family, text, available), available)
        got, error = native(family, text, available)
        assert got == want, f"{family} without {dropped}: requests differ"
        if family == "qwen2" and dropped == "lm_head.weight":
            assert missing is None and error is None and dropped not in {n for n, _ in got}
            continue
        assert missing == dropped
        assert error is not None and f"cannot find tensor {dropped}" in error, f"{family} without {dropped}: {error}"


def _family_fixtures() -> list[tuple[str, str]]:
    from fixtures.families import FAMILY_VARIANTS

    return [
        (f, v)
        for f, vs in FAMILY_VARIANTS.items()
        for v, spec in vs.items()
        if spec.label != "refused" and not spec.config_error
    ]


@pytest.mark.parametrize("family,variant", _family_fixtures(), ids=[f"{f}-{v}" for f, v in _family_fixtures()])
def test_family_fixture_checkpoint(family: str, variant: str) -> None:
    """The checkpoints transformers 5 writes (tied and untied variants included): candle requests
    the table's names from the real header, and stops at the same missing one (a tied mistral's
    `lm_head.weight`)."""
    from fixtures.families import family_fixture

    d: Path = family_fixture(family, variant)
    text = (d / "config.json").read_text()
    available = set(read_safetensors_header(d / "model.safetensors").tensors)
    want, missing = until_first_missing(python_table(family, text, available), available)
    got, error = native(family, text, available)
    assert got == want, f"{family}/{variant}: requests differ"
    if missing is None:
        assert error is None, f"{family}/{variant}: {error}"
    else:
        assert error is not None and f"cannot find tensor {missing}" in error, f"{family}/{variant}: {error}"
        unexpected = {n for n, _ in want} - available
        assert unexpected == {missing}


RECORDED = Path(__file__).resolve().parents[1] / "unit" / "family_tensor_tables.json"


def test_the_unit_suites_recording_is_candles_requests() -> None:
    """tests/unit/family_tensor_tables.json, which test_family_weights.py holds the Python tables
    to without the wheel, is what candle requests today; PORTKIT_RECORD_TABLES=1 rewrites it."""
    import os

    live = {}
    for family, label, overrides in CONFIG_VARIANTS:
        got, error = native(family, json.dumps(family_config(family, **overrides), indent=2), None)
        assert error is None, (family, label, error)
        live[f"{family}/{label}"] = {"overrides": overrides, "requests": [[n, s] for n, s in got]}
    if os.environ.get("PORTKIT_RECORD_TABLES") == "1":
        rows = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in live.items()]
        RECORDED.write_text("{\n" + ",\n".join(rows) + "\n}\n")
    assert json.loads(RECORDED.read_text()) == live
