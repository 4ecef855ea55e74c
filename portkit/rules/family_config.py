"""PK1xx that only some candle 0.11.0 modules need (PK114-PK123): windows, activations, scales,
multipliers and heads that one module reads its own way.

They compare `ctx.fv` (the family's serde mirror, `portkit.families.<name>`) with `ctx.ftv`
(`family_transformers_view`), and every message names the module (`Family.who`).
"""

from __future__ import annotations

import json
import math

from portkit.candle_modules import ADDED, MODULE_FOR
from portkit.candle_release import key
from portkit.encoders import detect as detect_encoder
from portkit.families import BY_NAME
from portkit.rules import as_candle
from portkit.rules.base import Context, Rule, location, num

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding

ALL_FAMILIES = tuple(BY_NAME)


def module(ctx: Context) -> str:
    """How a message names candle's module (`Family.who`): "candle 0.11.0" for llama (the target's release)."""
    assert ctx.family is not None
    return ctx.family.who


# --- PK114 ---------------------------------------------------------------------------------------

#: what candle's module does with an architecture (`architectures[0]`) whose model type portkit checks only in
#: part: the one path there is into it, and where that path refuses such a checkpoint
UNCHECKED_PATHS = {
    # gemma4/mod.rs:33-61: `Model::new` loads the vision tower first (`model.vision_tower`), then the text at
    # `vb.pp("model").pp("language_model")`, inside which TextModel::new adds `model.` again (text.rs:532);
    # config.rs:388-392: `text_config` and `vision_config` are required structs
    "Gemma4ForConditionalGeneration": "only through `gemma4::Model` (`Gemma4Config`), which refuses it: a text-only "
    "save's "
    '`"vision_config": null` is a serde type error, and otherwise the text weights are looked up at '
    "`model.language_model.model.*` where Gemma4ForConditionalGeneration saves `model.language_model.*` "
    "(``cannot find tensor model.language_model.model.embed_tokens.weight``); portkit checks Gemma 4's text "
    "decoder (`gemma4_text`, `Gemma4ForCausalLM`) only",
}


class NoCandleModule(Rule):
    """The target candle release has no module portkit checks for this `model_type`.

    ## What it does
    Flags a config whose `model_type` (or `architectures[0]`, when `model_type` is absent) maps
    to none of the candle modules portkit knows in the target release (the decoders of
    `portkit.families`, the encoders of `portkit.encoders`: bert.rs, distilbert.rs,
    xlm_roberta.rs, modernbert.rs, jina_bert.rs, nomic_bert.rs, whose checkpoints the embedding
    rules, PK6xx, speak about). It says whether candle has a module for it that portkit does not
    check yet, or none at all; on a release older than the module (`--candle 0.9.1`: qwen3,
    qwen3_moe and olmo2 arrived in 0.9.2), which release added it. Which module serves a model
    type, and the release that added each module, is `portkit.candle_modules`, generated from
    every release's src/models/mod.rs and transformers' model types. No other
    config rule speaks about such a config: their facts are about other modules.

    ## Why is this bad?
    Loading the checkpoint into another module (llama, for instance) reads the keys they share
    and ignores the rest: biases, norms, activations and attention patterns that model type
    needs are silently dropped.

    ## Example
    ```json
    {"model_type": "falcon_mamba"}
    ```

    ## Fix
    None in config.json; use the candle module written for that architecture, if there is one.

    ## Candle source
    candle-transformers-0.11.0/src/models/mod.rs:1-120 (the list of modules); each module's
    `Config` has no `model_type` field and ignores unknown keys.

    ## Verification
    static-only, reported NOT-PROBED with why.

    ## References
    - candle-transformers-0.11.0/src/models/mod.rs (the modules candle 0.11.0 has)
    - candle-transformers-0.9.1/src/models/mod.rs and 0.9.2's (qwen3, qwen3_moe, olmo2 added)
    """

    code = "PK114"
    name = "no-candle-module"
    group = "config"
    families = ("*",)
    severity = "warning"
    effect = "none"
    fix_title = "Run the checkpoint with the candle module for its architecture"
    probe_kind = "static-only"
    not_probed = "the target candle release has no module for this model type: there is nothing to run"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc = ctx.facts.config
        if ctx.family is not None or doc is None or not isinstance(doc.value, dict):
            return
        release = ctx.target.candle
        absent = ctx.detected  # a module portkit checks, which the target's release does not have yet
        if absent is not None:
            yield self.finding(
                ctx,
                f"candle {release} has no `{absent.name}` module; it arrived in {absent.exists.since} "
                f"({absent.exists.since_by}): upgrade candle, or this checkpoint has no module to run in",
                keys=("model_type",) if "model_type" in doc.value else ("architectures",),
                transformers_value=doc.value.get("model_type"),
                candle_value=None,
            )
            return
        enc = detect_encoder(doc.value)
        if enc is not None and key(ADDED[enc.name]) > key(release):
            yield self.finding(
                ctx,
                f"candle {release} has no `{enc.name}` module; it arrived in {ADDED[enc.name]}: upgrade candle, or "
                "this checkpoint has no module to run in",
                keys=("model_type",) if "model_type" in doc.value else ("architectures",),
                transformers_value=doc.value.get("model_type"),
                candle_value=None,
            )
            return
        if enc is not None:  # an embedding model candle has a module for: the PK6xx rules speak
            return
        mt = doc.value.get("model_type")
        archs = doc.value.get("architectures")
        if isinstance(mt, str):
            what, keys = f"`model_type` `{mt}`", ("model_type",)
        elif isinstance(archs, list) and archs:
            what, keys = f"`architectures` {archs[0]!r}", ("architectures",)
        else:
            what, keys = f"`model_type` {num(mt)}", ("model_type",)
        covered = MODULE_FOR.get(mt) if isinstance(mt, str) else None
        if covered is not None and key(release) < key(ADDED[covered]):
            msg, covered = f"candle {release} has no module for {what}; `{covered}` arrived in {ADDED[covered]}", None
        elif covered is not None and (
            path := UNCHECKED_PATHS.get(archs[0] if isinstance(archs, list) and archs else "")
        ):
            msg = f"candle {release}'s `{covered}` module reads {what} {path}"
        elif covered is not None:
            msg = f"candle {release} has a `{covered}` module for {what}; portkit does not check that module yet"
        else:
            msg = f"candle {release} has no module for {what}"
        yield self.finding(ctx, msg, keys=keys, transformers_value=mt, candle_value=covered)


# --- PK115 ---------------------------------------------------------------------------------------


def _candle_window(ctx: Context) -> tuple[list[float], list[float]]:
    """Keys candle attends to at the last position, per layer, in prefill and in decode
    (math.inf: every earlier key)."""
    fv, fam = ctx.fv, ctx.family
    assert fv is not None and fam is not None
    n = fv.get("num_hidden_layers") or 0
    sw, how = fv.get("sliding_window"), fam.traits.sliding_window
    inf = math.inf
    # candle's masks are `j + sw < i` (sw+1 keys), and only when seq_len > 1; the caches are
    # not trimmed, except gemma3's RotatingKvCache(sliding_window) on its sliding layers
    if how == "every-layer" and isinstance(sw, int):
        return [sw + 1] * n, [inf] * n
    if how == "pattern" and isinstance(sw, int):
        p = fv.get("sliding_window_pattern") or 1
        slides = [bool((i + 1) % p) for i in range(n)]
        return [sw + 1 if s else inf for s in slides], [sw if s else inf for s in slides]
    if how == "layer-types" and isinstance(sw, int):
        types = fv.get("layer_types") or []
        slides = [i < len(types) and types[i] == "sliding_attention" for i in range(n)]
        # the cache keeps `effective_sliding_window` (gemma4/config.rs:115-121): half the window, plus one,
        # under `use_bidirectional_attention: "all"`
        kept = sw // 2 + 1 if fv.get("use_bidirectional_attention") == "all" else sw
        return [sw + 1 if s else inf for s in slides], [kept if s else inf for s in slides]
    return [inf] * n, [inf] * n


class SlidingWindowSemantics(Rule):
    """candle's module attends to other keys than transformers past the sliding window.

    ## What it does
    Computes, per layer, how many keys transformers 5 and the family's candle module keep at
    the last position, in a full-prompt forward (prefill) and in one-token-at-a-time decoding
    with the KV cache, and names the sequence length from which they differ. It is an error
    when the target's `--max-tokens` reaches that length, else a warning.

    ## Why is this bad?
    transformers keeps `sliding_window` keys (`kv_idx > q_idx - sliding_window`). candle's masks keep
    `sliding_window`+1 (`j + sw < i` is masked) and are built only when more than one token is fed, and its
    caches are never trimmed (gemma3's and gemma4's sliding layers excepted: a RotatingKvCache of the window):
    so decode attends to every key. qwen2 and qwen2_moe apply the window to every layer even with
    `use_sliding_window: false` (where transformers 5 saves qwen2's as null and qwen2_moe's as 0, a window of
    one key in candle's prefill); gemma2 applies it to every layer where transformers alternates; phi3 never
    applies one. Short prompts agree; past the window the model silently differs.

    ## Example
    ```json
    {"model_type": "mistral", "sliding_window": 4096, "max_position_embeddings": 32768}
    ```

    ## Fix
    Sometimes: for qwen2 and qwen2_moe with `use_sliding_window: false`, `portkit fix --write` writes
    `sliding_window` = `max_position_embeddings` (transformers ignores the key there). Otherwise
    none in config.json (a smaller window fixes prefill and breaks decode); keep sequences
    shorter than the length named, or trim candle's KV cache to the window in your code.

    ## Candle source
    candle-transformers-0.11.0/src/models/mistral.rs:402-406, mixtral.rs:448, qwen2.rs:303-314,
    qwen2_moe.rs:433-458,
    gemma2.rs:398-413, gemma3.rs:192-193 and :403, gemma4/text.rs:271-275 and :487-493 (the layers
    `layer_types` names, config.rs:139-144), starcoder2.rs:306-310, phi3.rs:386-395;
    qwen3.rs:126-128 (`sliding window is not supported`, also reached from qwen3_moe.rs:211;
    smol/smollm3.rs:172-175 the same).

    ## Verification
    numeric: at a prompt longer than the window, candle differs from transformers; with the
    probe patch (`sliding_window` one less) candle's prefill agrees. phi3 (no window in candle):
    candle agrees with transformers run without `sliding_window`; shorter runs show nothing.

    ## References
    - transformers `masking_utils.py:96-97` (a window of W keeps the last W keys)
    - tests/native/test_family_runners.py `test_known_candle_differences_stay_visible` (candle's
      window, measured against transformers on generated fixtures)
    - https://github.com/huggingface/candle/issues/1927, https://github.com/EricLBuehler/mistral.rs/issues/82
    """

    code = "PK115"
    name = "sliding-window-semantics"
    group = "config"
    families = (
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "smollm3",
        "gemma2",
        "gemma3",
        "starcoder2",
        "phi3",
        "gemma4",
    )
    severity = "warning"
    effect = "silent"
    fix_availability = "sometimes"
    fix_title = "Keep sequences shorter than the length named, or trim candle's KV cache to the window"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None or not fv.ok:
            return
        if fam.traits.sliding_window == "unsupported":
            if fv.get("use_sliding_window"):
                yield self.finding(
                    ctx,
                    f"transformers applies `sliding_window`={num(ftv.get('sliding_window'))} "
                    f"(`use_sliding_window`=true); {module(ctx)} fails at build with `sliding window is not supported`",
                    keys=("use_sliding_window",),
                    transformers_value=ftv.get("sliding_window"),
                    severity="error",
                    probe_kind="crash",
                    expect="sliding window is not supported",
                )
            return
        n = fv.get("num_hidden_layers") or 0
        sw_t = ftv.get("sliding_window")
        keep_t = [sw_t if s and isinstance(sw_t, int) else math.inf for s in ftv.sliding_layers]
        if len(keep_t) != n:
            return
        prefill, decode = _candle_window(ctx)
        # candle masks only a multi-token forward: a prefill difference needs a prompt that long
        # fed at once, a decode difference only a sequence that long
        first_prefill = min(
            (min(kt, kp) + 1 for kt, kp in zip(keep_t, prefill, strict=False) if kt != kp), default=math.inf
        )
        first_decode = min(
            (min(kt, kd) + 1 for kt, kd in zip(keep_t, decode, strict=False) if kt != kd), default=math.inf
        )
        first = min(first_prefill, first_decode)
        mp = fv.get("max_position_embeddings")
        if first == math.inf or (isinstance(mp, int) and first > mp):
            return
        first = int(first)
        t_desc = (
            f"keeps `sliding_window`={num(sw_t)} keys on {sum(1 for k in keep_t if k != math.inf)} of {n} layers"
            if any(k != math.inf for k in keep_t)
            else "applies no sliding window"
        )
        c_parts = []
        if any(k != math.inf for k in prefill):
            c_parts.append(
                f"keeps {int(min(prefill))} keys on {sum(1 for k in prefill if k != math.inf)} of {n} layers in prefill"
            )
        else:
            c_parts.append("applies no window in prefill")
        c_parts.append(
            "keeps every key in decode" if all(k == math.inf for k in decode) else f"keeps {int(min(decode))} in decode"
        )
        max_tokens, prompt = ctx.target.max_tokens, ctx.target.prefill_tokens
        severe = (max_tokens is not None and max_tokens >= first_decode) or (
            prompt is not None and prompt >= first_prefill
        )
        plan = f"; you plan {max_tokens} tokens" if max_tokens is not None else ""
        if first_decode == math.inf and ctx.target.max_prompt_tokens is not None:
            plan += f" in prompts of at most {ctx.target.max_prompt_tokens}"
        patch = None
        windowed = [k for k in prefill if k != math.inf]
        # the patch that makes candle's prefill keep transformers' keys: only where candle reads
        # the window (not phi3) and applies it to the layers transformers slides (not gemma2)
        same_layers = all((kt != math.inf) == (kp != math.inf) for kt, kp in zip(keep_t, prefill, strict=False))
        if isinstance(sw_t, int) and sw_t > 1 and windowed and all(k == sw_t + 1 for k in windowed) and same_layers:
            patch = {"sliding_window": sw_t - 1}
        elif all(k == math.inf for k in keep_t) and windowed and isinstance(mp, int):
            # transformers applies none (qwen2's null window, qwen2_moe's 0): candle's reaching no key is the same
            patch = {"sliding_window": mp}
        # a config that does not opt in to the window (qwen2's `use_sliding_window`): transformers
        # ignores the key, so a window candle never reaches (`max_position_embeddings`) changes nothing
        opts_in = "use_sliding_window" in ftv.values
        fixable = opts_in and not any(k != math.inf for k in keep_t) and ftv.get("use_sliding_window") is not True
        # a module that applies no window at all (phi3): transformers without one computes what
        # candle does, so verify measures this finding's own effect (none before `first` tokens)
        # instead of confirming it on whatever else makes candle differ
        no_window = patch is None and all(k == math.inf for k in prefill + decode)
        edit = as_candle.edit("no sliding window", config={"sliding_window": None}) if no_window else None
        yield self.finding(
            ctx,
            f"transformers {t_desc}; {module(ctx)} {' and '.join(c_parts)}: they differ from {first} tokens on{plan}",
            keys=("sliding_window",),
            transformers_value=sw_t,
            candle_value=fv.get("sliding_window"),
            severity="error" if severe else "warning",
            fix_edits=patch if fixable else None,
            probe_patch=patch,
            as_candle=edit,
        )


# --- PK116 / PK117: activations ------------------------------------------------------------------

# transformers ACT2FN name or candle Activation variant (they spell them alike) -> the function it computes
_ACT = {
    "gelu": "erf GELU",
    "gelu_pytorch_tanh": "tanh GELU",
    "gelu_new": "tanh GELU",
    "silu": "SiLU",
    "swish": "SiLU",
    "relu": "ReLU",
}


def _both_activations(ctx: Context) -> bool:
    """A module that reads either of two activation keys (gemma) has both set."""
    fv, fam = ctx.fv, ctx.family
    keys = fam.traits.activation_keys if fam is not None else ()
    return bool(fv and fv.ok and len(keys) == 2 and all(fv.get(k) for k in keys))


class ActivationDiffers(Rule):
    """transformers and the candle module compute different activation functions from the same name.

    ## What it does
    Compares the MLP activation transformers 5 uses (after its own rewrites) with the
    `candle_nn::Activation` the module parses from config.json.

    ## Why is this bad?
    Gemma 1 checkpoints on the hub say `hidden_act: "gelu"`. transformers 5 reads that as the
    tanh approximation (`gelu_pytorch_tanh`); candle's serde maps `gelu` to `Activation::Gelu`,
    the exact erf GELU. Every MLP then computes slightly other numbers (1.8e-3 on the logits
    of portkit's generated gemma fixture; docs/measurements.md, "Rule effects"), silently.

    ## Example
    ```json
    {"model_type": "gemma", "hidden_act": "gelu"}
    ```
    Use instead:
    ```json
    {"model_type": "gemma", "hidden_act": "gelu_pytorch_tanh"}
    ```

    ## Fix
    `portkit fix --write` writes the name transformers uses; transformers reads it unchanged.

    ## Candle source
    candle-nn-0.11.0/src/activation.rs:5-27 (`gelu` is `Gelu`, erf; `gelu_pytorch_tanh` is
    `GeluPytorchTanh`), candle-transformers-0.11.0/src/models/gemma.rs:37-43.

    ## Verification
    numeric: candle differs from transformers and agrees once the probe patch writes the tanh name.

    ## References
    - transformers `models/gemma/configuration_gemma.py:89-94`
    """

    code = "PK116"
    name = "activation-differs"
    group = "config"
    families = (
        "gemma",
        "gemma2",
        "gemma3",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen3",
        "qwen3_moe",
        "phi3",
        "olmo2",
        "starcoder2",
        "stable_lm",
    )
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = "Write the activation name transformers uses"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None or not fv.ok or _both_activations(ctx):
            return
        keys = fam.traits.activation_keys
        key = next((k for k in keys if fv.get(k) is not None), keys[0])  # the one candle read
        candle = fv.get(key)
        trans = ftv.get(fam.traits.transformers_activation_key)
        if not isinstance(candle, str) or not isinstance(trans, str):
            return
        tf, cf = _ACT.get(trans), _ACT.get(candle)
        if tf is None or cf is None or tf == cf:
            return
        written = ctx.facts.config.value.get(key) if ctx.facts.config else None
        edits = {key: trans}
        yield self.finding(
            ctx,
            f'transformers uses `{trans}` ({tf}) for `{key}`="{written}"; {module(ctx)} parses it as `{candle}` ({cf})',
            keys=(key,),
            transformers_value=trans,
            candle_value=candle,
            fix_edits=edits,
            probe_patch=edits,
        )


class HiddenActAndHiddenActivation(Rule):
    """A gemma config sets both `hidden_act` and `hidden_activation`, or neither; candle's gemma refuses to build.

    ## What it does
    Flags a `gemma` config where both keys hold an activation, or neither does.

    ## Why is this bad?
    transformers' Gemma reads `hidden_act` and ignores `hidden_activation`. candle's
    `Config::hidden_act()` bails when both are set, so `Model::new` fails with `both
    hidden_act and hidden_activation are set` (gemma-1.1 configs carry both; a transformers 5
    re-save keeps both). With neither, transformers uses its default `gelu_pytorch_tanh` and
    candle fails with `none of hidden_act and hidden_activation are set`.

    ## Example
    ```json
    {"model_type": "gemma", "hidden_act": "gelu", "hidden_activation": "gelu_pytorch_tanh"}
    ```
    Use instead:
    ```json
    {"model_type": "gemma", "hidden_act": "gelu_pytorch_tanh", "hidden_activation": null}
    ```

    ## Fix
    `portkit fix --write` writes `hidden_activation: null` (candle's `Option` reads null as
    unset) and the `hidden_act` transformers uses; transformers' values do not change.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma.rs:20-22 (both `Option<Activation>`), :37-43
    (`both hidden_act and hidden_activation are set`), :137.

    ## Verification
    crash: candle's `Model::new` must fail with that message.

    ## References
    - candle-transformers-0.11.0/src/models/gemma.rs:37-43 (the error text)
    - tests/native/test_family_runners.py `test_refusals_carry_candles_text`
    """

    code = "PK117"
    name = "hidden-act-and-hidden-activation"
    group = "config"
    families = ("gemma",)
    severity = "error"
    effect = "load-error"
    fix_availability = "always"
    fix_title = "Write `hidden_activation: null` and the `hidden_act` transformers uses"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv = ctx.fv, ctx.ftv
        if (
            fv is not None
            and fv.ok
            and ftv is not None
            and fv.get("hidden_act") is None
            and fv.get("hidden_activation") is None
        ):
            trans = ftv.get("hidden_act")
            yield self.finding(
                ctx,
                f"transformers uses `hidden_act`=`{trans}` (its default); {module(ctx)} fails at build with "
                "`none of hidden_act and hidden_activation are set`",
                location=location((1, 1)),
                transformers_value=trans,
                candle_value={"error": "none of hidden_act and hidden_activation are set"},
                fix_edits={"hidden_act": trans},
                expect="none of hidden_act and hidden_activation are set",
                help="Write the `hidden_act` transformers uses",
            )
            return
        if not _both_activations(ctx):
            return
        assert ctx.ftv is not None
        trans = ctx.ftv.get("hidden_act")
        yield self.finding(
            ctx,
            f"transformers reads `hidden_act` (`{trans}`) and ignores `hidden_activation`; {module(ctx)} fails at "
            "build with `both hidden_act and hidden_activation are set`",
            keys=("hidden_activation",),
            transformers_value=trans,
            candle_value={"error": "both hidden_act and hidden_activation are set"},
            fix_edits={"hidden_act": trans, "hidden_activation": None},
            expect="both hidden_act and hidden_activation are set",
        )


# --- PK118: query_pre_attn_scalar -------------------------------------------------------------


class QueryPreAttnScalarIgnored(Rule):
    """gemma2/gemma3 scale attention by `query_pre_attn_scalar`; candle by `head_dim`.

    ## What it does
    Flags `query_pre_attn_scalar` different from `head_dim` in a gemma2 or gemma3 config.

    ## Why is this bad?
    transformers scales queries by `query_pre_attn_scalar ** -0.5`. candle parses the field
    (it is required) and never uses it: the scale is `1/sqrt(head_dim)`. gemma-2-27b (144 vs
    128) and gemma-3-27b (168 vs 128) then run with sharper attention, silently (0.49 on the
    logits of portkit's generated gemma2 fixture with 24 vs 16; docs/measurements.md).

    ## Example
    ```json
    {"model_type": "gemma2", "head_dim": 128, "query_pre_attn_scalar": 144}
    ```

    ## Fix
    None in config.json (`head_dim` also shapes the weights); patch the scale in candle's
    attention.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma2.rs:31, :240 (`1 / sqrt(head_dim)`);
    gemma3.rs:28, :263.

    ## Verification
    numeric, transformers as candle computes: candle differs from transformers and matches
    transformers run with `query_pre_attn_scalar` = `head_dim`.

    ## References
    - transformers `models/gemma2/modeling_gemma2.py:221` (`self.scaling = config.query_pre_attn_scalar**-0.5`)
    """

    code = "PK118"
    name = "query-pre-attn-scalar-ignored"
    group = "config"
    families = ("gemma2", "gemma3")
    severity = "error"
    effect = "silent"
    fix_title = "Scale attention by `query_pre_attn_scalar` in candle; no config edit fixes this"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv = ctx.fv, ctx.ftv
        if fv is None or ftv is None or not fv.ok:
            return
        q, hd = ftv.get("query_pre_attn_scalar"), fv.get("head_dim")
        if not isinstance(q, (int, float)) or not isinstance(hd, int) or q == hd:
            return
        yield self.finding(
            ctx,
            f"transformers scales attention by `query_pre_attn_scalar`={num(q)} (1/sqrt({num(q)})); {module(ctx)} "
            f"never reads it and scales by 1/sqrt(`head_dim`={hd})",
            keys=("query_pre_attn_scalar",),
            transformers_value=q,
            candle_value=hd,
            as_candle=as_candle.edit(f"attention scaled by 1/sqrt({hd})", config={"query_pre_attn_scalar": hd}),
        )


# --- PK119: granite multipliers --------------------------------------------------------------


class GraniteMultipliersIgnored(Rule):
    """granite's embedding, attention, residual and logits multipliers are never read by candle.

    ## What it does
    Flags a granite config whose multipliers are not neutral: `embedding_multiplier`,
    `residual_multiplier` or `logits_scaling` other than 1, or `attention_multiplier` other
    than 1/sqrt(head_dim) (candle's fixed scale).

    ## Why is this bad?
    transformers scales embeddings, the attention scores, each residual branch and the logits
    by these. candle's `GraniteConfig` has no such fields: the model runs as if all were
    neutral, silently (granite-3.1 style values on portkit's generated granite fixture: the
    logits differ by 8.7; docs/measurements.md, "Rule effects").

    ## Example
    ```json
    {"model_type": "granite", "embedding_multiplier": 12.0, "attention_multiplier": 0.015625,
     "residual_multiplier": 0.22, "logits_scaling": 8.0}
    ```

    ## Fix
    None in config.json; apply the multipliers in candle's granite forward.

    ## Candle source
    candle-transformers-0.11.0/src/models/granite.rs:38-52 (no multiplier fields), :295
    (`1/sqrt(head_dim)`), :397-402, :434-443.

    ## Verification
    numeric, transformers as candle computes: candle differs from transformers and matches
    transformers with neutral multipliers and `attention_multiplier` = 1/sqrt(head_dim).

    ## References
    - transformers `models/granite/modeling_granite.py:124, 275, 280, 388, 489` (the four multipliers)
    """

    code = "PK119"
    name = "granite-multipliers-ignored"
    group = "config"
    families = ("granite",)
    severity = "error"
    effect = "silent"
    fix_title = "Apply the granite multipliers in candle's forward; no config edit fixes this"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv = ctx.fv, ctx.ftv
        if fv is None or ftv is None or not fv.ok:
            return
        hd = fv.get("head_dim")
        if not isinstance(hd, int) or hd <= 0:
            return
        neutral = {
            "embedding_multiplier": 1.0,
            "attention_multiplier": 1.0 / math.sqrt(hd),
            "residual_multiplier": 1.0,
            "logits_scaling": 1.0,
        }
        off = {
            k: v
            for k, v in ftv.multipliers.items()
            if isinstance(v, (int, float)) and not math.isclose(float(v), neutral[k], rel_tol=1e-6)
        }
        if not off:
            return
        shown = ", ".join(f"`{k}`={num(v)}" for k, v in off.items())
        yield self.finding(
            ctx,
            f"transformers applies {shown}; {module(ctx)} never reads them (it scales attention by 1/sqrt({hd}) and "
            "nothing else)",
            keys=(next(iter(off)),),
            transformers_value=off,
            candle_value={k: neutral[k] for k in off},
            as_candle=as_candle.edit("neutral multipliers", config=neutral),
        )


# --- PK120: lm_head vs tie_word_embeddings (config side) ----------------------------------------


class LmHeadIgnoresTie(Rule):
    """The module builds `lm_head` its own way, whatever `tie_word_embeddings` says.

    ## What it does
    Reads `tie_word_embeddings` as transformers does (with the family's default) and flags the
    modules that ignore it: mistral, mixtral, stable_lm, granite, phi and qwen2_moe always load
    `lm_head.weight`; gemma, gemma2, gemma3 and starcoder2 always use `embed_tokens`.
    (portkit's weight rules check the tensors themselves.)

    ## Why is this bad?
    A tied checkpoint saved by transformers has no `lm_head.weight`, so mistral-style modules
    fail at load with `cannot find tensor lm_head.weight` (all granite-3.x). An untied gemma or
    starcoder2 checkpoint ships an `lm_head.weight` that candle never reads: other logits,
    silently.

    ## Example
    ```json
    {"model_type": "granite", "tie_word_embeddings": true}
    ```

    ## Fix
    None in config.json (the flag is what transformers computes with); for a tied checkpoint,
    save `lm_head.weight` as a copy of `model.embed_tokens.weight`.

    ## Candle source
    candle-transformers-0.11.0/src/models/mistral.rs:385, mixtral.rs:426, stable_lm.rs:383,
    granite.rs:448, phi.rs:334, qwen2_moe.rs:421 (always `lm_head`); gemma.rs:359, gemma2.rs:378, gemma3.rs:458,
    starcoder2.rs:288 (always `embed_tokens`).

    ## Verification
    crash for the always-loading modules (`cannot find tensor lm_head.weight`); numeric for the
    always-tied ones.

    ## References
    - the Candle source above (which modules always load `lm_head.weight`, which always tie)
    - tests/native/test_family_runners.py `test_requested_tensors_name_the_missing_lm_head`
    """

    code = "PK120"
    name = "lm-head-ignores-tie"
    group = "config"
    # the modules whose `LM_HEAD` is always-loaded or always-tied (portkit.families)
    families = (
        "mistral",
        "mixtral",
        "stable_lm",
        "granite",
        "phi",
        "qwen2_moe",
        "gemma",
        "gemma2",
        "gemma3",
        "starcoder2",
    )
    severity = "warning"
    effect = "load-error"
    fix_title = "Ship the `lm_head` the module builds; no config edit fixes this"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv, fam = ctx.ftv, ctx.family
        if ftv is None or fam is None:
            return
        tie = ftv.get("tie_word_embeddings")
        src = "" if "tie_word_embeddings" in ftv.sources and ftv.sources["tie_word_embeddings"] else " (its default)"
        keys = ("tie_word_embeddings",)
        lm_head = fam.traits.lm_head
        if lm_head == "always-loaded" and tie is True:
            st = ctx.facts.safetensors
            if st is not None and "lm_head.weight" in st.tensors:
                # the checkpoint has one: candle loads it, transformers ties over it
                yield self.finding(
                    ctx,
                    f"transformers ties `lm_head` to `embed_tokens` (`tie_word_embeddings`=true{src}) and never reads "
                    f"the checkpoint's `lm_head.weight`; {module(ctx)} always loads `lm_head.weight` and uses it",
                    keys=keys,
                    transformers_value=True,
                    candle_value="lm_head.weight",
                    probe_kind="numeric",
                    help="Make the checkpoint's `lm_head.weight` a copy of `model.embed_tokens.weight`, as "
                    "transformers computes",
                    as_candle=as_candle.edit("the stored lm_head", config={"tie_word_embeddings": False}),
                )
                return
            yield self.finding(
                ctx,
                f"transformers ties `lm_head` to `embed_tokens` (`tie_word_embeddings`=true{src}) and saves no "
                f"`lm_head.weight`; {module(ctx)} always loads `lm_head.weight`",
                keys=keys,
                transformers_value=True,
                candle_value="lm_head.weight",
                expect="lm_head.weight",
            )
        elif lm_head == "always-tied" and tie is False:
            yield self.finding(
                ctx,
                f"transformers uses its own `lm_head.weight` (`tie_word_embeddings`=false{src}); {module(ctx)} always "
                "uses `embed_tokens` as lm_head and never reads `lm_head.weight`",
                keys=keys,
                transformers_value=False,
                candle_value="model.embed_tokens.weight",
                severity="error",
                probe_kind="numeric",
                as_candle=as_candle.edit("the embeddings as lm_head", config={"tie_word_embeddings": True}),
            )


# --- PK121: gemma3's full-attention KV cache and more than one KV head ---------------------------


class Gemma3PrefillNeedsOneKvHead(Rule):
    """gemma3 with more than one KV head: candle fails on any prompt longer than one token.

    ## What it does
    Flags a gemma3 config with `num_key_value_heads` > 1 and at least one full-attention layer
    (every `sliding_window_pattern`-th layer).

    ## Why is this bad?
    candle's gemma3 appends the keys of a full-attention layer to a plain `KvCache` straight
    after transposing them. With more than one KV head and more than one token that tensor is not
    contiguous, and `KvCache::append` calls `slice_set` on it as is: the forward fails with
    `slice-set only supports contiguous tensors`. gemma-3-4b and larger have 4 or more KV heads;
    gemma-3-1b has one. Feeding the prompt one token at a time works (and agrees).

    ## Example
    ```json
    {"model_type": "gemma3_text", "num_key_value_heads": 4, "sliding_window_pattern": 6}
    ```

    ## Fix
    None in config.json; feed the prompt one token at a time, or make the keys contiguous before
    `KvCache::append` in candle's gemma3.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma3.rs:195 (`KvCache::new` for full-attention
    layers), :233-248 (transpose, then `cache.append`); candle-nn-0.11.0/src/kv_cache.rs:76
    (`slice_set(src, ...)` without `.contiguous()`, unlike the rotating cache at :241);
    candle-core-0.11.0/src/error.rs:148.

    ## Verification
    crash: candle's forward over a multi-token prompt must fail with that message.

    ## References
    - the Candle source above (the mask's shape against the attention weights' shape)
    - tests/native/test_family_runners.py `test_refusals_carry_candles_text`
    """

    code = "PK121"
    name = "gemma3-prefill-needs-one-kv-head"
    group = "config"
    families = ("gemma3",)
    severity = "error"
    effect = "runtime-error"
    fix_title = "Feed the prompt one token at a time, or patch candle's gemma3 KV cache; no config edit fixes this"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv = ctx.fv
        if fv is None or not fv.ok:
            return
        kv, n, p = fv.get("num_key_value_heads"), fv.get("num_hidden_layers") or 0, fv.get("sliding_window_pattern")
        if not isinstance(kv, int) or kv <= 1 or not isinstance(p, int) or p <= 0:
            return
        full = sum(1 for i in range(n) if (i + 1) % p == 0)
        if not full:
            return
        yield self.finding(
            ctx,
            f"transformers runs any prompt; {module(ctx)} appends the non-contiguous keys of its {full} full-attention "
            f"layer(s) to a `KvCache`, so with `num_key_value_heads`={kv} a prompt of more than one token fails with "
            "`slice-set only supports contiguous tensors`",
            keys=("num_key_value_heads",),
            transformers_value=kv,
            candle_value={"error": "slice-set only supports contiguous tensors"},
            expect="slice-set only supports contiguous tensors",
        )


# --- PK122: gemma3's bidirectional attention -------------------------------------------------------


class BidirectionalAttentionIgnored(Rule):
    """transformers' gemma3 or gemma4 attends both ways (`use_bidirectional_attention`); candle's is causal.

    ## What it does
    Flags a gemma3 config with `use_bidirectional_attention: true`, and a gemma4 one with
    `use_bidirectional_attention: "all"`.

    ## Why is this bad?
    transformers then builds bidirectional masks: full-attention layers see every position,
    sliding layers a window around each position, and the window itself becomes
    `sliding_window // 2 + 1`. candle's gemma3 never reads the key: its masks are causal and
    its window is `sliding_window`. Every position but the last attends to other keys, so
    the logits differ from the first token on, silently (EmbeddingGemma-style checkpoints).
    candle's gemma4 reads the key only to size its sliding layers' rotating cache
    (`effective_sliding_window`); its masks are causal too.

    ## Example
    ```json
    {"model_type": "gemma3_text", "use_bidirectional_attention": true}
    ```

    ## Fix
    None in config.json (false would change transformers' model); build a bidirectional mask
    in candle's gemma3 for such checkpoints.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma3.rs:13-38 (`Config`: no such field),
    :391-413 (`prepare_decoder_attention_mask`: `i < j` is always masked); gemma4/config.rs:115-121
    (the key sizes the rotating cache only), gemma4/text.rs:479-513 (causal masks).

    ## Verification
    numeric, transformers as candle computes: candle differs from transformers and matches it
    run with `use_bidirectional_attention` false (no config edit makes candle attend both ways).

    ## References
    transformers `models/gemma3/configuration_gemma3.py:100-102`, `modeling_gemma3.py:292,
    520-522`; `models/gemma4/configuration_gemma4.py` (`__post_init__`: "all" makes it non-causal
    and halves the window).
    """

    code = "PK122"
    name = "bidirectional-attention-ignored"
    group = "config"
    families = ("gemma3", "gemma4")
    severity = "error"
    effect = "silent"
    fix_title = "Build a bidirectional mask in candle's module; no config edit fixes this"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        switch = fam.traits.bidirectional if fam is not None else None
        if fv is None or ftv is None or not fv.ok or switch is None:
            return
        both_ways, causal_edit = switch
        if ftv.get("use_bidirectional_attention") != both_ways:
            return
        sw = fv.get("sliding_window")
        window = f" and a `sliding_window` of {sw // 2 + 1} around each position" if isinstance(sw, int) else ""
        shown = json.dumps(both_ways)
        reads = (
            "reads the key only to size its sliding cache"
            if "use_bidirectional_attention" in fv.values
            else "never reads the key"
        )
        yield self.finding(
            ctx,
            f"transformers attends both ways (`use_bidirectional_attention`={shown}{window}); {module(ctx)} {reads} "
            "and masks causally",
            keys=("use_bidirectional_attention",),
            transformers_value=both_ways,
            candle_value=False,
            as_candle=as_candle.edit("causal attention", config=causal_edit),
        )


# --- PK123: gemma2's softcapping left to transformers' default ---------------------------------------

_SOFTCAPPING = ("final_logit_softcapping", "attn_logit_softcapping")


class SoftcappingKeyAbsent(Rule):
    """gemma2 without a softcapping key: transformers caps with its default, candle not at all.

    ## What it does
    Flags a gemma2 config that leaves out `final_logit_softcapping` or
    `attn_logit_softcapping`.

    ## Why is this bad?
    transformers' `Gemma2Config` defaults them to 30.0 and 50.0 and caps the logits and the
    attention scores with `tanh`. candle reads both as `Option<f64>`: an absent key is `None`,
    and `None` skips the capping. The model runs and computes other numbers, silently (max
    logit difference 0.70 without the final cap on a tiny gemma2, 0.013 without the attention
    cap). An explicit `null` means no capping in both.

    ## Example
    ```json
    {"model_type": "gemma2", "query_pre_attn_scalar": 256}
    ```
    Use instead:
    ```json
    {"model_type": "gemma2", "query_pre_attn_scalar": 256, "final_logit_softcapping": 30.0,
     "attn_logit_softcapping": 50.0}
    ```

    ## Fix
    `portkit fix --write` writes the values transformers uses; transformers' model does not
    change.

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma2.rs:29-30 (`Option<f64>`), :243-246 and
    :442-445 (`None => logits`).

    ## Verification
    numeric: candle differs from transformers and agrees once the probe patch writes the
    defaults.

    ## References
    transformers `models/gemma2/configuration_gemma2.py:89-90`.
    """

    code = "PK123"
    name = "softcapping-key-absent"
    group = "config"
    families = ("gemma2",)
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = "Write the softcapping values transformers uses"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, doc = ctx.fv, ctx.ftv, ctx.facts.config
        if fv is None or ftv is None or not fv.ok or doc is None or not isinstance(doc.value, dict):
            return
        absent = {k: ftv.get(k) for k in _SOFTCAPPING if k not in doc.value and isinstance(ftv.get(k), (int, float))}
        if not absent:
            return
        shown = " and ".join(f"`{k}`={num(v)}" for k, v in absent.items())
        yield self.finding(
            ctx,
            f"transformers caps with {shown} by default; {module(ctx)} reads the absent "
            f"key{'s' if len(absent) > 1 else ''} as `None` and does not cap",
            location=location((1, 1)),
            transformers_value=absent,
            candle_value=dict.fromkeys(absent),
            fix_edits=absent,
            probe_patch=absent,
        )


class NoRopeLayersDiffer(Rule):
    """SmolLM3's layers without RoPE: transformers' and candle's are other layers.

    ## What it does
    Computes which layers skip the rotary embedding (SmolLM3's NoPE layers) as transformers 5 does
    and as candle's smollm3 does, and names the layers where they differ.

    ## Why is this bad?
    transformers reads `no_rope_layers` (1: the layer rotates), and where config.json has none it
    computes one from `no_rope_layer_interval`, 4 by default: every fourth layer has no RoPE.
    candle reads the list where it is, else the interval where config.json writes it, else
    rotates every layer. A config without either key (hand-written, or trimmed) then rotates
    layers transformers leaves unrotated, and the model silently computes other numbers.

    ## Example
    ```json
    {"model_type": "smollm3", "num_hidden_layers": 36}
    ```

    ## Fix
    `portkit fix --write` writes transformers' `no_rope_layers` list, which both read.

    ## Candle source
    candle-transformers-0.11.0/src/models/smol/smollm3.rs:39-56 (`Config::should_skip_rope`), :365-380.

    ## Verification
    numeric: candle differs from transformers, and agrees once the probe patch writes the list.

    ## References
    - transformers `models/smollm3/configuration_smollm3.py` (`__post_init__`: `no_rope_layers` from
      `no_rope_layer_interval`)
    """

    code = "PK124"
    name = "no-rope-layers-differ"
    group = "config"
    families = ("smollm3",)
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = "Write the `no_rope_layers` list transformers computes"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv = ctx.fv, ctx.ftv
        if fv is None or ftv is None or not fv.ok:
            return
        from portkit.families.smollm3 import skips_rope

        listed = ftv.get("no_rope_layers")
        n = fv.get("num_hidden_layers") or 0
        if not isinstance(listed, list) or len(listed) < n:
            return
        t_skip = [i for i in range(n) if not listed[i]]
        c_skip = [i for i in range(n) if skips_rope(fv.values, i)]
        if t_skip == c_skip:
            return
        src = "as written" if ftv.sources.get("no_rope_layers") else "from `no_rope_layer_interval`"
        edits = {"no_rope_layers": listed[:n]}
        yield self.finding(
            ctx,
            f"transformers leaves {_layers(t_skip)} without RoPE (`no_rope_layers` {src}); "
            f"{module(ctx)} leaves {_layers(c_skip)} without it",
            keys=("no_rope_layers", "no_rope_layer_interval"),
            transformers_value=t_skip,
            candle_value=c_skip,
            fix_edits=edits,
            probe_patch=edits,
        )


class AttentionBiasKeyAbsent(Rule):
    """No `attention_bias` key: transformers' GLM-4 adds q/k/v biases, candle's glm4_new does not.

    ## What it does
    Flags a GLM-4 (`Glm4ForCausalLM`) config.json without `attention_bias`.

    ## Why is this bad?
    transformers' `Glm4Config` defaults `attention_bias` to true and loads the q/k/v bias
    tensors. candle's glm4_new reads the key as `Option<bool>` and builds the projections
    without biases when it is absent: the checkpoint's biases are never read (PK202 names them)
    and every layer computes other numbers, without an error.

    ## Example
    ```json
    {"model_type": "glm4", "architectures": ["Glm4ForCausalLM"], "hidden_size": 4096}
    ```

    ## Fix
    `portkit fix --write` writes `"attention_bias": true`, which both read.

    ## Candle source
    candle-transformers-0.11.0/src/models/glm4_new.rs:19 (`attention_bias: Option<bool>`), :143-160
    (`cfg.attention_bias.unwrap_or(false)`), the same in 0.9.2 to 0.11.1.

    ## Verification
    numeric, transformers as candle computes: candle's logits differ from transformers' and match
    transformers run with `attention_bias` false (no biases, as candle's module).

    ## References
    - transformers `models/glm4/configuration_glm4.py` (`attention_bias: bool = True`)
    """

    code = "PK125"
    name = "attention-bias-key-absent"
    group = "config"
    families = ("glm4_new",)
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = 'Write `"attention_bias": true`, transformers\' default'
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, doc = ctx.fv, ctx.ftv, ctx.facts.config
        if fv is None or ftv is None or not fv.ok or doc is None or not isinstance(doc.value, dict):
            return
        if "attention_bias" in doc.value or ftv.get("attention_bias") is not True or fv.get("attention_bias"):
            return
        edits = {"attention_bias": True}
        yield self.finding(
            ctx,
            f"transformers adds q/k/v biases (`attention_bias` absent: its default true); {module(ctx)} reads the "
            "absent key as false and never reads the biases",
            location=location((1, 1)),
            transformers_value=True,
            candle_value=False,
            fix_edits=edits,
            # judged as PK105 is, on transformers as candle computes (the same biases PK202 names), not
            # on the fix: an empty patch keeps the fix's edits out of candle's run
            probe_patch={},
            as_candle=as_candle.edit("no attention biases", config={"attention_bias": False}),
        )


class PhiQkLayernormOverAllHeads(Rule):
    """phi with `qk_layernorm`: candle applies the per-head LayerNorm to all heads at once and fails.

    ## What it does
    Flags a phi (`PhiForCausalLM`) config.json with `"qk_layernorm": true` and more than one
    attention head.

    ## Why is this bad?
    transformers' phi normalises queries and keys head by head: it reshapes them to
    `[batch, heads, tokens, head_dim]` and applies `q_layernorm` / `k_layernorm`, LayerNorms of
    `head_dim` features. candle's phi loads the same `[head_dim]` weights and applies them to the
    projections before the reshape, `[batch, tokens, heads * head_dim]`: the model loads, then the
    first forward fails with `shape mismatch in layer-norm`. phi-1, phi-1.5 and phi-2 ship with
    `qk_layernorm` false; a checkpoint fine-tuned or converted with it true cannot run.

    ## Example
    ```json
    {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32, "qk_layernorm": true}
    ```

    ## Fix
    None in config.json: the weights need the norm. Apply `q_layernorm` and `k_layernorm` after the
    reshape to heads in a copy of phi.rs (as transformers does).

    ## Candle source
    candle-transformers-0.11.0/src/models/phi.rs:161-168 (`layer_norm(head_dim, ..)`), :197-204
    (applied to `q_proj`'s and `k_proj`'s output), :206-211 (the reshape after), the same in 0.9.1 to
    0.11.1; candle-nn-0.11.0/src/ops.rs:938 (`layer_norm`: `shape mismatch in layer-norm`).

    ## Verification
    crash: candle must fail at the first forward with `shape mismatch in layer-norm`.

    ## References
    - transformers `models/phi/modeling_phi.py` (`PhiAttention`: `q_layernorm` after `view(hidden_shape)`)
    """

    code = "PK131"
    name = "phi-qk-layernorm-over-all-heads"
    group = "config"
    families = ("phi",)
    severity = "error"
    effect = "runtime-error"
    fix_title = "Apply `q_layernorm`/`k_layernorm` per head in a copy of candle's phi.rs; no config edit fixes this"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv = ctx.fv
        if fv is None or not fv.ok or fv.get("qk_layernorm") is not True:
            return
        heads, head_dim = fv.get("num_attention_heads"), fv.get("head_dim")
        if not isinstance(heads, int) or heads < 2 or not isinstance(head_dim, int):
            return  # one head: the LayerNorm over all heads is the one over each
        yield self.finding(
            ctx,
            f"transformers normalises q and k per head (`qk_layernorm` true: {heads} heads of {head_dim}); "
            f"{module(ctx)} applies the {head_dim}-wide LayerNorm to all {heads * head_dim} features at once, "
            "so the first forward fails with `shape mismatch in layer-norm`",
            keys=("qk_layernorm",),
            transformers_value=head_dim,
            candle_value=heads * head_dim,
            expect="shape mismatch in layer-norm",
        )


def _layers(idx: list[int]) -> str:
    if not idx:
        return "no layer"
    shown = ", ".join(str(i) for i in idx[:6]) + (", ..." if len(idx) > 6 else "")
    return f"layer{'s' if len(idx) > 1 else ''} {shown}"


RULES = (
    NoCandleModule,
    SlidingWindowSemantics,
    ActivationDiffers,
    HiddenActAndHiddenActivation,
    QueryPreAttnScalarIgnored,
    GraniteMultipliersIgnored,
    LmHeadIgnoresTie,
    Gemma3PrefillNeedsOneKvHead,
    BidirectionalAttentionIgnored,
    SoftcappingKeyAbsent,
    NoRopeLayersDiffer,
    AttentionBiasKeyAbsent,
    PhiQkLayernormOverAllHeads,
)
