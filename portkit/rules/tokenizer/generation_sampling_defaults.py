"""PK510 generation-sampling-defaults: the candle program's sampler is not the one `generate()` samples with."""

from __future__ import annotations

from portkit.rules.base import Context, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding

#: the generation_config.json key each difference is about (its finding points there when it is set)
_KEY_OF = {
    "greedy": "do_sample",
    "repetition_penalty": "repetition_penalty",
    "window": "repetition_penalty",
    "renormalisation": "top_k",
    "temperature": "temperature",
    "top_p": "top_p",
}


class GenerationSamplingDefaults(TokenizerRule):
    """The candle program's sampler is not the one `generate()` samples with.

    ## What it does
    Compares what `generate()` samples with (generation_config.json over transformers' defaults)
    with the candle program's sampler: the one stated with `--sampler` or `[tool.portkit]
    sampler` (a candle-examples preset, or `temperature=…, top_p=…, top_k=…, repeat_penalty=…,
    repeat_last_n=…`), else generation_config.json's values passed as `LogitsProcessor::new(seed,
    temperature, top_p)` takes them. One finding per difference:
    - **top-k**: transformers fills `top_k`=50 into every generation config that does not set it
      and applies `TopKLogitsWarper` whenever it samples; `LogitsProcessor::new` applies no top-k.
    - **renormalisation**: `Sampling::TopKThenTopP` applies top-p to the top k probabilities as they
      are; transformers renormalises them first. On nearly flat logits with k=20, p=0.8 candle keeps
      20 tokens and transformers 16.
    - **repetition penalty and its window**: candle-examples pass `repeat_penalty` 1.1 over the last
      64 tokens (llama: 128); transformers' `repetition_penalty` (default 1.0: none) covers the
      whole sequence, the prompt's included.
    - temperature, top-p, greedy against sampling, and the settings candle's `LogitsProcessor` has
      no equivalent for (`min_p`, `typical_p`, `epsilon_cutoff`, `eta_cutoff`, `top_h`,
      `no_repeat_ngram_size`, `suppress_tokens`, `begin_suppress_tokens`, `bad_words_ids`,
      `sequence_bias`).

    ## Why is this bad?
    The two programs draw the next token from different distributions: with a Llama-3-style
    generation_config (`do_sample`, temperature 0.6, top-p 0.9, no `top_k`), the call its values
    suggest, `LogitsProcessor::new(seed, Some(0.6), Some(0.9))`, can draw tokens `generate()`
    never draws. The outputs differ for that reason alone, and no forward pass shows it.

    ## Example
    `{"do_sample": true, "temperature": 0.6, "top_p": 0.9}` with the program calling
    `LogitsProcessor::new(seed, Some(0.6), Some(0.9))`.

    ## Fix
    The finding's help gives the closest candle call: `Sampling::TopP` at the same temperature
    and top-p, drawn with `sample_f` and a closure that keeps the top k and renormalises
    (docs/verify.md, "Sampling"), and `apply_repeat_penalty` over `&tokens` (all of them) with
    generation_config's `repetition_penalty`. What has no equivalent stays different; the help
    names it.

    ## Candle source
    candle-transformers-0.11.0/src/generation/mod.rs:31-42 (`LogitsProcessor::new`: ArgMax, All or
    TopP), :96-113 (`sample_topk_topp`: no renormalisation), candle-transformers-0.11.0/src/utils.rs:25
    (`apply_repeat_penalty`: the context the program passes); candle-examples 0.11.0
    llama/main.rs:68-122 and qwen/main.rs:220-225 (the defaults). transformers
    generation/configuration_utils.py:602-640 (`top_k`: 50), generation/utils.py:1472-1480 and
    :1603-1650 (the processors and warpers `generate()` builds).

    ## Verification
    sampling: on the reference's logits at each teacher-forced step, the distribution candle's
    `LogitsProcessor` draws from (its own code, in the native wheel) against the one transformers'
    `LogitsProcessorList` gives; confirmed when the total-variation distance is over its bound and
    the difference's counterfactual (the candle call with that one thing changed, or transformers
    without a setting candle lacks) removes it.

    ## References
    - docs/verify.md ("Sampling")
    """

    code = "PK510"
    name = "generation-sampling-defaults"
    severity = "warning"
    fix_title = "Pass candle's `LogitsProcessor` the sampler `generate()` uses, or compare greedy runs"
    probe_kind = "sampling"
    probe_run = "sampling"
    needs = ("generation_config",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.semantics import sampling as S

        doc = ctx.facts.generation_config
        if doc is None:
            return
        values = analysis(ctx).generation or {}
        gen = S.Generate.from_config(values)
        stated = ctx.target.sampler
        program = S.parse(stated) if stated else S.plain_call(gen)
        said = f" (the program's sampler as stated: `{stated}`)" if stated else ""
        for d in S.differences(gen, program):
            key = _KEY_OF.get(d.key, d.key)
            at = doc.position(next((k for k in (key, "do_sample") if k in values), next(iter(values), "")))
            from portkit.findings import SamplingDifference  # with the first finding (`portkit.rules.base.location`)

            yield self.finding(
                ctx,
                d.message + said,
                filename=doc.path,
                location=location(at),
                transformers_value={"generate": gen.describe()},
                candle_value={"call": program.call()},
                probe=self.probe_of(SamplingDifference, key=d.key),
                help=S.advice(gen),
            )
