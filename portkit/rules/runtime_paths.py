"""PK3xx: the two ways chat programs and servers run candle that one prompt never meets.

A *continuation* (`--turns 2`): after the first answer, the next turn is fed many tokens at once
at an offset on the same KV cache, as candle-examples' interactive modes do. A *batch*
(`--batch N`): N rows of equal length in one forward, as servers and embedding programs do.
candle 0.11.0 has bugs on exactly those paths. Which module has which is data in the family
modules (`CONTINUATION_MASK`, `BATCH_MASK`, `PADDING_MASK`: the records of
`portkit.families.traits`, read through `Family.trait`), and a rule's `families` is derived from
it (`FamiliesWith`); for a GGUF loader it is the rule's `loaders`. `probe_run` says which run of
`portkit verify` shows it.
"""

from __future__ import annotations

from portkit.candle_release import Span
from portkit.families.traits import FamiliesWith
from portkit.rules.base import Context, Rule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

    from portkit.findings import Finding, ProbeRun, Severity
    from portkit.model import GgufFile
    from portkit.semantics import GgufView

_DT = {"f32": "F32", "bf16": "BF16", "f16": "F16"}
FIXED_0_11_1 = "fixed in candle 0.11.1"
#: the undersized batch mask: qwen3.rs and qwen3_moe.rs have it from their first release (0.9.2) to 0.11.0
#: (qwen3.rs 0.9.2:317-341, 0.11.0:441-467); 0.11.1 builds it with `utils::build_additive_causal_mask`
BATCH_MASK_RELEASES = Span(
    since="0.9.2", until="0.11.1", since_by="qwen3.rs and qwen3_moe.rs added", until_by="candle#3586, candle#3879"
)
#: how the CPU's broadcast add panics reading past a mask's buffer: candle-core indexes the right-hand
#: side one element at a time up to 0.10.2 (cpu_backend/utils.rs 0.10.2:171, `index out of bounds`),
#: by slices from 0.11.0 (utils.rs 0.11.0:189, `range end index .. out of range for slice`)
SLICED_BINARY_MAP = Span(since="0.11.0", since_by="candle-core 0.11.0's cpu_backend/utils.rs binary_map")


def read_past_panic(release: str) -> str:
    """The text of candle-core `release`'s CPU panic when a broadcast op reads past a buffer."""
    return "out of range" if SLICED_BINARY_MAP.holds(release) else "index out of bounds"


class _PathRule(Rule):
    group = "runtime"
    severity: ClassVar[Severity] = "error"
    probe_run: ClassVar[ProbeRun]

    def ready(self, ctx: Context) -> bool:
        return bool(ctx.facts.config is not None and ctx.ftv and ctx.ftv.ok and ctx.fv and ctx.fv.ok)

    def who(self, ctx: Context) -> str:
        """How a message names candle's module (the rules run on a config with a family)."""
        assert ctx.family is not None
        return ctx.family.who

    def keys(self, ctx: Context) -> tuple[str, ...]:
        return ("model_type",) if ctx.has_key("model_type") else ()


class _TraitPathRule(_PathRule):
    """A path rule about the modules whose family trait says they break there: its `families`
    are those whose module sets the trait to the rule's kind (`FamiliesWith`)."""

    families: ClassVar[FamiliesWith]

    def how(self, ctx: Context) -> Any:
        """This config's family's record of the trait when it is of the rule's kind, else None."""
        return self.families.of(ctx.family)


class _LoaderPathRule(_PathRule):
    """A path rule about the files one GGUF loader reads (the file's `general.architecture`
    decides, as for the PK4xx rules)."""

    families = ("*",)
    needs = ("gguf",)
    loaders: ClassVar[tuple[str, ...]]

    def each(self, ctx: Context) -> list[tuple[GgufFile, GgufView]]:
        return [(g, v) for g, v in ctx.ggufs if v.loader in self.loaders]

    def file_finding(self, ctx: Context, g: GgufFile, message: str, **details: Any) -> Finding:
        return self.finding(ctx, message, filename=g.path, location=None, **details)


class ContinuationMaskInModelDtype(_TraitPathRule):
    """A later turn in f16 or bf16: the mask for the cached keys is made in the model's dtype.

    ## What it does
    Flags `--turns 2` (or `turns` in `[tool.portkit]`) with `--dtype f16`, or `--dtype bf16` on
    cuda or metal (bf16 on the CPU fails earlier, at the first matmul: PK301), for qwen2 and olmo2.

    ## Why is this bad?
    transformers runs a chat's second turn on its cache in any dtype. When candle's qwen2 or
    olmo2 gets more than one token at `seqlen_offset > 0`, it builds the causal triangle in f32
    and the columns for the cached keys (`mask0`) as zeros of the model's dtype, then concatenates
    them: `Tensor::cat` refuses two dtypes, on every device. The first turn runs; the second
    fails with `dtype mismatch in cat, lhs: F16, rhs: F32`. At f32 both parts agree and the turn runs.

    ## Example
    `portkit lint --turns --dtype f16 MODEL_DIR` on a `"model_type": "qwen2"` checkpoint.

    ## Fix
    Run the model at `--dtype f32`, or feed a later turn one token at a time (candle masks only a
    multi-token forward). In a copy of the module, make `mask0` `DType::F32` as mistral.rs:416 does.
    Not fixed in candle 0.11.1 (qwen2.rs and olmo2.rs are unchanged there).

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen2.rs:316-318 and olmo2.rs:316-318 (`mask0` in
    `self.dtype`, `Tensor::cat` with the f32 triangle), mistral.rs:416 (the same code with
    `DType::F32`); candle-core-0.11.0/src/tensor_cat.rs:171 (the dtype check), error.rs:31.

    ## Verification
    crash: `portkit verify --turns --dtype f16` prefills the prompt, generates, then feeds a second
    segment of 8 tokens at the offset through `forward(x, offset)`; candle must fail with
    `dtype mismatch in cat, lhs: F16, rhs: F32`. The f32 twin agrees with transformers.

    ## References
    - docs/verify.md, "A second turn, and rows in a batch" (the measured table)
    """

    code = "PK309"
    name = "continuation-mask-in-model-dtype"
    families = FamiliesWith("CONTINUATION_MASK", "prefix-in-model-dtype")  # qwen2, olmo2
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "turns"
    fix_title = "Run the continuation at f32, or feed a later turn one token at a time"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        how = self.how(ctx)
        if not self.ready(ctx) or not t.continues or how is None:
            return
        if t.half_past_matmul:
            expect = f"dtype mismatch in cat, lhs: {_DT[t.dtype]}, rhs: F32"
            yield self.finding(
                ctx,
                f"transformers runs a second turn on its cache in {t.dtype}; {self.who(ctx)} makes the cached keys' "
                "part "
                f"of the mask in {t.dtype} and the rest in f32 ({how.source}), so a turn of more than one token at an "
                f"offset fails with `{expect}`",
                keys=self.keys(ctx),
                transformers_value=t.dtype,
                candle_value=expect,
                expect=expect,
            )


class ContinuationPastRotatingWindow(_TraitPathRule):
    """A later turn that ends past `sliding_window`: gemma3's sliding layers fail.

    ## What it does
    Flags `--turns 2` for gemma3 when the conversation (`--max-tokens`: every turn's tokens and
    the answers between them) is longer than candle's `sliding_window`; without `--max-tokens`,
    a warning that names the length.

    ## Why is this bad?
    transformers keeps the last `sliding_window` keys on its sliding layers and masks the new
    tokens against them. candle's gemma3 keeps a `RotatingKvCache` of `sliding_window` keys on
    those layers, but builds the mask of a multi-token forward with `offset + seq_len` columns:
    once a turn ends past the window, the cache hands back `sliding_window` keys, the mask has
    more columns, and `broadcast_add` fails (`shape mismatch in broadcast_add, lhs: [1, 4, 9, 32],
    rhs: [1, 1, 9, 33]` on the generated fixture, window 32). Gemma 3 1B's window is 512 tokens: a
    chat's second turn past that crashes on every device and dtype. A prompt of any length (offset 0)
    and one-token decoding run.

    ## Example
    `portkit lint --turns --max-tokens 2048 MODEL_DIR` on a Gemma 3 checkpoint (`sliding_window` 512).

    ## Fix
    Keep a conversation within `sliding_window` tokens, or feed a later turn one token at a time.
    Not fixed in candle 0.11.1 (gemma3.rs is unchanged there).

    ## Candle source
    candle-transformers-0.11.0/src/models/gemma3.rs:192-193 (`RotatingKvCache::new(2, sliding_window)`),
    :247-248 (its append), :417-423 (a mask of `tgt_len + seqlen_offset` columns), :273
    (`broadcast_add`); candle-nn-0.11.0/src/kv_cache.rs:229-260 (the rotating append returns at
    most `max_seq_len` keys once the sequence is longer).

    ## Verification
    crash: `portkit verify --turns` with a second turn that ends past the window must fail with
    `shape mismatch in broadcast_add`; within the window the continuation agrees with transformers.

    ## References
    - docs/verify.md, "A second turn, and rows in a batch" (the measured table)
    """

    code = "PK310"
    name = "continuation-past-rotating-window"
    families = FamiliesWith("CONTINUATION_MASK", "rotating-window")  # gemma3
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "turns"
    fix_title = "Keep a conversation within `sliding_window` tokens, or feed a later turn one token at a time"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t, fv = ctx.target, ctx.fv
        how = self.how(ctx)
        if not self.ready(ctx) or not t.continues or how is None or fv is None:
            return
        window = fv.get("sliding_window")
        if not isinstance(window, int) or isinstance(window, bool):
            return
        expect = "shape mismatch in broadcast_add"
        if t.max_tokens is not None and t.max_tokens <= window:
            return
        length = (
            f"the {t.max_tokens} tokens of the conversation run"
            if t.max_tokens is not None
            else f"a conversation of more than {window} tokens runs"
        )
        yield self.finding(
            ctx,
            f"transformers masks a later turn against the last `sliding_window`={window} keys; {self.who(ctx)}'s "
            "sliding "
            f"layers keep {window} keys but mask offset + length columns ({how.source}), so once {length} past the "
            f"window a multi-token turn fails with `{expect}`",
            keys=("sliding_window",),
            transformers_value=window,
            candle_value=expect,
            expect=expect,
            severity=None if t.max_tokens is not None else "warning",
        )


class BatchMaskUndersized(_TraitPathRule):
    """A batch in qwen3, qwen3_moe, smollm3 or glm4_new: the causal mask holds one row but is shaped for N.

    ## What it does
    Flags `--batch N` (N > 1) for qwen3 and qwen3_moe where candle reads or casts the mask:
    on cuda and metal (and on the CPU with the `flash-attn` feature), wrong rows; for qwen3_moe
    on the CPU at bf16 or f16, a panic. qwen3 on the CPU builds no mask; qwen3_moe on the CPU at
    f32 builds it and never reads it: no finding there. smollm3 (smol/smollm3.rs:396-420) and
    glm4_new (glm4_new.rs:332-357) add it on every device: on the CPU the first batched forward panics;
    so do qwen3 and qwen3_moe before 0.11.0, whose attention had no CPU flash-attention path yet
    (qwen3.rs 0.10.2:317-352; measured with candle 0.10.2's own crates: `index out of bounds: the
    len is 256 but the index is 256`).

    ## Why is this bad?
    transformers masks every row of a batch. candle's `causal_mask` fills `tgt * (tgt + offset)`
    values and shapes them `(b, 1, tgt, tgt + offset)`; `Tensor::from_slice` does not check the
    length against a fully given shape, so the tensor's storage is `b` times too small. Where
    attention adds it, rows after the first read past the buffer: garbage or NaN on Metal and CUDA
    (the issues below, Qwen3 embedding and reranker models). qwen3_moe casts it to the model dtype
    for every multi-token forward: on the CPU at bf16/f16 the cast itself reads past the buffer and
    panics (`range end index 512 out of range for slice of length 256` on the generated fixture).
    Fixed in candle 0.11.1 (`build_additive_causal_mask` shapes it `(1, 1, tgt, tgt + offset)`).

    ## Example
    `portkit lint --batch 8 --device cuda MODEL_DIR` on a `"model_type": "qwen3"` checkpoint.

    ## Fix
    Upgrade to candle-transformers 0.11.1, or run rows one at a time (`--batch 1`).

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen3.rs:441-466 (`causal_mask`), :473-480 (built only
    off the CPU; on the CPU with `flash-attn`), :226-240 (the standard attention that adds it);
    qwen3_moe.rs:302-327, :333-337 (built for every multi-token forward, cast to the model dtype);
    candle-core-0.11.0/src/tensor.rs:564-573 (`from_slice`), shape.rs:474-477 (`into_shape`
    ignores the element count), cpu_backend/utils.rs:221-228 (the cast that panics);
    candle-transformers-0.11.1/src/utils.rs:38-66 (`build_additive_causal_mask`, the fix).

    ## Verification
    crash: `portkit verify --batch 2 --dtype f16` on qwen3_moe must panic with `out of range for slice`.
    numeric (cuda, metal): each row of the batch against the same row alone and against
    transformers; the CPU cannot show it (qwen3 builds no mask there).

    ## References
    - https://github.com/huggingface/candle/issues/3582, https://github.com/huggingface/candle/issues/3764 (rows after
      the first wrong or NaN, Metal and CUDA)
    - https://github.com/huggingface/candle/pull/3586 (the fix, in 0.11.1)
    """

    code = "PK311"
    name = "batch-mask-undersized"
    holds = BATCH_MASK_RELEASES
    families = FamiliesWith("BATCH_MASK", "undersized")  # qwen3, qwen3_moe, smollm3, glm4_new
    effect = "silent"
    probe_kind = "numeric"
    probe_run = "batch"
    fix_title = "Upgrade to candle-transformers 0.11.1, or run one row at a time"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        how = self.how(ctx)
        if not self.ready(ctx) or not t.batched or how is None:
            return
        # qwen3's attention adds the mask on its standard path: off the CPU, or on it with flash-attn
        read = how.read == "every-device" or (t.device == "cpu") == ("flash-attn" in t.features)
        source, built = how.source, how.built
        if read and how.read == "every-device" and t.device == "cpu":
            yield self.finding(
                ctx,
                f"transformers masks each of the {t.batch} rows; {self.who(ctx)}'s causal mask holds one row shaped "
                f"for {t.batch} ({source}), and on the CPU attention reads past its buffer and panics ({FIXED_0_11_1})",
                keys=self.keys(ctx),
                transformers_value=f"{t.batch} rows",
                candle_value="panic",
                expect=read_past_panic(t.candle),
                probe_kind="crash",
            )
        elif read:
            yield self.finding(
                ctx,
                f"transformers masks each of the {t.batch} rows; {self.who(ctx)}'s causal mask holds one row shaped "
                f"for {t.batch} ({source}), and on `{t.device}` attention reads rows after the first past its buffer: "
                f"garbage or NaN ({FIXED_0_11_1})",
                keys=self.keys(ctx),
                transformers_value=f"{t.batch} rows",
                candle_value="rows after the first wrong",
            )
        elif built == "always" and t.dtype != "f32" and t.device == "cpu":
            expect = "out of range for slice"
            yield self.finding(
                ctx,
                f"transformers masks each of the {t.batch} rows; {self.who(ctx)} casts a causal mask of one row shaped "
                f"for {t.batch} to {t.dtype} ({source}), and the cast reads past its buffer and panics "
                f"({FIXED_0_11_1})",
                keys=self.keys(ctx),
                transformers_value=f"{t.batch} rows",
                candle_value="panic",
                expect=expect,
                probe_kind="crash",
            )


GLM4_BATCH_EXPECT = "shape mismatch in matmul"


class Glm4RopeFirstRowOnly(_PathRule):
    """A batch through glm4_new: its rotary embedding keeps the first row only (every release).

    ## What it does
    Flags `--batch N` (N > 1) for GLM-4 checkpoints (`Glm4ForCausalLM`) on every candle release
    that has glm4_new, 0.9.2 to 0.11.1; before 0.11.1 not on the CPU, where PK311's panic comes first.

    ## Why is this bad?
    transformers rotates the queries and keys of every row. candle's glm4_new slices row 0 out of
    them (`xs.i((0, .., .., ..rotary_dim))`, then `unsqueeze(0)`), so after RoPE the queries and
    keys of a batch of N are one row. On 0.11.1, whose causal mask is right, the attention then
    multiplies one row of probabilities with N rows of values and the batch fails:
    `shape mismatch in matmul, lhs: [1, 4, 16, 16], rhs: [2, 4, 16, 16]` (measured on the tiny
    fixture at N=2). Before 0.11.1 the undersized mask (PK311) broadcasts the scores back to N rows:
    on the CPU its read panics first; elsewhere every row after the first attends with the first
    row's queries and keys, without an error. One row at a time runs right on every release.

    ## Example
    `portkit lint --batch 8 MODEL_DIR` on a `"model_type": "glm4"` checkpoint.

    ## Fix
    Run rows one at a time; upgrading candle does not fix it. In a copy of glm4_new.rs, rotate
    every row (`xs.narrow(D::Minus1, 0, rotary_dim)` instead of `xs.i((0, ..))`).

    ## Candle source
    candle-transformers-0.11.1/src/models/glm4_new.rs:65-77 (`RotaryEmbedding::apply`: row 0 only),
    :211-212 (applied to q and k), :225 (`probs.matmul(&v)`); the same lines in 0.9.2 to 0.11.0.

    ## Verification
    crash (0.11.1): `portkit verify --candle 0.11.1 --batch 2` must fail with `shape mismatch in
    matmul`; each row alone agrees with transformers. numeric before 0.11.1 (cuda, metal): each row
    of the batch against the same row alone and against transformers.

    ## References
    - tests/native/test_chat_paths.py (glm4_new's batch on 0.11.0), where portkit found it
    - https://github.com/huggingface/candle/pull/3879 (0.11.1's mask fix, which leaves the rotary embedding as it was)
    """

    code = "PK322"
    name = "glm4-rope-first-row-only"
    families = ("glm4_new",)
    probe_run = "batch"
    probe_kind = "crash"
    fix_title = "Run rows one at a time; candle 0.11.1 does not fix it"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not self.ready(ctx) or not t.batched:
            return
        if BATCH_MASK_RELEASES.holds(t.candle):
            if t.device == "cpu":
                return  # PK311: the undersized mask's read panics first
            # the one-row mask broadcasts the scores back to N rows: no shape error, wrong rows
            yield self.finding(
                ctx,
                f"transformers rotates each of the {t.batch} rows; {self.who(ctx)}'s rotary embedding keeps the first "
                "row's queries and keys (glm4_new.rs:65-77), so every row after the first attends with them "
                "(0.11.1, whose mask is right, fails the batch instead)",
                keys=self.keys(ctx),
                transformers_value=f"{t.batch} rows",
                candle_value="rows after the first wrong",
                probe_kind="numeric",
            )
        else:
            yield self.finding(
                ctx,
                f"transformers rotates each of the {t.batch} rows; {self.who(ctx)}'s rotary embedding keeps the first "
                f"row's queries and keys (glm4_new.rs:65-77), so the attention fails with `{GLM4_BATCH_EXPECT}`",
                keys=self.keys(ctx),
                transformers_value=f"{t.batch} rows",
                candle_value=GLM4_BATCH_EXPECT,
                expect=GLM4_BATCH_EXPECT,
                probe_kind="crash",
            )


class PaddingMaskBidirectional(_TraitPathRule):
    """qwen2's forward with a padding mask attends both ways.

    ## What it does
    Flags `--batch N` (N > 1) for qwen2: batched programs (embeddings, evaluation, servers)
    call `qwen2::Model::forward(input_ids, offset, Some(attn_mask))` with the tokenizer's
    attention mask.

    ## Why is this bad?
    transformers' Qwen2 is causal with or without a padding mask. candle's
    `prepare_attention_mask` builds the mask from the padding signal alone, with no causal
    triangle: every position attends to the later tokens of its row. A single prompt (no mask)
    is causal and right; with a mask, every position changes, and from the second layer on even
    the last one (the generated fixture: max|diff| 14 over all positions). ModelForCausalLM's
    forward never passes a mask, so text generation is unaffected.

    ## Example
    `portkit lint --batch 32 MODEL_DIR` on a gte-Qwen2 style `"model_type": "qwen2"` checkpoint.

    ## Fix
    Call `forward` with `attn_mask = None` for rows of equal length; with padding, combine the
    padding mask with the causal triangle yourself (the open pull request below does). Not fixed
    in candle 0.11.1.

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen2.rs:326-338 (`prepare_attention_mask`: the padding
    row expanded to `(1, 1, L, L)`, no triangle), :347-348 (used whenever `attn_mask` is given),
    :296-324 (the causal mask the `None` branch builds).

    ## Verification
    numeric: `portkit verify --batch 2` runs the rows through `Model::forward(.., Some(mask))` with
    an all-ones mask and compares every position with the same row fed causally and with
    transformers.

    ## References
    - https://github.com/huggingface/candle/issues/3567 (open), https://github.com/huggingface/candle/pull/3609
    """

    code = "PK312"
    name = "padding-mask-bidirectional"
    families = FamiliesWith("PADDING_MASK", "bidirectional")  # qwen2
    severity = "warning"
    effect = "silent"
    probe_kind = "numeric"
    probe_run = "padded-batch"
    fix_title = "Pass no attention mask for rows of equal length, or add the causal triangle to it"

    def check(self, ctx: Context) -> Iterable[Finding]:
        how = self.how(ctx)
        if not self.ready(ctx) or not ctx.target.batched or how is None:
            return
        yield self.finding(
            ctx,
            f"transformers keeps a padded batch causal; {self.who(ctx)}'s `Model::forward` with a padding mask builds "
            f"it without the causal triangle ({how.source}): every position attends to the later tokens of its row",
            keys=self.keys(ctx),
            transformers_value="causal",
            candle_value="bidirectional",
        )


class Qwen3GgufBatch(_LoaderPathRule):
    """A batch through quantized_qwen3: a panic on the CPU, wrong rows elsewhere.

    ## What it does
    Flags `--batch N` (N > 1) for a GGUF read by candle's quantized_qwen3.

    ## Why is this bad?
    On the CPU, quantized_qwen3 builds no KV cache of the usual kind (`kv_cache` is `None` there)
    and its fast attention path requires `b == 1`; a batch takes the other path, which unwraps
    that `None`: `called Option::unwrap() on a None value` (a panic; not fixed in candle 0.11.1).
    On cuda and metal it takes the standard path with the same undersized causal mask as qwen3
    (PK311): rows after the first are garbage (fixed in candle 0.11.1).

    ## Example
    `portkit lint --batch 4 Qwen3-0.6B-Q8_0.gguf`.

    ## Fix
    Run rows one at a time on the CPU. On a GPU, upgrade to candle-transformers 0.11.1.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_qwen3.rs:198-214 (no `kv_cache` on the CPU),
    :269 (`if x.device().is_cpu() && b == 1`), :357 (`self.kv_cache.as_mut().unwrap()`), :538-563
    and :570-574 (the causal mask, off the CPU only); candle-transformers-0.11.1/src/utils.rs:38-66.

    ## Verification
    crash: `portkit verify --gguf FILE --batch 2` on the CPU must panic with
    `called \\`Option::unwrap()\\` on a \\`None\\` value`; each row alone agrees.

    ## References
    - https://github.com/huggingface/candle/issues/3764 (the mask, on CUDA; the same code in quantized_qwen3)
    """

    code = "PK313"
    name = "qwen3-gguf-batch"
    # read in quantized_qwen3.rs of 0.11.0 and 0.11.1 (the CPU path); the GPU finding ends with the mask's fix
    holds = Span(since="0.11.0", since_by="quantized_qwen3.rs 0.11.0:269, the CPU path with `b == 1`")
    loaders = ("quantized_qwen3",)
    effect = "panic"
    probe_kind = "crash"
    probe_run = "batch"
    fix_title = "Run rows one at a time (on a GPU: candle-transformers 0.11.1)"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not t.batched:
            return
        for g, _v in self.each(ctx):
            if t.device == "cpu":
                expect = "called `Option::unwrap()` on a `None` value"
                yield self.file_finding(
                    ctx,
                    g,
                    f"candle {ctx.target.candle}'s quantized_qwen3 runs a batch of {t.batch} on the CPU through a path "
                    "that unwraps the "
                    "KV cache it never builds there (quantized_qwen3.rs:269, :357): a panic, not fixed in "
                    "candle 0.11.1",
                    candle_value="panic",
                    expect=expect,
                )
            elif BATCH_MASK_RELEASES.holds(t.candle):
                yield self.file_finding(
                    ctx,
                    g,
                    f"candle {ctx.target.candle}'s quantized_qwen3 shapes a causal mask of one row for {t.batch} "
                    "(quantized_qwen3.rs:538-563): "
                    f"on `{t.device}` rows after the first read past its buffer ({FIXED_0_11_1})",
                    candle_value="rows after the first wrong",
                    probe_kind="numeric",
                )


class Qwen3GgufContinuationOnCpu(_LoaderPathRule):
    """A later turn through quantized_qwen3 on the CPU misses the tokens decoded before it.

    ## What it does
    Flags `--turns 2` for a GGUF read by candle's quantized_qwen3 on the CPU.

    ## Why is this bad?
    On the CPU, quantized_qwen3 keeps two caches: a multi-token forward appends to an interleaved
    cache (and copies into a raw one); a one-token step writes the raw cache only. A later turn is
    again a multi-token forward: it attends over the interleaved cache, which holds the prompt but
    none of the answer's tokens, with a causal offset that counts them. Every position of the turn
    but the first is silently wrong (the generated fixture: 3 to 9 in logits, where transformers'
    own logits are about 10). The first turn, and decoding token by token, are right. Not fixed in
    candle 0.11.1.

    ## Example
    `portkit lint --turns Qwen3-0.6B-Q8_0.gguf` (a chat's second turn on the CPU).

    ## Fix
    Feed a later turn one token at a time, or clear the cache and prefill the whole conversation again.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_qwen3.rs:272-313 (the one-token step: the raw
    cache only), :314-353 (a multi-token forward: `interleaved_cache.append`, then `flash_attn`
    with `causal_with_offset(offset)` over it); candle-nn-0.11.0/src/kv_cache.rs:989-1040
    (`InterleavedKvCache`), :1042-1110 (`RawInterleavedKvCache`).

    ## Verification
    numeric: `portkit verify --gguf FILE --turns` feeds the second segment at the offset and compares
    each position with the same positions fed one token at a time and with transformers.

    ## References
    - docs/verify.md, "A second turn, and rows in a batch" (the measured table)
    """

    code = "PK314"
    name = "qwen3-gguf-continuation-on-cpu"
    loaders = ("quantized_qwen3",)
    # 0.9.2-0.10.2 keep one ConcatKvCache on every device (quantized_qwen3.rs 0.10.2:163)
    holds = Span(since="0.11.0", since_by="quantized_qwen3.rs 0.11.0:197-214, the CPU's interleaved and raw caches")
    effect = "silent"
    probe_kind = "numeric"
    probe_run = "turns"
    fix_title = "Feed a later turn one token at a time, or prefill the whole conversation again"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not t.continues or t.device != "cpu":
            return
        for g, _v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"candle {ctx.target.candle}'s quantized_qwen3 on the CPU writes decoded tokens to one cache and reads "
                "another for a "
                "multi-token forward (quantized_qwen3.rs:272-313, :314-353): a later turn attends without the answer's "
                "tokens, and every position but its first is wrong",
                candle_value="a later turn's rows wrong",
            )


class Gemma3GgufContinuationMask(_LoaderPathRule):
    """A later turn through quantized_gemma3 fails: an f32 prefix joined to a u32 mask.

    ## What it does
    Flags `--turns 2` for a GGUF read by candle's quantized_gemma3, on every device.

    ## Why is this bad?
    quantized_gemma3 builds the mask of a multi-token forward as u32 (1 keeps a key) and, at
    `index_pos > 0`, the columns for the cached keys as f32 zeros; `Tensor::cat` refuses the two
    dtypes. Every turn after the first that has more than one token fails with `dtype mismatch in
    cat, lhs: F32, rhs: U32`: a Gemma 3 GGUF chat crashes on its second turn. (Were the prefix u32,
    its zeros would mask every cached key.) Not fixed in candle 0.11.1.

    ## Example
    `portkit lint --turns gemma-3-1b-it-Q4_K_M.gguf`.

    ## Fix
    Feed a later turn one token at a time, or clear the cache and prefill the whole conversation again.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:144-174 (`LayerWeights::mask`: u32
    values, `Tensor::zeros((seq_len, index_pos), DType::F32, ..)` and `Tensor::cat` at :170-172),
    :450 (called for every multi-token forward); candle-core-0.11.0/src/tensor_cat.rs:171.

    ## Verification
    crash: `portkit verify --gguf FILE --turns` must fail with `dtype mismatch in cat, lhs: F32, rhs: U32`.

    ## References
    - docs/verify.md, "A second turn, and rows in a batch" (the measured table)
    """

    code = "PK315"
    name = "gemma3-gguf-continuation-mask"
    loaders = ("quantized_gemma3",)
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "turns"
    fix_title = "Feed a later turn one token at a time, or prefill the whole conversation again"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not ctx.target.continues:
            return
        expect = "dtype mismatch in cat, lhs: F32, rhs: U32"
        for g, _v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"candle {ctx.target.candle}'s quantized_gemma3 joins an f32 prefix for the cached keys to its u32 "
                f"mask (quantized_gemma3.rs:170-172): a later turn of more than one token fails with `{expect}`",
                candle_value=expect,
                expect=expect,
            )


class Gemma3GgufBatch(_LoaderPathRule):
    """A batch through quantized_gemma3 fails at the final norm: its input is not contiguous.

    ## What it does
    Flags `--batch N` (N > 1) for a GGUF read by candle's quantized_gemma3, on every device.

    ## Why is this bad?
    After the last layer quantized_gemma3 takes each row's last position with
    `layer_in.i((.., seq_len - 1, ..))` and then applies the RMS norm. For one row that view is
    contiguous; for N rows it is strided, and candle-nn's fused RMS norm refuses strided input:
    `input has to be contiguous` (CPU and CUDA), `Non contiguous rmsnorm is not implemented`
    (Metal). quantized_llama normalises before it selects the position. Not fixed in candle 0.11.1.

    ## Example
    `portkit lint --batch 8 gemma-3-1b-it-Q4_K_M.gguf`.

    ## Fix
    Run rows one at a time, or in a copy of the loader apply the norm before `i((.., seq_len - 1, ..))`
    (or make the view `.contiguous()`).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:474-475; candle-nn-0.11.0/src/ops.rs:474
    (CPU), :568 (CUDA), :630 (Metal); quantized_llama.rs:592-593 (norm, then the position).

    ## Verification
    crash: `portkit verify --gguf FILE --batch 2` must fail with `input has to be contiguous` on the
    CPU; each row alone runs.

    ## References
    - docs/verify.md, "A second turn, and rows in a batch" (the measured table)
    """

    code = "PK316"
    name = "gemma3-gguf-batch"
    loaders = ("quantized_gemma3",)
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "batch"
    fix_title = "Run rows one at a time, or normalise before selecting the last position"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not t.batched:
            return
        expect = "Non contiguous rmsnorm is not implemented" if t.device == "metal" else "input has to be contiguous"
        for g, _v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"candle {ctx.target.candle}'s quantized_gemma3 normalises a strided view of the {t.batch} rows' last "
                f"positions (quantized_gemma3.rs:474-475): the first forward fails with `{expect}`",
                candle_value=expect,
                expect=expect,
            )


#: a square causal mask for a multi-token forward at an offset: llama.rs, granite.rs and the quantized llama,
#: qwen2, phi3 and phi loaders up to 0.10.1; 0.10.2 builds `(seq_len, index_pos + seq_len)` with
#: utils::build_causal_mask
SQUARE_MASK_RELEASES = Span(until="0.10.2", until_by="candle#3437, utils::build_causal_mask (utils.rs 0.10.2:17-23)")
SQUARE_MASK_EXPECT = "cannot broadcast"


class ContinuationMaskSquare(_PathRule):
    """A later turn through llama.rs or granite.rs before 0.10.2: the mask is square, the scores are not.

    ## What it does
    Flags `--turns 2` (or `turns` in `[tool.portkit]`) for llama and granite checkpoints on candle
    0.9.1 to 0.10.1, unless the program uses flash attention.

    ## Why is this bad?
    transformers runs a chat's second turn on its cache. Up to 0.10.1, llama.rs and granite.rs build
    the causal mask of a multi-token forward as `(seq_len, seq_len)` and broadcast it onto scores of
    shape `(b, heads, seq_len, index_pos + seq_len)`: at an offset the shapes differ, and the turn fails
    with `cannot broadcast [8, 8] to [1, 4, 8, 16]`. The first prompt and one-token decoding run.
    candle 0.10.2 builds the mask over the cached keys too.

    ## Example
    `portkit lint --turns --candle 0.10.1 MODEL_DIR` on a `"model_type": "llama"` checkpoint.

    ## Fix
    Upgrade candle to 0.10.2 or newer, or feed a later turn one token at a time.

    ## Candle source
    candle-transformers-0.10.1/src/models/llama.rs:218-230 (`Tensor::from_slice(&mask, (t, t), ..)`),
    :347 (`cache.mask(seq_len)?.broadcast_as(att.shape())`); granite.rs 0.10.1:172-184, :301;
    candle-core-0.9.2/src/error.rs:138 (the message).

    ## Verification
    crash: a later turn must fail with `cannot broadcast` (verify runs 0.11.0 and 0.11.1, where the
    fact does not hold: reported not reached there).

    ## References
    - https://github.com/huggingface/candle/pull/3437
    """

    code = "PK318"
    name = "continuation-mask-square"
    families: ClassVar[tuple[str, ...]] = ("llama", "granite")
    holds = SQUARE_MASK_RELEASES
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "turns"
    fix_title = "Upgrade candle to 0.10.2, or feed a later turn one token at a time"

    #: how the mask meets the scores, candle's message, and the release that fixed it (for the message)
    applies = "broadcasts it onto"
    expected = SQUARE_MASK_EXPECT
    fixed = " (fixed in 0.10.2)"

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        if not self.ready(ctx) or not t.continues or t.use_flash_attn:
            return
        yield self.finding(
            ctx,
            f"transformers runs a second turn on its cache; {self.who(ctx)} builds the causal mask of a multi-token "
            f"forward as (seq_len, seq_len) and {self.applies} scores over the cached keys too, so a turn of more than "
            f"one token at an offset fails with `{self.expected}`{self.fixed}",
            keys=self.keys(ctx),
            transformers_value="later turn",
            candle_value=self.expected,
            expect=self.expected,
        )


class GgufContinuationMaskSquare(_LoaderPathRule):
    """A later turn through quantized_llama, qwen2, phi3 or phi before 0.10.2: a square mask.

    ## What it does
    Flags `--turns 2` for a GGUF read by candle's quantized_llama, quantized_qwen2, quantized_phi3
    or quantized_phi on candle 0.9.1 to 0.10.1.

    ## Why is this bad?
    The four loaders build the mask of a multi-token forward as `(seq_len, seq_len)` and broadcast
    it onto scores over `index_pos + seq_len` keys: at an offset a later turn fails with `cannot
    broadcast`. candle 0.10.2 builds it with `utils::build_causal_mask`.

    ## Example
    `portkit lint --turns --candle 0.9.2 model-Q4_K_M.gguf`.

    ## Fix
    Upgrade candle to 0.10.2 or newer, or feed a later turn one token at a time.

    ## Candle source
    candle-transformers-0.10.1/src/models/quantized_llama.rs:478-490, :246; quantized_qwen2.rs:296-308,
    :137; quantized_phi3.rs:304-316, :161; quantized_phi.rs 0.10.1:274-282, :147-150.

    ## Verification
    crash: a later turn must fail with `cannot broadcast`.

    ## References
    - https://github.com/huggingface/candle/pull/3437
    """

    code = "PK319"
    name = "gguf-continuation-mask-square"
    loaders = ("quantized_llama", "quantized_qwen2", "quantized_phi3", "quantized_phi")
    holds = SQUARE_MASK_RELEASES
    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "turns"
    fix_title = "Upgrade candle to 0.10.2, or feed a later turn one token at a time"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not ctx.target.continues:
            return
        for g, v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"candle {ctx.target.candle}'s {v.loader} builds the causal mask of a multi-token forward as "
                "(seq_len, seq_len) and broadcasts it onto scores over the cached keys too: a later turn of more than "
                f"one token fails with `{SQUARE_MASK_EXPECT}` (fixed in 0.10.2)",
                candle_value=SQUARE_MASK_EXPECT,
                expect=SQUARE_MASK_EXPECT,
            )


PHI_MASK_EXPECT = "shape mismatch in where_cond"


class PhiContinuationMaskSquare(ContinuationMaskSquare):
    """A later turn through phi.rs: its mask is square, its scores are not (every release).

    ## What it does
    Flags `--turns 2` (or `turns` in `[tool.portkit]`) for phi checkpoints (`PhiForCausalLM`:
    phi-1, phi-1.5, phi-2) on every candle release portkit knows, 0.9.1 to 0.11.1.

    ## Why is this bad?
    transformers runs a chat's second turn on its cache. candle's phi builds the causal mask of a
    multi-token forward as `(seq_len, seq_len)` whatever its KV cache holds, and fills scores of shape
    `(b, heads, seq_len, cached + seq_len)` through it: at an offset the shapes differ, and the turn
    fails (measured on the tiny phi fixture: `shape mismatch in where_cond, lhs: [1, 4, 2, 2], rhs:
    [1, 4, 2, 26]`). The first prompt and one-token decoding run. The fix that gave llama.rs its
    offset mask in 0.10.2 never reached phi.rs (https://github.com/huggingface/candle/pull/3437).

    ## Example
    `portkit lint --turns MODEL_DIR` on a `"model_type": "phi"` checkpoint.

    ## Fix
    Feed a later turn one token at a time, or build the mask over the cached keys in a copy of
    phi.rs (as `utils::build_causal_mask` does for llama.rs since 0.10.2).

    ## Candle source
    candle-transformers-0.11.0/src/models/phi.rs:136-141 (`get_mask(size)`: `(size, size)`), :348-352
    (`get_mask(seq_len, ..)` whatever the cache holds), :250-254 (`masked_fill` over
    `mask.broadcast_left((b_size, num_heads))`); the same lines in 0.9.1 to 0.11.1.

    ## Verification
    crash: a later turn must fail with `shape mismatch in where_cond`; the first turn agrees.

    ## References
    - https://github.com/huggingface/candle/pull/3437 (the fix for llama.rs, granite.rs and three GGUF loaders)
    """

    code = "PK320"
    name = "phi-continuation-mask-square"
    families = ("phi",)
    holds = Span()  # never fixed: phi.rs is the same in 0.9.1 to 0.11.1
    fix_title = "Feed a later turn one token at a time, or mask over the cached keys in a copy of phi.rs"
    applies = "fills, through it,"
    expected = PHI_MASK_EXPECT
    fixed = ""


#: quantized_glm4 (up to 0.11.0) and quantized_smollm3 (up to 0.11.0) build a multi-token forward's mask with
#: `Tensor::from_slice` of one row's values in a `(batch, 1, tgt, tgt + offset)` shape; 0.11.1 builds it with
#: utils::build_additive_causal_mask, `(1, 1, tgt, tgt + offset)` broadcast over the batch (candle#3879)
FROM_SLICE_BATCH_MASK = Span(until="0.11.1", until_by="candle#3879: quantized_glm4.rs and smol/quantized_smollm3.rs")
FROM_SLICE_EXPECT = "Shape mismatch, got buffer of size"


class _GgufBatchOneRowMask(_LoaderPathRule):
    """A batch through a loader that builds its mask from one row's values up to 0.11.0
    (`FROM_SLICE_BATCH_MASK`) and fails a batch another way on 0.11.1: `later_expect`, because
    `later_why`, on `later_devices`."""

    effect = "runtime-error"
    probe_kind = "crash"
    probe_run = "batch"
    fix_title = "Run rows one at a time; candle 0.11.1 does not fix it"
    later_expect: ClassVar[str]
    later_why: ClassVar[str]
    later_devices: ClassVar[tuple[str, ...]] = ("cpu", "metal", "cuda")

    def check(self, ctx: Context) -> Iterable[Finding]:
        t = ctx.target
        one_row_mask = FROM_SLICE_BATCH_MASK.holds(t.candle)
        if not t.batched or (not one_row_mask and t.device not in self.later_devices):
            return
        expect, why = (
            (
                FROM_SLICE_EXPECT,
                "builds the causal mask of a multi-token forward from one row's values in a batch-sized shape",
            )
            if one_row_mask
            else (self.later_expect, self.later_why)
        )
        for g, v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"transformers runs each of the {t.batch} rows; candle {t.candle}'s {v.loader} {why}: the batch "
                f"fails with `{expect}`",
                transformers_value=f"{t.batch} rows",
                candle_value=expect,
                expect=expect,
            )


class Glm4GgufBatch(_GgufBatchOneRowMask):
    """A batch through quantized_glm4 fails: one row's mask, then one row's rotary embedding.

    ## What it does
    Flags `--batch N` (N > 1) for a GGUF read by candle's quantized_glm4, on every release that has
    it (0.9.2 to 0.11.1).

    ## Why is this bad?
    Up to 0.11.0 the loader builds the causal mask of a multi-token forward from one row's values
    in a `(batch, 1, tgt, tgt)` shape: `Tensor::from_slice` refuses the count, `Shape mismatch, got
    buffer of size ...`. 0.11.1 builds the mask right, and the rotary embedding, which keeps the first
    row's queries and keys only (`xs.i((0, ..))`, as glm4_new's, PK322), makes the attention fail:
    `shape mismatch in matmul`. One row at a time runs on every release.

    ## Example
    `portkit lint --batch 8 GLM-4-9B-0414-Q4_K_M.gguf`.

    ## Fix
    Run rows one at a time; upgrading candle does not fix it.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_glm4.rs:430-455 (`causal_mask`: `from_slice(&mask, (b, 1,
    tgt, tgt + offset), ..)`), :465; 0.11.1:131-143 (`RotaryEmbedding::apply`: row 0 only), :270-276;
    candle-core-0.11.1/src/error.rs:72.

    ## Verification
    crash: `portkit verify --gguf FILE --batch 2` must fail with the release's message; each row alone
    runs.

    ## References
    - https://github.com/huggingface/candle/pull/3879 (0.11.1's mask, which leaves the rotary embedding as it was)
    """

    code = "PK323"
    name = "glm4-gguf-batch"
    loaders = ("quantized_glm4",)
    later_expect = "shape mismatch in matmul"
    later_why = "rotates the first row's queries and keys only (quantized_glm4.rs:131-143)"


class SmolLm3GgufBatch(_GgufBatchOneRowMask):
    """A batch through quantized_smollm3 fails: one row's mask, then a strided input to the Q8_0 LM head.

    ## What it does
    Flags `--batch N` (N > 1) for a GGUF read by candle's quantized_smollm3, on every release that has
    it (0.9.2 to 0.11.1).

    ## Why is this bad?
    Up to 0.11.0 the loader builds the causal mask from one row's values in a `(batch, 1, tgt, tgt)`
    shape, which `Tensor::from_slice` refuses (`Shape mismatch, got buffer of size ...`). 0.11.1 builds
    the mask right; then the last position of N rows is a strided view, and the LM head, which the
    loader always re-quantizes to Q8_0 (PK429), refuses strided input on the CPU: `input tensor is not
    contiguous`. One row at a time runs on every release.

    ## Example
    `portkit lint --batch 8 SmolLM3-3B-Q8_0.gguf`.

    ## Fix
    Run rows one at a time; upgrading candle does not fix it.

    ## Candle source
    candle-transformers-0.11.0/src/models/smol/quantized_smollm3.rs:768-792 (`create_causal_mask`),
    0.11.1:750-771 (`narrow(1, seq_len - 1, 1)`, then the Q8_0 `lm_head`);
    candle-core-0.11.1/src/quantized/mod.rs:1180-1183.

    ## Verification
    crash: `portkit verify --gguf FILE --batch 2` must fail with the release's message; each row alone
    runs.

    ## References
    - https://github.com/huggingface/candle/pull/3879 (0.11.1's mask)
    """

    code = "PK324"
    name = "smollm3-gguf-batch"
    loaders = ("quantized_smollm3",)
    later_expect = "input tensor is not contiguous"
    later_why = "feeds the rows' last positions, a strided view, to its Q8_0 LM head"
    # CPU and Metal refuse a strided input to a quantized matmul (quantized/mod.rs:1181, metal.rs:290);
    # CUDA's is not measured
    later_devices = ("cpu", "metal")


RULES = (
    ContinuationMaskInModelDtype,
    ContinuationPastRotatingWindow,
    BatchMaskUndersized,
    PaddingMaskBidirectional,
    Qwen3GgufBatch,
    Qwen3GgufContinuationOnCpu,
    Gemma3GgufContinuationMask,
    Gemma3GgufBatch,
    ContinuationMaskSquare,
    GgufContinuationMaskSquare,
    PhiContinuationMaskSquare,
    Glm4RopeFirstRowOnly,
    Glm4GgufBatch,
    SmolLm3GgufBatch,
)
