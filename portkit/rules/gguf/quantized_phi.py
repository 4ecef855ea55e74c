"""PK4xx only candle's `quantized_phi` loader (phi-1, phi-1.5, phi-2 GGUFs: `general.architecture` `phi2`) has."""

from __future__ import annotations

from portkit.rules import as_candle
from portkit.rules.base import Context, f32, num
from portkit.rules.gguf.base import GgufRule, GgufTensorRequired
from portkit.rules.gguf.metadata import reshape_error
from portkit.semantics.gguf import PHI2_FREQ_BASE, md_u32, split_qkv

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class Phi2GgufSplitQkv(GgufTensorRequired):
    """quantized_phi reads one fused `attn_qkv`: a GGUF with `attn_q`, `attn_k`, `attn_v` does not load.

    ## What it does
    Flags a GGUF read by quantized_phi whose blocks hold `attn_q`, `attn_k` and `attn_v` where the
    loader asks for `attn_qkv`.

    ## Why is this bad?
    llama.cpp's converter writes transformers' `PhiForCausalLM` (phi-1.5 and phi-2 as published since
    January 2024: `q_proj`, `k_proj`, `v_proj`) as three tensors per block, and llama.cpp loads either
    layout. candle's quantized_phi was written for the GGUFs of phi-2's first release (one `Wqkv`) and
    reads only `blk.N.attn_qkv`: `from_gguf` fails with `cannot find tensor info for
    blk.0.attn_qkv.weight`.

    ## Example
    A phi-2 GGUF converted from microsoft/phi-2 today: `blk.0.attn_q.weight`, `blk.0.attn_k.weight`,
    `blk.0.attn_v.weight`.

    ## Fix
    None in config.json; write each block's `attn_q`, `attn_k` and `attn_v` (weights, then biases)
    as one `attn_qkv`, rows in that order.

    ## Candle source
    candle-transformers-0.11.1/src/models/quantized_phi.rs:246 (`QLinear::new(.., "{prefix}.attn_qkv", ..)?`),
    :111-118 (the fused rows split as q, k, v); candle-core-0.11.1/src/quantized/gguf_file.rs:577.

    ## Verification
    crash: candle's `from_gguf` must fail with `cannot find tensor info for blk.0.attn_qkv.weight`.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (`Phi2Model`: no `modify_tensors`, `q_proj` -> `attn_q`) and
      `src/llama-model.cpp` (`create_tensor_qkv`: `attn_qkv`, else `attn_q`/`attn_k`/`attn_v`)
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK422-...]`
    """

    code = "PK422"
    name = "phi2-gguf-split-qkv"
    fix_title = "Write each block's `attn_q`, `attn_k`, `attn_v` as one `attn_qkv` (rows q, k, v)"
    loaders = ("quantized_phi",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            first = self.first_missing(g, "quantized_phi")
            if first is None or not split_qkv(g, first):
                continue
            err = f"cannot find tensor info for {first}"
            block = first.rsplit(".", 2)[0]
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF holds `{block}.attn_q`, `attn_k` and `attn_v` (llama.cpp's converter writes transformers' "
                f"PhiForCausalLM so); candle {ctx.target.candle}'s quantized_phi reads only a fused `attn_qkv` and "
                f"fails at load with `{err}`",
                transformers_value="q_proj, k_proj, v_proj",
                candle_value=err,
                expect=err,
            )


class Phi2GgufQkvRows(GgufRule):
    """quantized_phi splits `attn_qkv` into three equal parts: grouped K/V heads fail at the first forward.

    ## What it does
    Flags a GGUF read by quantized_phi whose `attn_qkv` has other than 3 x `embedding_length` rows (K
    and V with fewer heads than Q).

    ## Why is this bad?
    candle reshapes the fused projection to `(batch, seq, 3, head_count, head_dim)`, so Q, K and V
    must have `head_count` heads each; `head_count_kv` only repeats K and V afterwards. transformers'
    `PhiForCausalLM` allows `num_key_value_heads` below `num_attention_heads`: such a file loads and its
    first forward fails with `shape mismatch in reshape` (`Shape mismatch, got buffer of size ...` from
    0.11.1).

    ## Example
    `phi2.embedding_length = 64`, `blk.0.attn_qkv.weight` with 128 rows (4 query heads, 2 kv heads of 16).

    ## Fix
    None: run the safetensors checkpoint with candle's `phi` module, which reads `num_key_value_heads`.

    ## Candle source
    candle-transformers-0.11.1/src/models/quantized_phi.rs:111-114 (the reshape), :240 (`head_dim:
    embedding_length / head_count`); candle-core-0.11.1/src/shape.rs:475-484.

    ## Verification
    crash: candle's first forward must fail with the reshape error.

    ## References
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK424-...]`
    """

    code = "PK424"
    name = "phi2-gguf-qkv-rows"
    severity = "error"
    effect = "runtime-error"
    fix_title = "Run the safetensors checkpoint with candle's `phi` module instead"
    probe_kind = "crash"
    loaders = ("quantized_phi",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            qkv, emb = g.tensors.get("blk.0.attn_qkv.weight"), md_u32(g, "phi2.embedding_length")
            if qkv is None or emb is None or len(qkv.shape) != 2 or qkv.shape[0] == 3 * emb:
                continue
            err = reshape_error(ctx.target.candle)
            yield self.file_finding(
                ctx,
                g,
                f"`blk.0.attn_qkv.weight` has {qkv.shape[0]} rows where candle {ctx.target.candle}'s quantized_phi "
                f"splits 3 x `phi2.embedding_length` = {3 * emb} (Q, K and V with every head); the first forward "
                f"fails with `{err}`",
                transformers_value=qkv.shape[0],
                candle_value=3 * emb,
                expect=err,
            )


class Phi2GgufRopeBaseIgnored(GgufRule):
    """quantized_phi rotates with a base of 10000 whatever the model's `rope_theta`.

    ## What it does
    With a config.json beside the GGUF, flags a phi model whose `rope_theta` (as transformers reads
    it) is not 10000.

    ## Why is this bad?
    llama.cpp's converter writes no `phi2.rope.freq_base`, and candle hard-codes 10000 when it builds
    the RoPE tables: a fine-tune trained with another base rotates with the wrong frequencies and
    drifts silently with length. (phi-1, phi-1.5 and phi-2 themselves use 10000.)

    ## Example
    `"rope_theta": 100000.0` in config.json beside `model-f16.gguf` (`general.architecture` `phi2`).

    ## Fix
    None: no metadata key is read; run the safetensors checkpoint with candle's `phi` module.

    ## Candle source
    candle-transformers-0.11.1/src/models/quantized_phi.rs:219
    (`precomput_freqs_cis(rope_dim, 10_000., device)`).

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with `rope_theta` 10000;
    CONFIRMED when the GGUF agrees with it where it does not agree with transformers as written.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (`Phi2Model.set_gguf_parameters` writes no `rope.freq_base`)
    """

    code = "PK423"
    name = "phi2-gguf-rope-base-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `phi` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_phi",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        theta = ctx.ftv.get("rope_theta") if self.tv_ok(ctx) and ctx.ftv is not None else None
        if not isinstance(theta, (int, float)) or f32(float(theta)) == PHI2_FREQ_BASE:
            return
        for g, _v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"transformers rotates with `rope_theta`={num(theta)}; candle {ctx.target.candle}'s quantized_phi "
                "reads no rope base from the GGUF and rotates with a hard-coded 10000",
                transformers_value=theta,
                candle_value=PHI2_FREQ_BASE,
                as_candle=as_candle.edit(
                    "rope base 10000", config=as_candle.rope(as_candle.raw_config(ctx), theta=PHI2_FREQ_BASE)
                ),
            )
