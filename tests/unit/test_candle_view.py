"""`candle_view` details the oracle test does not reach (mutmut survivors in semantics/candle.py)."""

from __future__ import annotations

import json

import pytest

from fixtures import skeleton as sk
from portkit.semantics import candle_view


def test_parsed_json_and_text_give_the_same_view() -> None:
    cfg = sk.config("tf4")
    from_text = candle_view(json.dumps(cfg))
    assert from_text.ok and candle_view(cfg) == from_text


def test_rope_theta_source() -> None:
    cfg = sk.config("tf4")
    assert candle_view(json.dumps(cfg)).rope_theta_source == "top-level"
    no_theta = {k: v for k, v in cfg.items() if k != "rope_theta"}
    v = candle_view(json.dumps(no_theta))
    assert v.rope_theta_source == "default" and v.rope_theta == 10000.0


def test_a_positional_struct_has_every_field() -> None:
    """serde takes a JSON array for a struct, field by field in declaration order."""
    fields = [64, 128, 256, 2, 4, 2, 1e-05, 500000.0, 1, 2, None, 128, True]
    v = candle_view(json.dumps(fields))
    assert v.ok and v.rope_theta == 500000.0 and v.rope_theta_source == "top-level" and v.tie_word_embeddings is True


def test_native_dict_of_a_refused_config_says_why() -> None:
    v = candle_view("{}")
    assert not v.ok
    with pytest.raises(ValueError, match=r"^candle refuses this config: missing field `hidden_size`"):
        v.native_dict()
