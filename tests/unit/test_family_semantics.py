"""The transformers side of every family (`family_transformers_view`) against transformers 5.24
itself, and `portkit fix` on each family's transformers-5 save: transformers' effective config
is unchanged by the edit, and candle's mirror then accepts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from portkit import fix
from portkit.families import BY_NAME, detect
from portkit.findings import CandleEdit
from portkit.semantics.transformers import FAMILY_DEFAULTS, family_transformers_view
from tests.unit.family_configs import LEGACY, T5

transformers = pytest.importorskip("transformers")
FAMILIES = sorted(LEGACY)  # llama included: its transformers view is one of the family table's
# keys `fix` may add that transformers keeps as plain attributes and its modeling never reads
CANDLE_ONLY_KEYS = {"use_flash_attn", "max_window_layers", "hidden_activation"}


def _auto(cfg: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    c = dict(cfg)
    conf = AutoConfig.for_model(c.pop("model_type"), **c)
    if hasattr(type(conf), "allow_global_per_layer_attribute_access"):
        # gemma4's `head_dim` is per layer: the global value is the sliding layers' (the full ones: `per_layer_config`)
        conf.allow_global_per_layer_attribute_access = True
    return conf


@pytest.mark.parametrize("family", FAMILIES)
def test_defaults_are_transformers_class_defaults(family: str) -> None:
    c = _auto({"model_type": BY_NAME[family].model_types[0]})
    mine = family_transformers_view(family, {"model_type": BY_NAME[family].model_types[0]}).values
    for key in FAMILY_DEFAULTS[family]:
        assert getattr(c, key) == mine[key], (
            f"{family}.{key}: portkit {mine[key]!r} != transformers {getattr(c, key)!r}"
        )
    # the rope base when config.json names none: the class's `default_theta` (mixtral, gemma3, smollm3), else 1e4
    rp = c.rope_parameters
    assert mine["rope_theta"] == rp.get("full_attention", rp)["rope_theta"], (family, mine["rope_theta"])
    # the rotated share of the head, where the class rotates part of it by default (stable_lm, phi)
    default_prf = c.rope_parameters.get("partial_rotary_factor")
    if default_prf is not None and default_prf != 1.0:
        assert mine.get("partial_rotary_factor") == default_prf, (family, mine.get("partial_rotary_factor"))


def _transformers_values(family: str, cfg: dict[str, Any]) -> dict[str, Any]:
    c = _auto(cfg)
    rp = c.rope_parameters
    full = rp.get("full_attention", rp)
    out = {
        "rope_theta": full["rope_theta"],
        "rope_type": full["rope_type"],
        "tie_word_embeddings": c.tie_word_embeddings,
    }
    if family == "gemma3":
        out["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        out["sliding_layers"] = tuple(t == "sliding_attention" and c.sliding_window is not None for t in c.layer_types)
    if family in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma2") and getattr(c, "layer_types", None):
        out["sliding_layers"] = tuple(t == "sliding_attention" and c.sliding_window is not None for t in c.layer_types)
    if family in ("stable_lm", "phi", "glm4_new", "gemma4"):
        out["partial_rotary_factor"] = full["partial_rotary_factor"]
    if family == "gemma4":
        out["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        out["sliding_layers"] = tuple(t == "sliding_attention" for t in c.layer_types)
        out["layer_types"] = list(c.layer_types)
        full_layers = [i for i, t in enumerate(c.layer_types) if t == "full_attention"]
        out["full_head_dims"] = [c.per_layer_config[i].head_dim for i in full_layers]
        out["num_global_key_value_heads"] = c.per_layer_config[full_layers[0]].num_key_value_heads
        for key in ("hidden_size_per_layer_input", "num_kv_shared_layers", "attention_k_eq_v", "enable_moe_block"):
            out[key] = getattr(c, key)
    if family == "qwen3_moe":
        out["num_experts"] = c.num_experts
    if family in ("gemma2", "gemma3"):
        out["query_pre_attn_scalar"] = c.query_pre_attn_scalar
    if family in ("gemma2", "gemma3", "gemma4"):
        out["hidden_activation"] = c.hidden_activation
    else:
        out["hidden_act"] = c.hidden_act
    if family not in ("llama", "gemma", "olmo2", "granite", "stable_lm", "qwen3_moe", "phi", "glm4_new"):
        out["sliding_window"] = c.sliding_window
    return out


def _portkit_values(family: str, cfg: dict[str, Any], keys: Any) -> dict[str, Any]:
    v = family_transformers_view(family, cfg)
    extra = {"rope_type": v.rope_type, "sliding_layers": v.sliding_layers}
    return {k: extra[k] if k in extra else v.get(k) for k in keys}


VARIED = (
    [(f, "legacy", LEGACY[f]) for f in FAMILIES]
    + [(f, "t5", T5[f]) for f in FAMILIES]
    + [
        ("gemma", "gelu", {**LEGACY["gemma"], "hidden_act": "gelu"}),
        ("gemma3", "linear", {**LEGACY["gemma3"], "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}),
        # the differential's gemma3 class: a legacy `type` alone leaves transformers' default rope
        ("gemma3", "legacy-type-linear", {**LEGACY["gemma3"], "rope_scaling": {"factor": 4.0, "type": "linear"}}),
        (
            "qwen2",
            "window-on",
            {**LEGACY["qwen2"], "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
        ),
        ("qwen2", "window-off", {**LEGACY["qwen2"], "sliding_window": 4}),
        ("mistral", "window", {**LEGACY["mistral"], "sliding_window": 4}),
        ("mixtral", "no-theta", {k: v for k, v in LEGACY["mixtral"].items() if k != "rope_theta"}),
        ("gemma2", "window", {**LEGACY["gemma2"], "sliding_window": 8}),
        ("qwen3_moe", "both-expert-keys", {**LEGACY["qwen3_moe"], "num_local_experts": 4}),
        # gemma4: the full layers' base from rope_parameters (a top-level key is never read), features on,
        # and a hand-written config without per_layer_config (the class's 512)
        ("gemma4", "top-level-theta", {**T5["gemma4"], "rope_theta": 10.0}),
        ("gemma4", "k-eq-v", {**T5["gemma4"], "attention_k_eq_v": True, "num_kv_shared_layers": 2}),
        ("gemma4", "no-per-layer-config", {k: v for k, v in T5["gemma4"].items() if k != "per_layer_config"}),
        ("gemma4", "no-ple-key", {k: v for k, v in T5["gemma4"].items() if k != "hidden_size_per_layer_input"}),
        (
            "phi3",
            "longrope",
            {
                **LEGACY["phi3"],
                "original_max_position_embeddings": 32,
                "rope_scaling": {"short_factor": [1.0] * 8, "long_factor": [2.0] * 8, "type": "longrope"},
            },
        ),
    ]
)


@pytest.mark.parametrize("family,name,cfg", VARIED, ids=[f"{f}-{n}" for f, n, _ in VARIED])
def test_family_view_is_what_transformers_computes(family: str, name: str, cfg: dict[str, Any]) -> None:
    theirs = _transformers_values(family, cfg)
    mine = _portkit_values(family, cfg, theirs)
    assert mine == theirs


def test_family_view_tells_the_layouts_apart_only_where_transformers_does() -> None:
    # negative control: a different theta in rope_parameters is seen
    cfg = {**T5["qwen3"], "rope_parameters": {"rope_theta": 2e6, "rope_type": "default"}}
    assert (
        family_transformers_view("qwen3", cfg).get("rope_theta")
        == 2e6
        != family_transformers_view("qwen3", T5["qwen3"]).get("rope_theta")
    )


#: family -> the findings a transformers-5 save keeps after `portkit fix`: mixtral's null window
#: (transformers applies any window it is given), gemma3's multi-KV-head prefill (candle's
#: attention), and the sliding-window semantics warnings (no value makes them equal).
REMAINING_AFTER_FIX = {
    "gemma2": {"PK115"},
    "gemma3": {"PK115", "PK121"},
    "gemma4": {"PK115", "PK126"},  # and candle's norm gain and attention scale: no key changes them
    "mixtral": {"PK112"},
    "phi3": {"PK115"},
    "starcoder2": {"PK115"},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_fix_keeps_transformers_and_makes_candle_parse(family: str, tmp_path: Path) -> None:
    from transformers import AutoConfig

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(T5[family], indent=2) + "\n")
    before = AutoConfig.from_pretrained(d).to_dict()
    p = fix.plan(d)
    # what no config edit fixes remains, with its reason; the safe edits are written all the same
    assert {f.code for f in p.refused} == REMAINING_AFTER_FIX.get(family, set()), [f.message for f in p.refused]
    assert all(e.refused for e in p.remaining)
    assert p.changed, f"{family}: nothing to fix in a transformers-5 save?"
    fix.write(p)
    new = json.loads((d / "config.json").read_text())
    assert list(new)[: len(T5[family])] != [] and all(k in new for k in T5[family])  # nothing dropped
    assert [k for k in new if k in T5[family]] == list(T5[family])  # key order kept
    after = AutoConfig.from_pretrained(d).to_dict()
    added = set(after) - set(before)
    assert added <= CANDLE_ONLY_KEYS, added
    assert {k: v for k, v in after.items() if k in before} == before
    fam = detect(new)
    assert fam is not None and (fam.view((d / "config.json").read_text()).ok or family == "mixtral")


def test_fix_restates_the_rotated_share_the_class_defaults(tmp_path: Path) -> None:
    """GLM-4 without `partial_rotary_factor`: transformers rotates half the head (its `__post_init__` puts
    0.5 in its rope parameters), candle all of it; fix writes 0.5, which changes nothing for transformers."""
    from transformers import AutoConfig

    d = tmp_path / "m"
    d.mkdir()
    cfg = {k: v for k, v in LEGACY["glm4_new"].items() if k != "partial_rotary_factor"}
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    before = AutoConfig.from_pretrained(d).to_dict()
    p = fix.plan(d)
    assert [e.finding.code for e in p.edits if not e.refused] == ["PK108"] and p.changed
    fix.write(p)
    assert json.loads((d / "config.json").read_text())["partial_rotary_factor"] == 0.5
    assert AutoConfig.from_pretrained(d).to_dict() == before


def test_fix_refuses_what_no_edit_fixes(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**LEGACY["gemma2"], "query_pre_attn_scalar": 24}, indent=2))
    p = fix.plan(d)
    assert [f.code for f in p.refused] == ["PK115", "PK118"] and not p.changed
    pk118 = next(e for e in p.remaining if e.finding.code == "PK118")
    assert pk118.refused == pk118.finding.help and "query_pre_attn_scalar" in pk118.finding.message


def test_fix_writes_gemma_activation(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    shutil.rmtree(d)
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({**LEGACY["gemma"], "hidden_act": "gelu", "hidden_activation": "gelu_pytorch_tanh"}, indent=2)
    )
    p = fix.plan(d)
    assert p.changes == {"hidden_act": "gelu_pytorch_tanh", "hidden_activation": None}
    fix.write(p)
    assert BY_NAME["gemma"].view((d / "config.json").read_text()).values["hidden_act"] == "gelu_pytorch_tanh"


@pytest.mark.parametrize("family,name,cfg", VARIED, ids=[f"{f}-{n}" for f, n, _ in VARIED])
def test_transformers_validation_accepts_every_family(family: str, name: str, cfg: dict[str, Any]) -> None:
    """The family view's `refused` models transformers' strict typing (LlamaConfig's field types,
    for every family); lint stops (exit 2) where it refuses, so it must accept what transformers
    accepts for every family (gemma3's nested rope_parameters, mixtral's `head_dim: null`, phi3's
    LongRoPE lists, EOS lists)."""
    _auto(cfg)  # transformers itself accepts it
    assert family_transformers_view(family, cfg).refused is None
    # negative control: a value transformers' strict typing refuses is still refused
    assert family_transformers_view(family, {**cfg, "hidden_size": "64"}).refused is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_head_checks_are_each_classs_own(family: str) -> None:
    """transformers refuses a hidden size the heads do not divide only in the classes that check
    it (llama, gemma2, gemma3); lint refuses exactly there. A None KV head count or head_dim is
    the heads' value where the class derives it, and stays None where it keeps it."""

    def refuses(cfg: dict[str, Any]) -> bool:
        try:
            _auto(cfg)
        except Exception:  # noqa: BLE001 - any refusal counts
            return True
        return False

    odd = {**LEGACY[family], "num_attention_heads": 3}
    assert (family_transformers_view(family, odd).refused is not None) == refuses(odd)
    for key in ("num_key_value_heads", "head_dim"):
        # absent: the class default, or the heads' value where the class derives it (phi3, olmo2: 4, not 32)
        absent = {k: v for k, v in LEGACY[family].items() if k != key}
        if key in family_transformers_view(family, absent).values:
            assert family_transformers_view(family, absent).get(key) == getattr(_auto(absent), key), key
        cfg = {**LEGACY[family], key: None}
        if refuses(cfg):
            continue  # a class typed `int` (lint holds every family to LlamaConfig's `int | None`)
        view = family_transformers_view(family, cfg)
        assert view.refused is None
        assert view.get(key) == getattr(_auto(cfg), key, None), key


@pytest.mark.parametrize("family", ["phi3", "olmo2"])
def test_fix_writes_the_kv_heads_transformers_derives(family: str, tmp_path: Path) -> None:
    """Regression: phi3's and olmo2's classes default `num_key_value_heads` to None, which is the
    query heads (4 here), not 32; candle requires the key, and `fix` writes what transformers uses."""
    from transformers import AutoConfig

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(
        json.dumps({k: v for k, v in LEGACY[family].items() if k != "num_key_value_heads"}, indent=2)
    )
    before = AutoConfig.from_pretrained(d).num_key_value_heads
    p = fix.plan(d)
    assert p.changes == {"num_key_value_heads": before} and before == LEGACY[family]["num_attention_heads"]
    fix.write(p)
    assert AutoConfig.from_pretrained(d).num_key_value_heads == before


def test_sliding_window_probe_patches(tmp_path: Path) -> None:
    """PK115's probe patch is the config edit that makes candle's prefill keep transformers' keys;
    none where candle never reads the window (phi3) or slides other layers (gemma2)."""
    from portkit.lint import lint_paths
    from portkit.settings import Settings

    def patch(family: str, **edits: Any) -> Any:
        d = tmp_path / f"{family}-{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**LEGACY[family], **edits}))
        (f,) = [f for f in lint_paths([d], Settings(respect_pyproject=False)).findings if f.code == "PK115"]
        return f.probe.edit if isinstance(f.probe, CandleEdit) else None

    assert patch("mistral", sliding_window=4) == {"sliding_window": 3}
    assert patch("qwen2", sliding_window=4) == {"sliding_window": 128}  # transformers: no window at all
    assert patch("phi3") is None
    assert patch("gemma2", sliding_window=4) is None


def test_phi3_window_is_measured_against_transformers_without_it(tmp_path: Path) -> None:
    """phi3's candle applies no window at all: PK115's counterfactual is transformers without
    `sliding_window` (as PK109's for llama), so verify measures the window's own effect and
    does not confirm it on another finding's difference (PK102 on a LongRoPE config)."""
    from portkit.lint import lint_paths
    from portkit.settings import Settings

    for family, edits in (("phi3", {}), ("mistral", {"sliding_window": 4}), ("gemma2", {"sliding_window": 4})):
        d = tmp_path / family
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**LEGACY[family], **edits}))
        (f,) = [f for f in lint_paths([d], Settings(respect_pyproject=False)).findings if f.code == "PK115"]
        assert isinstance(f.probe, CandleEdit)
        want = {"what": "no sliding window", "config": {"sliding_window": None}} if family == "phi3" else None
        assert f.probe.as_candle == want, (family, f.probe)


@pytest.mark.parametrize("family", FAMILIES)
def test_odd_values_give_findings_or_one_line_errors(family: str, tmp_path: Path) -> None:
    """Bad input behaves as for llama: lint and fix either work or raise InputError (one line,
    exit 2), never another exception. Regression: a `partial_rotary_factor` of 1e308 that fix
    would write at the top level overflowed PK108's rotary width."""
    from portkit.errors import InputError
    from portkit.lint import lint_paths
    from portkit.settings import Settings
    from portkit.target import Target

    target = Target(max_tokens=100, use_flash_attn=True, device="cuda", features=frozenset({"cuda", "flash-attn"}))
    extra_keys = ["rope_parameters", "layer_types", "sliding_window_pattern", "rope_scaling", "partial_rotary_factor"]
    cases = [
        {**base, k: w}
        for base in (LEGACY[family], T5[family])
        for k in [*base, *extra_keys]
        for w in (None, -1, "x", 1e308, [])
    ]
    cases.append(
        {**T5[family], "rope_parameters": {"rope_theta": 1e4, "rope_type": "default", "partial_rotary_factor": 1e308}}
    )
    for i, cfg in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        lint_paths(
            [d], Settings(target=target, preview=True, respect_pyproject=False)
        )  # errors are reported, not raised
        try:
            fix.plan(d)
        except InputError:
            pass


@pytest.mark.parametrize("family", ["qwen2", "qwen2_moe", "qwen3"])
@pytest.mark.parametrize("max_window_layers", [0, 1, 3, 6])
def test_sliding_layers_with_the_window_on_are_transformers_layer_types(family: str, max_window_layers: int) -> None:
    """qwen2 slides the layers from `max_window_layers` on, qwen2_moe every other layer below it:
    each class's own `layer_types`, from a config that writes none."""
    cfg = {
        "model_type": BY_NAME[family].model_types[0],
        "use_sliding_window": True,
        "sliding_window": 8,
        "max_window_layers": max_window_layers,
        "num_hidden_layers": 6,
    }
    c = _auto(cfg)
    want = tuple(t == "sliding_attention" for t in c.layer_types)
    assert family_transformers_view(family, cfg).sliding_layers == want


@pytest.mark.parametrize(
    "family,top_level",
    [("phi3", None), ("phi3", 32), ("phi3", 128), ("llama", 32), ("mistral", 32)],
)
def test_the_pretraining_length_of_a_scaled_rope_is_the_one_transformers_keeps(family: str, top_level: Any) -> None:
    """phi3's class field `original_max_position_embeddings` (default 4096) replaces the rope dict's;
    the same key written for another class does not (modeling_rope_utils.py:853-860)."""
    from transformers import AutoConfig

    rope = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}
    rope |= {"original_max_position_embeddings": 64, "rope_theta": 1e4}
    cfg: dict[str, Any] = {"model_type": family, "hidden_size": 64, "num_attention_heads": 4}
    cfg |= {"num_key_value_heads": 4, "max_position_embeddings": 256, "rope_parameters": rope}
    if top_level is not None:
        cfg["original_max_position_embeddings"] = top_level
    ours = family_transformers_view(family, cfg)
    theirs = AutoConfig.for_model(**json.loads(json.dumps(cfg)))
    assert ours.ok
    want = theirs.rope_parameters["original_max_position_embeddings"]
    assert ours.rope_parameters["original_max_position_embeddings"] == want
