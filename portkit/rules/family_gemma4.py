"""PK126-PK130: what candle 0.11.0's gemma4 text module (`gemma4::text::TextModel`) computes or
loads otherwise than transformers 5's Gemma4ForCausalLM, for every checkpoint or for the features
it does not implement.

Each compares `ctx.fv` (the serde mirror, `portkit.families.gemma4`) with `ctx.ftv` (transformers'
view: `per_layer_config`, the per-layer-type rope parameters, the feature switches with their
class defaults).
"""

from __future__ import annotations

import math

from portkit.rules import as_candle
from portkit.rules.base import Context, Rule, location, num
from portkit.rules.family_config import module

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from portkit.findings import Finding

FAMILY = ("gemma4",)
_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


def _ready(ctx: Context) -> bool:
    fv, ftv = ctx.fv, ctx.ftv
    return fv is not None and ftv is not None and fv.ok


def _t_head_dims(ctx: Context) -> list[int | None]:
    """Each layer's head size in transformers: `head_dim`, a full layer's from `per_layer_config`."""
    ftv = ctx.ftv
    assert ftv is not None
    types, full = ftv.get("layer_types") or [], list(ftv.get("full_head_dims") or [])
    n = ctx.fv.get("num_hidden_layers") if ctx.fv is not None else len(types)
    out: list[int | None] = []
    for i in range(n or 0):
        t = types[i] if i < len(types) else "full_attention"
        out.append(full.pop(0) if t == "full_attention" and full else ftv.get("head_dim"))
    return out


def _names(ctx: Context) -> set[str] | None:
    """The checkpoint's tensor names (None: config.json alone)."""
    st = ctx.facts.safetensors
    return set(st.tensors) if st is not None else None


# --- PK126 ---------------------------------------------------------------------------------------


class Gemma4NormGainAndScale(Rule):
    """candle's gemma4 multiplies every RmsNorm by (weight + 1) and scales the attention scores by 1/sqrt(head_dim).

    ## What it does
    Flags every Gemma 4 text checkpoint (`Gemma4ForCausalLM`, `model_type` `gemma4_text`) that
    candle's gemma4 module can read: the two differences are in its code, not in the config.

    ## Why is this bad?
    transformers' `Gemma4RMSNorm` multiplies the normalised activations by `weight` (Gemma 4's
    norm weights are stored as the gain itself, 1.0 at initialisation), and its attention uses
    `scaling = 1.0` (the queries and keys are RMS-normalised per head). candle's gemma4 keeps the
    Gemma 1-3 convention: `(weight + 1.0)` in every norm (the four of each layer, `q_norm`,
    `k_norm`, the final norm) and `1/sqrt(head_dim)` on the scores. Every layer then computes other
    numbers and the model runs without an error (max |logit difference| 0.6 on a tiny checkpoint
    whose norm weights are 1.0). candle also never reads `layer_scalar` (PK202).

    ## Example
    ```json
    {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"]}
    ```

    ## Fix
    None in config.json: no key changes either constant. In a copy of candle's gemma4/text.rs,
    multiply by `weight` and scale the scores by 1.0.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma4/text.rs:27-41 (`RmsNorm::forward`:
    `broadcast_mul(&(&self.weight + 1.0))`), :268-269 and :327-328 (q/k norms), :423-439 and :564
    (the layer and final norms), :359-363 (`1 / sqrt(head_dim)` on `q.matmul(k^T)`); the same in 0.11.1.

    ## Verification
    numeric, transformers as candle computes: transformers with every norm weight w read as
    w + 1, `q_norm` as (w + 1) / sqrt(head_dim) of its layer (a scale on the queries is the
    same scale on the scores); candle agrees with it where it does not agree with transformers as
    written. (`layer_scalar`, which candle never reads, is PK202's: transformers with each read as 1.)

    ## References
    - transformers `models/gemma4/modeling_gemma4.py:195-214` (`Gemma4RMSNorm`: `normed_output * self.weight`),
      `:1156` (`self.scaling = 1.0`), `:1244`, `:1343` and `:1417` (`layer_scalar`)
    """

    code = "PK126"
    name = "gemma4-norm-gain-and-scale"
    group = "config"
    families = FAMILY
    severity = "error"
    effect = "silent"
    fix_title = "No config edit: candle's gemma4 adds 1 to every norm weight and scales scores by 1/sqrt(head_dim)"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _ready(ctx):
            return
        fv = ctx.fv
        assert fv is not None
        from portkit.families.gemma4 import norm_offset

        edits = self._edits(ctx, norm_offset)
        yield self.finding(
            ctx,
            f"transformers multiplies each RmsNorm by its weight and scales attention scores by 1.0; {module(ctx)} "
            "multiplies by (weight + 1) and scales by 1/sqrt(head_dim): every layer computes other numbers",
            location=location((1, 1)),
            transformers_value={"norm_gain": "weight", "attention_scale": 1.0},
            candle_value={"norm_gain": "weight + 1", "attention_scale": "1/sqrt(head_dim)"},
            probe_patch={},
            as_candle=as_candle.edit("norms as weight + 1, scores by 1/sqrt(head_dim)", tensor_edits=edits)
            if edits
            else None,
        )

    @staticmethod
    def _edits(ctx: Context, offset: float) -> dict[str, str]:
        """The tensor edits that make transformers compute candle's norms and scores, for the
        tensors the checkpoint holds (config.json alone: candle's names)."""
        fv = ctx.fv
        assert fv is not None
        have = _names(ctx)
        n = fv.get("num_hidden_layers") or 0
        head_dims = _t_head_dims(ctx)
        out: dict[str, str] = {}
        gain = as_candle.affine(1.0, offset)
        for i in range(n):
            p = f"model.layers.{i}."
            for norm in _NORMS:
                out[f"{p}{norm}.weight"] = gain
            out[f"{p}self_attn.k_norm.weight"] = gain
            hd = head_dims[i] if i < len(head_dims) else None
            if isinstance(hd, int) and hd > 0:
                s = 1.0 / math.sqrt(hd)
                out[f"{p}self_attn.q_norm.weight"] = as_candle.affine(s, offset * s)
        out["model.norm.weight"] = gain
        # `layer_scalar`, which candle never reads, is PK202's own counterfactual (read as 1), not this one's
        return out if have is None else {k: v for k, v in out.items() if k in have}


# --- PK127 ---------------------------------------------------------------------------------------


class Gemma4GlobalHeadDim(Rule):
    """The full-attention layers' head size: transformers keeps it in `per_layer_config`, candle reads
    `global_head_dim`.

    ## What it does
    Compares the head size (and key-value heads) of the full-attention layers as transformers 5
    reads them (`per_layer_config`, written by `save_pretrained` for each full layer whose value
    differs from the global one) with candle's `global_head_dim` (default 512) and
    `num_global_key_value_heads` (default `num_key_value_heads`).

    ## Why is this bad?
    transformers 5 never writes `global_head_dim` to config.json: `__post_init__` pops it into
    `per_layer_config` (an entry per full layer, left out where it equals `head_dim`). candle's
    `Gemma4TextConfig` ignores `per_layer_config` and builds the full layers with 512-wide heads,
    so every checkpoint whose full layers have another size is refused at load:
    `shape mismatch for model.layers.N.self_attn.q_proj.weight` (N the first full layer).

    ## Example
    ```json
    {"model_type": "gemma4_text", "head_dim": 32, "per_layer_config": {},
     "layer_types": ["sliding_attention", "full_attention"]}
    ```
    Use instead (candle reads the key, transformers ignores it once `per_layer_config` is there):
    ```json
    {"model_type": "gemma4_text", "head_dim": 32, "per_layer_config": {}, "global_head_dim": 32,
     "layer_types": ["sliding_attention", "full_attention"]}
    ```

    ## Fix
    `portkit fix --write` writes `global_head_dim` (and `num_global_key_value_heads` where they
    differ) as transformers reads them, when every full layer has the same values.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma4/config.rs:43-45, :105-107 (`global_head_dim`
    default 512, `num_global_key_value_heads: Option<usize>`), text.rs:254-267 (the full layers'
    head size and projections).

    ## Verification
    crash: candle must fail loading the first full layer's `q_proj` (or `k_proj`) with a shape mismatch.

    ## References
    - transformers `models/gemma4/configuration_gemma4.py:205-218` (`global_head_dim` into
      `per_layer_config`), `models/gemma4/modeling_gemma4.py:1152-1155`
    """

    code = "PK127"
    name = "gemma4-global-head-dim"
    group = "config"
    families = FAMILY
    severity = "error"
    effect = "panic"
    fix_availability = "sometimes"
    fix_title = "Write the full layers' `global_head_dim` transformers reads from `per_layer_config`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _ready(ctx):
            return
        fv, ftv = ctx.fv, ctx.ftv
        assert fv is not None and ftv is not None
        from portkit.families.gemma4 import is_sliding, layer_attention

        n = fv.get("num_hidden_layers") or 0
        full = [i for i in range(n) if not is_sliding(fv.values, i)]
        if not full:
            return
        t_hd, t_kv = ftv.get("global_head_dim"), ftv.get("num_global_key_value_heads")
        c_hd, c_kv = layer_attention(fv.values, full[0])
        if not isinstance(t_hd, int) or not isinstance(t_kv, int) or (t_hd, t_kv) == (c_hd, c_kv):
            return
        heads = fv.get("num_attention_heads")
        same = len(set(ftv.get("full_head_dims") or [t_hd])) == 1
        edits: dict[str, Any] = {"global_head_dim": t_hd}
        if t_kv != c_kv:
            edits["num_global_key_value_heads"] = t_kv
        proj = "q_proj" if t_hd != c_hd else "k_proj"
        src = "from `per_layer_config`" if ftv.sources.get("global_head_dim") else "(config.json has none: 512)"
        key, c_val = ("global_head_dim", c_hd) if t_hd != c_hd else ("num_global_key_value_heads", c_kv)
        said = f"`{key}`={c_val}" if key in fv.written else f"no `{key}` and uses {c_val}"
        kv_words = f" and {t_kv} key-value heads" if t_kv != c_kv else ""
        yield self.finding(
            ctx,
            f"transformers builds the full-attention layers (first: {full[0]}) with {t_hd}-wide heads{kv_words} {src}; "
            f"{module(ctx)} reads {said}, so loading `model.layers.{full[0]}.self_attn.{proj}` fails "
            f"({heads * t_hd if proj == 'q_proj' and isinstance(heads, int) else t_kv * t_hd} rows in the checkpoint)",
            keys=("per_layer_config",) if "per_layer_config" in ftv.sources.get("global_head_dim", ()) else (),
            transformers_value={"global_head_dim": t_hd, "num_global_key_value_heads": t_kv},
            candle_value={"global_head_dim": c_hd, "num_global_key_value_heads": c_kv},
            fix_edits=edits if same else None,
            probe_patch=edits,
            expect=f"shape mismatch for model.layers.{full[0]}.self_attn.{proj}.weight",
        )


# --- PK128 ---------------------------------------------------------------------------------------


class Gemma4PerLayerInputs(Rule):
    """Per-layer inputs on: transformers adds them to every layer, candle's gemma4 has none.

    ## What it does
    Flags a Gemma 4 text config whose `hidden_size_per_layer_input` transformers reads as more
    than 0: written so, or absent (the class default is 256, as Gemma 4 E2B and E4B use).

    ## Why is this bad?
    transformers embeds each token a second time (`embed_tokens_per_layer`), mixes it with a
    projection of the hidden state, and each decoder layer adds a gated projection of its slice
    after the MLP. candle 0.11.0's gemma4 has none of this: it never reads those tensors and the
    model runs, computing another function, without an error.

    ## Example
    ```json
    {"model_type": "gemma4_text", "hidden_size_per_layer_input": 256}
    ```

    ## Fix
    None in config.json (the weights need it). Run the checkpoint with an implementation of
    per-layer inputs.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma4/text.rs:386-470 (`DecoderLayer`: attention and MLP
    only), :531-569 (`TextModel::new` reads no per-layer tensors); the same in 0.11.1.

    ## Verification
    numeric, transformers as candle computes: transformers with `hidden_size_per_layer_input` 0
    (no per-layer inputs) agrees with candle where transformers as written does not.

    ## References
    - transformers `models/gemma4/configuration_gemma4.py:171` (default 256),
      `models/gemma4/modeling_gemma4.py:1345-1350`, `:1408-1415`, `:1565-1580`
    """

    code = "PK128"
    name = "gemma4-per-layer-inputs-ignored"
    group = "config"
    families = FAMILY
    severity = "error"
    effect = "silent"
    fix_title = "No config edit: candle's gemma4 has no per-layer inputs"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _ready(ctx):
            return
        ftv = ctx.ftv
        assert ftv is not None
        ple = ftv.get("hidden_size_per_layer_input")
        if not isinstance(ple, int) or isinstance(ple, bool) or ple <= 0:
            return
        src = "" if ftv.sources.get("hidden_size_per_layer_input") else " (its default: config.json has none)"
        yield self.finding(
            ctx,
            f"transformers adds per-layer inputs to every layer (`hidden_size_per_layer_input`={ple}{src}); "
            f"{module(ctx)} has none and never reads their tensors",
            keys=("hidden_size_per_layer_input",),
            transformers_value=ple,
            candle_value=0,
            probe_patch={},
            as_candle=as_candle.edit("no per-layer inputs", config={"hidden_size_per_layer_input": 0}),
        )


# --- PK129 ---------------------------------------------------------------------------------------


class Gemma4KvProjectionsAbsent(Rule):
    """Shared-KV layers or `attention_k_eq_v`: transformers saves no `k_proj`/`v_proj` there, candle loads one for every
    layer.

    ## What it does
    Flags a Gemma 4 text config with `num_kv_shared_layers` > 0 (the last layers reuse an earlier
    layer's keys and values) or `attention_k_eq_v` true (the full-attention layers use the keys
    as values), and names the first tensor candle's load asks for that the checkpoint lacks.

    ## Why is this bad?
    transformers builds no `k_proj`, `v_proj` or `k_norm` in a shared-KV layer and no `v_proj` in
    a full layer with `attention_k_eq_v`, so `save_pretrained` writes none. candle 0.11.0's gemma4
    implements neither: it loads q/k/v/o for every layer and fails at load with
    `cannot find tensor model.layers.N.self_attn.k_proj.weight` (or `v_proj`).

    ## Example
    ```json
    {"model_type": "gemma4_text", "num_hidden_layers": 4, "num_kv_shared_layers": 2}
    ```

    ## Fix
    None in config.json: the weights are absent. Run the checkpoint with an implementation of KV sharing.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma4/text.rs:264-269 (`Attention::new`: q, k, v, o
    projections and both norms for every layer); the same in 0.11.1.

    ## Verification
    crash: candle must fail at load with `cannot find tensor` and the first absent projection.

    ## References
    - transformers `models/gemma4/configuration_gemma4.py:222-248` (`kv_sharing_modes`),
      `models/gemma4/modeling_gemma4.py:1154`, `:1171-1186` (no k/v projections when shared, no `v_proj` with k = v)
    """

    code = "PK129"
    name = "gemma4-kv-projections-absent"
    group = "config"
    families = FAMILY
    severity = "error"
    effect = "panic"
    fix_title = "No config edit: candle's gemma4 implements neither shared-KV layers nor k = v"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _ready(ctx):
            return
        fv, ftv = ctx.fv, ctx.ftv
        assert fv is not None and ftv is not None
        n = fv.get("num_hidden_layers") or 0
        shared, k_eq_v = ftv.get("num_kv_shared_layers"), ftv.get("attention_k_eq_v") is True
        shared = shared if isinstance(shared, int) and not isinstance(shared, bool) and shared > 0 else 0
        if not shared and not k_eq_v:
            return
        types = ftv.get("layer_types") or []
        first = None
        for i in range(n):
            if i >= n - shared:
                first = (i, "k_proj")
                break
            if k_eq_v and i < len(types) and types[i] == "full_attention":
                first = (i, "v_proj")
                break
        if first is None:
            return
        why = []
        if shared:
            why.append(f"the last {shared} layers reuse earlier keys and values (`num_kv_shared_layers`={shared})")
        if k_eq_v:
            why.append("the full-attention layers use their keys as values (`attention_k_eq_v`)")
        name = f"model.layers.{first[0]}.self_attn.{first[1]}.weight"
        yield self.finding(
            ctx,
            f"transformers saves no projection it does not build: {' and '.join(why)}; {module(ctx)} loads "
            f"k/v projections for every layer and fails on `{name}`",
            keys=("num_kv_shared_layers",) if shared else ("attention_k_eq_v",),
            transformers_value={"num_kv_shared_layers": shared, "attention_k_eq_v": k_eq_v},
            candle_value=f"loads {name}",
            expect=f"cannot find tensor {name}",
        )


# --- PK130 ---------------------------------------------------------------------------------------


class Gemma4MoeBlockIgnored(Rule):
    """`enable_moe_block`: transformers adds an expert block to every layer's MLP, candle's gemma4 does not.

    ## What it does
    Flags a Gemma 4 text config with `enable_moe_block` true (Gemma 4's mixture-of-experts
    checkpoints: a routed expert block beside the dense MLP of each layer).

    ## Why is this bad?
    transformers sums the dense MLP's and the routed experts' outputs, each with its own norm,
    before `post_feedforward_layernorm`. candle 0.11.0's gemma4 computes the dense MLP only and
    never reads the router, experts or their norms: the model runs and computes another function.

    ## Example
    ```json
    {"model_type": "gemma4_text", "enable_moe_block": true, "num_experts": 128, "top_k_experts": 8}
    ```

    ## Fix
    None in config.json: the expert weights need an implementation.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma4/text.rs:386-470 (`DecoderLayer`: one `MLP`),
    :416-422; the same in 0.11.1.

    ## Verification
    numeric, transformers as candle computes: transformers with `enable_moe_block` false (the
    dense MLP alone, as candle's module) agrees with candle where transformers as written does not.

    ## References
    - transformers `models/gemma4/modeling_gemma4.py:1352-1403` (`enable_moe_block`: router, experts, extra norms)
    """

    code = "PK130"
    name = "gemma4-moe-block-ignored"
    group = "config"
    families = FAMILY
    severity = "error"
    effect = "silent"
    fix_title = "No config edit: candle's gemma4 has no expert block"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not _ready(ctx):
            return
        ftv = ctx.ftv
        assert ftv is not None
        if ftv.get("enable_moe_block") is not True:
            return
        experts, top = ftv.get("num_experts"), ftv.get("top_k_experts")
        yield self.finding(
            ctx,
            f"transformers adds a block of {num(experts)} experts (top {num(top)}) to every layer's MLP "
            f"(`enable_moe_block`); {module(ctx)} computes the dense MLP alone and never reads the experts",
            keys=("enable_moe_block",),
            transformers_value=True,
            candle_value=False,
            probe_patch={},
            as_candle=as_candle.edit("no expert block", config={"enable_moe_block": False}),
        )


RULES = (
    Gemma4NormGainAndScale,
    Gemma4GlobalHeadDim,
    Gemma4PerLayerInputs,
    Gemma4KvProjectionsAbsent,
    Gemma4MoeBlockIgnored,
)
