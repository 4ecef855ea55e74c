"""The wrong classes issue 17's differential found, each a named regression: the trigger lint must
report (with the severity that says whether the run reaches it) and the clean twin it must not.

verify's confirmation of each trigger is in tests/acceptance/test_verify_families.py (VARIANTS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from portkit.lint import lint_paths
from portkit.settings import Settings
from portkit.target import Target
from tests.unit.rule_cases import family, family_model


def findings(builder: Any, tmp_path: Path, **target: Any) -> list[Any]:
    d, _ = builder(tmp_path / "m")
    r = lint_paths([d], Settings(target=Target(**target), respect_pyproject=False))
    assert not r.errors, r.errors
    return r.findings


def of(code: str, found: list[Any]) -> list[Any]:
    return [f for f in found if f.code == code]


DYNAMIC = {
    "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}
}  # (llama: candle refuses it as `rope_scaling`, PK103)


@pytest.mark.parametrize("name", ["mistral", "gemma2", "starcoder2", "qwen3_moe", "qwen2", "llama"])
def test_dynamic_rope_scaling_below_max_positions_is_a_warning(name: str, tmp_path: Path) -> None:
    """transformers' dynamic NTK acts only past `max_position_embeddings` (128 here): a run of 24
    tokens agrees with candle, a run of 200 does not."""
    below = of("PK102", findings(family(name, **DYNAMIC), tmp_path / "a", max_tokens=24))
    assert [f.severity for f in below] == ["warning"], below
    assert "the effect appears only past 128 tokens; --max-tokens 24 stays within" in below[0].message
    above = of("PK102", findings(family(name, **DYNAMIC), tmp_path / "b", max_tokens=200))
    assert [f.severity for f in above] == ["error"], above
    assert [f.code for f in findings(family(name), tmp_path / "c", max_tokens=200) if f.code == "PK102"] == []


@pytest.mark.parametrize(
    "edits",
    [
        {"sliding_window": 18},  # use_sliding_window false: transformers applies no window
        {
            "sliding_window": 18,
            "use_sliding_window": True,
            "max_window_layers": 2,
        },  # the window starts past the last layer
    ],
    ids=["use-sliding-window-false", "max-window-layers-covers-no-layer"],
)
def test_qwen2_window_only_candle_applies_matters_only_in_a_long_prompt(edits: dict[str, Any], tmp_path: Path) -> None:
    """candle's qwen2 masks every layer to the window, but only in a multi-token forward: with
    16-token prompts and 8 generated tokens both engines attend to every key."""
    short = of("PK115", findings(family("qwen2", **edits), tmp_path / "a", max_tokens=24, max_prompt_tokens=16))
    assert [f.severity for f in short] == ["warning"], short
    assert "in prompts of at most 16" in short[0].message
    long = of("PK115", findings(family("qwen2", **edits), tmp_path / "b", max_tokens=24, max_prompt_tokens=20))
    assert [f.severity for f in long] == ["error"], long
    # without a prompt bound, the whole run may be one prompt (what lint always assumed)
    whole = of("PK115", findings(family("qwen2", **edits), tmp_path / "c", max_tokens=24))
    assert [f.severity for f in whole] == ["error"], whole


def test_a_window_transformers_also_applies_in_decode_stays_an_error(tmp_path: Path) -> None:
    """mistral's transformers keeps the window in decode too, candle's decode keeps every key:
    a prompt bound does not help."""
    found = of("PK115", findings(family("mistral", sliding_window=18), tmp_path, max_tokens=24, max_prompt_tokens=16))
    assert [f.severity for f in found] == ["error"], found


def test_gemma3_bidirectional_attention(tmp_path: Path) -> None:
    found = of(
        "PK122", findings(family("gemma3", num_key_value_heads=1, use_bidirectional_attention=True), tmp_path / "a")
    )
    assert [f.severity for f in found] == ["error"]
    assert "`use_bidirectional_attention`=true and a `sliding_window` of 17 around each position" in found[0].message
    assert (
        of(
            "PK122",
            findings(family("gemma3", num_key_value_heads=1, use_bidirectional_attention=False), tmp_path / "b"),
        )
        == []
    )


@pytest.mark.parametrize("key,value", [("final_logit_softcapping", 30.0), ("attn_logit_softcapping", 50.0)])
def test_gemma2_softcapping_absent(key: str, value: float, tmp_path: Path) -> None:
    found = of("PK123", findings(family("gemma2", drop=(key,)), tmp_path / "a"))
    assert [f.severity for f in found] == ["error"]
    assert found[0].fix is not None and found[0].fix.edits == {key: value}
    # written as null, neither caps: the same model
    assert of("PK123", findings(family("gemma2", **{key: None}), tmp_path / "b")) == []


def test_gemma_without_any_activation_key(tmp_path: Path) -> None:
    found = of("PK117", findings(family("gemma", drop=("hidden_act",)), tmp_path / "a"))
    assert len(found) == 1 and found[0].severity == "error"
    assert "none of hidden_act and hidden_activation are set" in found[0].message
    assert found[0].fix is not None and found[0].fix.edits == {"hidden_act": "gelu_pytorch_tanh"}
    assert found[0].help == "Write the `hidden_act` transformers uses"
    assert (
        of(
            "PK117",
            findings(family("gemma", drop=("hidden_act",), hidden_activation="gelu_pytorch_tanh"), tmp_path / "b"),
        )
        == []
    )


def test_pk120_on_a_tied_checkpoint_that_has_an_lm_head(tmp_path: Path) -> None:
    """The checkpoint has `lm_head.weight`: it is not missing, transformers ties over it."""
    found = of("PK120", findings(family_model("mistral", tie_word_embeddings=True), tmp_path / "a"))
    assert len(found) == 1
    assert "saves no" not in found[0].message and "never reads the checkpoint's `lm_head.weight`" in found[0].message
    assert found[0].probe.kind == "numeric"
    missing = of(
        "PK120", findings(family_model("mistral", tie_word_embeddings=True, drop=("lm_head.weight",)), tmp_path / "b")
    )
    assert "saves no `lm_head.weight`" in missing[0].message


def test_pk205_help_on_a_module_that_reads_no_flag(tmp_path: Path) -> None:
    found = of("PK205", findings(family_model("mistral", tie_word_embeddings=True, drop=("lm_head.weight",)), tmp_path))
    assert len(found) == 1
    assert "tie_word_embeddings: true" not in found[0].help
    assert "Save `lm_head.weight`" in found[0].help


def test_pk110_and_pk112_help_name_the_familys_struct(tmp_path: Path) -> None:
    refused = of("PK112", findings(family("qwen2", "t5"), tmp_path / "a"))
    assert refused and all("LlamaConfig" not in f.help for f in refused)
    assert "`qwen2::Config`" in refused[0].help
    missing = of("PK110", findings(family("qwen2", "t5"), tmp_path / "b"))
    assert missing and all("LlamaConfig" not in (f.help or "") for f in missing)


def test_gemma3_legacy_rope_scaling_spelled_with_type_keeps_the_default_rope(tmp_path: Path) -> None:
    """Found by the differential (gemma3 seed 19): transformers 5's gemma3 updates
    `{"rope_type": "default"}` with a legacy `rope_scaling`, so `{"type": "linear"}` scales nothing
    and candle, which reads no scaling, agrees; `{"rope_type": "linear"}` (gemma-3-4b's spelling) scales."""
    legacy = of(
        "PK102",
        findings(
            family("gemma3", num_key_value_heads=1, rope_scaling={"type": "linear", "factor": 4.0}), tmp_path / "a"
        ),
    )
    assert legacy == []
    real = of(
        "PK102",
        findings(
            family("gemma3", num_key_value_heads=1, rope_scaling={"rope_type": "linear", "factor": 4.0}), tmp_path / "b"
        ),
    )
    assert [f.severity for f in real] == ["error"]
