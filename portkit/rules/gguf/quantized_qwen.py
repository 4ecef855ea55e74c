"""PK4xx only candle 0.11.0's `quantized_qwen2` and `quantized_qwen3` loaders have."""

from __future__ import annotations

from portkit.rules.base import Context, backticked
from portkit.rules.gguf.base import GgufRule, GgufTensorRequired
from portkit.semantics.gguf import candle_debug, loader_required_tensors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class Qwen3GgufRopeTableF16(GgufRule):
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
            yield self.file_finding(
                ctx,
                g,
                f"`general.dtype` {shown}: candle {ctx.target.candle}'s quantized_qwen3 computes its RoPE tables in "
                "F16, an error that grows with the position (transformers computes them in F32)",
                transformers_value="f32",
                candle_value="f16",
                probe_patch={"general.dtype": 0},
            )


class Qwen2GgufMissingQkvBias(GgufTensorRequired):
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
            missing = [
                n
                for n in loader_required_tensors(g, "quantized_qwen2", ctx.target.candle)
                if n.endswith(".bias") and n not in g.tensors
            ]
            err = f"cannot find tensor info for {first}"
            shown = backticked(missing)
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF has no {shown}; candle {ctx.target.candle}'s quantized_qwen2 requires the q/k/v biases and "
                f"fails at load with `{err}`",
                candle_value=err,
                expect=err,
            )
