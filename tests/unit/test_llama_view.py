"""llama's family view details the oracle test does not reach (what `portkit.families.llama`
makes of odd but valid JSON, the way the other families' views are tested)."""

from __future__ import annotations

import json

from fixtures import skeleton as sk
from portkit.families import BY_NAME

llama_view = BY_NAME["llama"].view


def test_parsed_json_and_text_give_the_same_view() -> None:
    cfg = sk.config("tf4")
    from_text = llama_view(json.dumps(cfg))
    assert from_text.ok and llama_view(cfg).values == from_text.values


def test_a_top_level_rope_theta_is_written_else_candle_defaults_it() -> None:
    cfg = sk.config("tf4")
    assert "rope_theta" in llama_view(json.dumps(cfg)).written
    no_theta = {k: v for k, v in cfg.items() if k != "rope_theta"}
    v = llama_view(json.dumps(no_theta))
    assert "rope_theta" not in v.written and v.get("rope_theta") == 10000.0


def test_a_positional_struct_has_every_field() -> None:
    """serde takes a JSON array for a struct, field by field in declaration order."""
    fields = [64, 128, 256, 2, 4, 2, 1e-05, 500000.0, 1, 2, None, 128, True]
    v = llama_view(json.dumps(fields))
    assert v.ok and v.get("rope_theta") == 500000.0 and v.get("tie_word_embeddings") is True


def test_a_refused_config_says_why() -> None:
    v = llama_view("{}")
    assert not v.ok and v.refused == "missing field `hidden_size`" and v.missing_field() == "hidden_size"
