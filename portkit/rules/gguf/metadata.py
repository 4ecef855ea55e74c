"""PK4xx that read a GGUF's metadata as every candle 0.11.0 GGUF loader does: the keys a loader
requires or defaults, the rope it derives from the architecture, the context and head size it
builds, and what the metadata says against config.json beside it.
"""

from __future__ import annotations

from portkit.candle_release import Span
from portkit.rules import as_candle
from portkit.rules.base import Context, f32, num
from portkit.rules.gguf.base import ALL_LOADERS, GgufRule
from portkit.semantics.gguf import (
    CANDLE_NEOX_ARCHS,
    FIXED_TABLE_ROWS,
    LLAMA_CPP_NEOX_NOT_IN_CANDLE,
    LOADER_REQUIRED,
    MAX_SEQ_LEN,
    NEOX_BY_ARCH,
    QUANTIZED_LLAMA_ARCH,
    REQUIRED_U32,
    candle_debug,
    md_u32,
    metadata_prefix,
    neox_archs,
    required_key_error,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding
    from portkit.model import GgufFile


class MissingGgufMetadata(GgufRule):
    """A metadata key the file's candle GGUF loader requires is missing or has the wrong type.

    ## What it does
    For quantized_llama checks `llama.attention.head_count`, `llama.attention.head_count_kv`,
    `llama.block_count`, `llama.embedding_length`, `llama.rope.dimension_count` (U32) and
    `llama.attention.layer_norm_rms_epsilon` (F32). For quantized_qwen2, quantized_qwen3,
    quantized_gemma3 and quantized_phi3 checks the keys each reads with `md_get(..)?` under its
    own prefix (quantized_qwen3 also requires `qwen3.rope.freq_base`, quantized_gemma3
    `attention.key_length`, `value_length` and `sliding_window`, quantized_phi3
    `feed_forward_length` and `rope.dimension_count`).

    ## Why is this bad?
    candle reads them with strict `to_u32()` / `to_f32()`: absent, or written as U64/I32/F64
    by a non-llama.cpp writer, the load fails (`cannot find ... in metadata`,
    `not a u32 U64(32)`). The keys are always under `llama.`, whatever
    `general.architecture` says.

    ## Example
    `llama.block_count` stored as U64.

    ## Fix
    None in config.json; rewrite the GGUF metadata with the types llama.cpp uses.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:372-390; quantized_qwen2.rs:191-196;
    quantized_qwen3.rs:474-481; quantized_gemma3.rs:288-295; quantized_phi3.rs:235-243;
    candle-core-0.11.0/src/quantized/gguf_file.rs:250-255, :284-289.

    ## Verification
    crash: candle's `from_gguf` must fail with the same message.

    ## References
    - https://github.com/huggingface/candle/issues/3410 (non-llama GGUFs through quantized_llama)
    """

    code = "PK401"
    name = "missing-gguf-metadata"
    severity = "error"
    effect = "load-error"
    fix_title = "Write the metadata key with the type llama.cpp uses (U32 counts, F32 epsilon)"
    probe_kind = "crash"

    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                yield from self._family_loader(ctx, g, v.loader)
                continue
            arch = v.architecture
            for key in v.missing_keys:
                prefix = f"{QUANTIZED_LLAMA_ARCH}."
                alt = key.replace(prefix, f"{arch}.", 1) if arch and arch != QUANTIZED_LLAMA_ARCH else None
                hint = f" (the file has `{alt}`: candle reads only `llama.` keys)" if alt and alt in g.metadata else ""
                yield self.file_finding(
                    ctx,
                    g,
                    f"candle {ctx.target.candle} requires `{key}` and fails at load with `cannot find {key} in "
                    f"metadata`{hint}",
                    candle_value=f"cannot find {key} in metadata",
                    expect=f"cannot find {key} in metadata",
                )
            for key, err in v.wrong_type_keys.items():
                want = "U32" if key in REQUIRED_U32 else "F32"
                yield self.file_finding(
                    ctx,
                    g,
                    f"`{key}` is {g.metadata[key].type}; candle {ctx.target.candle} reads it with "
                    f"`to_{want.lower()}()` and fails at load with `{err}`",
                    candle_value=err,
                    expect=err,
                )

    def _family_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        """A quantized_qwen2/qwen3/gemma3/phi3 file: the first key its loader reads with
        `md_get(..)?` that is absent or of another type."""
        prefix = metadata_prefix(g, loader, ctx.target.candle)
        for suffix, want in LOADER_REQUIRED[loader]:
            key = f"{prefix}.{suffix}"
            v = g.metadata.get(key)
            if v is None:
                err = required_key_error(loader, key, v, want)
                msg = f"candle {ctx.target.candle}'s {loader} requires `{key}` and fails at load with `{err}`"
            elif v.type != want:
                err = required_key_error(loader, key, v, want)
                msg = (
                    f"`{key}` is {v.type}; candle {ctx.target.candle}'s {loader} reads it with `to_{want.lower()}()` "
                    f"and fails at load with `{err}`"
                )
            else:
                continue
            yield self.file_finding(ctx, g, msg, candle_value=err, expect=err)
            return  # candle stops at the first: later keys are never read


class GgufFreqBaseDefaulted(GgufRule):
    """No usable `llama.rope.freq_base` (or `qwen2.`): candle silently uses 10000.

    ## What it does
    Flags a GGUF read by quantized_llama (`llama.rope.freq_base`) or quantized_qwen2
    (`qwen2.rope.freq_base`) without its freq_base key, or with one that is not F32 (candle's
    `to_f32()` fails and `.unwrap_or(10000)` swallows the error). With a config.json beside
    it, the message names transformers' `rope_theta`; if that is 10000 nothing is flagged.
    (quantized_qwen3 requires the key: PK401; quantized_phi3 never reads it: PK415.)

    ## Why is this bad?
    Older converters read only a top-level `rope_theta`; fed a transformers 5 config they
    write no freq_base, and candle then rotates with 10000: silent drift with length.

    Every finding is an error, with or without a config.json beside the GGUF. With one,
    portkit knows transformers' `rope_theta` and that candle's 10000 differs. Without one it
    cannot tell whether 10000 is the model's base (Llama 2 was trained with it), but the file
    does not say so either, and a GGUF is a whole model that others run without its
    config.json: write the key, 10000 if that is the model's base.

    ## Example
    A Llama 3 GGUF (theta 500000) without `llama.rope.freq_base`.

    ## Fix
    None in config.json; add `llama.rope.freq_base` (F32) to the GGUF, or re-convert after
    `portkit fix --write`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:392-394, :430;
    quantized_qwen2.rs:197-199.

    ## Verification
    numeric: candle's GGUF logits differ from transformers' and match once freq_base is
    written.

    ## References
    - https://github.com/ggml-org/llama.cpp/issues/2768, https://github.com/ggml-org/llama.cpp/issues/2773 (a converter
      that did not read `rope_theta`)
    - https://github.com/ggml-org/llama.cpp/issues/18013 (the converter learns transformers 5's `rope_parameters`)
    """

    code = "PK402"
    name = "gguf-freq-base-defaulted"
    severity = "error"
    effect = "silent"
    fix_title = "Write the architecture's `rope.freq_base` (F32) with the model's rope_theta"
    probe_kind = "numeric"
    loaders = ("quantized_llama", "quantized_qwen2")

    def check(self, ctx: Context) -> Iterable[Finding]:
        theta = ctx.ftv.get("rope_theta") if ctx.ftv is not None and self.tv_ok(ctx) else None
        for g, v in self.each(ctx):
            key = f"{metadata_prefix(g, v.loader, ctx.target.candle)}.rope.freq_base"
            written = g.metadata.get(key)
            if written is not None and written.type == "F32":
                continue  # read as written
            if written is not None:  # written in another type: the default all the same
                msg = (
                    f"`{key}` is {candle_debug(written)}; candle {ctx.target.candle}'s `to_f32()` fails and "
                    "`.unwrap_or(10000)` silently uses 10000"
                )
            elif theta is not None:
                if f32(theta) == 10000.0:
                    continue
                msg = (
                    f"transformers uses `rope_theta`={num(theta)}; the GGUF has no `{key}` and candle "
                    f"{ctx.target.candle} uses 10000"
                )
            else:
                msg = (
                    f"the GGUF has no `{key}`; candle {ctx.target.candle} uses 10000 (check the source model's "
                    "`rope_theta`)"
                )
            yield self.file_finding(
                ctx,
                g,
                msg,
                transformers_value=theta,
                candle_value=10000.0,
                help=f"Write `{key}` (F32) with the model's rope_theta",
                # quantized_llama reads `llama.rope.freq_base` whatever the architecture (quantized_llama.rs:392)
                probe_patch={key: theta} if theta is not None else None,
            )


class RopePairingByArchitecture(GgufRule):
    """candle picks interleaved RoPE for an architecture llama.cpp runs with NEOX pairing.

    ## What it does
    Flags a `general.architecture` that llama.cpp's `llama_model_rope_type()` runs with NEOX
    (or MROPE) pairing but candle's fixed list does not name (gemma, gemma2, gemma3,
    gptneox, nemotron, exaone, minicpm3, openelm, bitnet, qwen2vl). Up to candle 0.10.2 there is
    no list: quantized_llama pairs every architecture interleaved (quantized_llama.rs 0.10.2:180),
    so every architecture llama.cpp runs NEOX is flagged there (qwen2, phi3, qwen3 on 0.9.1, ...).

    ## Why is this bad?
    GGUF producers only permute Q/K rows for NORM-pairing architectures. candle pairs every
    architecture outside its list as interleaved (`rope_i`), so these models get the wrong
    pairing: typically ~20-30 coherent tokens, then degeneration.

    ## Example
    `general.architecture = "gemma2"` loaded with `quantized_llama`.

    ## Fix
    None; use the candle model for that architecture.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:396-428, :178-189.

    ## Verification
    numeric: candle's logits diverge from the producer's reference after the first tokens.

    ## References
    - https://github.com/huggingface/candle/issues/3410 (quantized_llama's RoPE pairing for NeoX-style models: ~30
      coherent tokens, then repetition)
    - https://github.com/ggml-org/llama.cpp/issues/13261, https://github.com/ikawrakow/ik_llama.cpp/issues/2290 (a wrong
      rope type per architecture: perplexity 252.8 vs 4.26)
    """

    code = "PK403"
    name = "rope-pairing-by-architecture"
    severity = "error"
    effect = "silent"
    fix_title = "Use the candle model written for this architecture"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        release = ctx.target.candle
        listed = bool(neox_archs(release))
        why = (
            "it is not in candle's NEOX list"
            if listed
            else f"candle pairs every architecture so up to 0.10.2; its NEOX list arrived in {NEOX_BY_ARCH.since} "
            "(candle#3411)"
        )
        for g, v in self.each(ctx):
            if v.architecture in LLAMA_CPP_NEOX_NOT_IN_CANDLE | CANDLE_NEOX_ARCHS and not v.rope_is_neox:
                yield self.file_finding(
                    ctx,
                    g,
                    f"llama.cpp runs `{v.architecture}` with NEOX rope pairing; candle {release}'s quantized_llama "
                    f"pairs it interleaved (`rope_i`): {why}",
                    transformers_value="neox",
                    candle_value="interleaved",
                )


class RopeFreqsIgnored(GgufRule):
    """`rope_freqs.weight` (Llama 3.1 rope scaling) is in the GGUF; candle never reads it.

    ## What it does
    Flags a GGUF holding a `rope_freqs.weight` tensor.

    ## Why is this bad?
    llama.cpp's converter stores Llama 3 scaling as per-frequency factors in
    `rope_freqs.weight`, with no metadata key. candle's quantized_llama computes plain
    `1 / freq_base^(i/d)` frequencies and never looks at the tensor: long-context behaviour
    silently differs from transformers and llama.cpp.

    ## Example
    A Llama 3.1 8B Q4_K_M GGUF.

    ## Fix
    None; candle 0.11.0 has no way to apply it.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:283-300 (frequencies), :430,
    :433-512 (tensors read; no `rope_freqs`).

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with default RoPE at the
    same theta; CONFIRMED when the GGUF agrees with it (or the effect exceeds the quantization
    noise) where it does not agree with transformers as written; otherwise the prompt length
    from which the effect exceeds the noise (docs/verify.md). The effect grows with position.

    ## References
    - https://github.com/ggml-org/llama.cpp/issues/8676, https://github.com/ggml-org/llama.cpp/issues/9396 (the
      converter writes `rope_freqs.weight`)
    - https://github.com/ikawrakow/ik_llama.cpp/issues/402, https://github.com/mozilla-ai/llamafile/issues/516,
      https://github.com/ggml-org/llama.cpp/issues/10759 (files without it)
    - https://github.com/floneum/kalosm/issues/340 (a candle-based runtime reads the scaling from config.json instead)
    """

    code = "PK404"
    name = "rope-freqs-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Apply the llama3 rope factors in your candle code; candle 0.11.0 cannot"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.has_rope_freqs:
                n = g.tensors["rope_freqs.weight"].numel
                yield self.file_finding(
                    ctx,
                    g,
                    f"the GGUF carries `rope_freqs.weight` ({n} llama3 rope factors); candle {ctx.target.candle}'s "
                    "quantized_llama never reads it and computes unscaled frequencies",
                    transformers_value="llama3 scaling",
                    candle_value="unscaled",
                    as_candle=as_candle.edit(
                        "no llama3 rope scaling", config=as_candle.rope(as_candle.raw_config(ctx), plain=True)
                    ),
                )


class ContextOverMaxSeqLen(GgufRule):
    """`llama.context_length` is above candle's fixed 4096-position table.

    ## What it does
    Flags `llama.context_length` > 4096 (or `--max-tokens` > 4096). For quantized_qwen2,
    quantized_qwen3, quantized_phi3, quantized_glm4 and quantized_smollm3, whose tables have
    `{arch}.context_length` rows (smollm3: 4096 without the key), flags a `--max-tokens` beyond that
    length (quantized_gemma3: beyond its fixed 131072, quantized_phi: its fixed 4096).

    ## Why is this bad?
    candle's quantized_llama precomputes cos/sin for `MAX_SEQ_LEN = 4096` positions whatever
    the metadata says; position 4096 fails with `narrow invalid args start + len > dim_len`.
    The other loaders fail the same way at their table's end, where transformers, which computes
    RoPE for any position, keeps going.

    ## Example
    A Llama 3.1 GGUF with `llama.context_length = 131072`.

    ## Fix
    Keep prompt plus generation within 4096 tokens.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:27, :283-300, :178-182;
    quantized_qwen2.rs:219; quantized_qwen3.rs:105, :500-506; quantized_phi3.rs:244;
    quantized_gemma3.rs:24; candle-transformers-0.11.1/src/models/quantized_phi.rs:25, :97-98;
    quantized_glm4.rs:379, :133-135; smol/quantized_smollm3.rs:112, :177-188.

    ## Verification
    crash: the GGUF runner fed 4097 tokens must fail in narrow.

    ## References
    - https://github.com/huggingface/candle/issues/1566, https://github.com/huggingface/candle/issues/1605 (quantized
      llama's hard-coded `MAX_SEQ_LEN`)
    - https://github.com/huggingface/candle/issues/2171, https://github.com/huggingface/candle/issues/3014 (prompts
      longer than the table)
    - https://github.com/EricLBuehler/mistral.rs/issues/86
    """

    code = "PK405"
    name = "context-over-max-seq-len"
    severity = "warning"
    effect = "runtime-error"
    fix_title = "Keep prompt plus generated tokens within 4096"
    probe_kind = "crash"

    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        mt = ctx.target.max_tokens
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                rows, key = self._table_rows(g, v.loader)
                if mt is None or rows is None or mt <= rows:
                    continue
                yield self.file_finding(
                    ctx,
                    g,
                    f"you plan {mt} tokens; candle {ctx.target.candle}'s {v.loader} has {rows} cos/sin rows ({key}) "
                    f"and fails at position {rows} with `narrow invalid args`",
                    severity="error",
                    transformers_value=mt,
                    candle_value=rows,
                    expect="narrow invalid args",
                )
                continue
            if mt is not None:
                if mt <= MAX_SEQ_LEN:
                    continue
                msg = (
                    f"you plan {mt} tokens; candle {ctx.target.candle}'s quantized_llama has {MAX_SEQ_LEN} cos/sin "
                    f"rows and fails at position {MAX_SEQ_LEN}"
                )
                sev = "error"
            elif v.context_length is not None and v.context_length > MAX_SEQ_LEN:
                msg = (
                    f"`llama.context_length` is {v.context_length}; candle {ctx.target.candle}'s quantized_llama has "
                    f"{MAX_SEQ_LEN} cos/sin rows and fails at position {MAX_SEQ_LEN} with `narrow invalid args`"
                )
                sev = "warning"
            else:
                continue
            yield self.file_finding(
                ctx,
                g,
                msg,
                severity=sev,
                transformers_value=v.context_length,
                candle_value=MAX_SEQ_LEN,
                expect="narrow invalid args",
            )

    @staticmethod
    def _table_rows(g: GgufFile, loader: str) -> tuple[int | None, str]:
        fixed = FIXED_TABLE_ROWS.get(loader)
        if fixed is not None:
            return fixed, "its fixed MAX_SEQ_LEN"
        key = f"{metadata_prefix(g, loader)}.context_length"
        rows = md_u32(g, key)
        if rows is None and loader == "quantized_smollm3":  # optional there: `unwrap_or(MAX_SEQ_LEN)`
            return MAX_SEQ_LEN, f"its MAX_SEQ_LEN, with no `{key}`"
        return rows, f"`{key}`"


#: candle-core's `reshape` checks the element count itself from 0.11.1 (`into_shape`, shape.rs 0.11.1:475-484),
#: before the check that 0.11.0 and older fail in (tensor.rs `reshape`: `shape mismatch in reshape`)
EAGER_RESHAPE_CHECK = Span(
    since="0.11.1", since_by="candle-core 0.11.1 shape.rs:475-484, `into_shape` checks the count"
)


def reshape_error(release: str) -> str:
    """The start of the error candle `release` fails a reshape to the wrong element count with."""
    return "Shape mismatch, got buffer of size" if EAGER_RESHAPE_CHECK.holds(release) else "shape mismatch in reshape"


class HeadDimNotEmbeddingOverHeads(GgufRule):
    """The GGUF's head size is not `embedding_length / head_count`, which candle assumes.

    ## What it does
    Compares `llama.attention.key_length` / `value_length` (when present),
    `llama.rope.dimension_count` and the `attn_q` rows with candle's head_dim,
    `embedding_length / head_count`.

    ## Why is this bad?
    candle never reads `key_length`: Q/K reshape with its own head_dim and the first forward
    fails (`lhs: [1,22,16,128], rhs: [1,22,1536]`, https://github.com/huggingface/candle/issues/3917); a rope dimension
    other than
    the head size fails in `rope_i` (`inconsistent last dim size in rope`).

    ## Example
    `llama.embedding_length = 1536`, `head_count = 16`, `key_length = 128`.

    ## Fix
    None; candle 0.11.0's quantized_llama cannot run these models.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:388, :430, :502, :203-208;
    candle-nn-0.11.0/src/rotary_emb.rs:262-277. The reshape's error: `shape mismatch in reshape` up to
    0.11.0 (tensor.rs `reshape`), `Shape mismatch, got buffer of size ...` from 0.11.1 (shape.rs:475-484).

    ## Verification
    crash: the GGUF runner must fail at the first forward.

    ## References
    - https://github.com/huggingface/candle/issues/3917 (quantized_llama assumes `head_dim == n_embd / n_head`)
    - https://github.com/ollama/ollama/issues/5817
    """

    code = "PK406"
    name = "head-dim-not-embedding-over-heads"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Use a runtime that reads `llama.attention.key_length`; candle 0.11.0 cannot run this file"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            hd = v.head_dim
            if hd is None:
                continue
            q = g.tensors.get("blk.0.attn_q.weight")
            q_rows = q.shape[0] if q is not None and len(q.shape) == 2 else None  # row-major: [out, in]
            if q_rows is not None and v.head_count and q_rows != hd * v.head_count:
                declared = "".join(
                    f", `{k}`={val}" for k, val in (("llama.attention.key_length", v.key_length),) if val is not None
                )
                # The Q reshape in forward_attn is the first place the sizes meet (quantized_llama.rs:203).
                yield self.file_finding(
                    ctx,
                    g,
                    f"`blk.0.attn_q.weight` has {q_rows} rows = `head_count` {v.head_count} x {q_rows // v.head_count}"
                    f"{declared}; candle {ctx.target.candle} uses head_dim = `embedding_length` / `head_count` = {hd} "
                    "and fails reshaping Q at the first forward",
                    transformers_value=q_rows // v.head_count,
                    candle_value=hd,
                    expect=reshape_error(ctx.target.candle),
                )
            elif v.rope_dim is not None and v.rope_dim != hd:
                yield self.file_finding(
                    ctx,
                    g,
                    f"`llama.rope.dimension_count` is {v.rope_dim} but candle {ctx.target.candle}'s head_dim is {hd}: "
                    "`rope_i` fails with `inconsistent last dim size in rope`",
                    transformers_value=v.rope_dim,
                    candle_value=hd,
                    expect="inconsistent last dim size in rope",
                )


class NonLlamaArchitecture(GgufRule):
    """A GGUF of an architecture candle has no loader for: only `quantized_llama` is left.

    ## What it does
    Flags a `general.architecture` (or none) that none of the target release's GGUF loaders is
    written for: not `llama` (quantized_llama, which llama.cpp also uses for Mistral and
    Mixtral conversions), `qwen2`, `qwen3`, `gemma3`, `phi3`, `phi2`, `glm4` or `smollm3`
    (quantized_qwen2, quantized_qwen3, quantized_gemma3, quantized_phi3, quantized_phi,
    quantized_glm4, quantized_smollm3), and names the loaders candle has that portkit does not
    check yet (quantized_lfm2, quantized_qwen3_moe).

    ## Why is this bad?
    The loader candle would use cannot read it: quantized_llama reads only `llama.*` metadata
    and the llama block layout; it picks RoPE pairing from a fixed architecture list and
    ignores everything else the architecture needs (biases, norms, activations). It either
    fails at load (`cannot find llama.attention.head_count in metadata`) or runs a different
    model.

    ## Example
    `general.architecture = "olmo2"` or `"starcoder2"`.

    ## Fix
    Run the safetensors checkpoint with candle's module for that family, or write a loader.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:372-428; the loaders
    quantized_qwen2.rs:181, quantized_qwen3.rs:463, quantized_gemma3.rs:261,
    quantized_phi3.rs:223 (`from_gguf`); candle-transformers-0.11.1/src/models/quantized_phi.rs:201,
    quantized_glm4.rs:362, smol/quantized_smollm3.rs:656. quantized_qwen3_moe.rs:332-345 builds `FusedMoeGGUF`
    (fused_moe.rs:222-290), whose `moe_gemm_gguf` is CUDA-only (candle-nn-0.11.0/src/moe.rs:339-352):
    an error on any other `--device`.

    ## Verification
    static-only, reported NOT-PROBED with why.

    ## References
    - https://github.com/huggingface/candle/issues/3410 (non-llama GGUFs through quantized_llama)
    - https://github.com/openvinotoolkit/openvino.genai/issues/4059
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle`
    """

    code = "PK407"
    name = "non-llama-architecture"
    severity = "warning"
    effect = "silent"
    fix_title = "Use candle's safetensors module for this family, or a loader written for the architecture"
    probe_kind = "static-only"
    not_probed = (
        "the target candle release has no loader written for the architecture: there is no right answer to compare "
        "quantized_llama's with"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.candle_release import key
        from portkit.families import GGUF_LOADERS
        from portkit.semantics.gguf import CUDA_ONLY_GGUF_LOADERS, UNCHECKED_GGUF_LOADERS, loader_added

        for g, v in self.each(ctx):
            own = GGUF_LOADERS.get(v.architecture)
            if own == v.loader:  # the architecture's own loader (llama's is quantized_llama)
                continue
            shown = f"`{v.architecture}`" if v.architecture else "absent"
            other = own or UNCHECKED_GGUF_LOADERS.get(v.architecture)
            if other is not None and own is None and key(loader_added(other)) <= key(ctx.target.candle):
                crash = CUDA_ONLY_GGUF_LOADERS.get(other) if ctx.target.device != "cuda" else None
                on_device = (
                    f"; on {ctx.target.device} its first forward fails (`{crash}`: its fused MoE kernel is CUDA-only)"
                    if crash
                    else ""
                )
                yield self.file_finding(
                    ctx,
                    g,
                    f"`general.architecture` is {shown}: candle {ctx.target.candle} reads it with `{other}`, a loader "
                    "portkit does not check yet; through quantized_llama it would read only `llama.*` keys and llama "
                    f"tensors{on_device}",
                    candle_value=other,
                    severity="error" if crash else None,
                )
                continue
            later = f" (`{other}` arrived in {loader_added(other)})" if other is not None else ""
            pairing = "NEOX (`rope`)" if v.rope_is_neox else "interleaved (`rope_i`)"
            yield self.file_finding(
                ctx,
                g,
                f"`general.architecture` is {shown}: candle {ctx.target.candle} has no GGUF loader for it{later}; "
                "quantized_llama, the only "
                f"one left, reads only `llama.*` keys and llama tensors, and pairs RoPE {pairing}",
                candle_value="quantized_llama",
            )
