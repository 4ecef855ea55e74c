"""`portkit.verify.judge.localise`: the first bad sub-layer inside the first bad layer, its error per
position, and what each pattern points to; sub-layers never decide the verdict; the summary line
prints the named row's own number. Synthetic values: each case perturbs one sub-layer and
everything computed after it, the way a real bug propagates."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.families import sublayers as S
from portkit.verify.judge.checks import TOLERANCES, compare_layers
from portkit.verify.judge.comparison import Comparison
from portkit.verify.judge.localise import localise, per_position
from portkit.verify.report.text import comparison_lines

T, H = 6, 8
RTOL = 1e-5
LLAMA = S.DEFAULT


def _reference(subs=LLAMA, layers: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {"embeddings": rng.normal(size=(T, H))}
    for i in range(layers):
        for s in subs:
            out[f"layer.{i}.{s}"] = rng.normal(size=(T, 4 if s.endswith(("k_proj", "v_proj")) else H))
        out[f"layer.{i}"] = rng.normal(size=(T, H)) * 10
    out["norm"] = rng.normal(size=(T, H))
    return out


def _broken(
    ref: dict[str, np.ndarray], first: str, rel: float = 1e-2, positions: slice = slice(None)
) -> dict[str, np.ndarray]:
    """`ref`, with `first` and every value after it off by `rel` (of its max|ref|) at `positions`."""
    names = list(ref)
    got = {k: v.copy() for k, v in ref.items()}
    for k in names[names.index(first) :]:
        got[k][positions] += rel * np.abs(ref[k]).max()
    return got


def _localise(ref, got, **kw):
    check = compare_layers(ref, got, RTOL)
    return check, localise(check, ref, got, **kw)


def test_agreeing_values_localise_nothing():
    ref = _reference()
    check, loc = _localise(ref, {k: v + 1e-9 for k, v in ref.items()})
    assert check.ok and loc is None


@pytest.mark.parametrize(
    "first, positions, diagnosis, pos0",
    [
        (
            "layer.1.input_layernorm",
            slice(None),
            "input_layernorm differs: eps or weight offset (gemma's 1 + w)",
            False,
        ),
        ("layer.1.self_attn.q_proj", slice(None), "q_proj differs from position 0: weight layout or bias", False),
        (
            "layer.1.self_attn.k_proj",
            slice(1, None),
            "k_proj differs but position 0 agrees: dumped after RoPE (put the projection's output, before the "
            "rotation) or rotary embedding (theta, pairing, scaling)",
            True,
        ),
        (
            "layer.1.self_attn",
            slice(1, None),
            "q/k/v projections agree, attention output differs, position 0 agrees: rotary embedding (theta, pairing, "
            "scaling) or the attention scale/softcap",
            True,
        ),
        (
            "layer.1.self_attn",
            slice(None),
            "q/k/v projections agree, attention output differs from position 0: o_proj (weight layout or bias) "
            "or the value path (v heads, key-value grouping)",
            False,
        ),
        (
            "layer.1.post_attention_layernorm",
            slice(None),
            "post_attention_layernorm differs: eps or weight offset (gemma's 1 + w)",
            False,
        ),
        (
            "layer.1.mlp",
            slice(None),
            "post_attention_layernorm agrees, mlp differs from position 0: gate/up order, the activation (hidden_act) "
            "or down_proj weight layout",
            False,
        ),
    ],
)
def test_each_pattern_points_to_its_candidates(first, positions, diagnosis, pos0):
    ref = _reference()
    check, loc = _localise(ref, _broken(ref, first, positions=positions))
    assert check.first_over == "layer.1" and loc is not None
    assert loc.layer == "layer.1" and loc.name == first and loc.diagnosis == diagnosis and loc.position0_agrees is pos0
    assert ("position 0 agrees" in loc.diagnosis) is pos0
    assert loc.rel == check.row(first).rel == max(loc.per_position)
    assert loc.agreeing == [f"layer.1.{s}" for s in LLAMA[: LLAMA.index(first.split(".", 2)[2])]]


def test_per_position_is_the_rows_error_at_each_position():
    ref = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = ref.copy()
    got[1, 2] += 0.55
    got[2, 0] -= 1.1
    assert per_position(ref, got) == pytest.approx([0.0, 0.05, 0.1])
    assert per_position(ref[0], got[0]) == []  # last-position logits: no positions


def test_missing_projections_are_said_and_the_residual_is_named_when_every_sub_layer_agrees():
    ref = _reference()
    partial = {k: v for k, v in ref.items() if not k.endswith(("k_proj", "v_proj"))}
    _, loc = _localise(partial, _broken(partial, "layer.0.self_attn", positions=slice(1, None)), available=list(ref))
    assert loc.diagnosis.startswith(
        "q_proj agrees (k_proj, v_proj not dumped), attention output differs, position 0 agrees"
    )
    assert loc.missing == ["layer.0.self_attn.k_proj", "layer.0.self_attn.v_proj"]
    # every sub-layer of layer.0 agrees, layer.0 does not: what is between them
    got = {k: v.copy() for k, v in ref.items()}
    for k in list(ref)[list(ref).index("layer.0") :]:
        got[k] = got[k] * (1 + 1e-3)
    _, loc = _localise(ref, got)
    assert loc.name == "layer.0" and loc.diagnosis.startswith(
        "every sub-layer dumped for layer.0 agrees: the residual additions"
    )


def test_without_sub_layers_it_says_which_would_localise_it():
    ref = _reference()
    only = {k: v for k, v in ref.items() if S.split(k) is None}
    got = _broken(only, "layer.2")
    _, loc = _localise(only, got, available=list(ref))
    assert loc.name == "layer.2" and loc.missing == [f"layer.2.{s}" for s in LLAMA]
    assert loc.diagnosis == "layer.2 differs; its sub-layers would localise it: dump " + ", ".join(loc.missing)
    _, loc = _localise(only, got, no_sublayers_hint="this capture records no sub-layers")
    assert loc.diagnosis == "layer.2 differs; this capture records no sub-layers"


@pytest.mark.parametrize(
    "first, start", [("embeddings", "embeddings differ"), ("norm", "every layer agrees, the final norm differs")]
)
def test_values_between_the_layers_are_localised_too(first, start):
    ref = _reference()
    _, loc = _localise(ref, _broken(ref, first))
    assert loc.name == loc.layer == first and loc.diagnosis.startswith(start)


def test_gemma2_and_olmo2_norms_around_the_mlp():
    gemma2 = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn",
              "post_attention_layernorm", "pre_feedforward_layernorm", "mlp", "post_feedforward_layernorm")  # fmt: skip
    ref = _reference(gemma2)
    _, loc = _localise(ref, _broken(ref, "layer.0.post_feedforward_layernorm"))
    assert loc.name == "layer.0.post_feedforward_layernorm" and "eps or weight offset" in loc.diagnosis
    _, loc = _localise(ref, _broken(ref, "layer.0.mlp"))
    assert loc.diagnosis.startswith("pre_feedforward_layernorm agrees, mlp differs from position 0")
    olmo2 = (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn",
        "post_attention_layernorm",
        "mlp",
        "post_feedforward_layernorm",
    )
    ref = _reference(olmo2)
    _, loc = _localise(ref, _broken(ref, "layer.1.post_attention_layernorm"))
    assert loc.name == "layer.1.post_attention_layernorm" and loc.agreeing[-1] == "layer.1.self_attn"


def test_sub_layers_are_reported_but_never_decide_the_verdict():
    """A sub-layer's error is not damped by the residual stream: over the line on its own, with
    every layer agreeing, it is reported (its row is `over`) and the comparison still agrees."""
    ref = _reference()
    got = {k: v.copy() for k, v in ref.items()}
    got["layer.1.mlp"] = got["layer.1.mlp"] * (1 + 1e-4)
    check, loc = _localise(ref, got)
    assert check.row("layer.1.mlp").over and check.first_over is None and check.ok and loc is None
    assert check.max_rel < RTOL  # the judged rows' largest


def test_the_summary_line_prints_the_named_rows_number_not_the_tables_largest():
    ref = _reference()
    got = _broken(ref, "layer.1.mlp", rel=1e-3)
    got["norm"] = ref["norm"] * 1.5  # a later row with a far larger error
    check, loc = _localise(ref, got)
    c = Comparison(tolerance=TOLERANCES["f32"], layers=check, localisation=loc)
    lines = comparison_lines(c, [])
    own = check.row("layer.1").rel
    assert check.max_rel > 100 * own
    assert f"first layer over 1e-5 (fallback): layer.1[/] (rel {own:.2e})" in lines[0]
    assert lines[1] == f"    first bad sub-layer: [red]layer.1.mlp[/] (rel {loc.rel:.2e})"
    assert lines[2].startswith("    layer.1.mlp per position: 0: 1.0e-03  1: 1.0e-03")
    assert lines[3].startswith("    diagnosis: post_attention_layernorm agrees, mlp differs from position 0")
