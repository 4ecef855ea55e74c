"""`portkit.families.detect`: which candle module a config.json goes to (mutmut found no test
telling `model_type` from `architectures`)."""

from __future__ import annotations

import pytest

from portkit.families import BY_NAME, FAMILIES, by_name, detect


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_each_model_type_and_architecture_finds_its_family(family) -> None:
    for mt in family.model_types:
        assert detect({"model_type": mt}) is family
    for arch in family.architectures:
        assert detect({"architectures": [arch]}) is family


def test_model_type_wins_over_architectures() -> None:
    assert detect({"model_type": "qwen2", "architectures": ["LlamaForCausalLM"]}) is BY_NAME["qwen2"]
    # a model_type portkit has no family for is not rescued by the architectures
    assert detect({"model_type": "bert", "architectures": ["LlamaForCausalLM"]}) is None


def test_only_the_first_architecture_counts() -> None:
    assert detect({"architectures": ["MistralForCausalLM", "LlamaForCausalLM"]}) is BY_NAME["mistral"]
    assert detect({"architectures": ["Unknown", "LlamaForCausalLM"]}) is None


@pytest.mark.parametrize(
    "config",
    [
        None,
        [],
        "llama",
        {},
        {"model_type": 5},
        {"architectures": []},
        {"architectures": "LlamaForCausalLM"},
        {"architectures": [7]},
    ],
)
def test_what_names_no_family(config) -> None:
    assert detect(config) is None


def test_by_name() -> None:
    assert by_name("gemma3") is BY_NAME["gemma3"]
    with pytest.raises(ValueError, match=r"^unknown family `nope` \(known: llama, "):
        by_name("nope")
