"""Config texts for the view tests: healthy, every rule's trigger/clean config, and the weird
but valid JSON serde has opinions about. Used by the native oracle test (candle_view vs
candle's own parse), the schema tests and the transformers oracle test.
"""

from __future__ import annotations

import json
from typing import Any

from fixtures import skeleton as sk

BASE = sk.config("tf4")


def j(obj: Any) -> str:
    return json.dumps(obj, indent=2)


def with_(**kw: Any) -> str:
    return j(sk.config("tf4", **kw))


def without(*keys: str) -> str:
    return j({k: v for k, v in BASE.items() if k not in keys})


def raw_replace(old: str, new: str) -> str:
    t = j(BASE)
    assert old in t, old
    return t.replace(old, new, 1)


CORPUS: dict[str, str] = {
    "healthy-tf4": j(BASE),
    "healthy-tf5": j(sk.config("tf5")),
    "llama31-tf4": j(sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)),
    "llama31-tf5": j(sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)),
    "compact": json.dumps(BASE, separators=(",", ":")),
    # rope_theta
    "theta-int": with_(rope_theta=500000),
    "theta-absent": without("rope_theta"),
    "theta-null": with_(rope_theta=None),
    "theta-string": with_(rope_theta="1e4"),
    "theta-huge": with_(rope_theta=1e39),
    "theta-max-f32": with_(rope_theta=3.4028234663852886e38),
    "theta-tiny": with_(rope_theta=1e-50),
    "theta-negative": with_(rope_theta=-5.0),
    "theta-bool": with_(rope_theta=True),
    "theta-u64-max": with_(rope_theta=2**64 - 1),
    "theta-beyond-u64": with_(rope_theta=2**64 + 10),
    "theta-1e400": raw_replace('"rope_theta": 100000.0', '"rope_theta": 1e400'),
    "theta-both": with_(rope_parameters={"rope_theta": 1e6, "rope_type": "default"}),
    "theta-dup": raw_replace('"rope_theta": 100000.0', '"rope_theta": 100000.0,\n  "rope_theta": 500000.0'),
    "dup-unknown-key": raw_replace('"model_type": "llama"', '"model_type": "llama",\n  "model_type": "llama"'),
    # integer fields
    "hidden-float-integral": with_(hidden_size=64.0),
    "hidden-float": with_(hidden_size=64.5),
    "hidden-negative": with_(hidden_size=-64),
    "hidden-zero": with_(hidden_size=0),
    "hidden-string": with_(hidden_size="64"),
    "hidden-null": with_(hidden_size=None),
    "hidden-bool": with_(hidden_size=True),
    "hidden-list": with_(hidden_size=[64]),
    "hidden-map": with_(hidden_size={"v": 64}),
    "hidden-u64-max": with_(hidden_size=2**64 - 1),
    "hidden-beyond-u64": with_(hidden_size=2**64),
    "hidden-exp": raw_replace('"hidden_size": 64', '"hidden_size": 6.4e1'),
    "hidden-minus-zero": raw_replace('"hidden_size": 64', '"hidden_size": -0'),
    "heads-zero": with_(num_attention_heads=0),
    "heads-not-divisor": with_(hidden_size=65),
    "layers-zero": with_(num_hidden_layers=0),
    "max-pos-float": with_(max_position_embeddings=128.0),
    "max-pos-missing": without("max_position_embeddings"),
    "vocab-missing": without("vocab_size"),
    "all-required-missing": j({"model_type": "llama"}),
    "empty-object": "{}",
    "rms-missing": without("rms_norm_eps"),
    "rms-int": with_(rms_norm_eps=1),
    "rms-null": with_(rms_norm_eps=None),
    "rms-string": with_(rms_norm_eps="1e-5"),
    # Option fields
    "kv-null": with_(num_key_value_heads=None),
    "kv-absent": without("num_key_value_heads"),
    "kv-float": with_(num_key_value_heads=2.0),
    "kv-negative": with_(num_key_value_heads=-2),
    "bos-null": with_(bos_token_id=None),
    "bos-u32-max": with_(bos_token_id=2**32 - 1),
    "bos-beyond-u32": with_(bos_token_id=2**32),
    "bos-negative": with_(bos_token_id=-1),
    "bos-float": with_(bos_token_id=1.0),
    "tie-null": with_(tie_word_embeddings=None),
    "tie-true": with_(tie_word_embeddings=True),
    "tie-int": with_(tie_word_embeddings=1),
    "tie-string": with_(tie_word_embeddings="true"),
    # eos
    "eos-list": with_(eos_token_id=[128001, 128008, 128009]),
    "eos-empty-list": with_(eos_token_id=[]),
    "eos-null": with_(eos_token_id=None),
    "eos-negative": with_(eos_token_id=-1),
    "eos-list-negative": with_(eos_token_id=[1, -2]),
    "eos-list-float": with_(eos_token_id=[1, 2.0]),
    "eos-float": with_(eos_token_id=2.0),
    "eos-string": with_(eos_token_id="</s>"),
    "eos-beyond-u32": with_(eos_token_id=2**32),
    "eos-nested": with_(eos_token_id=[[1]]),
    "eos-1e400": raw_replace('"eos_token_id": 2', '"eos_token_id": [1e400]'),
    # rope_scaling shapes
    "scaling-null": with_(rope_scaling=None),
    "scaling-empty": with_(rope_scaling={}),
    "scaling-llama3": with_(rope_scaling=sk.LLAMA3_SCALING),
    "scaling-default-type": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": "default"}),
    "scaling-legacy-linear": with_(rope_scaling={"type": "linear", "factor": 2.0}),
    "scaling-linear-rope-type": with_(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "scaling-dynamic": with_(rope_scaling={"type": "dynamic", "factor": 2.0}),
    "scaling-yarn": with_(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    "scaling-llama3-legacy-type": with_(
        rope_scaling={k: v for k, v in {**sk.LLAMA3_SCALING, "type": "llama3"}.items() if k != "rope_type"}
    ),
    "scaling-llama3-no-orig": with_(
        rope_scaling={k: v for k, v in sk.LLAMA3_SCALING.items() if k != "original_max_position_embeddings"}
    ),
    "scaling-llama3-int-factor": with_(rope_scaling={**sk.LLAMA3_SCALING, "factor": 8}),
    "scaling-llama3-orig-float": with_(rope_scaling={**sk.LLAMA3_SCALING, "original_max_position_embeddings": 8192.0}),
    "scaling-llama3-extra-keys": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_theta": 5e5, "type": "llama3"}),
    "scaling-unknown-variant": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": "LLAMA3"}),
    "scaling-type-null": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": None}),
    "scaling-type-int": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": 3}),
    "scaling-type-map-unit": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": {"llama3": None}}),
    "scaling-type-map-value": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": {"llama3": 1}}),
    "scaling-type-map-empty": with_(rope_scaling={**sk.LLAMA3_SCALING, "rope_type": {}}),
    "scaling-seq": with_(rope_scaling=[8.0, 1.0, 4.0, 8192, "llama3"]),
    "scaling-seq-short": with_(rope_scaling=[8.0, 1.0, 4.0]),
    "scaling-seq-long": with_(rope_scaling=[8.0, 1.0, 4.0, 8192, "llama3", 1]),
    "scaling-string": with_(rope_scaling="llama3"),
    "scaling-dup-factor": raw_replace(
        '"rope_scaling": null',
        '"rope_scaling": {"factor": 8.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, '
        '"original_max_position_embeddings": 8192, "rope_type": "llama3"}',
    ),
    "scaling-in-rope-parameters": j(sk.config("tf5", scaling={"rope_type": "linear", "factor": 2.0})),
    # other rule triggers (candle accepts them: unknown keys)
    "head-dim": with_(head_dim=32),
    "attention-bias": with_(attention_bias=True),
    "mlp-bias": with_(mlp_bias=True),
    "gelu": with_(hidden_act="gelu"),
    "partial-rotary": with_(partial_rotary_factor=0.5),
    "sliding-window": with_(model_type="mistral", sliding_window=4096),
    "sliding-window-llama": with_(sliding_window=4),
    "sliding-window-null": with_(sliding_window=None),
    # top-level shapes
    "top-level-array": json.dumps([64, 128, 256, 2, 4, 2, 1e-5, 10000.0, 1, 2, None, 128, False]),
    "top-level-array-short": json.dumps([64, 128]),
    "top-level-string": '"llama"',
    "top-level-null": "null",
    "nan-literal": raw_replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'),
    "infinity-literal": raw_replace('"rope_theta": 100000.0', '"rope_theta": Infinity'),
    "unicode-key": raw_replace('"model_type": "llama"', '"model_type": "llama",\n  "n\\u00e4me": "\\ud83e\\udd99"'),
    "escaped-key": raw_replace('"hidden_size": 64', '"hidden\\u005fsize": 64'),
    # more serde_json edges (found with the native oracle)
    "theta-minus-zero-float": with_(rope_theta=-0.0),
    "hidden-exponent-int": raw_replace('"hidden_size": 64', '"hidden_size": 1e2'),
    "theta-underflow": raw_replace('"rope_theta": 100000.0', '"rope_theta": 1e-400'),
    "scaling-factor-string": with_(rope_scaling={**sk.LLAMA3_SCALING, "factor": "8"}),
    "scaling-factor-huge": with_(rope_scaling={**sk.LLAMA3_SCALING, "factor": 1e39}),
    "eos-u32-max-list": with_(eos_token_id=[0, 2**32 - 1]),
    "bom": "\ufeff" + json.dumps(BASE),
    "trailing-comma": json.dumps(BASE)[:-1] + ",}",
    "trailing-garbage": json.dumps(BASE) + " x",
    "trailing-whitespace": json.dumps(BASE) + " \n\t ",
    "lone-surrogate-unknown-key": raw_replace('"model_type": "llama"', '"model_type": "llama",\n  "note": "\\ud800"'),
    "control-char": raw_replace('"model_type": "llama"', '"model_type": "lla\u0001ma"'),
    "unknown-key-1e400": raw_replace('"model_type": "llama"', '"model_type": "llama",\n  "zzz": 1e400'),
    "missing-comma": raw_replace('"hidden_size": 64,', '"hidden_size": 64'),
    "missing-colon": raw_replace('"hidden_size": 64', '"hidden_size" 64'),
    "unterminated-string": '{"model_type": "lla',
    "eof-in-object": '{"hidden_size": 64',
    "eof-after-comma": '{"hidden_size": 64,',
    "eof-in-array": '{"eos_token_id": [1, 2',
    "bad-escape": raw_replace('"model_type": "llama"', '"model_type": "ll\\qama"'),
    "single-quotes": "{'hidden_size': 64}",
    "empty-text": "",
    "unknown-key-huge-int": raw_replace('"model_type": "llama"', '"model_type": "llama",\n  "zzz": ' + "9" * 400),
}
