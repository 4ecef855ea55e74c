"""portkit's model of candle's encoder `Config`s (`portkit.encoders.REQUIRED`, `NOMIC_DEFAULTS`,
PK612, PK613) against candle's own serde through the native wheel (`portkit_native.encoder_config`):
a config with every required key parses; each required key removed is refused with serde's
``missing field `X` ``, and lint's PK612 names that key; a key not in the list removed still
parses; nomic_bert defaults what PK613 says it defaults."""

from __future__ import annotations

import json

import pytest

import portkit_native as pn
from portkit.encoders import EMBEDDERS, ENCODERS, NOMIC_DEFAULTS, NOMIC_KEYS, REQUIRED
from portkit.encoders import detect as detect_encoder

#: a valid value for each key any of the six requires
VALUES = {
    "hidden_act": "gelu",
    "activation": "gelu",
    "position_embedding_type": "absolute",
    "layer_norm_eps": 1e-12,
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "global_rope_theta": 160000.0,
    "local_rope_theta": 10000.0,
}
#: keys each module reads but does not require (serde default or Option): removing them changes nothing
OPTIONAL = {
    "bert": ("position_embedding_type", "use_cache", "classifier_dropout", "model_type"),
    "distilbert": ("use_cache", "model_type"),
    "xlm_roberta": (),
    "modernbert": (),
    "jina_bert": (),
    "nomic_bert": ("vocab_size", "n_embd"),
}
OPTIONAL_VALUES = {
    "position_embedding_type": "absolute",
    "use_cache": True,
    "classifier_dropout": None,
    "model_type": "bert",
    "vocab_size": 2,
    "n_embd": 2,
}
MODEL_TYPE = {
    "bert": "bert",
    "distilbert": "distilbert",
    "xlm_roberta": "xlm-roberta",
    "modernbert": "modernbert",
    "nomic_bert": "nomic_bert",
}


def full(name: str) -> dict:
    cfg = {k: VALUES.get(k, 2) for k in REQUIRED[name]}
    cfg.update({k: v for k, v in {"use_cache": True, "classifier_dropout": None}.items() if k in OPTIONAL[name]})
    return cfg


def refusal(cfg: dict, name: str) -> str | None:
    try:
        pn.encoder_config(json.dumps(cfg), name)
    except pn.ConfigError as e:
        return str(e)
    return None


@pytest.mark.parametrize("name", [e.name for e in ENCODERS])
def test_every_required_key_present_parses(name):
    assert pn.encoder_families() == [e.name for e in EMBEDDERS]  # the encoders, then the decoders used as encoders
    assert refusal(full(name), name) is None


CASES = [(e.name, k) for e in ENCODERS for k in REQUIRED[e.name]]


@pytest.mark.parametrize(("name", "key"), CASES)
def test_each_required_key_removed_is_refused_as_predicted(name, key):
    cfg = full(name)
    del cfg[key]
    said = refusal(cfg, name)
    assert said is not None and f"missing field `{key}`" in said, said


@pytest.mark.parametrize(("name", "key"), [(n, k) for n, ks in OPTIONAL.items() for k in ks])
def test_a_key_outside_the_list_removed_still_parses(name, key):
    cfg = {**full(name), key: OPTIONAL_VALUES[key]}
    assert refusal(cfg, name) is None
    del cfg[key]
    assert refusal(cfg, name) is None


@pytest.mark.parametrize(("name", "key"), [c for c in CASES if c[0] in MODEL_TYPE])
def test_lint_pk612_names_the_key_serde_names(tmp_path, name, key):
    from portkit.lint import lint_dir

    cfg = {**full(name), "model_type": MODEL_TYPE[name]}
    del cfg[key]
    assert detect_encoder(cfg).name == name
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (f,) = [f for f in lint_dir(tmp_path).findings if f.code == "PK612"]
    said = refusal(cfg, name)
    assert f.probe is not None and f.probe.expect is not None and f.probe.expect in (said or ""), (f.probe.expect, said)


def test_nomic_bert_defaults_what_pk613_says():
    got = pn.encoder_config(json.dumps({"hidden_size": 32, "num_attention_heads": 2}), "nomic_bert")
    for candle_key, value in NOMIC_DEFAULTS.items():
        assert got[candle_key] == value, candle_key
    assert set(NOMIC_KEYS.values()) <= set(got)
    assert pn.encoder_config(json.dumps({"n_embd": 32}), "nomic_bert")["n_embd"] == 32  # read when given


#: values to try in each enum a module's serde reads (PK615): transformers' activation names, candle's
#: own spellings, and values neither knows
ENUM_TRIALS = sorted(
    {
        *__import__("portkit.encoders", fromlist=["ACT2FN_NAMES"]).ACT2FN_NAMES,
        "geluapproximate",
        "newgelu",
        "gelupytorchtanh",
        "hardsigmoid",
        "swiglu",
        "elu",
        "leakyrelu",
        "GELU",
        "absolute",
        "alibi",
        "relative_key",
        "rotary",
        "",
    }
)


def _enum_keys(name: str) -> list[str]:
    from portkit.encoders import ACTIVATIONS, ENUM_VALUES

    keys = [k for (e, k) in ENUM_VALUES if e == name]
    return keys + ([ACTIVATIONS[name].key] if ACTIVATIONS[name].key else [])


@pytest.mark.parametrize(("name", "key"), [(e.name, k) for e in ENCODERS for k in _enum_keys(e.name)])
def test_pk615_predicts_every_enum_value_serde_refuses(name, key):
    """Every trial value (and a number, and null): PK615's prediction is serde's verdict, with its words."""
    from portkit.rules.embedding_config import refused_values, serde_refusal

    wrong = []
    for value in [*ENUM_TRIALS, 3, None]:
        cfg = {**full(name), key: value}
        said = refusal(cfg, name)
        predicted = refused_values(cfg, name)
        if (said is None) != (not predicted):
            wrong.append(f"{key}={value!r}: candle {said!r}, portkit {predicted}")
        elif said is not None and serde_refusal(value, predicted[0][2]) not in said:
            wrong.append(f"{key}={value!r}: candle {said!r}, portkit expects {serde_refusal(value, predicted[0][2])!r}")
    assert not wrong, "\n".join(wrong)


def test_pk615_names_the_value_serde_meets_first(tmp_path):
    from portkit.lint import lint_dir

    rest = {k: v for k, v in full("bert").items() if k != "hidden_act"}
    cfg = {
        "model_type": "bert",
        "position_embedding_type": "relative_key",
        **rest,
        "hidden_act": "gelu_new",
    }  # serde reads in file order
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (f,) = [f for f in lint_dir(tmp_path).findings if f.code == "PK615"]
    said = refusal(cfg, "bert")
    assert f.probe.expect == "unknown variant `relative_key`" and f.probe.expect in said, said
