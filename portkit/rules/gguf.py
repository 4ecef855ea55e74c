"""PK4xx: GGUF files as candle 0.11.0's GGUF loaders read them.

Each file goes to the loader its `general.architecture` names in `portkit.families.GGUF_LOADERS`
(quantized_llama for an architecture candle has no loader for); each rule lists the loaders it
speaks about (`loaders`) and sees only their files. GGUF rules apply to every model family: the
file's architecture, not config.json's `model_type`, decides how candle reads it.
"""

from __future__ import annotations

import struct

from portkit.errors import InputError
from portkit.rules.base import Context, Rule, backticked, f32, num
from portkit.semantics.gguf import (
    CANDLE_LOADS,
    CANDLE_PARSES,
    GEMMA3_DEFAULT_LOCAL_FREQ_BASE,
    LLAMA_CPP_NEOX_NOT_IN_CANDLE,
    LOADER_REQUIRED,
    MAX_SEQ_LEN,
    PHI3_FREQ_BASE,
    REQUIRED_U32,
    GgufView,
    candle_debug,
    loader_required_tensors,
    md_f32,
    md_u32,
    metadata_prefix,
)
from portkit.semantics.transformers import llama3_inv_freq_factors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import ClassVar, Iterable

    from portkit.findings import Finding
    from portkit.model import GgufFile


ALL_LOADERS = ("quantized_llama", "quantized_qwen2", "quantized_qwen3", "quantized_gemma3", "quantized_phi3")


class _GgufRule(Rule):
    group = "gguf"
    families = ("*",)
    needs = ("gguf",)
    # the candle GGUF loaders whose files the rule speaks about
    loaders: ClassVar[tuple[str, ...]] = ("quantized_llama",)

    def each(self, ctx: Context) -> Iterable[tuple[GgufFile, GgufView]]:
        return [(g, v) for g, v in ctx.ggufs if v.loader in self.loaders]

    def tv_ok(self, ctx: Context) -> bool:
        return bool(ctx.tv is not None and ctx.tv.ok)


class MissingGgufMetadata(_GgufRule):
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
                yield from self._other_loader(ctx, g, v.loader)
                continue
            arch = v.architecture
            for key in v.missing_keys:
                alt = key.replace("llama.", f"{arch}.", 1) if arch and arch != "llama" else None
                hint = f" (the file has `{alt}`: candle reads only `llama.` keys)" if alt and alt in g.metadata else ""
                yield self.finding(
                    ctx,
                    f"candle 0.11.0 requires `{key}` and fails at load with `cannot find {key} in metadata`{hint}",
                    filename=g.path,
                    location=None,
                    candle_value=f"cannot find {key} in metadata",
                    expect=f"cannot find {key} in metadata",
                )
            for key, err in v.wrong_type_keys.items():
                want = "U32" if key in REQUIRED_U32 else "F32"
                yield self.finding(
                    ctx,
                    f"`{key}` is {g.metadata[key].type}; candle 0.11.0 reads it with `to_{want.lower()}()` and fails at load "
                    f"with `{err}`",
                    filename=g.path,
                    location=None,
                    candle_value=err,
                    expect=err,
                )


    def _other_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        prefix = metadata_prefix(g, loader)
        for suffix, want in LOADER_REQUIRED[loader]:
            key = f"{prefix}.{suffix}"
            v = g.metadata.get(key)
            if v is None:
                err = f"cannot find {key} in metadata"
                msg = f"candle 0.11.0's {loader} requires `{key}` and fails at load with `{err}`"
            elif v.type != want:
                err = f"not a {want.lower()} {candle_debug(v)}"
                msg = f"`{key}` is {v.type}; candle 0.11.0's {loader} reads it with `to_{want.lower()}()` and fails at load with `{err}`"
            else:
                continue
            yield self.finding(ctx, msg, filename=g.path, location=None, candle_value=err, expect=err)
            return  # candle stops at the first: later keys are never read


class GgufFreqBaseDefaulted(_GgufRule):
    """No usable `llama.rope.freq_base` (or `qwen2.`): candle 0.11.0 silently uses 10000.

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
    - https://github.com/ggml-org/llama.cpp/issues/2768, https://github.com/ggml-org/llama.cpp/issues/2773 (a converter that did not read `rope_theta`)
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
        theta = ctx.tv.rope_theta if self.tv_ok(ctx) else None  # type: ignore[union-attr]
        for g, v in self.each(ctx):
            key = f"{metadata_prefix(g, v.loader)}.rope.freq_base"
            written = g.metadata.get(key)
            source = "metadata" if written is not None and written.type == "F32" else "default" if written is None else "default-wrong-type"
            if source == "metadata":
                continue
            if source == "default-wrong-type":
                msg = (
                    f"`{key}` is {candle_debug(written)}; candle 0.11.0's `to_f32()` fails and "  # type: ignore[arg-type]
                    "`.unwrap_or(10000)` silently uses 10000"
                )
            elif theta is not None:
                if f32(theta) == 10000.0:
                    continue
                msg = (
                    f"transformers uses `rope_theta`={num(theta)}; the GGUF has no `{key}` and candle "
                    "0.11.0 uses 10000"
                )
            else:
                msg = f"the GGUF has no `{key}`; candle 0.11.0 uses 10000 (check the source model's `rope_theta`)"
            yield self.finding(
                ctx,
                msg,
                filename=g.path,
                location=None,
                transformers_value=theta,
                candle_value=10000.0,
                help=f"Write `{key}` (F32) with the model's rope_theta",
                # quantized_llama reads `llama.rope.freq_base` whatever the architecture (quantized_llama.rs:392)
                probe_patch={key: theta} if theta is not None else None,
            )


class RopePairingByArchitecture(_GgufRule):
    """candle picks interleaved RoPE for an architecture llama.cpp runs with NEOX pairing.

    ## What it does
    Flags a `general.architecture` that llama.cpp's `llama_model_rope_type()` runs with NEOX
    (or MROPE) pairing but candle's fixed list does not name (gemma, gemma2, gemma3,
    gptneox, nemotron, exaone, minicpm3, openelm, bitnet, qwen2vl).

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
    - https://github.com/huggingface/candle/issues/3410 (quantized_llama's RoPE pairing for NeoX-style models: ~30 coherent tokens, then repetition)
    - https://github.com/ggml-org/llama.cpp/issues/13261, https://github.com/ikawrakow/ik_llama.cpp/issues/2290 (a wrong rope type per architecture: perplexity 252.8 vs 4.26)
    """

    code = "PK403"
    name = "rope-pairing-by-architecture"
    severity = "error"
    effect = "silent"
    fix_title = "Use the candle model written for this architecture"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.architecture in LLAMA_CPP_NEOX_NOT_IN_CANDLE:
                yield self.finding(
                    ctx,
                    f"llama.cpp runs `{v.architecture}` with NEOX rope pairing; candle 0.11.0's quantized_llama pairs it "
                    "interleaved (`rope_i`): it is not in candle's NEOX list",
                    filename=g.path,
                    location=None,
                    transformers_value="neox",
                    candle_value="interleaved",
                )


class RopeFreqsIgnored(_GgufRule):
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
    numeric: at positions past the original context / factor, candle differs from
    transformers with llama3 scaling.

    ## References
    - https://github.com/ggml-org/llama.cpp/issues/8676, https://github.com/ggml-org/llama.cpp/issues/9396 (the converter writes `rope_freqs.weight`)
    - https://github.com/ikawrakow/ik_llama.cpp/issues/402, https://github.com/mozilla-ai/llamafile/issues/516, https://github.com/ggml-org/llama.cpp/issues/10759 (files without it)
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
                yield self.finding(
                    ctx,
                    f"the GGUF carries `rope_freqs.weight` ({n} llama3 rope factors); candle 0.11.0's quantized_llama never "
                    "reads it and computes unscaled frequencies",
                    filename=g.path,
                    location=None,
                    transformers_value="llama3 scaling",
                    candle_value="unscaled",
                )


class ContextOverMaxSeqLen(_GgufRule):
    """`llama.context_length` is above candle's fixed 4096-position table.

    ## What it does
    Flags `llama.context_length` > 4096 (or `--max-tokens` > 4096). For quantized_qwen2,
    quantized_qwen3 and quantized_phi3, whose tables have `{arch}.context_length` rows, flags a
    `--max-tokens` beyond that length (quantized_gemma3: beyond its fixed 131072).

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
    quantized_gemma3.rs:24.

    ## Verification
    crash: the GGUF runner fed 4097 tokens must fail in narrow.

    ## References
    - https://github.com/huggingface/candle/issues/1566, https://github.com/huggingface/candle/issues/1605 (quantized llama's hard-coded `MAX_SEQ_LEN`)
    - https://github.com/huggingface/candle/issues/2171, https://github.com/huggingface/candle/issues/3014 (prompts longer than the table)
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
                yield self.finding(
                    ctx,
                    f"you plan {mt} tokens; candle 0.11.0's {v.loader} has {rows} cos/sin rows ({key}) and fails at "
                    f"position {rows} with `narrow invalid args`",
                    filename=g.path,
                    location=None,
                    severity="error",
                    transformers_value=mt,
                    candle_value=rows,
                    expect="narrow invalid args",
                )
                continue
            if mt is not None:
                if mt <= MAX_SEQ_LEN:
                    continue
                msg = f"you plan {mt} tokens; candle 0.11.0's quantized_llama has {MAX_SEQ_LEN} cos/sin rows and fails at position {MAX_SEQ_LEN}"
                sev = "error"
            elif v.context_length is not None and v.context_length > MAX_SEQ_LEN:
                msg = (
                    f"`llama.context_length` is {v.context_length}; candle 0.11.0's quantized_llama has {MAX_SEQ_LEN} "
                    f"cos/sin rows and fails at position {MAX_SEQ_LEN} with `narrow invalid args`"
                )
                sev = "warning"
            else:
                continue
            yield self.finding(
                ctx,
                msg,
                filename=g.path,
                location=None,
                severity=sev,  # type: ignore[arg-type]
                transformers_value=v.context_length,
                candle_value=MAX_SEQ_LEN,
                expect="narrow invalid args",
            )

    @staticmethod
    def _table_rows(g: GgufFile, loader: str) -> tuple[int | None, str]:
        if loader == "quantized_gemma3":
            return 131072, "its fixed MAX_SEQ_LEN"
        key = f"{metadata_prefix(g, loader)}.context_length"
        return md_u32(g, key), f"`{key}`"


class HeadDimNotEmbeddingOverHeads(_GgufRule):
    """The GGUF's head size is not `embedding_length / head_count`, which candle assumes.

    ## What it does
    Compares `llama.attention.key_length` / `value_length` (when present),
    `llama.rope.dimension_count` and the `attn_q` rows with candle's head_dim,
    `embedding_length / head_count`.

    ## Why is this bad?
    candle never reads `key_length`: Q/K reshape with its own head_dim and the first forward
    fails (`lhs: [1,22,16,128], rhs: [1,22,1536]`, https://github.com/huggingface/candle/issues/3917); a rope dimension other than
    the head size fails in `rope_i` (`inconsistent last dim size in rope`).

    ## Example
    `llama.embedding_length = 1536`, `head_count = 16`, `key_length = 128`.

    ## Fix
    None; candle 0.11.0's quantized_llama cannot run these models.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:388, :430, :502, :203-208;
    candle-nn-0.11.0/src/rotary_emb.rs:262-277.

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
                yield self.finding(
                    ctx,
                    f"`blk.0.attn_q.weight` has {q_rows} rows = `head_count` {v.head_count} x {q_rows // v.head_count}"
                    f"{declared}; candle 0.11.0 uses head_dim = `embedding_length` / `head_count` = {hd} and fails "
                    "reshaping Q at the first forward",
                    filename=g.path,
                    location=None,
                    transformers_value=q_rows // v.head_count,
                    candle_value=hd,
                    expect="shape mismatch in reshape",
                )
            elif v.rope_dim is not None and v.rope_dim != hd:
                yield self.finding(
                    ctx,
                    f"`llama.rope.dimension_count` is {v.rope_dim} but candle 0.11.0's head_dim is {hd}: `rope_i` fails "
                    "with `inconsistent last dim size in rope`",
                    filename=g.path,
                    location=None,
                    transformers_value=v.rope_dim,
                    candle_value=hd,
                    expect="inconsistent last dim size in rope",
                )
            # key_length/value_length that disagree with tensors laid out for `hd` are never read by
            # candle, which then runs the file as its tensors say: no divergence to report.


class NonLlamaArchitecture(_GgufRule):
    """A GGUF of an architecture candle 0.11.0 has no loader for: only `quantized_llama` is left.

    ## What it does
    Flags a `general.architecture` (or none) that none of candle 0.11.0's GGUF loaders is
    written for: not `llama` (quantized_llama, which llama.cpp also uses for Mistral and
    Mixtral conversions), `qwen2`, `qwen3`, `gemma3` or `phi3` (quantized_qwen2,
    quantized_qwen3, quantized_gemma3, quantized_phi3).

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
    quantized_phi3.rs:223 (`from_gguf`).

    ## Verification
    static-only.

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

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.families import GGUF_LOADERS

        for g, v in self.each(ctx):
            if v.architecture in GGUF_LOADERS:
                continue
            shown = f"`{v.architecture}`" if v.architecture else "absent"
            pairing = "NEOX (`rope`)" if v.rope_is_neox else "interleaved (`rope_i`)"
            yield self.finding(
                ctx,
                f"`general.architecture` is {shown}: candle 0.11.0 has no GGUF loader for it; quantized_llama, the only "
                f"one left, reads only `llama.*` keys and llama tensors, and pairs RoPE {pairing}",
                filename=g.path,
                location=None,
                candle_value="quantized_llama",
            )


class UnsupportedGgufTensorType(_GgufRule):
    """Tensor types candle 0.11.0 cannot parse or load.

    ## What it does
    Flags tensors whose ggml type candle does not know (IQ*, TQ*, MXFP4, I8..F64: the whole
    file is refused at parse) or knows but cannot load (Q8_1, Q8_K).

    ## Why is this bad?
    `unknown dtype for tensor 16` when reading the header, or `quantized type Q8_1 is not
    supported yet` when loading the tensor.

    ## Example
    An IQ2_XXS GGUF.

    ## Fix
    None; use a Q4_K/Q5_K/Q6_K/Q8_0/F16 conversion.

    ## Candle source
    candle-core-0.11.0/src/quantized/mod.rs:300-321; ggml_file.rs:153-188;
    gguf_file.rs:538-539.

    ## Verification
    crash: candle must fail with the same message.

    ## References
    - llama.cpp quantization types (ggml.h `ggml_type`)
    """

    code = "PK408"
    name = "unsupported-gguf-tensor-type"
    severity = "error"
    effect = "load-error"
    fix_title = "Use a quantization candle supports (Q4_0..Q8_0, Q2_K..Q6_K, F16, BF16, F32)"
    probe_kind = "crash"

    loaders = ALL_LOADERS  # candle-core's GGUF reader, shared by every loader

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            bad: dict[int, list[str]] = {}
            for t in g.tensors.values():
                if t.type_id not in CANDLE_LOADS:
                    bad.setdefault(t.type_id, []).append(t.name)
            for tid, names in sorted(bad.items()):
                tname = g.tensors[names[0]].type_name
                if tid not in CANDLE_PARSES:
                    err = f"unknown dtype for tensor {tid}"
                    when = "refuses the whole file while reading the header"
                else:
                    err = f"quantized type {tname.replace('_K', 'K')} is not supported yet"
                    when = "fails loading the tensor"
                shown = backticked(names)
                yield self.finding(
                    ctx,
                    f"{len(names)} tensor{'s are' if len(names) > 1 else ' is'} {tname} ({shown}); candle 0.11.0 {when}: `{err}`",
                    filename=g.path,
                    location=None,
                    candle_value=err,
                    expect=err,
                )


class GgufConfigDisagreement(_GgufRule):
    """GGUF hyper-parameters disagree with the config.json beside it.

    ## What it does
    With a config.json in the same directory, compares heads, kv heads, layers, hidden and
    intermediate sizes, context length, RMS epsilon, vocabulary, `llama.rope.freq_base` with
    transformers' effective `rope_theta`, and the `rope_freqs.weight` factors (or their
    absence) with what transformers computes from a llama3 `rope_parameters`. For
    quantized_qwen2, quantized_qwen3, quantized_gemma3 and quantized_phi3 files it compares the
    same sizes and epsilon under their own prefix with transformers' values for the config's
    family, and what each loader also reads: `rope.freq_base` (not phi3's, which candle ignores:
    PK415), `attention.key_length` with `head_dim` (qwen3, gemma3), gemma3's
    `attention.sliding_window` and `rope.local_freq_base`.

    ## Why is this bad?
    candle's quantized_llama trusts only the GGUF. A converter that read a transformers 5
    config with an old parser writes the wrong theta, drops the llama3 factors, or the GGUF
    was made from another revision: either way candle computes another model than
    transformers, silently.

    ## Example
    `llama.rope.freq_base = 10000` beside `rope_parameters.rope_theta = 500000`.

    ## Fix
    None in config.json; re-convert the GGUF from this config.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:384-394 (what it reads), :433
    (vocabulary from `token_embd.weight`); quantized_qwen2.rs:191-199; quantized_qwen3.rs:474-481;
    quantized_gemma3.rs:288-304; quantized_phi3.rs:235-243.

    ## Verification
    numeric: the GGUF runner's logits differ from transformers' beyond the quantization
    error.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (what a converter writes from config.json)
    - https://github.com/floneum/kalosm/issues/340 (GGUF files that lack the scaling config.json has)
    - https://github.com/ggml-org/llama.cpp/issues/18013 (older converters read only the top-level `rope_theta`)
    """

    code = "PK409"
    name = "gguf-config-disagreement"
    severity = "error"
    effect = "silent"
    fix_title = "Re-convert the GGUF from this config.json"
    probe_kind = "numeric"
    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not ctx.ggufs:
            return
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                yield from self._family_loader(ctx, g, v.loader)
        if not self.tv_ok(ctx):
            return
        tv = ctx.tv
        assert tv is not None
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                continue
            pairs: list[tuple[str, object, str, object]] = [
                ("llama.attention.head_count", v.head_count, "num_attention_heads", tv.num_attention_heads),
                ("llama.attention.head_count_kv", v.head_count_kv, "num_key_value_heads", tv.num_key_value_heads),
                ("llama.block_count", v.block_count, "num_hidden_layers", tv.num_hidden_layers),
                ("llama.embedding_length", v.embedding_length, "hidden_size", tv.hidden_size),
                ("llama.context_length", v.context_length, "max_position_embeddings", tv.max_position_embeddings),
            ]
            ff = g.metadata.get("llama.feed_forward_length")
            if ff is not None and isinstance(ff.value, int):
                pairs.append(("llama.feed_forward_length", ff.value, "intermediate_size", tv.intermediate_size))
            emb = g.tensors.get("token_embd.weight")
            if emb is not None and len(emb.shape) == 2:
                pairs.append(("token_embd.weight rows", emb.shape[0], "vocab_size", tv.vocab_size))
            for gk, gval, ck, cval in pairs:
                if gval is not None and gval != cval:
                    yield self._f(ctx, g, f"`{gk}` is {gval}; config.json's `{ck}` (what transformers uses) is {cval}", cval, gval)
            if v.rms_eps is not None and f32(tv.rms_norm_eps) != v.rms_eps:
                yield self._f(
                    ctx, g, f"`llama.attention.layer_norm_rms_epsilon` is {num(v.rms_eps)}; transformers uses `rms_norm_eps`={num(tv.rms_norm_eps)}",
                    tv.rms_norm_eps, v.rms_eps,
                )
            if v.freq_base_source == "metadata" and tv.rope_theta is not None and f32(tv.rope_theta) != v.freq_base:
                yield self._f(
                    ctx, g,
                    f"`llama.rope.freq_base` is {num(v.freq_base)}; transformers uses `rope_theta`={num(tv.rope_theta)}",
                    tv.rope_theta, v.freq_base,
                    patch={"llama.rope.freq_base": tv.rope_theta},
                )
            yield from self._rope_freqs(ctx, g, v)

    def _family_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        """A quantized_qwen2/qwen3/gemma3/phi3 file against transformers' values for a config of
        the same family, on the keys that loader reads (phi3's ignored freq_base is PK415's)."""
        ftv, p = ctx.ftv, metadata_prefix(g, loader)
        if ftv is None or ctx.family is None or ctx.family.gguf_loader != loader:
            return
        keys = [("attention.head_count", "num_attention_heads"), ("attention.head_count_kv", "num_key_value_heads"),
                ("block_count", "num_hidden_layers"), ("embedding_length", "hidden_size"),
                ("feed_forward_length", "intermediate_size")]  # fmt: skip
        if loader != "quantized_gemma3":  # gemma3's table length is a constant: context_length is never read
            keys.append(("context_length", "max_position_embeddings"))
        if loader in ("quantized_qwen3", "quantized_gemma3"):
            keys.append(("attention.key_length", "head_dim"))
        if loader == "quantized_gemma3":
            keys.append(("attention.sliding_window", "sliding_window"))
        for suffix, ck in keys:
            gval, cval = md_u32(g, f"{p}.{suffix}"), ftv.get(ck)
            if gval is not None and isinstance(cval, int) and gval != cval:
                yield self._f(ctx, g, f"`{p}.{suffix}` is {gval}; config.json's `{ck}` (what transformers uses) is {cval}", cval, gval)
        emb = g.tensors.get("token_embd.weight")
        vocab = ftv.get("vocab_size")
        if emb is not None and len(emb.shape) == 2 and isinstance(vocab, int) and emb.shape[0] != vocab:
            yield self._f(ctx, g, f"`token_embd.weight rows` is {emb.shape[0]}; config.json's `vocab_size` is {vocab}", vocab, emb.shape[0])
        eps = md_f32(g, f"{p}.attention.layer_norm_rms_epsilon")
        if eps is not None and isinstance(ftv.get("rms_norm_eps"), float) and f32(ftv.get("rms_norm_eps")) != eps:
            yield self._f(ctx, g, f"`{p}.attention.layer_norm_rms_epsilon` is {num(eps)}; transformers uses `rms_norm_eps`={num(ftv.get('rms_norm_eps'))}",
                          ftv.get("rms_norm_eps"), eps)  # fmt: skip
        thetas = [] if loader == "quantized_phi3" else [("rope.freq_base", "rope_theta")]
        if loader == "quantized_gemma3":  # the local base only when written: its absence is PK414's
            thetas.append(("rope.local_freq_base", "rope_local_base_freq"))
        for suffix, ck in thetas:
            fb, theta = md_f32(g, f"{p}.{suffix}"), ftv.get(ck)
            if fb is not None and isinstance(theta, (int, float)) and f32(float(theta)) != fb:
                yield self._f(ctx, g, f"`{p}.{suffix}` is {fb:.7g}; transformers uses `{ck}`={num(theta)}", theta, fb,
                              patch={f"{p}.{suffix}": float(theta)})  # fmt: skip

    def _f(self, ctx: Context, g: GgufFile, msg: str, tval: object, cval: object, patch: dict[str, object] | None = None) -> Finding:
        """`patch`: the metadata edit that makes candle read what transformers uses, when one exists."""
        return self.finding(
            ctx, msg + "; candle 0.11.0 reads only the GGUF", filename=g.path, location=None,
            transformers_value=tval, candle_value=cval, probe_patch=patch,
        )

    def _rope_freqs(self, ctx: Context, g: GgufFile, v: GgufView) -> Iterable[Finding]:
        tv = ctx.tv
        assert tv is not None
        want = llama3_inv_freq_factors(tv)
        t = g.tensors.get("rope_freqs.weight")
        if want is None:
            if t is not None:
                yield self._f(ctx, g, f"the GGUF has `rope_freqs.weight` but transformers applies `{tv.rope_type}` rope, not llama3", tv.rope_type, "rope_freqs")
            return
        if t is None:
            yield self._f(
                ctx, g,
                "transformers applies llama3 rope scaling; the GGUF has no `rope_freqs.weight` (the converter dropped the scaling)",
                "llama3", None,
            )
            return
        if t.type_id != 0 or t.numel != len(want):
            yield self._f(ctx, g, f"`rope_freqs.weight` has {t.numel} {t.type_name} values; transformers' llama3 scaling has {len(want)} factors", len(want), t.numel)
            return
        from portkit.model.gguf_header import read_tensor_bytes

        try:
            raw = read_tensor_bytes(g, t, limit=1 << 20)
        except InputError:
            return
        got = struct.unpack(f"<{len(want)}f", raw)
        worst = max(range(len(want)), key=lambda i: abs(got[i] - want[i]) / max(abs(want[i]), 1e-12))
        if abs(got[worst] - want[worst]) > 1e-3 * max(abs(want[worst]), 1.0):
            yield self._f(
                ctx, g,
                f"`rope_freqs.weight`[{worst}] is {got[worst]:.6g}; transformers' llama3 `rope_parameters` give {want[worst]:.6g}",
                want[worst], got[worst],
            )


class QkRowsNotPermuted(_GgufRule):
    """Layer 0's Q/K rows in the GGUF are not laid out for the RoPE pairing candle uses.

    ## What it does
    When HF safetensors sit beside the GGUF, dequantizes the first head of `blk.0.attn_q` and
    `blk.0.attn_k` and compares it with the HF `q_proj`/`k_proj` rows as written and as
    llama.cpp's converter permutes them (`reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2)`).
    The only lint rule that reads tensor data (one head per tensor).

    ## Why is this bad?
    candle pairs llama RoPE interleaved (`rope_i`), which equals transformers'
    `rotate_half` only on permuted rows. A GGUF written without the permutation (or with it,
    for a NEOX architecture) loads and runs, and attention is silently wrong after the first
    position.

    ## Example
    A GGUF written by a custom exporter that copied `q_proj` rows unchanged.

    ## Fix
    None in config.json; re-convert with llama.cpp's `convert_hf_to_gguf.py`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:178-189 (`rope` vs `rope_i`),
    :406-428.

    ## Verification
    numeric: the GGUF runner's logits differ from transformers' from position 1 on, and
    match once the rows are permuted.

    ## References
    - https://github.com/jzhang38/TinyLlama/issues/24, https://github.com/ggml-org/llama.cpp/issues/3018, https://github.com/ggml-org/llama.cpp/issues/2376 (the GQA permutation: gibberish)
    - https://github.com/karpathy/llama2.c/issues/286 (degenerates after ~20 tokens)
    - https://github.com/huggingface/transformers/issues/31766, https://github.com/huggingface/transformers/issues/31788 (GGUF to HF must undo it with `num_key_value_heads`)
    """

    code = "PK410"
    name = "qk-rows-not-permuted"
    severity = "error"
    effect = "silent"
    fix_title = "Re-convert with llama.cpp's convert_hf_to_gguf.py (it permutes Q/K rows)"
    probe_kind = "numeric"
    needs = ("gguf", "safetensors")

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors
        if st is None or not ctx.ggufs:
            return
        for g, v in self.each(ctx):
            if not v.head_count or not v.head_dim:
                continue
            for hf, gg, heads in (
                ("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", v.head_count),
                ("model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight", v.head_count_kv or v.head_count),
            ):
                verdict = _compare_first_head(st, g, hf, gg, v.head_dim)
                if verdict is None:
                    continue
                permuted, e_perm, e_plain = verdict
                if permuted == v.rope_is_neox:
                    want = "as written (NEOX pairing)" if v.rope_is_neox else "permuted for interleaved pairing"
                    got = "permuted" if permuted else "as in the HF checkpoint"
                    yield self.finding(
                        ctx,
                        f"`{gg}` rows are {got} (relative error {min(e_perm, e_plain):.2g} vs {max(e_perm, e_plain):.2g}); "
                        f"candle 0.11.0 pairs `{v.architecture or 'llama'}` RoPE "
                        f"{'NEOX' if v.rope_is_neox else 'interleaved'} and needs them {want}",
                        filename=g.path,
                        location=None,
                        transformers_value="rotate_half on HF rows",
                        candle_value="rope" if v.rope_is_neox else "rope_i",
                        # verify rewrites a copy with llama.cpp's permutation (unpermuting has no probe yet)
                        probe_patch=None if v.rope_is_neox else {"permute_qk": True},
                    )
                    break


def _decode_hf(raw: bytes, dtype: str):  # type: ignore[no-untyped-def]
    import numpy as np

    if dtype == "F32":
        return np.frombuffer(raw, "<f4").astype(np.float64)
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float64)
    if dtype == "BF16":
        u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    return None


def _compare_first_head(st, g: GgufFile, hf_name: str, gg_name: str, hd: int):  # type: ignore[no-untyped-def]
    """(permuted?, err_if_permuted, err_if_plain) for the first head, or None if undecidable."""
    import numpy as np

    t = st.tensors.get(hf_name)
    q = g.tensors.get(gg_name)
    if t is None or q is None or len(t.shape) != 2 or len(q.shape) != 2 or t.shape != q.shape or hd % 2:
        return None
    rows, cols = t.shape
    if rows < hd:
        return None
    n = hd * cols
    esize = {"F32": 4, "F16": 2, "BF16": 2}.get(t.dtype)
    if esize is None:
        return None
    from portkit.model.gguf_header import GGML_TYPES

    info = GGML_TYPES.get(q.type_id)
    if info is None or cols % info[1]:
        return None
    try:
        with open(t.file, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            f.seek(8 + header_len + t.data_offsets[0])
            hf_raw = f.read(n * esize)
        with open(g.path, "rb") as f:
            f.seek(g.data_offset + q.offset)
            g_raw = f.read(n // info[1] * info[2])
    except OSError:
        return None
    w = _decode_hf(hf_raw, t.dtype)
    if w is None or w.size != n:
        return None
    w = w.reshape(hd, cols)
    if q.type_id == 0:
        d = np.frombuffer(g_raw, "<f4").astype(np.float64)
    elif q.type_id == 1:
        d = np.frombuffer(g_raw, "<f2").astype(np.float64)
    else:
        try:
            import gguf.quants  # lazy: numpy-only, never torch

            d = gguf.quants.dequantize(np.frombuffer(g_raw, np.uint8), q.type_id).astype(np.float64).ravel()
        except Exception:
            return None
    if d.size != n:
        return None
    d = d.reshape(hd, cols)
    perm = w.reshape(2, hd // 2, cols).swapaxes(0, 1).reshape(hd, cols)
    scale = float(np.max(np.abs(w)))
    if scale == 0 or not np.isfinite(scale) or np.array_equal(perm, w):
        return None
    e_perm = float(np.max(np.abs(d - perm))) / scale
    e_plain = float(np.max(np.abs(d - w))) / scale
    lo, hi = min(e_perm, e_plain), max(e_perm, e_plain)
    if hi < 4 * lo + 1e-6 or lo > 0.5:
        return None  # not clearly one layout (or not the same weights at all)
    return (e_perm < e_plain, e_perm, e_plain)


class MissingGgufTensor(_GgufRule):
    """A tensor the file's candle GGUF loader loads is not in the GGUF.

    ## What it does
    For quantized_llama checks `token_embd.weight`, `output_norm.weight` and the nine tensors of
    every block `blk.0` .. `blk.{block_count - 1}` (`output.weight` may be absent: candle then
    reuses the embedding; a MoE file's per-expert tensors are PK419's). For quantized_qwen2,
    quantized_qwen3, quantized_gemma3 and quantized_phi3 checks each loader's own list (q/k
    norms, gemma3's four norms, phi3's fused tensors) and names the first one missing in load
    order, except qwen2's q/k/v biases (PK418) and phi3's `output.weight` (PK417).

    ## Why is this bad?
    `from_gguf` fails at load (`cannot find tensor info for blk.2.attn_q.weight`), typically
    when `llama.block_count` disagrees with the blocks written, or a converter renamed
    tensors.

    ## Example
    `llama.block_count = 3` in a file with `blk.0` and `blk.1` only.

    ## Fix
    None in config.json; re-convert the GGUF.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:433-488; quantized_qwen2.rs:205-252;
    quantized_qwen3.rs:403-427, :492-517; quantized_gemma3.rs:318-378; quantized_phi3.rs:248-283;
    candle-core-0.11.0/src/quantized/gguf_file.rs:569-580.

    ## Verification
    crash: candle's `from_gguf` must fail with the same message.

    ## References
    - https://github.com/mozilla-ai/llamafile/issues/516, https://github.com/ggml-org/llama.cpp/issues/10759 (tensor count mismatches)
    """

    code = "PK411"
    name = "missing-gguf-tensor"
    severity = "error"
    effect = "load-error"
    fix_title = "Re-convert the GGUF with every tensor its loader reads (every block `block_count` announces)"
    probe_kind = "crash"
    loaders = ALL_LOADERS

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.loader != "quantized_llama":
                yield from self._other_loader(ctx, g, v.loader)
                continue
            if v.merged_experts and v.expert_count > 1:
                continue  # PK419 says why the per-expert tensors are missing
            if v.refused and v.refused.startswith("cannot find tensor info for "):
                blocks = sorted({int(n.split(".")[1]) for n in g.tensors if n.startswith("blk.") and n.split(".")[1].isdigit()})
                have = f"blocks {blocks[0]}-{blocks[-1]}" if blocks else "no blocks"
                yield self.finding(
                    ctx,
                    f"candle 0.11.0 fails at load with `{v.refused}` (`llama.block_count`={v.block_count}, the file has {have})",
                    filename=g.path,
                    location=None,
                    candle_value=v.refused,
                    expect=v.refused,
                )

    def _other_loader(self, ctx: Context, g: GgufFile, loader: str) -> Iterable[Finding]:
        required = loader_required_tensors(g, loader)
        first = next((n for n in required if n not in g.tensors), None)
        if first is None or (loader == "quantized_qwen2" and first.endswith(".bias")) or (loader == "quantized_phi3" and first == "output.weight"):
            return  # none missing, or PK418's / PK417's
        missing = [n for n in required if n not in g.tensors]
        err = f"cannot find tensor info for {first}"
        shown = backticked(missing)
        prefix = metadata_prefix(g, loader)
        yield self.finding(
            ctx,
            f"the GGUF has no {shown} (`{prefix}.block_count`={md_u32(g, f'{prefix}.block_count')}); candle 0.11.0's "
            f"{loader} fails at load with `{err}`",
            filename=g.path,
            location=None,
            candle_value=err,
            expect=err,
        )


class Qwen3GgufRopeTableF16(_GgufRule):
    """quantized_qwen3 computes its RoPE tables in F16 unless `general.dtype` says F32.

    ## What it does
    Flags a GGUF read by quantized_qwen3 whose `general.dtype` is absent or not the U32 `0`
    (F32). llama.cpp's converter never writes `general.dtype` (it writes `general.file_type`),
    so every converted Qwen3 GGUF is flagged.

    ## Why is this bad?
    candle builds the position × inverse-frequency table in that dtype: positions above 2048
    are not even representable exactly in F16, and the rounding grows with the position. The
    logits drift from transformers' (`portkit verify` on the generated qwen3 fixture: 4.87e-3
    as converted, 5.48e-6 with `general.dtype = 0`; docs/measurements.md, "Rule effects").

    ## Example
    A Qwen3 GGUF from `convert_hf_to_gguf.py`, no `general.dtype` key.

    Use instead: the same file with `general.dtype` = 0 (U32).

    ## Fix
    None in config.json; add `general.dtype` = 0 (U32) to the GGUF metadata.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_qwen3.rs:483-490 (absent or not 0 -> F16),
    :111-115 (`inv_freq` and positions `.to_dtype(dtype)` before the matmul).

    ## Verification
    numeric: candle's GGUF logits differ from transformers' and agree once `general.dtype` = 0
    is written.

    ## References
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK412]` (absent equals F16;
      F32 changes the tables)
    """

    code = "PK412"
    name = "qwen3-gguf-rope-table-f16"
    severity = "error"
    effect = "silent"
    fix_title = "Write `general.dtype` = 0 (U32, F32) into the GGUF"
    probe_kind = "numeric"
    loaders = ("quantized_qwen3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            dt = g.metadata.get("general.dtype")
            if dt is not None and dt.type == "U32" and dt.value == 0:
                continue
            shown = "is absent" if dt is None else f"is {candle_debug(dt)}"
            yield self.finding(
                ctx,
                f"`general.dtype` {shown}: candle 0.11.0's quantized_qwen3 computes its RoPE tables in F16, an error "
                "that grows with the position (transformers computes them in F32)",
                filename=g.path,
                location=None,
                transformers_value="f32",
                candle_value="f16",
                probe_patch={"general.dtype": 0},
            )


class Gemma3GgufMlpSilu(_GgufRule):
    """quantized_gemma3's MLP uses SiLU; Gemma 3 uses the tanh GELU.

    ## What it does
    Flags every GGUF read by candle 0.11.0's quantized_gemma3 (architectures `gemma3`, and any
    file whose metadata it reads under `gemma3.`, `gemma2.`, `gemma.` or `gemma-embedding.`).

    ## Why is this bad?
    The gated MLP computes `silu(gate) * up` where transformers' Gemma 3 computes
    `gelu_pytorch_tanh(gate) * up` (`hidden_activation`): every layer is another function, so
    the logits are wrong from the first token (docs/measurements.md, "Rule effects").
    transformers run with `hidden_activation="silu"` matches candle within 1e-4
    (tests/native/test_gguf_loaders.py). No metadata key selects the activation.

    ## Example
    Any `general.architecture = "gemma3"` GGUF run with `quantized_gemma3::ModelWeights`.

    ## Fix
    None in the file; run the safetensors checkpoint with candle's `gemma3` module.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:57-63 (`candle_nn::ops::silu`
    at :60).

    ## Verification
    static-only: no metadata edit changes the activation; verify's comparison shows the gap.

    ## References
    - transformers `models/gemma3/modeling_gemma3.py` (`Gemma3MLP`: `ACT2FN[config.hidden_activation]`)
    - tests/native/test_gguf_loaders.py `test_gemma3_gguf_is_transformers_with_silu`
    """

    code = "PK413"
    name = "gemma3-gguf-mlp-silu"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `gemma3` module instead"
    probe_kind = "static-only"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            yield self.finding(
                ctx,
                "candle 0.11.0's quantized_gemma3 gates its MLP with SiLU; Gemma 3 (transformers' `hidden_activation`) "
                "uses the tanh GELU: every layer computes another function",
                filename=g.path,
                location=None,
                transformers_value="gelu_pytorch_tanh",
                candle_value="silu",
            )


class Gemma3GgufLocalFreqBaseKey(_GgufRule):
    """The sliding layers' RoPE base is in `rope.freq_base_swa`; quantized_gemma3 reads `rope.local_freq_base`.

    ## What it does
    Flags a GGUF read by quantized_gemma3 that writes the sliding-window layers' base as
    llama.cpp does (`{arch}.rope.freq_base_swa`), with no `{arch}.rope.local_freq_base`, when
    that base is not candle's default 10000.

    ## Why is this bad?
    candle looks only for `rope.local_freq_base` and falls back to 10000 for the local layers.
    Gemma 3's own value is 10000, so published Gemma 3 files are fine by luck; any other base
    (a fine-tune, another gemma-architecture model) rotates every sliding layer with the
    wrong frequencies, silently.

    ## Example
    `gemma3.rope.freq_base_swa = 50000.0`, no `gemma3.rope.local_freq_base`.

    Use instead: also write `gemma3.rope.local_freq_base = 50000.0`.

    ## Fix
    None in config.json; copy the value into `{arch}.rope.local_freq_base` (F32).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:302-304
    (`md_get("rope.local_freq_base")...unwrap_or(DEFAULT_ROPE_FREQUENCY_SLIDING)`), :27 (10000).

    ## Verification
    numeric: candle's logits differ and agree once `rope.local_freq_base` is written.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (Gemma 3 writes `rope.freq_base_swa`)
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK414]`
    """

    code = "PK414"
    name = "gemma3-gguf-local-freq-base-key"
    severity = "error"
    effect = "silent"
    fix_title = "Write the sliding layers' base as `rope.local_freq_base` (F32)"
    probe_kind = "numeric"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            p = metadata_prefix(g, "quantized_gemma3")
            local_key = f"{p}.rope.local_freq_base"
            if md_f32(g, local_key) is not None:
                continue
            swa = md_f32(g, f"{p}.rope.freq_base_swa")
            if swa is None or f32(swa) == GEMMA3_DEFAULT_LOCAL_FREQ_BASE:
                continue
            yield self.finding(
                ctx,
                f"`{p}.rope.freq_base_swa` is {swa:.7g} but candle 0.11.0's quantized_gemma3 reads only "
                f"`{local_key}`: its sliding-window layers use 10000",
                filename=g.path,
                location=None,
                transformers_value=swa,
                candle_value=GEMMA3_DEFAULT_LOCAL_FREQ_BASE,
                probe_patch={local_key: swa},
            )


class Phi3GgufFreqBaseIgnored(_GgufRule):
    """quantized_phi3 ignores `phi3.rope.freq_base`: RoPE always uses 10000.

    ## What it does
    Flags a GGUF read by quantized_phi3 whose `phi3.rope.freq_base` is not 10000.

    ## Why is this bad?
    candle hard-codes the base when it builds the RoPE tables, so a model trained with
    another theta (Phi-3-small's 1e6, fine-tunes with a raised theta) rotates with the wrong
    frequencies and drifts silently with length.

    ## Example
    `phi3.rope.freq_base = 1000000.0`.

    ## Fix
    None: no metadata key is read; run the safetensors checkpoint with candle's `phi3` module.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_phi3.rs:244
    (`precomput_freqs_cis(rope_dim, max_seq_len, 10_000., device)`).

    ## Verification
    static-only: no metadata edit reaches the hard-coded base.

    ## References
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK415]`
    """

    code = "PK415"
    name = "phi3-gguf-freq-base-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `phi3` module instead"
    probe_kind = "static-only"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            fb = md_f32(g, "phi3.rope.freq_base")
            if fb is None or f32(fb) == PHI3_FREQ_BASE:
                continue
            yield self.finding(
                ctx,
                f"`phi3.rope.freq_base` is {fb:.7g}; candle 0.11.0's quantized_phi3 never reads it and rotates "
                "with a hard-coded 10000",
                filename=g.path,
                location=None,
                transformers_value=fb,
                candle_value=PHI3_FREQ_BASE,
            )


class Phi3GgufLongRopeIgnored(_GgufRule):
    """quantized_phi3 ignores LongRoPE: the factor tensors and `rope.scaling.attn_factor`.

    ## What it does
    Flags a GGUF read by quantized_phi3 that holds `rope_factors_long.weight` or
    `rope_factors_short.weight`, or a `phi3.rope.scaling.attn_factor` other than 1.

    ## Why is this bad?
    Phi-3-mini-128k, Phi-3.5-mini and Phi-4-mini use LongRoPE: transformers divides the
    inverse frequencies by the short (or long) factors and scales cos/sin by the attention
    factor. candle reads neither and runs plain RoPE at every length
    (tests/native/test_gguf_loaders.py, PK416's mechanism).

    ## Example
    A Phi-3-mini-128k GGUF with `rope_factors_long.weight`, `rope_factors_short.weight` and
    `phi3.rope.scaling.attn_factor = 1.1832`.

    ## Fix
    None: no metadata key is read; run the safetensors checkpoint with candle's `phi3` module
    (whose LongRoPE has its own problems: see the config rules).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_phi3.rs:235-283 (the only metadata and
    tensors read; `precomput_freqs_cis` at :244 takes no factors).

    ## Verification
    static-only: no metadata edit makes candle read the factors.

    ## References
    - transformers `modeling_rope_utils.py` (`_compute_longrope_parameters`)
    - llama.cpp `convert_hf_to_gguf.py` (Phi-3 writes `rope_factors_long/short.weight`)
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK416]`
    """

    code = "PK416"
    name = "phi3-gguf-longrope-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `phi3` module instead"
    probe_kind = "static-only"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            factors = [n for n in ("rope_factors_long.weight", "rope_factors_short.weight") if n in g.tensors]
            attn = md_f32(g, "phi3.rope.scaling.attn_factor")
            attn_used = attn is not None and f32(attn) != 1.0
            if not factors and not attn_used:
                continue
            what = [f"`{n}`" for n in factors] + ([f"`phi3.rope.scaling.attn_factor`={attn:.7g}"] if attn_used else [])
            yield self.finding(
                ctx,
                f"the GGUF carries LongRoPE ({', '.join(what)}); candle 0.11.0's quantized_phi3 never reads it and "
                "runs plain RoPE",
                filename=g.path,
                location=None,
                transformers_value="longrope",
                candle_value="plain rope",
            )


class _GgufTensorRequired(_GgufRule):
    """Shared by the rules for tensors a non-llama loader reads with `ct.tensor(..)?`."""

    severity = "error"
    effect = "load-error"
    probe_kind = "crash"

    def first_missing(self, g: GgufFile, loader: str) -> str | None:
        """The first tensor `loader` fails on (load order), None when all are there."""
        return next((n for n in loader_required_tensors(g, loader) if n not in g.tensors), None)


class Phi3GgufMissingOutput(_GgufTensorRequired):
    """quantized_phi3 requires `output.weight`: a tied Phi-3 GGUF does not load.

    ## What it does
    Flags a GGUF read by quantized_phi3 without an `output.weight` tensor (llama.cpp's
    converter omits it for tied models such as Phi-4-mini).

    ## Why is this bad?
    Unlike quantized_llama, quantized_qwen2 and quantized_qwen3, quantized_phi3 has no fallback
    to `token_embd.weight`: `from_gguf` fails with `cannot find tensor info for output.weight`.

    ## Example
    A Phi-4-mini GGUF (`tie_word_embeddings: true`): no `output.weight`.

    ## Fix
    None in config.json; write `token_embd.weight`'s data again as `output.weight`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_phi3.rs:250 (`QLinear::new(.., "output", ..)?`),
    :29-40; candle-core-0.11.0/src/quantized/gguf_file.rs:577 (`cannot find tensor info for`).

    ## Verification
    crash: candle's `from_gguf` must fail with `cannot find tensor info for output.weight`.

    ## References
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK417]`
    """

    code = "PK417"
    name = "phi3-gguf-missing-output"
    fix_title = "Write `output.weight` (a copy of `token_embd.weight` for a tied model) into the GGUF"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            if "output.weight" in g.tensors or self.first_missing(g, "quantized_phi3") != "output.weight":
                continue
            err = "cannot find tensor info for output.weight"
            yield self.finding(
                ctx,
                f"the GGUF has no `output.weight` (a tied model); candle 0.11.0's quantized_phi3 has no fallback to "
                f"`token_embd.weight` and fails at load with `{err}`",
                filename=g.path,
                location=None,
                transformers_value="tied",
                candle_value=err,
                expect=err,
            )


class Qwen2GgufMissingQkvBias(_GgufTensorRequired):
    """quantized_qwen2 requires the q/k/v bias tensors of every block.

    ## What it does
    Flags a GGUF read by quantized_qwen2 that lacks `blk.N.attn_q.bias`, `attn_k.bias` or
    `attn_v.bias` for a block below `qwen2.block_count`.

    ## Why is this bad?
    candle loads the three biases with `ct.tensor(..)?`: a Qwen2-architecture GGUF converted
    from a model without attention biases (or a converter that dropped them) fails at load
    with `cannot find tensor info for blk.0.attn_q.bias`.

    ## Example
    `general.architecture = "qwen2"` with `blk.0.attn_q.weight` but no `blk.0.attn_q.bias`.

    ## Fix
    None in config.json; re-convert with the biases (zeros if the model has none).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_qwen2.rs:229-231; candle-core-0.11.0/src/
    quantized/gguf_file.rs:577 (`cannot find tensor info for`).

    ## Verification
    crash: candle's `from_gguf` must fail with `cannot find tensor info for` the first bias.

    ## References
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK418]`
    """

    code = "PK418"
    name = "qwen2-gguf-missing-qkv-bias"
    fix_title = "Re-convert the GGUF with `attn_q/k/v.bias` in every block"
    loaders = ("quantized_qwen2",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            first = self.first_missing(g, "quantized_qwen2")
            if first is None or not first.endswith((".attn_q.bias", ".attn_k.bias", ".attn_v.bias")):
                continue
            missing = [n for n in loader_required_tensors(g, "quantized_qwen2") if n.endswith(".bias") and n not in g.tensors]
            err = f"cannot find tensor info for {first}"
            shown = backticked(missing)
            yield self.finding(
                ctx,
                f"the GGUF has no {shown}; candle 0.11.0's quantized_qwen2 requires the q/k/v biases and fails at load "
                f"with `{err}`",
                filename=g.path,
                location=None,
                candle_value=err,
                expect=err,
            )


class MixtralGgufMergedExperts(_GgufRule):
    """A MoE GGUF with llama.cpp's merged expert tensors: quantized_llama reads experts one by one.

    ## What it does
    Flags a GGUF read by quantized_llama with `llama.expert_count` > 1 whose experts are
    stored merged (`blk.N.ffn_gate_exps.weight`, as llama.cpp's converter writes Mixtral since
    2024) rather than per expert (`blk.N.ffn_gate.E.weight`).

    ## Why is this bad?
    candle looks up `blk.0.ffn_gate.0.weight` and fails at load with `cannot find tensor
    info for blk.0.ffn_gate.0.weight`: every current Mixtral GGUF.

    ## Example
    A Mixtral-8x7B GGUF from `convert_hf_to_gguf.py` (`blk.0.ffn_gate_exps.weight` [.., .., 8]).

    ## Fix
    None in config.json; split the merged tensors into per-expert `ffn_{gate,down,up}.E.weight`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:378-380 (`llama.expert_count`),
    :463-479 (`ffn_gate_inp`, then `ffn_gate.{i}.weight`).

    ## Verification
    crash: candle's `from_gguf` must fail with `cannot find tensor info for blk.0.ffn_gate.0.weight`.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (merged `ffn_*_exps` expert tensors)
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK419]`, `test_per_expert_mixtral_file_loads`
    """

    code = "PK419"
    name = "mixtral-gguf-merged-experts"
    severity = "error"
    effect = "load-error"
    fix_title = "Split the merged expert tensors into per-expert `ffn_{gate,down,up}.E.weight`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if not (v.merged_experts and v.expert_count > 1) or v.refused is None:
                continue
            if not v.refused.startswith("cannot find tensor info for ") or ".ffn_" not in v.refused:
                continue
            yield self.finding(
                ctx,
                f"the GGUF stores its {v.expert_count} experts merged (`blk.0.ffn_gate_exps.weight`); candle 0.11.0's "
                f"quantized_llama reads them one by one and fails at load with `{v.refused}`",
                filename=g.path,
                location=None,
                candle_value=v.refused,
                expect=v.refused,
            )



class Phi3GgufPartialRotary(_GgufRule):
    """quantized_phi3 rotates the whole head with a `rope.dimension_count`-wide table: partial RoPE fails.

    ## What it does
    Flags a GGUF read by quantized_phi3 whose `phi3.rope.dimension_count` is not the head size
    (`embedding_length / head_count`): llama.cpp writes partial_rotary_factor x head_dim there
    (Phi-4-mini: 96 of 128).

    ## Why is this bad?
    candle builds its cos/sin tables over `rope.dimension_count` but applies them to every
    dimension of the head, so the first forward fails with `inconsistent last dim size in
    rope` (after the load, so a server starts and fails on its first request).

    ## Example
    `phi3.rope.dimension_count = 96`, `phi3.embedding_length = 3072`, `phi3.attention.head_count = 24`.

    ## Fix
    None: no metadata value makes candle rotate part of the head; run the safetensors
    checkpoint with candle's `phi3` module, which does.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_phi3.rs:244 (tables over `rope_dim`),
    :99-105 (`rope` over the whole head); candle-nn-0.11.0/src/rotary_emb.rs:555-568
    (`inconsistent last dim size in rope`).

    ## Verification
    crash: candle's first forward must fail with `inconsistent last dim size in rope`.

    ## References
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK420]`
    """

    code = "PK420"
    name = "phi3-gguf-partial-rotary"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Run the safetensors checkpoint with candle's `phi3` module instead"
    probe_kind = "crash"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            rope_dim, emb, heads = (md_u32(g, f"phi3.{k}") for k in ("rope.dimension_count", "embedding_length", "attention.head_count"))
            if rope_dim is None or emb is None or not heads or rope_dim == emb // heads:
                continue
            head_dim = emb // heads
            what = "partial RoPE" if rope_dim < head_dim else "wider than the head"
            yield self.finding(
                ctx,
                f"`phi3.rope.dimension_count` is {rope_dim} for a {head_dim}-wide head ({what}); candle 0.11.0's "
                "quantized_phi3 applies its table to the whole head and the first forward fails with "
                "`inconsistent last dim size in rope`",
                filename=g.path,
                location=None,
                transformers_value=f"rotate {rope_dim} of {head_dim}",
                candle_value="inconsistent last dim size in rope",
                expect="inconsistent last dim size in rope",
            )


class Gemma3GgufSlidingWindow(_GgufRule):
    """quantized_gemma3's sliding window keeps one key too many in prefill and none in decode.

    ## What it does
    Flags a GGUF read by quantized_gemma3 with sliding-window layers (every layer that is not
    a multiple of `attention.sliding_window_type`, default 6): its `attention.sliding_window`
    W is applied as transformers never does. An error when the target's `--max-tokens`
    reaches W + 1, else a warning.

    ## Why is this bad?
    transformers keeps the last W keys on a sliding layer. candle's prefill mask keeps W + 1
    (`j + W < i` masks), and a decode step (one token) gets no mask at all while the KV cache is
    never trimmed: from W + 1 tokens on, every sliding layer attends to keys transformers has
    dropped, silently (tests/native/test_gguf_loaders.py measures both on a generated gemma3 GGUF).

    ## Example
    `gemma3.attention.sliding_window = 512` (Gemma 3 1B) and a 2,000-token chat.

    ## Fix
    None that makes decode agree. `attention.sliding_window` = W - 1 makes candle's prefill keep
    the W keys transformers keeps.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:152-168 (the mask), :447-451 (no
    mask when seq_len == 1), :210-222 (the cache only grows), :386-387 (which layers slide).

    ## Verification
    numeric: with `attention.sliding_window` one less, candle's prefill agrees with transformers
    (decode still differs past the window).

    ## References
    - transformers `masking_utils.py:96-97` (a window of W keeps the last W keys)
    - tests/native/test_gguf_loaders.py `test_gemma3_gguf_window_is_one_wider_in_prefill_and_absent_in_decode`
    """

    code = "PK421"
    name = "gemma3-gguf-sliding-window"
    severity = "warning"
    effect = "silent"
    fix_title = "Keep prompt and generation within the sliding window, or run candle's safetensors `gemma3` module"
    probe_kind = "numeric"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            p = metadata_prefix(g, "quantized_gemma3")
            window, blocks = md_u32(g, f"{p}.attention.sliding_window"), md_u32(g, f"{p}.block_count")
            pattern = md_u32(g, f"{p}.attention.sliding_window_type") or 6  # quantized_gemma3.rs:294-296
            if window is None or not blocks:
                continue
            sliding = sum(1 for i in range(min(blocks, 100_000)) if (i + 1) % pattern > 0)
            if not sliding:
                continue
            max_tokens = ctx.target.max_tokens
            severe = max_tokens is not None and max_tokens > window
            plan = f"; you plan {max_tokens} tokens" if max_tokens is not None else ""
            yield self.finding(
                ctx,
                f"transformers keeps the last {window} keys on {sliding} of {blocks} layers; candle 0.11.0's quantized_gemma3 "
                f"keeps {window + 1} in prefill and every key in decode: they differ from {window + 1} tokens on{plan}",
                filename=g.path,
                location=None,
                severity="error" if severe else "warning",
                transformers_value=window,
                candle_value={"prefill": window + 1, "decode": None},
                probe_patch={f"{p}.attention.sliding_window": window - 1} if window > 0 else None,
            )

RULES = (
    MissingGgufMetadata,
    GgufFreqBaseDefaulted,
    RopePairingByArchitecture,
    RopeFreqsIgnored,
    ContextOverMaxSeqLen,
    HeadDimNotEmbeddingOverHeads,
    NonLlamaArchitecture,
    UnsupportedGgufTensorType,
    GgufConfigDisagreement,
    QkRowsNotPermuted,
    MissingGgufTensor,
    Qwen3GgufRopeTableF16,
    Gemma3GgufMlpSilu,
    Gemma3GgufLocalFreqBaseKey,
    Phi3GgufFreqBaseIgnored,
    Phi3GgufLongRopeIgnored,
    Phi3GgufMissingOutput,
    Qwen2GgufMissingQkvBias,
    MixtralGgufMergedExperts,
    Phi3GgufPartialRotary,
    Gemma3GgufSlidingWindow,
)
