"""PK510 generation-sampling-defaults: generation_config.json makes `generate()` sample; a candle loop does only what it is given."""

from __future__ import annotations

from portkit.rules.base import Context, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Iterable

    from portkit.findings import Finding


class GenerationSamplingDefaults(TokenizerRule):
    """generation_config.json makes `generate()` sample; a candle loop does only what it is given.

    ## What it does
    Lists the sampling settings of generation_config.json that `generate()` applies by default
    (`do_sample`, `temperature`, `top_p`, `top_k`; `repetition_penalty` even when greedy).

    ## Why is this bad?
    It is not wrong, but it is not the same run: transformers samples at temperature 0.6 with
    top-p 0.9 where a candle program passing nothing decodes greedily. Outputs compared
    across the two runtimes will differ for that reason alone.

    ## Example
    `{"do_sample": true, "temperature": 0.6, "top_p": 0.9}`.

    ## Fix
    Pass the same settings to candle's `LogitsProcessor` (`LogitsProcessor::new(seed,
    Some(0.6), Some(0.9))`, `Sampling::TopKThenTopP`) and `apply_repeat_penalty`, or compare
    greedy runs.

    ## Candle source
    candle-transformers-0.11.0/src/generation/mod.rs:31-42 (`LogitsProcessor::new`: only the
    temperature and top-p passed), candle-transformers-0.11.0/src/utils.rs:25
    (`apply_repeat_penalty`, called by the program).

    ## Verification
    static-only, reported NOT-PROBED with why: verify compares greedy decoding on both sides.

    ## References
    - docs/tokenizers.md
    """

    code = "PK510"
    name = "generation-sampling-defaults"
    severity = "info"
    fix_title = "Pass the same sampling settings to candle's `LogitsProcessor`, or compare greedy runs"
    probe_kind = "static-only"
    not_probed = "verify compares greedy decoding on both sides: sampling settings change no computed number"
    needs = ("generation_config",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        doc = ctx.facts.generation_config
        if doc is None:
            return
        found = S.sampling_defaults(a.generation)
        if not found:
            return
        shown = ", ".join(f"`{k}`={'true' if v is True else v}" for k, v in found.items())
        key = next(iter(found))
        yield self.finding(
            ctx,
            f"generation_config.json makes `generate()` apply {shown} by default; candle's `LogitsProcessor` applies only "
            "what the program passes",
            filename=doc.path,
            location=location(doc.position(key)),
            transformers_value=found,
            candle_value=None,
        )

