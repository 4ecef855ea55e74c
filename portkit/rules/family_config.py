"""PK1xx for every candle 0.11.0 family: what each family's own module reads differently.

The generalised llama rules (PK101, PK102, PK110, PK112) call the `*_findings` helpers here for a
non-llama family; the rules only a family module has (PK114-PK120) are classes here. Both
compare `ctx.fv` (the family's serde mirror, `portkit.families.<name>`) with `ctx.ftv`
(`family_transformers_view`), and every message names the module: "candle 0.11.0's `qwen3`".
"""

from __future__ import annotations

import math

from portkit.families import BY_NAME, UNCOVERED_CANDLE_MODULES
from portkit.rules.base import Context, Rule, f32, location, num

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, Iterable

    from portkit.findings import Finding

ALL_FAMILIES = tuple(BY_NAME)
OTHER_FAMILIES = tuple(n for n in BY_NAME if n != "llama")
_SOURCE_WORDS = {"rope_parameters": "from `rope_parameters`", "rope_scaling": "from `rope_scaling`"}


def module(ctx: Context) -> str:
    assert ctx.family is not None
    return f"candle 0.11.0's `{ctx.family.name}`"


def source_words(path: tuple[str, ...]) -> str:
    """Where transformers took a value from, in words: 'from `rope_parameters`', 'by default'."""
    if not path:
        return "by default"
    if len(path) == 1:
        return f"from the top-level `{path[0]}`"
    return "from `" + ".".join(path[:-1]) + "`"


def _required(ctx: Context) -> list[str]:
    import importlib

    from portkit.semantics.serde import MISSING

    assert ctx.family is not None
    mod = importlib.import_module(f"portkit.families.{ctx.family.name}")
    return [f.name for f in mod.FIELDS if f.default is MISSING]


# --- PK101: a rope base candle reads from elsewhere (a top-level key, or its default) ---------

# keys that hold a rope base, per family: gemma3 has a second one for its sliding layers
_THETA_KEYS = {"gemma3": ("rope_theta", "rope_local_base_freq")}


def rope_theta_findings(rule: Rule, ctx: Context) -> Iterable[Finding]:
    fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
    if fv is None or ftv is None or fam is None or not fv.ok:
        return
    for key in _THETA_KEYS.get(fam.name, ("rope_theta",)):
        t, c = ftv.get(key), fv.get(key)
        if not isinstance(t, float) or not isinstance(c, (int, float)):
            continue
        if (f32(t) if fam.name == "granite" else t) == c:
            continue
        if key in fv.written:
            tail = f"{module(ctx)} reads the top-level `{key}`={num(c)}"
        else:
            tail = f"{module(ctx)} reads no top-level `{key}` and uses {num(c)}"
        path = ftv.sources.get(key, ())
        yield rule.finding(
            ctx,
            f"transformers uses `{key}`={num(t)} {source_words(path)}; {tail}",
            keys=path or (key,),
            transformers_value=t,
            candle_value=c,
            fix_edits={key: t},
            probe_patch={key: t},
        )


# --- PK102: rope scaling the module ignores or misapplies ---------------------------------------


def rope_scaling_findings(rule: Rule, ctx: Context) -> Iterable[Finding]:
    fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
    if ftv is None or fam is None:
        return
    scaled = [("", ftv.rope_type, ftv.rope_parameters)]
    if ftv.local_rope_type is not None:
        scaled.append(("sliding-attention ", ftv.local_rope_type, ftv.local_rope_parameters))
    for which, rope_type, params in scaled:
        if rope_type == "default":
            continue
        shown = ", ".join(
            f"`{k}`=[{len(v)} values]" if isinstance(v, list) else f"`{k}`={num(v)}"
            for k, v in params.items() if k not in ("rope_type", "type", "rope_theta")
        )
        if fam.name == "phi3" and rope_type == "longrope" and fv is not None and fv.ok and fv.get("rope_scaling") is not None:
            tail = (
                f"{module(ctx)} reads the legacy `rope_scaling` but multiplies the frequencies by the factors "
                "where transformers divides by them, and applies no attention factor"
            )
        else:
            tail = f"{module(ctx)} reads no rope scaling and computes unscaled frequencies"
        yield rule.finding(
            ctx,
            f"transformers applies `{rope_type}` rope scaling to its {which}layers ({shown or 'no parameters'}); {tail}",
            keys=("rope_scaling",) if ctx.has_key("rope_scaling") else ("rope_parameters",),
            transformers_value=params,
            candle_value=fv.get("rope_scaling") if fv is not None and fv.ok else None,
            help=f"No config edit makes {module(ctx)} apply `{rope_type}` scaling as transformers does; "
            "run this checkpoint with an implementation of that scaling",
        )


# --- PK110: a field the module's serde requires is missing --------------------------------------

# what to write for a required key transformers has no value for, because transformers never reads it
_CANDLE_ONLY = {"use_flash_attn": False}


def missing_field_findings(rule: Rule, ctx: Context) -> Iterable[Finding]:
    fv, ftv, doc = ctx.fv, ctx.ftv, ctx.facts.config
    if fv is None or ftv is None or doc is None or not isinstance(doc.value, dict):
        return
    # every missing field, also behind a refused value (PK112): serde names one at a time
    for key in _required(ctx):
        if key in doc.value:
            continue
        value, why = _value_to_write(ctx, key)
        refusal = f"missing field `{key}`"
        yield rule.finding(
            ctx,
            f"{module(ctx)} refuses the config: {refusal}; {why}",
            location=location((1, 1)),
            transformers_value=value,
            candle_value={"refused": refusal},
            fix_edits={key: value} if value is not None else None,
            expect=refusal,
            help=None if value is not None else f"Write `{key}` by hand: transformers has no value for it",
        )


def _value_to_write(ctx: Context, key: str) -> tuple[Any, str]:
    ftv = ctx.ftv
    assert ftv is not None
    if key in _CANDLE_ONLY:
        v = _CANDLE_ONLY[key]
        return v, f"transformers never reads it; {num(v)} runs candle as transformers runs (no flash attention)"
    if key == "max_window_layers":
        n = ftv.get("num_hidden_layers")
        return n, f"transformers' `{ftv.family}` has no such setting and candle never uses it; writing `num_hidden_layers`={num(n)}"
    if key not in ftv.values:
        return None, "transformers has no value for it"
    v = ftv.values[key]
    return v, f"transformers uses {num(v)} {source_words(ftv.sources.get(key, ()))}"


# --- PK112: the module's serde refuses a value -------------------------------------------------


def refused_findings(rule: Rule, ctx: Context) -> Iterable[Finding]:
    fv, ftv, doc = ctx.fv, ctx.ftv, ctx.facts.config
    if fv is None or ftv is None or fv.ok or doc is None or not isinstance(doc.value, dict):
        return
    if fv.missing_field() is not None:
        return  # PK110
    at = fv.refused_at or []
    where = ".".join(at)
    edits, help = None, None
    if at == ["sliding_window"] and doc.value.get("sliding_window") is None:
        edits, help = _null_window_fix(ctx)
    yield rule.finding(
        ctx,
        f"transformers loads this config; {module(ctx)} refuses it" + (f" at `{where}`" if where else "") + f": {fv.refused}",
        keys=tuple(at),
        candle_value={"refused": fv.refused},
        fix_edits=edits,
        expect=fv.refused,
        help=help,
    )


def _null_window_fix(ctx: Context) -> tuple[dict[str, Any] | None, str | None]:
    """`sliding_window: null` where candle wants a number. transformers' qwen2 ignores the key
    unless `use_sliding_window`, and candle keeps `sliding_window`+1 keys: a window of
    `max_position_embeddings` is no window in either. Elsewhere (mixtral) transformers reads
    any window it is given, so no value keeps it unchanged."""
    ftv, fam = ctx.ftv, ctx.family
    assert ftv is not None and fam is not None
    mp = ftv.get("max_position_embeddings")
    if fam.name in ("qwen2",) and ftv.get("use_sliding_window") is not True and isinstance(mp, int):
        return {"sliding_window": mp}, None
    return None, (
        f"No config edit: {module(ctx)} requires a window and transformers' `{fam.name}` applies any window it is given; "
        "build candle's Config in code with a window of at least your longest sequence"
    )


# --- PK114 ---------------------------------------------------------------------------------------


class NoCandleModule(Rule):
    """candle 0.11.0 has no module portkit checks for this `model_type`.

    ## What it does
    Flags a config whose `model_type` (or `architectures[0]`, when `model_type` is absent) maps
    to none of the candle 0.11.0 modules portkit knows (`portkit.families`). It says whether
    candle has a module for it that portkit does not check yet, or none at all. No other
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
    static-only.

    ## References
    - candle-transformers-0.11.0/src/models/mod.rs (the modules candle 0.11.0 has)
    """

    code = "PK114"
    name = "no-candle-module"
    group = "config"
    families = ("*",)
    severity = "warning"
    effect = "none"
    fix_title = "Run the checkpoint with the candle module for its architecture"
    probe_kind = "static-only"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc = ctx.facts.config
        if ctx.family is not None or doc is None or not isinstance(doc.value, dict):
            return
        mt = doc.value.get("model_type")
        archs = doc.value.get("architectures")
        if isinstance(mt, str):
            what, keys = f"`model_type` `{mt}`", ("model_type",)
        elif isinstance(archs, list) and archs:
            what, keys = f"`architectures` {archs[0]!r}", ("architectures",)
        else:
            what, keys = f"`model_type` {num(mt)}", ("model_type",)
        covered = UNCOVERED_CANDLE_MODULES.get(mt) if isinstance(mt, str) else None
        if covered is not None:
            msg = f"candle 0.11.0 has a `{covered}` module for {what}; portkit does not check that module yet"
        else:
            msg = f"candle 0.11.0 has no module for {what}"
        yield self.finding(ctx, msg, keys=keys, transformers_value=mt, candle_value=covered)


# --- PK115 ---------------------------------------------------------------------------------------

# per module: (keys kept by the prefill mask, which layers it masks, keys kept in decode)
# candle's masks are `j + sw < i` (sw+1 keys), and only when seq_len > 1; the caches are not
# trimmed, except gemma3's RotatingKvCache(sliding_window) on its sliding layers
_WINDOW_LINES = {
    "mistral": "mistral.rs:402-406 (`unwrap_or(tgt_len + 1)`, `j + sliding_window < i`), :385-391",
    "mixtral": "mixtral.rs:448",
    "qwen2": "qwen2.rs:291, :303-314 (`use_sliding_window` and `max_window_layers` are never read)",
    "gemma2": "gemma2.rs:398-413 (every layer), :388",
    "gemma3": "gemma3.rs:403, :192-193 (RotatingKvCache), :448 (pattern)",
    "starcoder2": "starcoder2.rs:306-310",
    "phi3": "phi3.rs:386-395 (plain causal mask)",
}


def _candle_window(ctx: Context) -> tuple[list[float], list[float]]:
    """Keys candle attends to at the last position, per layer, in prefill and in decode
    (math.inf: every earlier key)."""
    fv, fam = ctx.fv, ctx.family
    assert fv is not None and fam is not None
    n = fv.get("num_hidden_layers") or 0
    sw = fv.get("sliding_window")
    inf = math.inf
    if fam.name in ("mistral", "mixtral", "qwen2", "gemma2", "starcoder2") and isinstance(sw, int):
        return [sw + 1] * n, [inf] * n
    if fam.name == "gemma3" and isinstance(sw, int):
        p = fv.get("sliding_window_pattern") or 1
        slides = [bool((i + 1) % p) for i in range(n)]
        return [sw + 1 if s else inf for s in slides], [sw if s else inf for s in slides]
    return [inf] * n, [inf] * n


class SlidingWindowSemantics(Rule):
    """candle 0.11.0's module attends to other keys than transformers past the sliding window.

    ## What it does
    Computes, per layer, how many keys transformers 5 and the family's candle module keep at
    the last position, in a full-prompt forward (prefill) and in one-token-at-a-time decoding
    with the KV cache, and names the sequence length from which they differ. It is an error
    when the target's `--max-tokens` reaches that length, else a warning.

    ## Why is this bad?
    transformers keeps `sliding_window` keys (`kv_idx > q_idx - sliding_window`). candle's
    masks keep `sliding_window`+1 (`j + sw < i` is masked) and are built only when more than
    one token is fed, and its caches are never trimmed (gemma3's sliding layers excepted): so
    decode attends to every key. qwen2 applies the window to every layer even with
    `use_sliding_window: false`; gemma2 applies it to every layer where transformers alternates;
    phi3 never applies one. Short prompts agree; past the window the model silently differs.

    ## Example
    ```json
    {"model_type": "mistral", "sliding_window": 4096, "max_position_embeddings": 32768}
    ```

    ## Fix
    Sometimes: for qwen2 with `use_sliding_window: false`, `portkit fix --write` writes
    `sliding_window` = `max_position_embeddings` (transformers ignores the key there). Otherwise
    none in config.json (a smaller window fixes prefill and breaks decode); keep sequences
    shorter than the length named, or trim candle's KV cache to the window in your code.

    ## Candle source
    candle-transformers-0.11.0/src/models/mistral.rs:402-406, mixtral.rs:448, qwen2.rs:303-314,
    gemma2.rs:398-413, gemma3.rs:192-193 and :403, starcoder2.rs:306-310, phi3.rs:386-395;
    qwen3.rs:126-128 (`sliding window is not supported`, also reached from qwen3_moe.rs:211).

    ## Verification
    numeric: at a prompt longer than the window, candle differs from transformers; with the
    probe patch (`sliding_window` one less) candle's prefill agrees.

    ## References
    - transformers `masking_utils.py:96-97` (a window of W keeps the last W keys)
    - tests/native/test_family_runners.py `test_known_candle_differences_stay_visible` (candle's
      window, measured against transformers on generated fixtures)
    - https://github.com/huggingface/candle/issues/1927, https://github.com/EricLBuehler/mistral.rs/issues/82
    """

    code = "PK115"
    name = "sliding-window-semantics"
    group = "config"
    families = ("mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "gemma3", "starcoder2", "phi3")
    severity = "warning"
    effect = "silent"
    fix_availability = "sometimes"
    fix_title = "Keep sequences shorter than the length named, or trim candle's KV cache to the window"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None or not fv.ok:
            return
        if fam.name in ("qwen3", "qwen3_moe"):
            # qwen3_moe builds qwen3's attention from its config (qwen3_moe.rs:50-55, :211)
            if fv.get("use_sliding_window"):
                yield self.finding(
                    ctx,
                    f"transformers applies `sliding_window`={num(ftv.get('sliding_window'))} (`use_sliding_window`=true); "
                    f"{module(ctx)} fails at build with `sliding window is not supported`",
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
        first = math.inf
        for kt, kp, kd in zip(keep_t, prefill, decode):
            for kc in (kp, kd):
                if kt != kc:
                    first = min(first, min(kt, kc) + 1)
        mp = fv.get("max_position_embeddings")
        if first == math.inf or (isinstance(mp, int) and first > mp):
            return
        first = int(first)
        t_desc = (
            f"keeps `sliding_window`={num(sw_t)} keys on {sum(1 for k in keep_t if k != math.inf)} of {n} layers"
            if any(k != math.inf for k in keep_t) else "applies no sliding window"
        )
        c_parts = []
        if any(k != math.inf for k in prefill):
            c_parts.append(f"keeps {int(min(prefill))} keys on {sum(1 for k in prefill if k != math.inf)} of {n} layers in prefill")
        else:
            c_parts.append("applies no window in prefill")
        c_parts.append(
            "keeps every key in decode" if all(k == math.inf for k in decode) else f"keeps {int(min(decode))} in decode"
        )
        max_tokens = ctx.target.max_tokens
        severe = max_tokens is not None and max_tokens >= first
        plan = f"; you plan {max_tokens} tokens" if max_tokens is not None else ""
        patch = None
        windowed = [k for k in prefill if k != math.inf]
        # the patch that makes candle's prefill keep transformers' keys: only where candle reads
        # the window (not phi3) and applies it to the same layers (not gemma2)
        if isinstance(sw_t, int) and sw_t > 1 and windowed and all(k == sw_t + 1 for k in windowed) and fam.name != "gemma2":
            patch = {"sliding_window": sw_t - 1}
        elif sw_t is None and any(k != math.inf for k in prefill) and isinstance(mp, int):
            patch = {"sliding_window": mp}
        # qwen2 without `use_sliding_window`: transformers ignores the key, so a window candle
        # never reaches (`max_position_embeddings`) changes nothing for transformers
        fixable = fam.name == "qwen2" and not any(k != math.inf for k in keep_t) and ftv.get("use_sliding_window") is not True
        yield self.finding(
            ctx,
            f"transformers {t_desc}; {module(ctx)} {' and '.join(c_parts)}: they differ from {first} tokens on{plan}",
            keys=("sliding_window",),
            transformers_value=sw_t,
            candle_value=fv.get("sliding_window"),
            severity="error" if severe else "warning",
            fix_edits=patch if fixable else None,
            probe_patch=patch,
        )


# --- PK116 / PK117: activations ------------------------------------------------------------------

# transformers ACT2FN name / candle Activation variant -> the function it computes
_T_ACT = {"gelu": "erf GELU", "gelu_pytorch_tanh": "tanh GELU", "gelu_new": "tanh GELU", "silu": "SiLU", "swish": "SiLU", "relu": "ReLU"}
_C_ACT = {"gelu": "erf GELU", "gelu_pytorch_tanh": "tanh GELU", "gelu_new": "tanh GELU", "silu": "SiLU", "swish": "SiLU", "relu": "ReLU"}
# the key each module reads the activation from (gemma: whichever of the two is set)
_ACT_KEY = {"gemma2": "hidden_activation", "gemma3": "hidden_activation"}


def _gemma_both(ctx: Context) -> bool:
    fv = ctx.fv
    return bool(fv and fv.ok and ctx.family and ctx.family.name == "gemma" and fv.get("hidden_act") and fv.get("hidden_activation"))


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
    families = ("gemma", "gemma2", "gemma3", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "phi3", "olmo2", "starcoder2", "stable_lm")
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = "Write the activation name transformers uses"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None or not fv.ok or _gemma_both(ctx):
            return
        key = _ACT_KEY.get(fam.name, "hidden_act")
        if fam.name == "gemma" and fv.get("hidden_act") is None:
            key = "hidden_activation"
        candle = fv.get(key)
        trans = ftv.get("hidden_act" if fam.name == "gemma" else key)
        if not isinstance(candle, str) or not isinstance(trans, str):
            return
        tf, cf = _T_ACT.get(trans), _C_ACT.get(candle)
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
    """A gemma config sets both `hidden_act` and `hidden_activation`; candle's gemma refuses to build.

    ## What it does
    Flags a `gemma` config where both keys hold an activation.

    ## Why is this bad?
    transformers' Gemma reads `hidden_act` and ignores `hidden_activation`. candle's
    `Config::hidden_act()` bails when both are set, so `Model::new` fails with `both
    hidden_act and hidden_activation are set` (gemma-1.1 configs carry both; a transformers 5
    re-save keeps both).

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
        if not _gemma_both(ctx):
            return
        assert ctx.ftv is not None
        trans = ctx.ftv.get("hidden_act")
        yield self.finding(
            ctx,
            f"transformers reads `hidden_act` (`{trans}`) and ignores `hidden_activation`; {module(ctx)} fails at build "
            "with `both hidden_act and hidden_activation are set`",
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
    numeric: candle differs from transformers and matches transformers run with
    `query_pre_attn_scalar` = `head_dim`.

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
            f"transformers scales attention by `query_pre_attn_scalar`={num(q)} (1/sqrt({num(q)})); {module(ctx)} never "
            f"reads it and scales by 1/sqrt(`head_dim`={hd})",
            keys=("query_pre_attn_scalar",),
            transformers_value=q,
            candle_value=hd,
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
    numeric: candle differs from transformers and matches transformers with neutral
    multipliers and `attention_multiplier` = 1/sqrt(head_dim).

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
        neutral = {"embedding_multiplier": 1.0, "attention_multiplier": 1.0 / math.sqrt(hd), "residual_multiplier": 1.0, "logits_scaling": 1.0}
        off = {
            k: v for k, v in ftv.multipliers.items()
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
        )


# --- PK120: lm_head vs tie_word_embeddings (config side) ----------------------------------------

_ALWAYS_LOADS_LM_HEAD = {"mistral": "mistral.rs:385", "mixtral": "mixtral.rs:426", "stable_lm": "stable_lm.rs:383", "granite": "granite.rs:448"}
_ALWAYS_TIED = {"gemma": "gemma.rs:359", "gemma2": "gemma2.rs:378", "gemma3": "gemma3.rs:458", "starcoder2": "starcoder2.rs:288"}


class LmHeadIgnoresTie(Rule):
    """The module builds `lm_head` its own way, whatever `tie_word_embeddings` says.

    ## What it does
    Reads `tie_word_embeddings` as transformers does (with the family's default) and flags the
    modules that ignore it: mistral, mixtral, stable_lm and granite always load
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
    granite.rs:448 (always `lm_head`); gemma.rs:359, gemma2.rs:378, gemma3.rs:458,
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
    families = tuple(_ALWAYS_LOADS_LM_HEAD) + tuple(_ALWAYS_TIED)
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
        if fam.name in _ALWAYS_LOADS_LM_HEAD and tie is True:
            yield self.finding(
                ctx,
                f"transformers ties `lm_head` to `embed_tokens` (`tie_word_embeddings`=true{src}) and saves no "
                f"`lm_head.weight`; {module(ctx)} always loads `lm_head.weight`",
                keys=keys,
                transformers_value=True,
                candle_value="lm_head.weight",
                expect="lm_head.weight",
            )
        elif fam.name in _ALWAYS_TIED and tie is False:
            yield self.finding(
                ctx,
                f"transformers uses its own `lm_head.weight` (`tie_word_embeddings`=false{src}); {module(ctx)} always "
                "uses `embed_tokens` as lm_head and never reads `lm_head.weight`",
                keys=keys,
                transformers_value=False,
                candle_value="model.embed_tokens.weight",
                severity="error",
                probe_kind="numeric",
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


RULES = (
    NoCandleModule,
    SlidingWindowSemantics,
    ActivationDiffers,
    HiddenActAndHiddenActivation,
    QueryPreAttnScalarIgnored,
    GraniteMultipliersIgnored,
    LmHeadIgnoresTie,
    Gemma3PrefillNeedsOneKvHead,
)
