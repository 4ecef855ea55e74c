"""PK3xx: the model on a target (`--device`, `--dtype`, `--features`, ...) in candle 0.11.0."""

from __future__ import annotations

from portkit.candle_release import Span
from portkit.families import CANDLE_PATCH_KEY, MIXTRAL_ROUTING_IN_DTYPE
from portkit.rules import as_candle
from portkit.rules.base import Context, Rule
from portkit.rules.family_config import ALL_FAMILIES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


_DT = {"f32": "F32", "bf16": "BF16", "f16": "F16"}


class _RuntimeRule(Rule):
    group = "runtime"

    def keys(self, ctx: Context) -> tuple[str, ...]:
        for k in ("dtype", "torch_dtype"):
            if ctx.has_key(k):
                return (k,)
        return ()

    def ready(self, ctx: Context) -> bool:
        return bool(ctx.facts.config is not None and ctx.ftv and ctx.ftv.ok)

    def half_precision_run(self, ctx: Context) -> bool:
        """A config candle reads, run in half precision past the first matmul (`Target.half_past_matmul`)."""
        return bool(self.ready(ctx) and ctx.fv is not None and ctx.fv.ok and ctx.target.half_past_matmul)


def rope_dtype_error(dtype: str, device: str) -> str:
    """candle-nn's `rope` refusing an F32 cos/sin table with `dtype` queries, in its backend's words
    (candle-nn-0.11.0/src/rotary_emb.rs:395-406 CPU, :470-482 CUDA, :506-513 Metal)."""
    d = _DT[dtype]
    return f"dtype mismatch in rope {d} F32 F32" if device == "metal" else f"unsupported dtype for rope {d} F32 F32"


class Bf16MatmulOnCpu(_RuntimeRule):
    """bf16 on the CPU: candle up to 0.11.0 has no bf16 matmul there.

    ## What it does
    Flags the target `--device cpu --dtype bf16`.

    ## Why is this bad?
    transformers runs bf16 on CPU. candle's CPU matmul (gemm, and the mkl and accelerate
    paths) supports F16, F32 and F64 only: the model loads, then the first forward fails with
    `unsupported dtype BF16 for op matmul`.

    ## Example
    `portkit lint --device cpu --dtype bf16 MODEL_DIR` on a `"torch_dtype": "bfloat16"` checkpoint.

    ## Fix
    Load with `DType::F32` on CPU (the weights are converted at load), or run on cuda/metal.

    ## Candle source
    candle-core-0.11.0/src/cpu_backend/mod.rs:1372-1385 (gemm path: F16 | F32 | F64, else
    `UnsupportedDTypeForOp`), :1541 (accelerate), candle-core-0.11.0/src/error.rs:38-39.
    The matmul is candle-core's, under every model module: the rule applies to every family.
    candle-core 0.11.1 widens a BF16 matmul to f32 and narrows the product back
    (cpu_backend/mod.rs:3062-3071): the forward runs, and the rule holds up to 0.11.0.

    ## Verification
    crash: candle on CPU with bf16 must fail at the first forward with
    `unsupported dtype BF16 for op matmul`.

    ## References
    - https://github.com/huggingface/candle/issues/594, https://github.com/huggingface/candle/issues/920 (`unsupported
      dtype BF16 for op matmul` on the CPU)
    - https://github.com/huggingface/candle/issues/3503 (a cast-to-F32 CPU matmul, open)
    - https://github.com/utensils/mold/issues/971, https://github.com/EricLBuehler/candle-vllm/issues/205
    """

    code = "PK301"
    families = ALL_FAMILIES  # candle-core's matmul: the same for every module
    holds = Span(
        until="0.11.1",
        until_by="candle-core 0.11.1 cpu_backend/mod.rs:3062-3071, which widens a BF16 matmul to f32 and narrows back",
    )
    name = "bf16-matmul-on-cpu"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Use `--dtype f32` on CPU (candle converts the weights at load)"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.ready(ctx) and t.device == "cpu" and t.dtype == "bf16":
            yield self.finding(
                ctx,
                f"transformers runs bf16 matmuls on CPU; candle {ctx.target.candle} fails at the first forward with "
                "`unsupported dtype BF16 for op matmul`",
                keys=self.keys(ctx),
                transformers_value="bf16",
                candle_value="unsupported dtype BF16 for op matmul",
                expect="unsupported dtype BF16 for op matmul",
            )


class F16MatmulWithAccelerate(_RuntimeRule):
    """f16 on the CPU with candle's `accelerate` feature: no f16 matmul.

    ## What it does
    Flags `--device cpu --dtype f16 --features accelerate` (the macOS default build).

    ## Why is this bad?
    With `accelerate`, candle's CPU matmul goes through Apple's sgemm/dgemm and bails on
    F16: the first forward fails with `the accelerate backend does not support f16 matmul`.

    ## Example
    `portkit lint --dtype f16 --features accelerate MODEL_DIR`.

    ## Fix
    Use `--dtype f32` on CPU, or run f16 on metal.

    ## Candle source
    candle-core-0.11.0/src/cpu_backend/mod.rs:1455-1498.
    candle-core's matmul, under every model module: the rule applies to every family.

    ## Verification
    crash: only on a build with `accelerate` (macOS); elsewhere verify reports it as not
    runnable.

    ## References
    - https://github.com/huggingface/candle/issues/1716 (`--features accelerate` errors in matmul)
    """

    code = "PK302"
    families = ALL_FAMILIES  # candle-core's matmul: the same for every module
    name = "f16-matmul-with-accelerate"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Use `--dtype f32` on CPU, or f16 on metal"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.ready(ctx) and t.device == "cpu" and t.dtype == "f16" and "accelerate" in t.features:
            yield self.finding(
                ctx,
                f"transformers runs f16 matmuls on CPU; candle {ctx.target.candle} with `accelerate` fails at the "
                "first forward with `the accelerate backend does not support f16 matmul`",
                keys=self.keys(ctx),
                transformers_value="f16",
                candle_value="the accelerate backend does not support f16 matmul",
                expect="the accelerate backend does not support f16 matmul",
            )


class F16AccumulationOnCpu(_RuntimeRule):
    """f16 on the CPU without accelerate/mkl: candle's gemm may accumulate in f16.

    ## What it does
    Flags `--device cpu --dtype f16` without the `accelerate` or `mkl` feature.

    ## Why is this bad?
    candle's default CPU matmul is the `gemm` crate. On aarch64 CPUs with the fp16
    extension (Apple silicon, recent Arm servers) gemm-f16 multiplies and accumulates in f16
    (`MixedSimd<f16, f16, f16, f16>`), so long dot products lose precision: 44x the error of
    an f32-accumulating reference (measured on Apple silicon: docs/measurements.md, "Half
    precision"). On x86 gemm-f16 accumulates in f32.
    transformers' CPU f16 matmul accumulates in f32.

    ## Example
    `portkit lint --dtype f16 MODEL_DIR` on an Apple silicon Linux VM.

    ## Fix
    Use `--dtype f32` on CPU.

    ## Candle source
    candle-core-0.11.0/src/cpu_backend/mod.rs:1372-1453 (gemm path);
    gemm-f16-0.19.0/src/gemm.rs:813-823 (`neonfp16` when `fp16` is detected), :959-1000.
    candle-core's matmul, under every model module: the rule applies to every family.

    ## Verification
    numeric: verify measures candle f16 vs transformers f32 and reports the error beside
    the f16 step; the finding is confirmed when it exceeds f32-accumulated f16.

    ## References
    - https://github.com/InternLM/lmdeploy/issues/403, https://github.com/ggml-org/llama.cpp/issues/22571,
      https://github.com/ggml-org/llama.cpp/issues/23953,
      https://github.com/huggingface/text-generation-inference/issues/295 (f16 overflow and precision loss)
    """

    code = "PK303"
    families = ALL_FAMILIES  # candle-core's matmul: the same for every module
    name = "f16-accumulation-on-cpu"
    severity = "warning"
    effect = "silent"
    fix_title = "Use `--dtype f32` on CPU"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.ready(ctx) and t.device == "cpu" and t.dtype == "f16" and not (t.features & {"accelerate", "mkl"}):
            yield self.finding(
                ctx,
                f"transformers accumulates f16 matmuls in f32; candle {ctx.target.candle}'s gemm accumulates in f16 on "
                "aarch64 CPUs with fp16 (in f32 on x86), so logits drift",
                keys=self.keys(ctx),
                transformers_value="f32 accumulation",
                candle_value="f16 accumulation (aarch64 fp16)",
            )


class CacheDtypeMismatch(_RuntimeRule):
    """A half-precision model needs a `Cache` built with the same dtype.

    ## What it does
    For `--dtype bf16` or `f16`, reminds that candle's `Cache::new(use_kv_cache, dtype,
    &config, &device)` casts its cos/sin tables to `dtype`, which must be the model's.
    (Preview: portkit cannot see your Rust code, so this fires for every half-precision
    target.)

    ## Why is this bad?
    transformers casts the rotary tables per call. In candle a `Cache` built with F32 for a
    BF16 model fails at the first forward: `unsupported dtype for rope BF16 F32 F32` (CPU and
    CUDA) or `dtype mismatch in rope BF16 F32 F32` (Metal).

    ## Example
    `Cache::new(true, DType::F32, &cfg, &dev)` with a `VarBuilder` of `DType::BF16`.

    ## Fix
    Pass the model dtype to `Cache::new`.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:164, :206-207 (`to_dtype(dtype)`);
    candle-nn-0.11.0/src/rotary_emb.rs:395-406 (CPU), :470-482 (CUDA), :506-513 (Metal).

    ## Verification
    crash: the native runner with `cache_dtype` f32 and model dtype bf16 must fail in rope.

    ## References
    - tests/native/test_predicted_errors.py `test_pk304_predicts_the_whole_rope_error_of_its_backend`
    """

    code = "PK304"
    name = "cache-dtype-mismatch"
    severity = "info"
    effect = "runtime-error"
    fix_title = "Pass the model dtype to `Cache::new`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.ready(ctx) and t.dtype != "f32":
            d, err = _DT[t.dtype], rope_dtype_error(t.dtype, t.device)
            yield self.finding(
                ctx,
                f"transformers casts rotary tables per call; candle {ctx.target.candle}'s `Cache::new` must get "
                f"`DType::{d}` for {d} weights, else the first forward fails with `{err}`",
                keys=self.keys(ctx),
                transformers_value="per-call cast",
                candle_value=f"Cache dtype must be {d}",
                expect=err,
            )


class FlashAttnWithoutFeature(_RuntimeRule):
    """`use_flash_attn` without candle's `flash-attn` feature (or off CUDA).

    ## What it does
    Flags `--use-flash-attn` when `--features` lacks `flash-attn`, or the device is not cuda.

    ## Why is this bad?
    `into_config(true)` loads fine; the first forward reaches `flash_attn`, which without the
    feature is `unimplemented!("compile with '--features flash-attn'")`: a panic, not an
    `Err`. candle-flash-attn kernels exist only for CUDA.

    ## Example
    `portkit lint --use-flash-attn MODEL_DIR`.

    ## Fix
    Build candle with `--features flash-attn` on CUDA, or call `into_config(false)`.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:245-259, :329-336; the same
    `unimplemented!` in mistral.rs:199, gemma.rs:279, stable_lm.rs:178, granite.rs:212 (and
    mixtral, gemma2, gemma3, which take `use_flash_attn` the same way). qwen2, qwen3, phi3,
    olmo2 and starcoder2 take no such flag, so the rule does not apply to them.

    ## Verification
    crash: the native runner with `use_flash_attn=True` must panic (caught) with
    `compile with '--features flash-attn'`.

    ## References
    - tests/acceptance/test_verify_variants.py `test_flash_attn_without_feature_is_crash_confirmed`
    """

    code = "PK305"
    # the modules that take `use_flash_attn` and call `flash_attn` (else `unimplemented!`)
    families = ("llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3", "granite", "stable_lm")
    name = "flash-attn-without-feature"
    severity = "error"
    effect = "panic"
    fix_title = "Build candle with `--features flash-attn` on CUDA, or use `into_config(false)`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not self.ready(ctx) or not t.use_flash_attn:
            return
        if "flash-attn" not in t.features:
            yield self.finding(
                ctx,
                f"candle {ctx.target.candle} built without `flash-attn` panics at the first forward with "
                "`not implemented: compile with '--features flash-attn'`; transformers falls back to another attention",
                keys=self.keys(ctx),
                candle_value="panic",
                expect="compile with '--features flash-attn'",
            )
        elif t.device != "cuda":
            yield self.finding(
                ctx,
                f"candle's flash-attn kernels are CUDA-only; on `{t.device}` the first forward fails",
                keys=self.keys(ctx),
                candle_value="error",
            )


class SequenceBeyondMaxPositions(_RuntimeRule):
    """Sequences longer than `max_position_embeddings` fail in candle.

    ## What it does
    With `--max-tokens N`, flags N above `max_position_embeddings`.

    ## Why is this bad?
    transformers computes rotary angles for any position. candle precomputes a cos/sin
    table of `max_position_embeddings` rows and narrows it per call: position
    `max_position_embeddings` fails with `narrow invalid args start + len > dim_len`.

    ## Example
    `portkit lint --max-tokens 8192 MODEL_DIR` with `max_position_embeddings: 4096`.

    ## Fix
    Keep prompt plus generation within `max_position_embeddings`.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:200-207 (table rows), :262-268
    (`narrow(0, index_pos, seq_len)`); candle-core-0.11.0/src/tensor.rs:878-897. Every other
    module builds the same table: mistral.rs:121 and :145-146, mixtral.rs:84, qwen2.rs:49,
    qwen3.rs:44, gemma.rs:85, gemma3.rs:78, phi3.rs:85, olmo2.rs:38, stable_lm.rs:94,
    starcoder2.rs:54, granite.rs:156.

    ## Verification
    crash: the native runner fed `max_position_embeddings + 1` tokens must fail in narrow.

    ## References
    - https://github.com/huggingface/candle/issues/1566, https://github.com/huggingface/candle/issues/2171 (the same
      table in quantized_llama)
    """

    code = "PK306"
    families = ALL_FAMILIES  # every module precomputes max_position_embeddings rows of cos/sin
    name = "sequence-beyond-max-positions"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Keep prompt plus generated tokens within `max_position_embeddings`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t, fv, fam = ctx.target, ctx.fv, ctx.family
        if not self.ready(ctx) or t.max_tokens is None or not fv or not fv.ok or fam is None:
            return
        mp = fv.get("max_position_embeddings") or 0
        who = fam.who
        if t.max_tokens > mp:
            yield self.finding(
                ctx,
                f"transformers computes rotary angles for all {t.max_tokens} positions; {who}'s cos/sin table "
                f"has `max_position_embeddings`={mp} rows and fails at position {mp} with "
                "`narrow invalid args start + len > dim_len`",
                keys=("max_position_embeddings",),
                transformers_value=t.max_tokens,
                candle_value=mp,
                expect="narrow invalid args",
            )


class SoftcappingSkippedByFlashAttn(_RuntimeRule):
    """gemma2/gemma3 with flash attention: candle skips the attention logit softcapping.

    ## What it does
    With `--use-flash-attn`, flags a gemma2 or gemma3 config whose `attn_logit_softcapping`
    transformers applies (gemma-2 checkpoints: 50).

    ## Why is this bad?
    transformers caps every attention score with `tanh(s / cap) * cap`. candle's gemma2 and
    gemma3 apply the cap only on their plain attention path; the flash-attn path calls
    `flash_attn` on the raw scores, so long or peaked attention silently differs.

    ## Example
    `portkit lint --use-flash-attn --device cuda --features cuda,flash-attn MODEL_DIR` on a
    config with `"attn_logit_softcapping": 50.0`.

    ## Fix
    Run without flash attention (`use_flash_attn = false`).

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma2.rs:232-246 (flash path without the cap,
    :243-246 the cap on the plain path); gemma3.rs:266-269.

    ## Verification
    numeric, transformers as candle computes: only on a CUDA build with flash-attn (elsewhere
    verify reports it as not runnable), candle against transformers run without
    `attn_logit_softcapping`.

    ## References
    - transformers `models/gemma2/modeling_gemma2.py` (`softcap` in eager attention)
    """

    code = "PK307"
    name = "softcapping-skipped-by-flash-attn"
    families = ("gemma2", "gemma3")
    severity = "error"
    effect = "silent"
    fix_title = "Run gemma2/gemma3 without flash attention"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        fv, ftv = ctx.fv, ctx.ftv
        if not self.ready(ctx) or not ctx.target.use_flash_attn or fv is None or ftv is None or not fv.ok:
            return
        cap = ftv.get("attn_logit_softcapping")
        if not isinstance(cap, (int, float)) or isinstance(cap, bool):
            return
        yield self.finding(
            ctx,
            f"transformers caps attention scores at `attn_logit_softcapping`={cap:g}; candle {ctx.target.candle}'s "
            f"`{fv.family}` skips the cap on its flash-attn path",
            keys=("attn_logit_softcapping",),
            transformers_value=cap,
            candle_value=None,
            as_candle=as_candle.edit("no attention softcapping", config={"attn_logit_softcapping": None}),
        )


class MixtralExpertsBelowF32(_RuntimeRule):
    """mixtral at f16 or bf16: candle multiplies each expert's output by f32 routing weights.

    ## What it does
    Flags a mixtral config with the target `--dtype f16`, or `--dtype bf16` on cuda or metal
    (bf16 on the CPU fails earlier, at the first matmul: PK301).

    ## Why is this bad?
    transformers runs Mixtral in bf16 or f16, and the published checkpoints are bf16 (8x7B is
    93 GB in bf16, 187 GB in f32). candle's mixtral copies the routing weights to the host as
    f32, builds each expert's share back as an f32 tensor and multiplies the expert's f16/bf16
    output by it without a cast: the model loads, then the first forward fails with
    `dtype mismatch in mul, lhs: F16, rhs: F32`. candle's qwen3_moe casts the same tensor to the
    activations' dtype; mixtral does not.

    ## Example
    `portkit lint --dtype f16 MODEL_DIR` on a `"model_type": "mixtral"` checkpoint.

    ## Fix
    Run candle's mixtral at `--dtype f32`, or patch candle's `SparseMoeBlock` to cast the routing
    weights to the activations' dtype (`.to_dtype(xs.dtype())`, as qwen3_moe.rs does). No config
    edit fixes this.

    ## Candle source
    candle-transformers-0.11.0/src/models/mixtral.rs:307 (routing weights to f32 on the host),
    :340-341 (`Tensor::new` of f32 values, no cast), :348 (`broadcast_mul` with the expert's
    output); qwen3_moe.rs:163-166 (the same tensor `.to_dtype(xs.dtype())`);
    candle-core-0.11.0/src/error.rs:31 (`dtype mismatch in {op}, lhs: {lhs:?}, rhs: {rhs:?}`).

    ## Verification
    crash: `portkit verify --dtype f16` on a mixtral checkpoint must fail at the first forward
    with `dtype mismatch in mul, lhs: F16, rhs: F32`. verify then repairs it with the program the
    fix above gives, candle's mixtral.rs with that one cast added (native/src/mixtral_copy.rs,
    generated from candle's file), and judges the findings after the crash on it: PK317's
    half-precision RoPE table is CONFIRMED there (docs/verify.md, "RoPE tables in half
    precision").

    ## References
    - tests/native/test_candle_run_cache.py (mixtral at f16), where portkit found it
    - https://github.com/EricLBuehler/mistral.rs/issues/728 (the same error in another Rust port's mixtral:
      `DTypeMismatchBinaryOp { lhs: BF16, rhs: F32 }`)
    """

    code = "PK308"
    name = "mixtral-experts-below-f32"
    families = ("mixtral",)
    severity = "error"
    effect = "runtime-error"
    fix_title = "Run candle's mixtral at `--dtype f32`; no config edit fixes this"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.half_precision_run(ctx):
            expect = f"dtype mismatch in mul, lhs: {_DT[t.dtype]}, rhs: F32"
            yield self.finding(
                ctx,
                f"transformers runs Mixtral in {t.dtype}; candle {ctx.target.candle}'s `mixtral` multiplies each "
                f"expert's {t.dtype} output by f32 routing weights and fails at the first forward with `{expect}`",
                keys=self.keys(ctx),
                transformers_value=t.dtype,
                candle_value=expect,
                expect=expect,
                # verify repairs it with the program PK308's fix gives, so a finding after this
                # crash (PK317's half-precision RoPE table) is judged on candle's own mixtral
                probe_patch={CANDLE_PATCH_KEY: MIXTRAL_ROUTING_IN_DTYPE},
            )


class PhiRopeTableInF32(_RuntimeRule):
    """phi at f16 or bf16: candle's phi builds its rotary table in F32 and never casts it.

    ## What it does
    Flags a phi config (`PhiForCausalLM`: phi-1, phi-1.5, phi-2) with the target `--dtype f16`,
    or `--dtype bf16` on cuda or metal (bf16 on the CPU fails earlier, at the first matmul:
    PK301), on every candle release portkit knows, 0.9.1 to 0.11.1.

    ## Why is this bad?
    transformers runs phi-2 in f16 (its published weights are f16). candle's phi computes the
    cos/sin table in F32 and hands it to `candle_nn::rotary_emb::rope` with the f16/bf16 queries
    without a cast: the model loads, then the first forward fails with `unsupported dtype for rope
    F16 F32 F32` (CPU and CUDA) or `dtype mismatch in rope F16 F32 F32` (Metal). The other modules
    that build their table in F32 (llama, qwen3, mistral, granite) cast cos/sin to the model's dtype.

    ## Example
    `portkit lint --dtype f16 MODEL_DIR` on a `"model_type": "phi"` checkpoint.

    ## Fix
    Run candle's phi at `--dtype f32`, or cast `cos`/`sin` to the activations' dtype in a copy of
    phi.rs (`RotaryEmbedding::apply_rotary_emb`, as mistral.rs:127-134 does when it builds the
    table). No config edit fixes this.

    ## Candle source
    candle-transformers-0.11.0/src/models/phi.rs:61-77 (`RotaryEmbedding::new` in F32, no cast),
    :80-88 (`rope(&xs_rot, &c, &s)`), the same lines in 0.9.1 to 0.11.1;
    candle-nn-0.11.0/src/rotary_emb.rs:395-406 (CPU), :470-482 (CUDA), :506-513 (Metal).

    ## Verification
    crash: `portkit verify --dtype f16` on a phi checkpoint must fail at the first forward with
    `unsupported dtype for rope F16 F32 F32`; at f32 (the control) the rule does not fire.

    ## References
    - tests/native/test_candle_run_cache.py (phi at f16), where portkit found it
    """

    code = "PK321"
    name = "phi-rope-table-in-f32"
    families = ("phi",)
    severity = "error"
    effect = "runtime-error"
    fix_title = "Run candle's phi at `--dtype f32`; no config edit fixes this"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if self.half_precision_run(ctx):
            expect = rope_dtype_error(t.dtype, t.device)
            yield self.finding(
                ctx,
                f"transformers runs phi in {t.dtype}; candle {t.candle}'s `phi` builds its rotary table in F32 and "
                f"passes it uncast with {t.dtype} queries, so the first forward fails with `{expect}`",
                keys=self.keys(ctx),
                transformers_value=t.dtype,
                candle_value=expect,
                expect=expect,
            )


#: mantissa bits of the half-precision dtypes: integers are exact up to 2^(bits + 1)
_MANTISSA = {"f16": 10, "bf16": 7}


def _rounded(x: float, dtype: str) -> float:
    """`x` rounded to `dtype` (round to nearest even), in pure Python: lint stays numpy-free."""
    import struct

    if dtype == "f16":
        return struct.unpack("<e", struct.pack("<e", x))[0]
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def position_error(dtype: str, last: int) -> tuple[int, float]:
    """(the first position `dtype` cannot hold, the largest |t - round(t)| over positions up to
    `last`): the angle error of the rotary pair whose inverse frequency is 1, exactly."""
    exact = 2 ** (_MANTISSA[dtype] + 1)
    worst, k = 0.0, exact
    while k <= last:  # each binade's worst position lies within its first ulp
        ulp = k >> _MANTISSA[dtype]
        worst = max([worst] + [abs(t - _rounded(float(t), dtype)) for t in range(k, min(last, k + ulp) + 1)])
        k *= 2
    return exact + 1, worst


class RopeTableInHalfPrecision(_RuntimeRule):
    """f16 or bf16 runs of eleven candle modules rotate by angles from a half-precision table.

    ## What it does
    Flags `--dtype f16` (and `--dtype bf16` off the CPU) for phi3, qwen2, qwen2_moe, gemma, gemma2,
    gemma3, mixtral, olmo2, starcoder2, stable_lm and glm4_new when the planned length (`--max-tokens`, else
    `max_position_embeddings`) reaches a position the dtype cannot hold: 2049 in f16, 257 in bf16.
    The message gives that position and the angle error it implies at the planned length.

    ## Why is this bad?
    These modules build their RoPE cos/sin table in the model dtype: `inv_freq` and the
    positions `Tensor::arange(0u32, max_seq_len)` are each `.to_dtype(dtype)`, and
    `t.matmul(&inv_freq)` runs in it, so every angle is rounded to the dtype too. f16 holds
    integers exactly only up to 2048 and bf16 up to 256 (bf16(1001) = 1000): past them the
    positions themselves are rounded, and the pair whose inverse frequency is 1 turns up to half
    a spacing off (in f16 1 rad from position 2049, 2 rad from 4098; in bf16 1 rad from 257, 4 rad from 1028).
    transformers
    keeps the table in f32, and candle's llama, qwen3, mistral and granite compute it in F32 and
    cast only cos/sin. Measured on the tiny fixtures at 2132 positions in f16: logits 0.6 to 9.6
    from transformers where transformers run with candle's table stays within 0.1-0.5
    (docs/verify.md, "RoPE tables in half precision").

    ## Example
    `portkit lint --dtype f16 MODEL_DIR` on a Qwen2.5 checkpoint (`max_position_embeddings`
    32768): positions past 2048 are rounded to multiples of 2 to 16.

    Use instead: `--dtype f32`.

    ## Fix
    Load the model with `DType::F32`. There is no config edit: the table is private to each
    module, so a half-precision run needs a patched copy of the module whose
    `RotaryEmbedding::new` computes in F32 and casts `cos`/`sin` to the dtype (as qwen3.rs:50-57
    and mistral.rs:127-134 do).

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen2.rs:47-63 (`inv_freq ... .to_dtype(dtype)`, `arange(0u32,
    ..).to_dtype(dtype)`, `t.matmul(&inv_freq)`, `freqs.sin()`/`cos()`), :279 (`RotaryEmbedding::new(vb.dtype(),
    ..)`); the same in phi3.rs:77-136 and :363, gemma.rs:83-99 and :350, gemma2.rs:76-92 and :369,
    gemma3.rs:71-97 and :326, mixtral.rs:82-99 and :418, olmo2.rs:36-52 and :282, starcoder2.rs:52-69 and
    :280, stable_lm.rs:92-110 and :375, qwen2_moe.rs:54-72 and :414, glm4_new.rs:38-62 and :311. In F32 instead:
    llama.rs:200-207, qwen3.rs:42-58,
    mistral.rs:118-135, granite.rs:156-161. The GGUF sibling: PK412 (quantized_qwen3.rs:111-115).

    ## Verification
    numeric, transformers as candle computes: candle at the dtype over a prompt past the first
    rounded position, against transformers in f32 and against transformers whose rotary modules
    return candle's table (positions, `inv_freq` and each angle rounded as candle rounds them,
    cos/sin rounded to the dtype). CONFIRMED when candle agrees with the second where it does not
    agree with the first (the distance at least halves and the effect exceeds the dtype's noise).
    bf16 cannot run on the CPU (PK301: candle's CPU matmul has no BF16, so these modules fail
    building the table itself); there the table alone is measured (docs/verify.md). mixtral at f16
    fails at its first forward first (PK308), so its finding is NOT-REACHED there.

    ## References
    - https://github.com/huggingface/candle/issues/3698 (the RoPE table in the model dtype)
    - docs/verify.md, "RoPE tables in half precision" (the table and the model, per family)
    """

    code = "PK317"
    name = "rope-table-in-half-precision"
    # the modules whose trait `ROPE_TABLE_IN_MODEL_DTYPE` is set (tests/unit/test_rope_table.py holds the two equal;
    # listed, so that loading the rules imports no family module)
    families = (
        "phi3",
        "qwen2",
        "qwen2_moe",
        "gemma",
        "gemma2",
        "gemma3",
        "mixtral",
        "olmo2",
        "starcoder2",
        "stable_lm",
        "glm4_new",
    )
    severity = "error"
    effect = "silent"
    fix_title = (
        "Load with `DType::F32`, or patch the module's `RotaryEmbedding::new` to compute in F32 and cast cos/sin"
    )
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t, fv, fam = ctx.target, ctx.fv, ctx.family
        if not self.half_precision_run(ctx) or fv is None or fam is None:
            return
        mp = fv.get("max_position_embeddings")
        if not isinstance(mp, int) or isinstance(mp, bool) or mp <= 0:
            return
        planned = min(t.max_tokens, mp) if t.max_tokens is not None else mp
        first, worst = position_error(t.dtype, planned - 1)
        if planned - 1 < first:
            return
        src = fam.traits.rope_table_in_model_dtype
        how = (
            f"`--max-tokens` {t.max_tokens}"
            if t.max_tokens is not None and t.max_tokens <= mp
            else f"`max_position_embeddings` {mp}"
        )
        yield self.finding(
            ctx,
            f"{fam.who} builds its RoPE table in {t.dtype} ({src}): positions from {first} on are rounded "
            f"({t.dtype} holds integers exactly only up to {first - 1}), so over {planned} positions ({how}) the "
            "rotary pair "
            f"of inverse frequency 1 turns up to {worst:g} rad off and every angle is rounded to {t.dtype}; "
            f"transformers keeps the table in f32 (the effect appears past {first} tokens)",
            keys=("max_position_embeddings",) if t.max_tokens is None else self.keys(ctx),
            transformers_value="f32",
            candle_value=t.dtype,
            as_candle=as_candle.edit(f"candle's {t.dtype} RoPE table", rope_table=t.dtype),
        )


RULES = (
    Bf16MatmulOnCpu,
    F16MatmulWithAccelerate,
    F16AccumulationOnCpu,
    CacheDtypeMismatch,
    FlashAttnWithoutFeature,
    SequenceBeyondMaxPositions,
    SoftcappingSkippedByFlashAttn,
    MixtralExpertsBelowF32,
    RopeTableInHalfPrecision,
    PhiRopeTableInF32,
)
