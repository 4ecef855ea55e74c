"""PK1xx: config.json values a candle 0.11.0 module reads differently from transformers 5.

Each rule has one body for every family it applies to: it compares `ctx.fv` (the family's serde
mirror) with `ctx.ftv` (transformers' values for the family, under candle's names), and takes
what differs between families (how a message names the module, f32 fields, the rope scaling a
module computes) from the family's module (`Family.trait`). The rules only some modules need are in
`portkit.rules.family_config`.
"""

from __future__ import annotations

import math

from portkit.rules import as_candle, family_gemma4
from portkit.rules import family_config as fc
from portkit.rules.base import Context, Rule, f32, location, num
from portkit.rules.common import length_severity, source_words
from portkit.semantics.serde import MISSING
from portkit.semantics.transformers import SILU_NAMES, eos_ids

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.families.view import FamilyView
    from portkit.findings import Finding


# what to write for a required key transformers has no value for, because transformers never reads it
_CANDLE_ONLY = {"use_flash_attn": False}


class RopeThetaInRopeParameters(Rule):
    """transformers and candle compute RoPE with different `rope_theta`.

    ## What it does
    Compares the `rope_theta` transformers 5 uses (from `rope_parameters`, a legacy
    `rope_scaling` dict, the top-level key, or 10000) with the one candle 0.11.0 reads (the
    top-level key only, else its serde default 10000).

    ## Why is this bad?
    transformers 5 `save_pretrained` writes `rope_theta` only inside `rope_parameters`.
    candle loads such a config without complaint and rotates every query and key with
    theta 10000: the model runs, short prompts look fine, and the output degrades with
    length (portkit's generated llama fixture, theta 1e5, saved by transformers 5: candle's
    last-position logits differ by 4.2; docs/measurements.md, "Rule effects").

    ## Example
    ```json
    {"rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}
    ```
    Use instead:
    ```json
    {"rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}, "rope_theta": 100000.0}
    ```

    ## Fix
    `portkit fix --write` adds the top-level `rope_theta` transformers uses. transformers
    still reads `rope_parameters` first, so its effective value does not change.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:47-48 (`#[serde(default = "default_rope")]
    pub rope_theta: f32`), :62-64 (`10_000.0`), :155-161 (inverse frequencies from
    `cfg.rope_theta`).

    ## Verification
    numeric: verify runs candle on the config as written and with the top-level `rope_theta`
    patched in; only the patched run matches transformers past the first positions.

    ## References
    - https://github.com/lyogavin/airllm/issues/368, https://github.com/lyogavin/airllm/issues/369 (the MLX path fell
      back to 10000: incoherent past ~1k tokens)
    - https://github.com/stanford-crfm/levanter/issues/649, https://github.com/google-deepmind/penzai/issues/102 (a
      hard-coded or different RoPE base)
    - https://github.com/ggml-org/llama.cpp/issues/2768, https://github.com/ggml-org/llama.cpp/issues/2773 (CodeLlama's
      `rope_theta` not read)
    - https://github.com/deepspeedai/DeepSpeed/issues/8341, https://github.com/sgl-project/sglang/issues/14745,
      https://github.com/InternLM/lmdeploy/issues/4304, https://github.com/ml-explore/mlx-lm/issues/953,
      https://github.com/ggml-org/llama.cpp/issues/18013 (transformers 5 moved `rope_theta` into `rope_parameters`)
    """

    code = "PK101"
    name = "rope-theta-in-rope-parameters"
    group = "config"
    families = fc.ALL_FAMILIES
    severity = "error"
    effect = "silent"
    fix_availability = "always"
    fix_title = "Write the `rope_theta` transformers uses at the top level of config.json"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None or not fv.ok:
            return
        for key in fam.traits.theta_keys:
            t, c = ftv.get(key), fv.get(key)
            if not isinstance(t, float) or not isinstance(c, (int, float)):
                continue
            if (f32(t) if key in fam.traits.f32_fields else t) == c:
                continue
            if key in fv.written:
                tail = f"{fam.who} reads the top-level `{key}`={num(c)}"
            else:
                tail = f"{fam.who} reads no top-level `{key}` and uses {num(c)}"
            path = ftv.sources.get(key, ())
            yield self.finding(
                ctx,
                f"transformers uses `{key}`={num(t)} {source_words(path)}; {tail}",
                keys=path or (key,),
                transformers_value=t,
                candle_value=c,
                fix_edits={key: t},
                probe_patch={key: t},
            )


class RopeScalingInRopeParameters(Rule):
    """transformers scales RoPE from `rope_parameters`; candle computes unscaled frequencies.

    ## What it does
    Flags a config whose effective rope type in transformers 5 is not `default` (llama3,
    linear, dynamic, yarn, longrope) when candle 0.11.0 applies no scaling: the scaling lives
    only in `rope_parameters`, which candle never reads, or candle's own `rope_scaling` has
    `rope_type: default`.

    ## Why is this bad?
    A Llama 3.1 checkpoint resaved by transformers 5 loses both its theta and its llama3
    scaling in candle, silently: frequencies past the original context are wrong and long
    prompts degrade. candle 0.11.0 implements only llama3 scaling, so linear, dynamic, yarn
    and longrope cannot be expressed in a config candle reads at all.

    ## Example
    ```json
    {"rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"}}
    ```
    Use instead (llama3 only):
    ```json
    {"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0}
    ```

    ## Fix
    Sometimes: for llama3, `portkit fix --write` writes a top-level `rope_scaling` in the
    shape candle's `Llama3RopeConfig` reads (and the top-level `rope_theta`). Other rope types
    have no candle 0.11.0 equivalent: port the scaling in your candle code.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:23-30 (`Llama3RopeConfig`), :51
    (`rope_scaling: Option<Llama3RopeConfig>`), :166-171 (no scaling, or `rope_type:
    default`, gives the unscaled frequencies), :172-195 (llama3 smoothing).

    ## Verification
    numeric: verify compares candle with the config as written and with the llama3
    `rope_scaling` patched in, at positions past `original_max_position_embeddings` / factor.

    ## References
    - https://github.com/JIA-Lab-research/LongLoRA/issues/181, https://github.com/ggml-org/llama.cpp/issues/2772
      (scaling dropped: nonsense at long context)
    - https://github.com/ml-explore/mlx-examples/issues/909, https://github.com/ml-explore/mlx-examples/issues/907,
      https://github.com/vllm-project/vllm/issues/6689, https://github.com/EricLBuehler/mistral.rs/issues/618,
      https://github.com/EricLBuehler/candle-vllm/issues/286 (Llama 3.1 scaling support)
    """

    code = "PK102"
    name = "rope-scaling-in-rope-parameters"
    group = "config"
    families = fc.ALL_FAMILIES
    severity = "error"
    effect = "silent"
    fix_availability = "sometimes"
    fix_title = "Write llama3 scaling as a top-level `rope_scaling` in candle's shape"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam = ctx.fv, ctx.ftv, ctx.family
        if fv is None or ftv is None or fam is None:
            return
        if not fv.ok and (fv.refused_at or [""])[0] == "rope_scaling":
            return  # candle refuses the `rope_scaling` itself: PK103 or PK112 says so
        # (a config candle refuses for another key still says which scaling it would miss)
        computed = fam.traits.candle_rope_scaling
        src = f"`{ftv.rope_source}`" if ftv.rope_source else "`rope_parameters`"
        scaled = [("", ftv.rope_type, ftv.rope_parameters)]
        if ftv.local_rope_type is not None:
            scaled.append(("to its sliding-attention layers ", ftv.local_rope_type, ftv.local_rope_parameters))
        for which, rope_type, p in scaled:
            if rope_type == "default" or (
                computed is not None and fam.semantics.rope_scaling_applied(fv.values, rope_type)
            ):
                continue
            shown = fam.traits.rope_keys_shown or tuple(k for k in p if k not in ("rope_type", "type", "rope_theta"))
            params = ", ".join(
                f"`{k}`=[{len(p[k])} values]" if isinstance(p[k], list) else f"`{k}`={num(p[k])}"
                for k in shown
                if k in p
            )
            tail = _rope_scaling_tail(ctx, rope_type)
            edits = _rope_scaling_edits(ctx, rope_type, p)
            severity = None
            mp = ftv.get("max_position_embeddings")
            if rope_type == "dynamic" and isinstance(mp, int) and mp > 0:
                # dynamic NTK rescales only once a sequence outgrows `max_position_embeddings`
                # (modeling_rope_utils.py `_compute_dynamic_ntk_parameters`: seq_len = max(seq_len, mpe))
                severity, when = length_severity(ctx, mp)
                tail += f" ({when})"
            yield self.finding(
                ctx,
                f"transformers applies `{rope_type}` rope scaling {which}from {src} ({params or 'no parameters'}); "
                f"{tail}",
                keys=(ftv.rope_source or "rope_parameters",),
                transformers_value=dict(p),
                candle_value=fv.get("rope_scaling") if fv.ok else None,
                fix_edits=edits,
                probe_patch=edits,
                help=None if edits else _no_scaling_help(ctx, rope_type),
                severity=severity,
            )


def _rope_scaling_tail(ctx: Context, rope_type: str) -> str:
    """What candle's module does with transformers' `rope_type` scaling: the family module's
    words when it reads a `rope_scaling` of its own (llama, phi3), else that it reads none."""
    fam, fv = ctx.family, ctx.fv
    assert fam is not None and fv is not None
    own = getattr(fam.semantics, "rope_scaling_tail", None)
    if own is not None:
        return own(fv.values, rope_type, fam.who)
    return f"{fam.who} reads no rope scaling and computes unscaled frequencies"


def _rope_scaling_edits(ctx: Context, rope_type: str, p: dict[str, object]) -> dict[str, object] | None:
    """The config edits that make candle's module compute transformers' `rope_type` scaling
    (its own `rope_scaling` shape, and the `rope_theta`), None when it computes no such scaling."""
    fam, ftv = ctx.family, ctx.ftv
    assert fam is not None and ftv is not None
    computed = fam.traits.candle_rope_scaling
    if computed is None or rope_type != computed:
        return None
    edits: dict[str, object] = {"rope_scaling": fam.semantics.rope_scaling_edits(p)}
    if isinstance(ftv.get("rope_theta"), float):
        edits["rope_theta"] = ftv.get("rope_theta")
    return edits


def _no_scaling_help(ctx: Context, rope_type: str) -> str:
    """The help line when no config edit makes candle's module apply transformers' scaling."""
    fam = ctx.family
    assert fam is not None
    computed = fam.traits.candle_rope_scaling
    implements = f" (its {fam.name} implements {computed} only)" if computed else " as transformers does"
    return (
        f"No config edit makes {fam.who} apply `{rope_type}` scaling{implements}; run this checkpoint with an "
        "implementation of that scaling"
    )


class RopeScalingUnparseable(Rule):
    """candle refuses a top-level `rope_scaling` that is not its llama3 shape.

    ## What it does
    Checks the top-level `rope_scaling` against candle's `Llama3RopeConfig`: all of
    `factor`, `low_freq_factor`, `high_freq_factor`, `original_max_position_embeddings` and
    `rope_type` (`llama3` or `default`) must be present.

    ## Why is this bad?
    transformers accepts legacy shapes (`{"type": "linear", "factor": 2.0}`), fills a missing
    `original_max_position_embeddings` from `max_position_embeddings` and a missing
    `rope_type` from `type`. candle's serde parse of the whole config fails instead, so the
    model does not load (`missing field `low_freq_factor``, `unknown variant `linear``).

    ## Example
    ```json
    {"rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}}
    ```
    Use instead:
    ```json
    {"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    ```

    ## Fix
    Sometimes: when transformers' effective scaling is llama3, `portkit fix --write` rewrites
    `rope_scaling` completely (and writes the top-level `rope_theta`). Linear, dynamic, yarn
    and longrope have no candle 0.11.0 equivalent.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:14-21 (`Llama3RopeType`: only `llama3`,
    `default`), :23-30 (every field required), :51.

    ## Verification
    crash: candle's `LlamaConfig` parse must fail with serde's message.

    ## References
    - https://github.com/ml-explore/mlx-examples/issues/909 (a strict parser refuses Llama 3.1's `rope_scaling`)
    - https://github.com/huggingface/transformers/issues/32182, https://github.com/vllm-project/vllm/issues/6897,
      https://github.com/deepseek-ai/DeepSeek-R1/issues/684, https://github.com/ggml-org/llama.cpp/issues/21617
      (rope-scaling validation and key names)
    """

    code = "PK103"
    name = "rope-scaling-unparseable"
    group = "config"
    severity = "error"
    effect = "load-error"
    fix_availability = "sometimes"
    fix_title = "Rewrite `rope_scaling` in candle's llama3 shape"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv, fv, fam = ctx.ftv, ctx.fv, ctx.family
        if not ftv or not fv or fam is None or fv.ok or not fv.refused_at or fv.refused_at[0] != "rope_scaling":
            return
        edits = _rope_scaling_edits(ctx, ftv.rope_type, ftv.rope_parameters)
        what = f"`{ftv.rope_type}` rope scaling" if ftv.rope_scaled else "no rope scaling (rope_type default)"
        yield self.finding(
            ctx,
            f"transformers applies {what} from `rope_scaling`; {fam.who} refuses the config: `{fv.refused}`",
            keys=tuple(fv.refused_at),
            transformers_value=ftv.rope_parameters,
            candle_value={"refused": fv.refused},
            fix_edits=edits,
            expect=fv.refused,
            help=_no_scaling_help(ctx, ftv.rope_type) if ftv.rope_scaled and edits is None else None,
        )


class HeadDimMismatch(Rule):
    """`head_dim` differs from `hidden_size / num_attention_heads`, which candle always uses.

    ## What it does
    Compares transformers' head dimension (the `head_dim` key when set) with candle's
    (always `hidden_size / num_attention_heads`).

    ## Why is this bad?
    candle builds `q_proj` as `(hidden/heads) * heads` rows and reshapes with its own
    head_dim. With a checkpoint whose heads are wider or narrower, `Llama::load` panics on
    the first attention weight (its per-block `.unwrap()` of `shape mismatch for
    model.layers.0.self_attn.q_proj.weight`). mixtral, qwen2, phi3, starcoder2, olmo2 and
    granite derive head_dim the same way and fail loading the same projection (`qkv_proj` in
    phi3; granite panics like llama). glm4_new reads `head_dim` and derives it only when the key
    is absent, where transformers' GLM-4 uses its class default, 128.

    ## Example
    ```json
    {"hidden_size": 3072, "num_attention_heads": 24, "head_dim": 128}
    ```

    ## Fix
    Sometimes: for glm4_new without the key, `portkit fix --write` writes transformers' `head_dim`.
    Otherwise none in config.json: candle 0.11.0's llama cannot express a separate head_dim. Patch
    candle's llama (https://github.com/huggingface/candle/issues/3602) or use a model whose head_dim is hidden/heads.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:155-156, :366-371 (`size_q =
    (hidden_size / num_attention_heads) * num_attention_heads`), :379. The same derivation in
    mixtral.rs:157, qwen2.rs:135, phi3.rs:184 (`cfg.head_dim()`, :63-66), starcoder2.rs:137,
    olmo2.rs:126 and granite.rs:112; transformers reads `head_dim` for all of them. glm4_new.rs:39-41,
    :136-138 (`head_dim.unwrap_or(hidden_size / num_attention_heads)`).

    ## Verification
    crash: candle must panic loading `q_proj` with a shape mismatch.

    ## References
    - https://github.com/huggingface/candle/issues/3593, https://github.com/huggingface/candle/issues/3602 (`head_dim`
      support for candle's llama)
    - https://github.com/huggingface/candle/issues/3917 (quantized_llama assumes `head_dim == n_embd / n_head`)
    - https://github.com/ollama/ollama/issues/5817, https://github.com/huggingface/transformers/issues/32502,
      https://github.com/huggingface/transformers/issues/32857, https://github.com/facebookresearch/fairseq2/issues/1244
    """

    code = "PK104"
    name = "head-dim-mismatch"
    group = "config"
    # the modules that derive head_dim from hidden_size / num_attention_heads while transformers
    # reads the `head_dim` key (mistral, qwen3, gemma* read it; stablelm's transformers does not)
    families = ("llama", "mixtral", "qwen2", "phi3", "starcoder2", "olmo2", "granite", "glm4_new")
    severity = "error"
    effect = "panic"
    fix_availability = "sometimes"
    fix_title = (
        "Use a candle llama that reads `head_dim` (https://github.com/huggingface/candle/issues/3602); no "
        "config edit fixes this"
    )
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, doc, fam = ctx.fv, ctx.facts.config, ctx.family
        if fv is None or not fv.ok or doc is None or fam is None or not isinstance(doc.value, dict):
            return
        hd, heads, c = doc.value.get("head_dim"), fv.get("num_attention_heads"), fv.get("head_dim")
        edits, said = None, f"`head_dim`={hd}"
        if "head_dim" not in doc.value and fam.has_field("head_dim") and ctx.ftv is not None:
            # candle reads the absent key as None and derives it; transformers' class has its own default
            hd = ctx.ftv.get("head_dim")
            edits, said = {"head_dim": hd}, f"`head_dim`={hd} (its default: config.json has none)"
        if not isinstance(hd, int) or isinstance(hd, bool) or not isinstance(c, int) or not heads or hd == c:
            return
        proj, panics = fam.traits.query_proj, fam.traits.load_panics
        if panics:
            how = f"so `{panics}` panics on `{proj}` ({hd * heads} rows, candle expects {c * heads})"
        else:
            how = f"so loading `{proj}` fails ({hd * heads} query rows, candle expects {c * heads})"
        yield self.finding(
            ctx,
            f"transformers uses {said}; {fam.who} uses `hidden_size` / `num_attention_heads` = {c}, {how}",
            keys=("head_dim",),
            transformers_value=hd,
            candle_value=c,
            fix_edits=edits,
            expect=f"shape mismatch for model.layers.0.self_attn.{proj}.weight",
        )


class AttentionBiasIgnored(Rule):
    """`attention_bias` is true; candle never reads q/k/v/o biases.

    ## What it does
    Flags `attention_bias: true`.

    ## Why is this bad?
    transformers adds the bias vectors to every attention projection. candle's llama builds
    them with `linear_no_bias`, so the bias tensors are never read and every layer computes
    something else, without an error.

    ## Example
    ```json
    {"attention_bias": true}
    ```

    ## Fix
    None in config.json: setting it to false would change transformers too. Use a candle
    model with biases (e.g. `models::qwen2`) or add them to candle's llama.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:7 (`linear_no_bias as linear`), :368-371.

    ## Verification
    numeric, transformers as candle computes: candle's logits differ from transformers' and
    match transformers run with `attention_bias` false (no biases, as candle's module).

    ## References
    - https://github.com/mlc-ai/mlc-llm/issues/3494 (a hard-coded `bias=False` silently drops bias vectors)
    - https://github.com/sbryngelson/ANEForge/issues/253 (Qwen2 biases dropped: mojibake)
    - https://github.com/EricLBuehler/candle-vllm/issues/167 (qwen2 `attention_bias`)
    """

    code = "PK105"
    families = ("llama", "granite")
    name = "attention-bias-ignored"
    group = "config"
    severity = "error"
    effect = "silent"
    fix_title = "Run the model with a candle implementation that applies attention biases"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv = ctx.ftv
        if ftv and ftv.get("attention_bias") is True:
            yield self.finding(
                ctx,
                f"transformers adds q/k/v/o biases (`attention_bias`=true); {fc.module(ctx)} builds these projections "
                "with `linear_no_bias` and never reads a bias",
                keys=("attention_bias",),
                transformers_value=True,
                candle_value=False,
                as_candle=as_candle.edit("no attention biases", config={"attention_bias": False}),
            )


class MlpBiasIgnored(Rule):
    """`mlp_bias` is true; candle never reads MLP biases.

    ## What it does
    Flags `mlp_bias: true`.

    ## Why is this bad?
    transformers adds biases to `gate_proj`, `up_proj` and `down_proj`; candle's llama MLP is
    built with `linear_no_bias`, so the biases are silently dropped.

    ## Example
    ```json
    {"mlp_bias": true}
    ```

    ## Fix
    None in config.json; use or write a candle MLP with biases.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:7, :410-416.

    ## Verification
    numeric, transformers as candle computes: candle matches transformers only when it runs
    with `mlp_bias` false (no MLP biases, as candle's module).

    ## References
    - https://github.com/mlc-ai/mlc-llm/issues/3494 (a hard-coded `bias=False` silently drops bias vectors)
    - https://github.com/sbryngelson/ANEForge/issues/253
    """

    code = "PK106"
    families = ("llama", "granite")
    name = "mlp-bias-ignored"
    group = "config"
    severity = "error"
    effect = "silent"
    fix_title = "Run the model with a candle implementation that applies MLP biases"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv = ctx.ftv
        if ftv and ftv.get("mlp_bias") is True:
            yield self.finding(
                ctx,
                f"transformers adds gate/up/down biases (`mlp_bias`=true); {fc.module(ctx)} builds the MLP with "
                "`linear_no_bias` and never reads a bias",
                keys=("mlp_bias",),
                transformers_value=True,
                candle_value=False,
                as_candle=as_candle.edit("no MLP biases", config={"mlp_bias": False}),
            )


class HiddenActNotSilu(Rule):
    """`hidden_act` is not SiLU; candle's llama MLP always uses SiLU.

    ## What it does
    Flags a `hidden_act` other than `silu` (or its alias `swish`).

    ## Why is this bad?
    transformers picks the activation from `ACT2FN[hidden_act]`; candle hard-codes
    `candle_nn::ops::silu` in the MLP, so a gelu or relu model computes other numbers.

    ## Example
    ```json
    {"hidden_act": "gelu"}
    ```

    ## Fix
    None in config.json; port the activation to your candle MLP.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:403-408 (`silu(&self.c_fc1.forward(x)?)`).

    ## Verification
    numeric, transformers as candle computes: candle's logits differ from transformers' and
    match transformers run with `hidden_act: silu`.

    ## References
    transformers `activations.py` ACT2CLS (`silu` and `swish` are both SiLU).
    """

    code = "PK107"
    families = ("llama", "granite")
    name = "hidden-act-not-silu"
    group = "config"
    severity = "error"
    effect = "silent"
    fix_title = "Port the activation to candle's MLP; no config edit fixes this"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv, fam = ctx.ftv, ctx.family
        if ftv is None or fam is None:
            return
        key = fam.traits.transformers_activation_key
        act = ftv.get(key)
        if isinstance(act, str) and act not in SILU_NAMES:
            yield self.finding(
                ctx,
                f'transformers uses `{key}`="{act}"; {fc.module(ctx)} always applies silu',
                keys=(key,),
                transformers_value=act,
                candle_value="silu",
                as_candle=as_candle.edit("SiLU in the MLP", config={key: "silu"}),
            )


class PartialRotaryIgnored(Rule):
    """transformers rotates only part of each head; candle rotates all of it.

    ## What it does
    Flags a `partial_rotary_factor` (top-level or in `rope_parameters`) that transformers
    applies: for model types that use it, and for llama with a non-default rope type. (For
    `model_type: llama` with the default rope, transformers' `LlamaRotaryEmbedding` ignores
    the factor too, so both rotate the whole head and nothing is flagged.)

    ## Why is this bad?
    cos/sin tables can match byte for byte while the pairing is wrong: quality drifts with
    context, without an error.

    ## Example
    ```json
    {"model_type": "phi3", "partial_rotary_factor": 0.5}
    ```

    ## Fix
    llama: none in config.json, candle 0.11.0's llama has no partial rotary; port it.
    phi3, stable_lm and glm4_new rotate part of the head, but read the factor only at the top level
    (transformers 5 keeps it in `rope_parameters`; GLM-4's class defaults it to 0.5 where
    config.json has none): `portkit fix --write` writes it there.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:155-161 (frequencies for every pair of
    the head), :262-268 (`rope` over the whole head); phi3.rs:58, :77-81 (top-level
    `partial_rotary_factor`, else the whole head); stable_lm.rs:32 (required top-level key);
    glm4_new.rs:42-46 (the top-level factor, else the whole head).

    ## Verification
    numeric: candle differs from transformers and matches it with `partial_rotary_factor`
    removed.

    ## References
    - https://github.com/labscommunity/cascadia/issues/69 (cos/sin matched transformers, the pairing did not)
    - https://github.com/pie-project/pie/issues/603 (frequencies must use the rotary width)
    - https://github.com/ml-explore/mlx-lm/issues/1698 (unknown keys silently dropped),
      https://github.com/apple/coreai-models/issues/66, https://github.com/vllm-project/vllm/issues/12718
    """

    code = "PK108"
    name = "partial-rotary-ignored"
    group = "config"
    families = ("llama", "phi3", "stable_lm", "glm4_new")
    severity = "error"
    effect = "silent"
    fix_availability = "sometimes"
    fix_title = (
        "Write the `partial_rotary_factor` transformers uses at the top level (phi3, stable_lm, glm4_new), or "
        "port partial rotary to candle's llama"
    )
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, fam, doc = ctx.fv, ctx.ftv, ctx.family, ctx.facts.config
        if fv is not None and not fv.ok:
            fv = view_with_required_written(ctx)  # a transformers-5 save: the factor behind PK110's refusal
        if fv is None or ftv is None or fam is None or not fv.ok or doc is None or not isinstance(doc.value, dict):
            return
        hd = fv.get("head_dim")
        written_hd = doc.value.get("head_dim")
        t_hd = (
            written_hd if isinstance(written_hd, int) and not isinstance(written_hd, bool) else hd
        )  # transformers' head
        t, c = ftv.get("partial_rotary_factor"), fv.get("partial_rotary_factor")
        t_eff, c_eff = (1.0 if t is None else t), (1.0 if c is None else c)
        if not isinstance(hd, int) or not isinstance(t_hd, int):
            return
        if not all(isinstance(x, (int, float)) and math.isfinite(h * x) for x, h in ((t_eff, t_hd), (c_eff, hd))):
            return  # a factor no runtime can compute with: transformers itself refuses it (lint's exit 2)
        if int(t_hd * t_eff) == int(hd * c_eff) and t_hd == hd:
            return
        if int(t_hd * t_eff) == t_hd and c_eff == 1.0:
            return  # both rotate the whole head (a head_dim mismatch is PK104's)
        path = ftv.sources.get("partial_rotary_factor", ())
        edits = None
        if not fam.has_field("partial_rotary_factor"):
            # candle's module has no such field: where transformers read it from changes nothing
            said, tail = f"`partial_rotary_factor`={num(t_eff)}", f"{fam.who} rotates all {hd}"
        else:
            said = f"`partial_rotary_factor`={num(t_eff)} {source_words(path)}"
            if c is None:
                tail = f"{fam.who} reads no top-level `partial_rotary_factor` and rotates all {hd}"
            else:
                tail = f"{fam.who} reads the top-level `partial_rotary_factor`={num(c)} and rotates {int(hd * c_eff)}"
            edits = {"partial_rotary_factor": t} if t is not None else None
        yield self.finding(
            ctx,
            f"transformers rotates {int(t_hd * t_eff)} of {t_hd} head dimensions ({said}); {tail}",
            keys=path or ("partial_rotary_factor",),
            transformers_value=int(t_hd * t_eff),
            candle_value=int(hd * c_eff),
            fix_edits=edits,
            probe_patch=edits,
        )


class SlidingWindowIgnored(Rule):
    """transformers attends within a sliding window; candle's llama attends everywhere.

    ## What it does
    Flags a positive `sliding_window` that transformers applies: in the forward pass
    (Mistral-family model types, Qwen2 with `use_sliding_window`, `layer_types` with
    `sliding_attention`), or only in `generate()`: transformers 5 builds sliding-window
    KV-cache layers for any config that sets `sliding_window`, Llama included, although
    Llama's forward ignores the key.

    ## Why is this bad?
    Up to the window length both agree; past it, candle attends to tokens transformers
    masks out (or has dropped from its cache), so long prompts and long generations
    silently diverge.

    ## Example
    ```json
    {"model_type": "mistral", "sliding_window": 4096}
    ```

    ## Fix
    None in config.json; keep prompts within the window or use candle's `models::mistral`.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:218-227 (plain causal mask),
    :298-323 (the KV cache keeps every position), :341-347.

    ## Verification
    numeric, transformers as candle computes: at a sequence longer than the window, candle
    differs from transformers (for a Llama config: greedy generation past the window, the
    full-prompt forward agrees) and agrees with transformers run without `sliding_window`.

    ## References
    - transformers `cache_utils.py` `get_layer_types_and_kwargs`
    - https://github.com/huggingface/candle/issues/1927 (`sliding_window` optional: null in Mistral v0.2)
    - https://github.com/EricLBuehler/mistral.rs/issues/82, https://github.com/EricLBuehler/mistral.rs/issues/83,
      https://github.com/dphnAI/sonar/issues/163, https://github.com/axolotl-ai-cloud/axolotl/issues/1047,
      https://github.com/axolotl-ai-cloud/axolotl/issues/1214
    """

    code = "PK109"
    name = "sliding-window-ignored"
    group = "config"
    severity = "warning"
    effect = "silent"
    fix_title = "Keep sequences within the window, or use a candle model with sliding-window attention"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv = ctx.ftv
        if not ftv or not (ftv.sliding_window_applied or ftv.sliding_window_in_cache):
            return
        window = ftv.get("sliding_window")
        if ftv.sliding_window_applied:
            what = f"transformers (`{ftv.model_type}`) attends within a `sliding_window` of {window} tokens"
        else:
            what = (
                f"transformers' `generate()` keeps a `sliding_window`={window} KV cache, so cached decoding "
                "attends to the last positions only (its full-sequence forward does not)"
            )
        # the window acts only past its length: an error when the run reaches it, else a warning naming it
        severity, when = length_severity(ctx, window)
        yield self.finding(
            ctx,
            f"{what}; candle {ctx.target.candle}'s llama attends to every earlier position ({when})",
            keys=("sliding_window",),
            transformers_value=window,
            candle_value=None,
            severity=severity,
            as_candle=as_candle.edit("no sliding window", config={"sliding_window": None}),
        )


class MissingRequiredKey(Rule):
    """A key candle's config struct requires is absent; transformers fills in its default.

    ## What it does
    Lists every required `LlamaConfig` field missing from config.json: `hidden_size`,
    `intermediate_size`, `vocab_size`, `num_hidden_layers`, `num_attention_heads`,
    `rms_norm_eps`, `max_position_embeddings`.

    ## Why is this bad?
    transformers' `LlamaConfig` has a default for each (e.g. `max_position_embeddings`
    2048, `rms_norm_eps` 1e-6); candle's serde parse fails (`missing field ...`), so the
    model does not load.

    ## Example
    ```json
    {"hidden_size": 2048, "num_attention_heads": 32}
    ```

    ## Fix
    `portkit fix --write` writes transformers' default for each missing key, which is the
    value transformers already uses.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:38-54 (fields without `Option` or a
    serde default are required).

    ## Verification
    crash: candle's parse must fail with `missing field`.

    ## References
    - transformers `models/llama/configuration_llama.py` field defaults
    - https://github.com/huggingface/transformers/issues/32182 (transformers' own validation: a missing mandatory key is
      an error)
    """

    code = "PK110"
    name = "missing-required-key"
    group = "config"
    families = fc.ALL_FAMILIES
    severity = "error"
    effect = "load-error"
    fix_availability = "always"
    fix_title = "Write the value transformers uses for the missing key"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv, doc, fam = ctx.fv, ctx.ftv, ctx.facts.config, ctx.family
        if fv is None or ftv is None or fam is None or doc is None or not isinstance(doc.value, dict):
            return
        # every missing field, also behind a refused value (PK112): serde names one at a time
        for key in (f.name for f in fam.fields if f.default is MISSING):
            if key in doc.value:
                continue
            value, said = _value_to_write(ctx, key)
            refusal = f"missing field `{key}`"
            yield self.finding(
                ctx,
                f"{said}; {fam.who} refuses the config: `{refusal}`",
                location=location((1, 1)),
                transformers_value=value,
                candle_value={"refused": refusal},
                fix_edits={key: value} if value is not None else None,
                expect=refusal,
                help=None if value is not None else f"Write `{key}` by hand: transformers has no value for it",
            )


def view_with_required_written(ctx: Context) -> FamilyView | None:
    """candle's view of config.json once every required key it lacks holds the value PK110's fix
    writes (what a finding behind that refusal is judged on), else None."""
    fam, doc = ctx.family, ctx.facts.config
    if fam is None or doc is None or not isinstance(doc.value, dict) or ctx.ftv is None:
        return None
    edits = {}
    for key in (f.name for f in fam.fields if f.default is MISSING and f.name not in doc.value):
        value, _ = _value_to_write(ctx, key)
        if value is None:
            return None
        edits[key] = value
    view = fam.view({**doc.value, **edits}) if edits else None
    return view if view is not None and view.ok else None


def _value_to_write(ctx: Context, key: str) -> tuple[object, str]:
    """(the value transformers computes with for a key candle requires, what transformers does with it)."""
    ftv = ctx.ftv
    assert ftv is not None
    if key in _CANDLE_ONLY:
        v = _CANDLE_ONLY[key]
        return v, f"transformers never reads `{key}`; {num(v)} runs candle as transformers runs (no flash attention)"
    if key == "max_window_layers":
        n = ftv.get("num_hidden_layers")
        return (
            n,
            f"transformers' `{ftv.family}` has no such setting and candle never uses `{key}`; writing "
            f"`num_hidden_layers`={num(n)}",
        )
    if key not in ftv.values:
        return None, f"transformers has no value for `{key}`"
    v, path = ftv.values[key], ftv.sources.get(key, ())
    if not path:
        return v, f"transformers defaults `{key}` to {num(v)}"
    return v, f"transformers uses `{key}`={num(v)} {source_words(path)}"


class GenerationEosDiffers(Rule):
    """`generation_config.json` stops on other EOS ids than the config.json candle reads.

    ## What it does
    Compares the EOS ids transformers' `generate()` stops on (generation_config.json,
    else config.json) with config.json's `eos_token_id`, the only one candle 0.11.0's
    `LlamaConfig` reads.

    ## Why is this bad?
    Llama 3 instruct models end turns with `<|eot_id|>`, listed only in
    generation_config.json: a candle generation loop that stops on config.json's ids runs
    past the end of the answer.

    ## Example
    generation_config.json `{"eos_token_id": [128001, 128008, 128009]}` beside config.json
    `{"eos_token_id": 128001}`.

    ## Fix
    None in config.json (transformers reads config.json's ids too); stop your candle loop on
    every id generation_config.json lists.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:31-36 (`LlamaEosToks`), :50.

    ## Verification
    static-only, reported NOT-PROBED with why: a fact about the files; logits are not affected.

    ## References
    - https://github.com/huggingface/candle/issues/2085 (llama3 instruct uses `<|eot_id|>` and `<|end_of_text|>` as EOS)
    - https://github.com/vllm-project/vllm/issues/4180 (generation does not stop at `<|eot_id|>`)
    - https://github.com/zhihu/ZhiLight/issues/20 (an EOS list crashes a strict parser)
    """

    code = "PK111"
    name = "generation-eos-differs"
    group = "config"
    severity = "warning"
    effect = "silent"
    fix_title = "Stop generation on every EOS id generation_config.json lists"
    probe_kind = "static-only"
    not_probed = (
        "the ids a candle loop stops on are the program's choice, not a number candle computes (verify's "
        "greedy comparison already stops where `generate()` does)"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        ftv, fv, fam = ctx.ftv, ctx.fv, ctx.family
        gen = ctx.facts.generation_config
        if (
            not ftv
            or not fv
            or fam is None
            or not fv.ok
            or gen is None
            or ftv.generation_eos_source != "generation_config.json"
        ):
            return
        g = eos_ids(ftv.generation_eos_token_id)
        c = eos_ids(fv.get("eos_token_id"))
        if set(g) == set(c):
            return
        pos = gen.position("eos_token_id")
        yield self.finding(
            ctx,
            f"transformers' `generate()` stops on `eos_token_id` {g} from generation_config.json; {fam.who} "
            f"reads {c or 'none'} from config.json",
            filename=gen.path,
            location=location(pos),
            transformers_value=g,
            candle_value=c,
        )


class ConfigRefusedByCandle(Rule):
    """candle's serde parse refuses a config transformers loads.

    ## What it does
    Runs portkit's exact mirror of candle's `LlamaConfig` deserialization and reports its
    error when no more specific rule (PK103, PK110) covers it: a float where candle wants an
    integer (`4096.0`), `null` for a required field, a negative size, a key written twice
    (transformers keeps the last, serde refuses), an EOS list with a non-u32 id.

    ## Why is this bad?
    The model does not load in candle, while transformers runs it.

    ## Example
    ```json
    {"max_position_embeddings": 4096.0}
    ```

    ## Fix
    None automatically; write the value as candle's type (an integer, no duplicates).

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:38-54 (`usize`, `u32`, `f32`, `f64`,
    `Option<bool>` fields, serde_json 1.0.154 rules).

    ## Verification
    crash: candle's parse must fail with the same serde message.

    ## References
    - https://github.com/zhihu/ZhiLight/issues/20 (an EOS list crashes a strict parser)
    """

    code = "PK112"
    name = "config-refused-by-candle"
    group = "config"
    families = fc.ALL_FAMILIES
    severity = "error"
    effect = "load-error"
    fix_title = "Write the value with the type candle's config struct declares"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, doc, fam = ctx.fv, ctx.facts.config, ctx.family
        if fv is None or fv.ok or fam is None or doc is None or not isinstance(doc.value, dict):
            return
        if fv.missing_field() is not None:
            return  # PK110
        at = fv.refused_at or []
        if at and at[0] == "rope_scaling" and ctx.applies(RopeScalingUnparseable):
            return  # PK103
        edits, help = None, None
        if at == ["sliding_window"] and doc.value.get("sliding_window") is None:
            edits, help = _null_window_fix(ctx)
        where = ".".join(at)
        yield self.finding(
            ctx,
            f"transformers loads this config; {fam.who} refuses it"
            + (f" at `{where}`" if where else "")
            + f": `{fv.refused}`",
            keys=tuple(at),
            candle_value={"refused": fv.refused},
            fix_edits=edits,
            expect=fv.refused,
            help=help or f"Write the value with the type candle's `{fam.struct}` declares",
        )


def _null_window_fix(ctx: Context) -> tuple[dict[str, object] | None, str | None]:
    """`sliding_window: null` where candle wants a number. transformers ignores the key where
    the config does not opt in to the window (qwen2's `use_sliding_window`), and candle keeps
    `sliding_window`+1 keys: a window of `max_position_embeddings` is no window in either.
    Elsewhere (mixtral) transformers reads any window it is given, so no value keeps it unchanged."""
    ftv, fam = ctx.ftv, ctx.family
    assert ftv is not None and fam is not None
    mp = ftv.get("max_position_embeddings")
    opts_in = "use_sliding_window" in ftv.values  # the family's transformers config has the switch
    if opts_in and ftv.get("use_sliding_window") is not True and isinstance(mp, int):
        return {"sliding_window": mp}, None
    return None, (
        f"No config edit: {fam.who} requires a window and transformers' `{fam.name}` applies any window it is given; "
        "build candle's Config in code with a window of at least your longest sequence"
    )


RULES = (
    RopeThetaInRopeParameters,
    RopeScalingInRopeParameters,
    RopeScalingUnparseable,
    HeadDimMismatch,
    AttentionBiasIgnored,
    MlpBiasIgnored,
    HiddenActNotSilu,
    PartialRotaryIgnored,
    SlidingWindowIgnored,
    MissingRequiredKey,
    GenerationEosDiffers,
    ConfigRefusedByCandle,
    *fc.RULES,
    *family_gemma4.RULES,
)
