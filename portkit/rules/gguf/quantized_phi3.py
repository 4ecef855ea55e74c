"""PK4xx only candle 0.11.0's `quantized_phi3` loader has."""

from __future__ import annotations

from portkit.rules import as_candle
from portkit.rules.base import Context, f32
from portkit.rules.gguf.base import GgufRule, GgufTensorRequired
from portkit.semantics.gguf import PHI3_FREQ_BASE, md_f32, md_u32

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class Phi3GgufFreqBaseIgnored(GgufRule):
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
    numeric, transformers as candle computes: no metadata edit reaches the hard-coded base, so
    verify runs transformers with `rope_theta` 10000; CONFIRMED when the GGUF agrees with it
    where it does not agree with transformers as written.

    ## References
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK415]`
    """

    code = "PK415"
    name = "phi3-gguf-freq-base-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `phi3` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            fb = md_f32(g, "phi3.rope.freq_base")
            if fb is None or f32(fb) == PHI3_FREQ_BASE:
                continue
            yield self.file_finding(
                ctx,
                g,
                f"`phi3.rope.freq_base` is {fb:.7g}; candle {ctx.target.candle}'s quantized_phi3 never reads it and "
                "rotates with a hard-coded 10000",
                transformers_value=fb,
                candle_value=PHI3_FREQ_BASE,
                as_candle=as_candle.edit(
                    "rope base 10000", config=as_candle.rope(as_candle.raw_config(ctx), theta=PHI3_FREQ_BASE)
                ),
            )


class Phi3GgufLongRopeIgnored(GgufRule):
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
    numeric, transformers as candle computes: no metadata edit makes candle read the factors,
    so verify runs transformers with plain RoPE (no scaling, the same theta); CONFIRMED when the
    GGUF agrees with it where it does not agree with transformers as written.

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
    probe_kind = "numeric"
    loaders = ("quantized_phi3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            factors = [n for n in ("rope_factors_long.weight", "rope_factors_short.weight") if n in g.tensors]
            attn = md_f32(g, "phi3.rope.scaling.attn_factor")
            attn_used = attn is not None and f32(attn) != 1.0
            if not factors and not attn_used:
                continue
            what = [f"`{n}`" for n in factors] + ([f"`phi3.rope.scaling.attn_factor`={attn:.7g}"] if attn_used else [])
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF carries LongRoPE ({', '.join(what)}); candle {ctx.target.candle}'s quantized_phi3 never "
                "reads it and runs plain RoPE",
                transformers_value="longrope",
                candle_value="plain rope",
                as_candle=as_candle.edit(
                    "plain RoPE (no LongRoPE)", config=as_candle.rope(as_candle.raw_config(ctx), plain=True)
                ),
            )


class Phi3GgufMissingOutput(GgufTensorRequired):
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
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF has no `output.weight` (a tied model); candle {ctx.target.candle}'s quantized_phi3 has no "
                f"fallback to `token_embd.weight` and fails at load with `{err}`",
                transformers_value="tied",
                candle_value=err,
                expect=err,
            )


class Phi3GgufPartialRotary(GgufRule):
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
            rope_dim, emb, heads = (
                md_u32(g, f"phi3.{k}") for k in ("rope.dimension_count", "embedding_length", "attention.head_count")
            )
            if rope_dim is None or emb is None or not heads or rope_dim == emb // heads:
                continue
            head_dim = emb // heads
            what = "partial RoPE" if rope_dim < head_dim else "wider than the head"
            yield self.file_finding(
                ctx,
                g,
                f"`phi3.rope.dimension_count` is {rope_dim} for a {head_dim}-wide head ({what}); candle "
                f"{ctx.target.candle}'s "
                "quantized_phi3 applies its table to the whole head and the first forward fails with "
                "`inconsistent last dim size in rope`",
                transformers_value=f"rotate {rope_dim} of {head_dim}",
                candle_value="inconsistent last dim size in rope",
                expect="inconsistent last dim size in rope",
            )
