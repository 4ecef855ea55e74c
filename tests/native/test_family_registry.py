"""The family registry says what the native wheel really has: every family has a binding and a
runner, `capture` is true exactly where a per-layer copy exists, and every GGUF loader the
registry routes to is built in."""

from __future__ import annotations

import pytest

from portkit.families import BY_NAME, FAMILIES, GGUF_LOADERS, by_name, detect

pn = pytest.importorskip("portkit_native")


def test_every_family_has_a_native_binding() -> None:
    assert sorted(pn.families()) == sorted(BY_NAME)


def test_capture_flag_matches_the_native_copies() -> None:
    assert sorted(pn.capture_families()) == sorted(f.name for f in FAMILIES if f.capture)


def test_gguf_loaders_are_built_in() -> None:
    loaders = {f.gguf_loader for f in FAMILIES if f.gguf_loader} | set(GGUF_LOADERS.values())
    assert loaders <= set(pn.gguf_loaders())


@pytest.mark.parametrize(
    "config,family",
    [
        ({"model_type": "qwen2"}, "qwen2"),
        ({"model_type": "gemma3_text"}, "gemma3"),
        ({"model_type": "stablelm"}, "stable_lm"),
        ({"architectures": ["MistralForCausalLM"]}, "mistral"),
        ({"model_type": "qwen2", "architectures": ["MistralForCausalLM"]}, "qwen2"),  # model_type wins
    ],
)
def test_detect(config, family) -> None:
    assert detect(config).name == family


@pytest.mark.parametrize("config", [{"model_type": "falcon"}, {"model_type": 3}, {"architectures": ["X"]}, [], {}])
def test_detect_nothing(config) -> None:
    assert detect(config) is None


def test_by_name_refuses_an_unknown_family() -> None:
    with pytest.raises(ValueError, match="unknown family `olmo`"):
        by_name("olmo")
