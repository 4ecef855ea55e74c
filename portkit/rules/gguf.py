"""PK4xx: GGUF files as candle 0.11.0's `models::quantized_llama` reads them."""

from __future__ import annotations

import struct

from portkit.errors import InputError
from portkit.rules.base import Context, Rule, f32, num
from portkit.semantics.gguf import (
    CANDLE_LOADS,
    CANDLE_PARSES,
    LLAMA_CPP_NEOX_NOT_IN_CANDLE,
    MAX_SEQ_LEN,
    REQUIRED_U32,
    GgufView,
)
from portkit.semantics.transformers import llama3_inv_freq_factors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Iterable

    from portkit.findings import Finding
    from portkit.model import GgufFile


class _GgufRule(Rule):
    group = "gguf"
    needs = ("gguf",)

    def each(self, ctx: Context) -> Iterable[tuple[GgufFile, GgufView]]:
        return ctx.ggufs

    def tv_ok(self, ctx: Context) -> bool:
        return bool(ctx.tv is not None and ctx.tv.ok)


class MissingGgufMetadata(_GgufRule):
    """A metadata key candle's quantized_llama requires is missing or has the wrong type.

    ## What it does
    Checks `llama.attention.head_count`, `llama.attention.head_count_kv`,
    `llama.block_count`, `llama.embedding_length`, `llama.rope.dimension_count` (U32) and
    `llama.attention.layer_norm_rms_epsilon` (F32).

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
    candle-transformers-0.11.0/src/models/quantized_llama.rs:372-390;
    candle-core-0.11.0/src/quantized/gguf_file.rs:250-255, :284-289.

    ## Verification
    crash: candle's `from_gguf` must fail with the same message.

    ## References
    FIELD-REPORTS mode 7 (candle#3410: non-llama GGUFs through quantized_llama).
    """

    code = "PK401"
    name = "missing-gguf-metadata"
    severity = "error"
    effect = "load-error"
    fix_title = "Write the metadata key with the type llama.cpp uses (U32 counts, F32 epsilon)"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
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


class GgufFreqBaseDefaulted(_GgufRule):
    """No usable `llama.rope.freq_base`: candle 0.11.0 silently uses 10000.

    ## What it does
    Flags a GGUF without `llama.rope.freq_base`, or with one that is not F32 (candle's
    `to_f32()` fails and `.unwrap_or(10000)` swallows the error). With a config.json beside
    it, the message names transformers' `rope_theta`; if that is 10000 nothing is flagged.

    ## Why is this bad?
    Older converters read only a top-level `rope_theta`; fed a transformers 5 config they
    write no freq_base, and candle then rotates with 10000: silent drift with length.

    ## Example
    A Llama 3 GGUF (theta 500000) without `llama.rope.freq_base`.

    ## Fix
    None in config.json; add `llama.rope.freq_base` (F32) to the GGUF, or re-convert after
    `portkit fix --write`.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:392-394, :430.

    ## Verification
    numeric: candle's GGUF logits differ from transformers' and match once freq_base is
    written.

    ## References
    FIELD-REPORTS mode 1: llama.cpp#2768, #2773, #18013.
    """

    code = "PK402"
    name = "gguf-freq-base-defaulted"
    severity = "error"
    effect = "silent"
    fix_title = "Write `llama.rope.freq_base` (F32) with the model's rope_theta"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        theta = ctx.tv.rope_theta if self.tv_ok(ctx) else None  # type: ignore[union-attr]
        for g, v in self.each(ctx):
            if v.freq_base_source == "metadata":
                continue
            if v.freq_base_source == "default-wrong-type":
                msg = (
                    f"`llama.rope.freq_base` is {v.freq_base_written}; candle 0.11.0's `to_f32()` fails and "
                    "`.unwrap_or(10000)` silently uses 10000"
                )
                sev = "error"
            elif theta is not None:
                if f32(theta) == 10000.0:
                    continue
                msg = (
                    f"transformers uses `rope_theta`={num(theta)}; the GGUF has no `llama.rope.freq_base` and candle "
                    "0.11.0 uses 10000"
                )
                sev = "error"
            else:
                msg = "the GGUF has no `llama.rope.freq_base`; candle 0.11.0 uses 10000 (check the source model's `rope_theta`)"
                sev = "warning"
            yield self.finding(
                ctx,
                msg,
                filename=g.path,
                location=None,
                severity=sev,  # type: ignore[arg-type]
                transformers_value=theta,
                candle_value=10000.0,
                # candle reads `llama.rope.freq_base` whatever the architecture (quantized_llama.rs:392)
                probe_patch={"llama.rope.freq_base": theta} if theta is not None else None,
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
    FIELD-REPORTS mode 7: candle#3410, llama.cpp#13261, ik_llama.cpp#2290.
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
    FIELD-REPORTS mode 3: llama.cpp#8676, #9396, ik_llama.cpp#402, llamafile#516,
    llama.cpp#10759, kalosm#340.
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
    Flags `llama.context_length` > 4096 (or `--max-tokens` > 4096).

    ## Why is this bad?
    candle's quantized_llama precomputes cos/sin for `MAX_SEQ_LEN = 4096` positions whatever
    the metadata says; position 4096 fails with `narrow invalid args start + len > dim_len`.

    ## Example
    A Llama 3.1 GGUF with `llama.context_length = 131072`.

    ## Fix
    Keep prompt plus generation within 4096 tokens.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:27, :283-300, :178-182.

    ## Verification
    crash: the GGUF runner fed 4097 tokens must fail in narrow.

    ## References
    FIELD-REPORTS mode 9: candle#1566, #1605, #2171, #3014, mistral.rs#86.
    """

    code = "PK405"
    name = "context-over-max-seq-len"
    severity = "warning"
    effect = "runtime-error"
    fix_title = "Keep prompt plus generated tokens within 4096"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        mt = ctx.target.max_tokens
        for g, v in self.each(ctx):
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


class HeadDimNotEmbeddingOverHeads(_GgufRule):
    """The GGUF's head size is not `embedding_length / head_count`, which candle assumes.

    ## What it does
    Compares `llama.attention.key_length` / `value_length` (when present),
    `llama.rope.dimension_count` and the `attn_q` rows with candle's head_dim,
    `embedding_length / head_count`.

    ## Why is this bad?
    candle never reads `key_length`: Q/K reshape with its own head_dim and the first forward
    fails (`lhs: [1,22,16,128], rhs: [1,22,1536]`, candle#3917); a rope dimension other than
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
    FIELD-REPORTS mode 4: candle#3917, ollama#5817.
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
    """A GGUF of another architecture, loaded through candle's `quantized_llama`.

    ## What it does
    Flags `general.architecture` other than `llama` (or absent).

    ## Why is this bad?
    quantized_llama reads only `llama.*` metadata and the llama block layout; it picks RoPE
    pairing from a fixed architecture list and ignores everything else the architecture
    needs (biases, norms, activations). It either fails at load or runs a different model.

    ## Example
    `general.architecture = "qwen2"`.

    ## Fix
    Use the candle model written for that architecture (e.g. `quantized_qwen2`).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:372-428.

    ## Verification
    static-only.

    ## References
    FIELD-REPORTS mode 7: candle#3410, openvino.genai#4059.
    """

    code = "PK407"
    name = "non-llama-architecture"
    severity = "warning"
    effect = "silent"
    fix_title = "Use the candle model written for this architecture"
    probe_kind = "static-only"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
            if v.architecture != "llama":
                shown = f"`{v.architecture}`" if v.architecture else "absent"
                pairing = "NEOX (`rope`)" if v.rope_is_neox else "interleaved (`rope_i`)"
                yield self.finding(
                    ctx,
                    f"`general.architecture` is {shown}; candle 0.11.0's quantized_llama reads only `llama.*` keys and "
                    f"llama tensors, and pairs RoPE {pairing}",
                    filename=g.path,
                    location=None,
                    candle_value="llama",
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
    llama.cpp quantization types (ggml.h `ggml_type`).
    """

    code = "PK408"
    name = "unsupported-gguf-tensor-type"
    severity = "error"
    effect = "load-error"
    fix_title = "Use a quantization candle supports (Q4_0..Q8_0, Q2_K..Q6_K, F16, BF16, F32)"
    probe_kind = "crash"

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
                shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
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
    absence) with what transformers computes from a llama3 `rope_parameters`.

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
    (vocabulary from `token_embd.weight`).

    ## Verification
    numeric: the GGUF runner's logits differ from transformers' beyond the quantization
    error.

    ## References
    CANDLE-FACTS "What GGUF producers write"; FIELD-REPORTS mode 3 (kalosm#340).
    """

    code = "PK409"
    name = "gguf-config-disagreement"
    severity = "error"
    effect = "silent"
    fix_title = "Re-convert the GGUF from this config.json"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.tv_ok(ctx) or not ctx.ggufs:
            return
        tv = ctx.tv
        assert tv is not None
        for g, v in self.each(ctx):
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
    FIELD-REPORTS mode 7: TinyLlama#24, llama.cpp#3018, #2376, llama2.c#286,
    transformers#31766, #31788.
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
    """A tensor candle's quantized_llama loads is not in the GGUF.

    ## What it does
    Checks `token_embd.weight`, `output_norm.weight` and the nine tensors of every block
    `blk.0` .. `blk.{block_count - 1}` (`output.weight` may be absent: candle then reuses
    the embedding).

    ## Why is this bad?
    `from_gguf` fails at load (`cannot find tensor info for blk.2.attn_q.weight`), typically
    when `llama.block_count` disagrees with the blocks written, or a converter renamed
    tensors.

    ## Example
    `llama.block_count = 3` in a file with `blk.0` and `blk.1` only.

    ## Fix
    None in config.json; re-convert the GGUF.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_llama.rs:433-488;
    candle-core-0.11.0/src/quantized/gguf_file.rs:569-580.

    ## Verification
    crash: candle's `from_gguf` must fail with the same message.

    ## References
    FIELD-REPORTS mode 3 (llamafile#516, llama.cpp#10759: tensor count mismatches).
    """

    code = "PK411"
    name = "missing-gguf-tensor"
    severity = "error"
    effect = "load-error"
    fix_title = "Re-convert the GGUF with every block `llama.block_count` announces"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, v in self.each(ctx):
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
)
