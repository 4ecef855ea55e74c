"""The sub-layer names: each family's `SUBLAYERS` (data in its module), the one list of known
names with their roles, portkit-dump's list, the report schema's pattern, and the dump order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from portkit.families import FAMILIES
from portkit.families import sublayers as S
from portkit.porting.dumpfile import describe_names, known_name, order_key

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_each_familys_sub_layers_follow_the_one_computation_order(family):
    """`ROLES`' order is every family's: the dump's order (`order_key`) needs no family."""
    subs = S.of(next(f for f in FAMILIES if f.name == family))
    assert subs and len(set(subs)) == len(subs) and set(subs) <= set(S.ROLES)
    ranks = [list(S.ROLES).index(s) for s in subs]
    assert ranks == sorted(ranks), subs
    assert any(S.ROLES[s] == S.PROJECTION for s in subs) and "self_attn" in subs and "mlp" in subs


def test_families_name_their_extra_norms_and_fused_projections():
    by = {f.name: S.of(f) for f in FAMILIES}
    assert by["gemma2"][-3:] == by["gemma3"][-3:] == ("pre_feedforward_layernorm", "mlp", "post_feedforward_layernorm")
    assert "input_layernorm" not in by["olmo2"] and by["olmo2"][-1] == "post_feedforward_layernorm"
    assert "self_attn.qkv_proj" in by["phi3"] and "self_attn.q_proj" not in by["phi3"]
    assert by["qwen2"] == by["llama"] == S.DEFAULT and S.of(None) == S.DEFAULT


def test_portkit_dump_accepts_the_same_names():
    text = (ROOT / "native" / "portkit-dump" / "src" / "lib.rs").read_text()
    block = re.search(r"pub const SUBLAYERS: \[&str; (\d+)\] = \[(.*?)\];", text, re.S)
    assert block is not None
    names = re.findall(r'"([^"]+)"', block.group(2))
    assert names == list(S.ROLES) and int(block.group(1)) == len(names)


def test_the_report_schema_names_every_sub_layer():
    schema = json.loads((ROOT / "schemas" / "verify-report.schema.json").read_text())
    pattern = schema["$defs"]["layers"]["properties"]["rows"]["items"]["properties"]["name"]["pattern"]
    for sub in S.ROLES:
        assert re.fullmatch(pattern, f"layer.12.{sub}"), sub
    for bad in ("layer.1.o_proj", "layer.1.self_attn.o_proj", "layer.x", "layer.1.mlp.up_proj"):
        assert not re.fullmatch(pattern, bad), bad


def test_names_and_order():
    assert S.split("layer.3.self_attn.q_proj") == (3, "self_attn.q_proj")
    # any module path is a sub-layer: a model without a family is recorded as transformers names it
    assert S.split("layer.3.mlp.experts.0.w1") == (3, "mlp.experts.0.w1")
    for bad in ("layer.03.mlp", "layer.3", "layer.3.", "norm", "layer.-1.mlp", "layer.3.mlp..x", "layer.3.1x"):
        assert S.split(bad) is None, bad
    assert known_name("layer.0.post_feedforward_layernorm") and known_name("layer.0.attn.c_attn")
    assert not known_name("layer.0.attn.") and not known_name("refeed.layer.0")
    names = [
        "logits",
        "layer.1",
        "layer.0.mlp",
        "layer.10.input_layernorm",
        "layer.0",
        "layer.0.self_attn",
        "ids",
        "layer.0.input_layernorm",
        "embeddings",
    ]
    assert sorted(names, key=order_key) == [
        "ids", "embeddings", "layer.0.input_layernorm", "layer.0.self_attn", "layer.0.mlp", "layer.0", "layer.1",
        "layer.10.input_layernorm", "logits",
    ]  # fmt: skip
    assert describe_names(names) == (
        "ids, embeddings, layer.0..layer.1, logits, 4 sub-layer values: input_layernorm, self_attn, mlp of 2 layers"
    )


def test_roles_of_other_models_names():
    """GPT-2's, GPT-NeoX's and phi's names get the role their part plays; a name that says
    nothing gets none (localisation: no diagnosis for it)."""
    roles = {
        "ln_1": S.NORM, "ln_2": S.NORM, "final_layernorm": S.NORM, "attention.query_key_value": S.PROJECTION,
        "attn.c_attn": S.PROJECTION, "attn": S.ATTENTION, "attention": S.ATTENTION, "feed_forward": S.MLP,
        "self_attn.k_proj": S.PROJECTION, "mlp": S.MLP, "attention.dense": S.ATTENTION, "attn.c_proj": S.ATTENTION,
    }  # fmt: skip
    for name, role in roles.items():
        assert S.role(name) == role, name
    for name in ("mlp.c_proj", "mlp.fc1", "self_attn.rotary_emb", "mamba", "mlp.gate", "linear"):
        assert S.role(name) is None, name


def test_dump_order_follows_the_recorded_computation_order():
    """A reference's `sublayers` metadata orders names portkit has no role for."""
    from portkit.porting.dumpfile import layout_order

    names = ["layer.0", "layer.0.mlp.c_fc", "layer.0.ln_1", "layer.0.attn", "layer.0.attn.c_attn", "layer.0.mlp"]
    key = layout_order({"sublayers": json.dumps(["ln_1", "attn.c_attn", "attn", "mlp.c_fc", "mlp"])})
    assert sorted(names, key=key) == [
        "layer.0.ln_1", "layer.0.attn.c_attn", "layer.0.attn", "layer.0.mlp.c_fc", "layer.0.mlp", "layer.0",
    ]  # fmt: skip
    for hostile in ({"sublayers": "not json"}, {"sublayers": '{"a": 1}'}, {"sublayers": "[1, 2]"}, None):
        assert sorted(names, key=layout_order(hostile))[-1] == "layer.0"
