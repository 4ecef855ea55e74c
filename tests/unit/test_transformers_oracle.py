"""llama's transformers view (`family_transformers_view("llama", ...)`) against the installed
transformers' own `LlamaConfig` (5.24.0): its values and its refusals.

portkit never imports transformers; this test does, to keep the pure-Python model of it
honest. It needs only the config classes (a few seconds), never a model.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import pytest

from portkit.semantics import family_transformers_view
from tests.unit.config_corpus import CORPUS

transformers = pytest.importorskip("transformers")  # the `verify` extra; CI installs it

# transformers' config loads these; it fails later, building the model (rope init).
MODEL_INIT_REFUSALS = (
    "`rope_theta` must be a number",
    "has no rope init function",
    "values transformers cannot compute",
)


def _load(text: str) -> Any:
    try:
        return json.loads(text)  # what transformers does (NaN accepted)
    except json.JSONDecodeError:
        return None


def _tf(config: dict[str, Any]) -> Any:
    from transformers import LlamaConfig

    logging.getLogger("transformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaConfig.from_dict(dict(config))


CASES = {k: v for k, v in CORPUS.items() if isinstance(_load(v), dict)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transformers_view_matches_transformers(name: str) -> None:
    cfg = _load(CASES[name])
    view = family_transformers_view("llama", cfg)
    try:
        tf = _tf(cfg)
    except Exception as e:  # noqa: BLE001 - any refusal counts
        assert view.refused is not None, f"transformers refuses ({type(e).__name__}: {e}); portkit's view accepts"
        return
    if view.refused is not None:
        assert any(r in view.refused for r in MODEL_INIT_REFUSALS), (
            f"portkit refuses ({view.refused}); transformers loads"
        )
        return
    rp = tf.rope_parameters
    assert view.rope_type == rp["rope_type"]
    assert view.get("rope_theta") == pytest.approx(float(rp["rope_theta"]))
    assert view.rope_parameters == dict(rp)
    for key in (
        "head_dim",
        "num_key_value_heads",
        "hidden_act",
        "tie_word_embeddings",
        "attention_bias",
        "mlp_bias",
        "max_position_embeddings",
        "eos_token_id",
        "bos_token_id",
        "hidden_size",
        "num_hidden_layers",
    ):
        assert view.get(key) == getattr(tf, key), key
    eps = view.get("rms_norm_eps")
    assert eps == tf.rms_norm_eps or eps != eps
    from transformers.cache_utils import get_layer_types_and_kwargs

    layer_types, _ = get_layer_types_and_kwargs(tf)
    assert view.sliding_window_in_cache == ("sliding_attention" in layer_types)
