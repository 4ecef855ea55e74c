"""Each fixture variant's `candle` label is what candle 0.11.0 really does with it.

The labels drive which verdict verify must reach, so they are checked against the native
runner: "load-error" is an Err at load, "panic" a caught panic at load, "forward-error" an Err
at the first forward (in the dtype the checkpoint declares), anything else loads and runs.
"""

from __future__ import annotations

import json

import pytest

import portkit_native as pn
from fixtures.variants import VARIANTS


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_label_matches_candle(name: str, fixture_dir) -> None:
    label = VARIANTS[name].candle
    d = fixture_dir(name)
    config = (d / "config.json").read_text()
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    declared = json.loads(config).get("dtype") or json.loads(config).get("torch_dtype")
    dtype = "bf16" if declared == "bfloat16" else "f32"
    try:
        runner = pn.LlamaRunner([str(d / "model.safetensors")], config, dtype=dtype)
    except (pn.ConfigError, pn.CandleError) as e:
        assert label == "load-error", f"{name} ({label}): candle failed at load with an Err: {e}"
        return
    except pn.CandlePanic as e:
        assert label == "panic", f"{name} ({label}): candle panicked at load: {e}"
        return
    try:
        runner.last_logits(ids)
    except pn.CandleError as e:
        assert label == "forward-error", f"{name} ({label}): candle failed at the first forward: {e}"
        return
    assert label in ("same", "silent", "generation"), f"{name} ({label}): candle loaded and ran it"
