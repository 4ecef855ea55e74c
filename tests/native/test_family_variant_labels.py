"""Each family fixture's `label` is what candle 0.11.0 really does with it (fixtures/families.py).

Checked against the native `FamilyRunner` (candle's own model per family): "refused" is a serde
`ConfigError`, "load-error" an `Err` while building the model, "panic" a caught panic at load,
"forward-error" an `Err` at the first forward; "same" must then agree with transformers on the
fixture's prompt and "silent" must not.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import FAMILY_VARIANTS, family_fixture, reference_last_logits

ALL = [(f, v) for f, variants in FAMILY_VARIANTS.items() for v in variants]
SAME_REL = 2e-5  # candle vs transformers in f32 on CPU stays below 3e-6 (measured on every family fixture)
SILENT_REL = 1e-4  # the smallest measured silent gap: gemma's erf GELU, 2.7e-4


@pytest.mark.parametrize(("family", "variant"), ALL)
def test_family_variant_label_matches_candle(family: str, variant: str) -> None:
    v = FAMILY_VARIANTS[family][variant]
    d = family_fixture(family, variant)
    config = (d / "config.json").read_text()
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    where = f"{family}/{variant} ({v.label})"
    try:
        runner = pn.FamilyRunner(family, [str(d / "model.safetensors")], config)
    except pn.ConfigError as e:
        assert v.label == "refused", f"{where}: candle's serde refused config.json: {e}"
        assert v.candle_message in str(e), f"{where}: {e}"
        return
    except pn.CandleError as e:
        assert v.label == "load-error", f"{where}: candle failed at load with an Err: {e}"
        assert v.candle_message in str(e), f"{where}: {e}"
        return
    except pn.CandlePanic as e:
        assert v.label == "panic", f"{where}: candle panicked at load: {e}"
        return
    try:
        got = np.asarray(runner.last_logits(ids), dtype=np.float32)
    except pn.CandleError as e:
        assert v.label == "forward-error", f"{where}: candle failed at the first forward: {e}"
        assert v.candle_message in str(e), f"{where}: {e}"
        return
    want = reference_last_logits(d, ids).numpy()
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert v.label in ("same", "silent"), f"{where}: candle loaded and ran it (rel {rel:.3g})"
    if v.label == "same":
        assert rel <= SAME_REL, f"{where}: candle vs transformers rel {rel:.3g} > {SAME_REL}"
    else:
        assert rel > SILENT_REL, f"{where}: candle agrees with transformers (rel {rel:.3g}), not silent"
