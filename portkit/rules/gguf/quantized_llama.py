"""PK4xx only candle 0.11.0's `quantized_llama` loader has (Mixtral GGUFs are written as arch `llama`)."""

from __future__ import annotations

from portkit.rules.base import Context
from portkit.rules.gguf.base import GgufRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class MixtralGgufMergedExperts(GgufRule):
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
    - tests/native/test_gguf_loaders.py `test_crash_prediction_matches_candle[PK419]`,
      `test_per_expert_mixtral_file_loads`
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
            yield self.file_finding(
                ctx,
                g,
                f"the GGUF stores its {v.expert_count} experts merged (`blk.0.ffn_gate_exps.weight`); candle "
                f"{ctx.target.candle}'s quantized_llama reads them one by one and fails at load with `{v.refused}`",
                candle_value=v.refused,
                expect=v.refused,
            )
