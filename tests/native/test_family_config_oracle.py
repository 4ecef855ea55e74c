"""Each family's Python serde mirror (`portkit.families.<name>`) against candle's own parse
(`portkit_native.candle_config(text, family=name)`).

Candle is the oracle: where they disagree, the mirror is wrong. For every family, a varied corpus
(the legacy and transformers-5 configs, each required field missing, `null`, a float, a string, a
negative number or a bool where candle wants a number, activation spellings, EOS lists, rope
scaling shapes, duplicate keys) must give the same effective values field by field, and candle
must refuse exactly what the mirror refuses, with serde's message (its ` at line L column C`
stripped).

No importorskip, as in test_candle_view_oracle.py: a missing native module must fail here.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from typing import Any

import pytest

import portkit_native
from portkit.families import BY_NAME
from portkit.semantics.serde import MISSING
from tests.unit.family_configs import LEGACY, T5

_POS = re.compile(r" at line \d+ column \d+$")
FAMILIES = sorted(n for n in LEGACY if n != "llama")


def _j(obj: Any) -> str:
    return json.dumps(obj, indent=2)


def _fields(family: str) -> list[Any]:
    return list(importlib.import_module(f"portkit.families.{family}").FIELDS)


def _base(family: str) -> dict[str, Any]:
    base = dict(LEGACY[family])
    if family == "mixtral":  # the hub config's null window is its own corpus entry
        base.update(sliding_window=128, use_flash_attn=False)
    return base


def _corpus(family: str) -> dict[str, str]:
    base = _base(family)
    out = {"legacy": _j(LEGACY[family]), "t5": _j(T5[family]), "base": _j(base), "compact": json.dumps(base, separators=(",", ":"))}
    for f in _fields(family):
        k = f.name
        out[f"drop-{k}"] = _j({x: v for x, v in base.items() if x != k})
        out[f"null-{k}"] = _j({**base, k: None})
        out[f"string-{k}"] = _j({**base, k: "12"})
        out[f"bool-{k}"] = _j({**base, k: True})
        v = base.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            out[f"float-{k}"] = _j({**base, k: v + 0.5})
            out[f"integral-float-{k}"] = _j({**base, k: float(v)})
            out[f"negative-{k}"] = _j({**base, k: -v - 1})
        if isinstance(v, float):
            out[f"int-{k}"] = _j({**base, k: int(v)})
            out[f"huge-{k}"] = _j({**base, k: 1e39})
    # the first required field missing, then two: serde names the first in declaration order
    required = [f.name for f in _fields(family) if f.default is MISSING]
    if len(required) >= 2:
        out["drop-two-required"] = _j({x: v for x, v in base.items() if x not in required[-2:]})
    text = _j(base)
    first = next(iter(base))
    out["duplicate-first-key"] = text.replace(f'"{first}":', f'"{first}": {json.dumps(base[first])},\n  "{first}":', 1)
    out["not-an-object"] = "[1, 2]"
    out["trailing-garbage"] = text + "x"
    for act_key in ("hidden_act", "hidden_activation"):
        if any(f.name == act_key for f in _fields(family)):
            for name in ("gelu", "gelu_new", "gelu_pytorch_tanh", "GELU", "swiglu", "elu", "relu2", "quick_gelu"):
                out[f"{act_key}-{name}"] = _j({**base, act_key: name})
            out[f"{act_key}-newtype-elu"] = _j({**base, act_key: {"elu": 1.0}})
            out[f"{act_key}-newtype-silu"] = _j({**base, act_key: {"silu": 1.0}})
    for k in ("eos_token_id", "bos_token_id"):
        out[f"{k}-list"] = _j({**base, k: [1, 2]})
        out[f"{k}-negative"] = _j({**base, k: -1})
    out["rope-scaling-linear"] = _j({**base, "rope_scaling": {"type": "linear", "factor": 2.0}})
    out["rope-scaling-longrope"] = _j({**base, "rope_scaling": {"short_factor": [1.0] * 8, "long_factor": [2.0] * 8, "type": "longrope"}})
    out["rope-scaling-granite"] = _j({**base, "rope_scaling": {"factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                "original_max_position_embeddings": 64, "rope_type": "granite"}})
    out["rope-scaling-null"] = _j({**base, "rope_scaling": None})
    out["rope-parameters-only"] = _j({**{x: v for x, v in base.items() if x != "rope_theta"}, "rope_parameters": {"rope_theta": 2e6, "rope_type": "default"}})
    out["extra-unknown-keys"] = _j({**base, "layer_types": ["full_attention"], "num_local_experts": 3, "use_bidirectional_attention": False})
    return out


CASES = [(fam, name, text) for fam in FAMILIES for name, text in _corpus(fam).items()]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and not math.isfinite(a) and b is None:
        return True  # the binding returns JSON, where serde_json writes a non-finite float as null
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_every_family_has_a_native_binding() -> None:
    assert portkit_native.build_info()["candle_version"] == "0.11.0"
    for fam in FAMILIES:
        assert portkit_native.candle_config(_j(_base(fam)), family=fam)


@pytest.mark.parametrize("family,name,text", CASES, ids=[f"{f}-{n}" for f, n, _ in CASES])
def test_family_mirror_matches_candle(family: str, name: str, text: str) -> None:
    view = BY_NAME[family].view(text)
    try:
        theirs = portkit_native.candle_config(text, family=family)
    except portkit_native.ConfigError as e:
        msg = _POS.sub("", str(e))
        assert view.refused is not None, f"candle refuses ({msg}); portkit's {family} mirror accepts: {view.values}"
        assert view.refused == msg, f"refusal: portkit {view.refused!r} != candle {msg!r}"
        return
    assert view.refused is None, f"portkit's {family} mirror refuses ({view.refused}); candle accepts: {theirs}"
    assert set(view.values) == set(theirs), (sorted(view.values), sorted(theirs))
    diffs = [f"{k}: portkit {view.values[k]!r} != candle {theirs[k]!r}" for k in view.values if not _same(view.values[k], theirs[k])]
    assert not diffs, "; ".join(diffs)


def test_corpus_covers_both_outcomes() -> None:
    for fam in FAMILIES:
        views = [BY_NAME[fam].view(t) for t in _corpus(fam).values()]
        assert sum(v.ok for v in views) >= 5 and sum(not v.ok for v in views) >= 10, fam
