"""PK4xx only candle's `quantized_smollm3` loader (SmolLM3 GGUFs: `general.architecture` `smollm3`) has."""

from __future__ import annotations

from portkit.rules import as_candle
from portkit.rules.base import Context
from portkit.rules.gguf.base import GgufRule
from portkit.rules.gguf.metadata import reshape_error
from portkit.semantics.gguf import SMOLLM3_NOPE_INTERVAL, SMOLLM3_QK_CHUNK, md_u32, smollm3_unpermuted_rows

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding

#: candle-core's message for `Tensor::cat(&[])` (tensor_cat.rs 0.11.1:23-25)
EMPTY_CAT = "cat expects at least one tensor"


class SmolLm3GgufHeadDim(GgufRule):
    """quantized_smollm3 undoes llama.cpp's Q/K row order in 128-row chunks: other head sizes break.

    ## What it does
    Flags a GGUF read by quantized_smollm3 whose head size (`smollm3.rope.dimension_count`, which
    candle takes as the head size) is not 128, or whose `attn_q`/`attn_k` rows are not an even number
    of 128-row heads.

    ## Why is this bad?
    llama.cpp's converter permutes the Q and K rows of each head for its interleaved RoPE. candle
    restores transformers' order with a function written for SmolLM3-3B: it takes the rows 128 at a
    time (one head of 128) from each half of the matrix and drops whatever does not fill a chunk.
    - fewer than 256 rows: nothing is left and the load fails with `cat expects at least one tensor`;
    - rows left over: the projection comes out short and the first forward fails in its reshape;
    - another head size: every chunk spans parts of two heads (or half of one), the rows are put
      back in the wrong order, and the model runs with the wrong rotary pairs, silently.

    ## Example
    `smollm3.rope.dimension_count = 64`, `smollm3.attention.head_count = 32` (a 2048-wide model with
    64-wide heads).

    ## Fix
    None: no metadata value changes the chunk; run the safetensors checkpoint with candle's `smollm3`
    module.

    ## Candle source
    candle-transformers-0.11.1/src/models/smol/quantized_smollm3.rs:16-62 (`reconstruct_qk_weights`:
    `let chunk_size = 128;`), :330-345 (applied to `attn_q` and `attn_k`), :128-130 (`head_dim` is
    `rope.dimension_count`); candle-core-0.11.1/src/tensor_cat.rs:23-25.

    ## Verification
    crash: the load (or first forward) must fail with the predicted text; numeric where candle loads:
    the GGUF differs from transformers with every other finding's counterfactual applied.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (`SmolLM3Model(LlamaModel)`: Q/K rows permuted per head)
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK426-...]`
    """

    code = "PK426"
    name = "smollm3-gguf-head-dim"
    severity = "error"
    effect = "load-error"
    fix_title = "Run the safetensors checkpoint with candle's `smollm3` module instead"
    probe_kind = "crash"
    loaders = ("quantized_smollm3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            head = md_u32(g, "smollm3.rope.dimension_count")
            shapes = [(n, g.tensors.get(f"blk.0.{n}.weight")) for n in ("attn_q", "attn_k")]
            rows = {n: t.shape[0] for n, t in shapes if t is not None and len(t.shape) == 2}
            if head is None or len(rows) < 2:
                continue
            kept = {n: smollm3_unpermuted_rows(r) for n, r in rows.items()}
            empty = next((n for n in ("attn_q", "attn_k") if kept[n] == 0), None)
            short = next((n for n in ("attn_q", "attn_k") if 0 < kept[n] < rows[n]), None)
            what = f"the head size is {head}, and `blk.0.attn_q` has {rows['attn_q']} rows, `attn_k` {rows['attn_k']}"
            if empty is not None:
                yield self.file_finding(
                    ctx,
                    g,
                    f"{what}; candle {ctx.target.candle}'s quantized_smollm3 restores the Q/K row order in "
                    f"{SMOLLM3_QK_CHUNK}-row chunks from each half of the matrix, finds none in `{empty}` and fails at "
                    f"load with `{EMPTY_CAT}`",
                    transformers_value=head,
                    candle_value=EMPTY_CAT,
                    expect=EMPTY_CAT,
                )
            elif short is not None:
                err = reshape_error(ctx.target.candle)
                yield self.file_finding(
                    ctx,
                    g,
                    f"{what}; candle {ctx.target.candle}'s quantized_smollm3 restores the Q/K row order in "
                    f"{SMOLLM3_QK_CHUNK}-row chunks from each half of the matrix and keeps {kept[short]} of "
                    f"`{short}`'s rows: the first forward fails with `{err}`",
                    transformers_value=rows[short],
                    candle_value=kept[short],
                    expect=err,
                )
            elif head != SMOLLM3_QK_CHUNK:
                yield self.file_finding(
                    ctx,
                    g,
                    f"{what}; candle {ctx.target.candle}'s quantized_smollm3 restores the Q/K row order in "
                    f"{SMOLLM3_QK_CHUNK}-row chunks (SmolLM3-3B's head size), which straddle this model's heads: "
                    "it rotates the wrong pairs of dimensions, silently",
                    transformers_value=head,
                    candle_value=SMOLLM3_QK_CHUNK,
                    probe_kind="numeric",
                )


class SmolLm3GgufNopeLayers(GgufRule):
    """quantized_smollm3 leaves every 4th layer without RoPE, whatever the model's `no_rope_layers`.

    ## What it does
    With a config.json beside the GGUF, flags a SmolLM3 whose layers without RoPE (transformers'
    `no_rope_layers`, or every `no_rope_layer_interval`-th) are not layers 3, 7, 11, ...

    ## Why is this bad?
    The GGUF carries nothing about the NoPE layers (llama.cpp hard-codes every 4th as well), and
    candle's loader sets an interval of 4. SmolLM3-3B matches; a model trained with another pattern
    rotates where it should not, or not where it should, silently.

    ## Example
    `"no_rope_layer_interval": 2` in config.json beside `model-q8_0.gguf`.

    ## Fix
    None: no metadata key is read; run the safetensors checkpoint with candle's `smollm3` module, which
    reads `no_rope_layers`.

    ## Candle source
    candle-transformers-0.11.1/src/models/smol/quantized_smollm3.rs:117 (`no_rope_layer_interval: Some(4)`),
    :121-126 (`should_skip_rope`).

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with candle's `no_rope_layers`;
    CONFIRMED when the GGUF agrees with it where it does not agree with transformers as written.

    ## References
    - transformers `models/smollm3/configuration_smollm3.py` (`no_rope_layers` from `no_rope_layer_interval`)
    - llama.cpp `src/llama-model.cpp` (`n_no_rope_layer_step = 4` for SMOLLM3)
    """

    code = "PK427"
    name = "smollm3-gguf-nope-layers"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `smollm3` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_smollm3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        listed = ctx.ftv.get("no_rope_layers") if self.tv_ok(ctx) and ctx.ftv is not None else None
        if not isinstance(listed, list):
            return
        for g, _v in self.each(ctx):
            n = md_u32(g, "smollm3.block_count") or len(listed)
            candle = [0 if (i + 1) % SMOLLM3_NOPE_INTERVAL == 0 else 1 for i in range(n)]
            theirs = [int(listed[i]) if i < len(listed) else 1 for i in range(n)]
            if theirs == candle:
                continue
            t_nope = [i for i, r in enumerate(theirs) if r == 0]
            c_nope = [i for i, r in enumerate(candle) if r == 0]
            yield self.file_finding(
                ctx,
                g,
                f"transformers leaves layers {t_nope or 'none'} without RoPE; candle {ctx.target.candle}'s "
                f"quantized_smollm3 reads no such setting and leaves every {SMOLLM3_NOPE_INTERVAL}th: layers "
                f"{c_nope or 'none'}",
                transformers_value=t_nope,
                candle_value=c_nope,
                as_candle=as_candle.edit(
                    f"no RoPE in every {SMOLLM3_NOPE_INTERVAL}th layer", config={"no_rope_layers": candle}
                ),
            )


class SmolLm3GgufOutputIgnored(GgufRule):
    """quantized_smollm3 never reads `output.weight`: the LM head is always the token embedding.

    ## What it does
    Flags a GGUF read by quantized_smollm3 that holds an `output.weight` (llama.cpp writes one only for
    a model whose `lm_head` is not tied to its embedding).

    ## Why is this bad?
    candle builds the LM head from `token_embd.weight` (re-quantized to Q8_0) without looking for
    `output.weight`: right for SmolLM3-3B, which is tied, silently wrong for an untied fine-tune.

    ## Example
    A GGUF with both `token_embd.weight` and `output.weight`, `general.architecture` `smollm3`.

    ## Fix
    None in the GGUF; run the safetensors checkpoint with candle's `smollm3` module, which reads
    `lm_head.weight` when `tie_word_embeddings` is false.

    ## Candle source
    candle-transformers-0.11.1/src/models/smol/quantized_smollm3.rs:722-727 (`lm_head` from the
    embedding).

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with `tie_word_embeddings` true;
    CONFIRMED when the GGUF agrees with it where it does not agree with transformers as written.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (`output.weight` is written where `lm_head.weight` is saved)
    """

    code = "PK428"
    name = "smollm3-gguf-output-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `smollm3` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_smollm3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            if "output.weight" not in g.tensors:
                continue
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF has its own `output.weight` (an untied LM head); candle {ctx.target.candle}'s "
                "quantized_smollm3 never reads it and uses `token_embd.weight` as the LM head",
                transformers_value="output.weight",
                candle_value="token_embd.weight",
                as_candle=as_candle.edit("the LM head tied to the embedding", config={"tie_word_embeddings": True}),
            )


class SmolLm3GgufRequantized(GgufRule):
    """quantized_smollm3 computes Q, K and the LM head in Q8_0, whatever the file's weight type.

    ## What it does
    Flags a GGUF read by quantized_smollm3 whose `attn_q`, `attn_k` or `token_embd` weights are finer
    than Q8_0 (F32, F16, BF16).

    ## Why is this bad?
    candle dequantizes `attn_q` and `attn_k` to restore their row order and quantizes them again to
    Q8_0, and builds the LM head by quantizing the embedding to Q8_0; on a CPU a Q8_0 matmul rounds
    its input to 8 bits as well. An F32 or F16 file therefore gives Q8_0's numbers in those three
    places: what a user picked a full-precision file to avoid.

    ## Example
    `model-f16.gguf` of SmolLM3-3B: `blk.N.attn_q.weight` F16.

    ## Fix
    None: candle re-quantizes unconditionally; run the safetensors checkpoint with candle's `smollm3`
    module for full precision.

    ## Candle source
    candle-transformers-0.11.1/src/models/smol/quantized_smollm3.rs:331-345 (`QTensor::quantize(..,
    GgmlDType::Q8_0)` for Q and K), :722-724 (the LM head); candle-core-0.11.1/src/quantized/k_quants.rs
    (`matmul`: the input quantized to `VecDotType`).

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with those Linears computing in
    Q8_0 (weights and inputs rounded to Q8_0 blocks); CONFIRMED when the GGUF agrees with it where it
    does not agree with transformers as written.

    ## References
    - tests/native/test_gguf_loaders.py `test_smollm3_gguf_is_transformers_with_q8_0_q_k_and_head`
    """

    code = "PK429"
    name = "smollm3-gguf-requantized"
    severity = "warning"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `smollm3` module for full precision"
    probe_kind = "numeric"
    loaders = ("quantized_smollm3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            fine = sorted(
                {n.split(".")[-2] for n, t in g.tensors.items() if t.type_name in FULL_PRECISION and _requantized(n)}
            )
            blocks = md_u32(g, "smollm3.block_count") or 0
            if not fine or not blocks:
                continue
            per_layer = ("self_attn.q_proj.weight", "self_attn.k_proj.weight")
            edits = {f"model.layers.{i}.{w}": as_candle.Q8_0 for i in range(min(blocks, 100_000)) for w in per_layer}
            yield self.file_finding(
                ctx,
                g,
                f"{', '.join(f'`{n}`' for n in fine)} are {'/'.join(sorted(FULL_PRECISION))}-precision; candle "
                f"{ctx.target.candle}'s quantized_smollm3 re-quantizes Q, K and the LM head to Q8_0 and computes them "
                "with 8-bit inputs",
                transformers_value="full precision",
                candle_value="Q8_0",
                as_candle=as_candle.edit(
                    "Q, K and the LM head in Q8_0", tensor_edits={**edits, "lm_head.weight": as_candle.Q8_0}
                ),
            )


#: the weight types quantized_smollm3's re-quantization to Q8_0 loses precision from
FULL_PRECISION = frozenset({"F32", "F16", "BF16"})


def _requantized(name: str) -> bool:
    """A tensor quantized_smollm3 quantizes again: each block's `attn_q`/`attn_k`, and the embedding."""
    return name == "token_embd.weight" or name.endswith((".attn_q.weight", ".attn_k.weight"))
