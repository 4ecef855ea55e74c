"""PK506 padding-saved-in-tokenizer: tokenizer.json saves padding or truncation: candle's crate
applies it to every encode."""

from __future__ import annotations

from portkit.rules.base import Context
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from portkit.findings import Finding


class PaddingSavedInTokenizer(TokenizerRule):
    """tokenizer.json saves padding or truncation: candle's crate applies it to every encode.

    ## What it does
    Flags a non-null `padding` or `truncation` in tokenizer.json (fine-tuning scripts often save
    the trainer's settings into it). Padding is an error; truncation alone is an error when the
    planned prompt (`--max-prompt-tokens`, else `--max-tokens`) is longer than its
    `max_length`, else a warning.

    ## Why is this bad?
    The crate pads and truncates every `encode`: a candle program feeds `[19556, 905, 49152 x
    126]` for `"Hello world"` with padding to 128 saved, and a prompt longer than the saved
    `max_length` is cut. transformers turns both off for a plain call, whatever the file says.
    Padding changes every text shorter than its length; truncation only the texts longer than
    its `max_length` (a saved 512 leaves a 100-token chat alone, and cuts a 2,000-token one).

    ## Example
    `"padding": {"strategy": {"Fixed": 128}, "pad_id": 49152, ...}, "truncation": {"max_length": 128, ...}`.

    Use instead: `"padding": null, "truncation": null`.

    ## Fix
    `portkit fix --write` sets both to null.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/serialization.rs:122-127 (read from the file),
    src/tokenizer/mod.rs:1279-1300 (`post_process` truncates and pads). transformers 5.24
    tokenization_utils_tokenizers.py:941-943 and 964-966 (no truncation, no padding for a plain call).

    ## Verification
    tokens: every text of verify's corpus, which holds one text longer than the saved
    `max_length`; CONFIRMED when removing them removes differing ids.

    ## References
    - docs/tokenizers.md
    """

    code = "PK506"
    probe_measure = "saved-padding"
    name = "padding-saved-in-tokenizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Remove `padding` and `truncation` from tokenizer.json (`portkit fix --write`)"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.tj is None or a.crate.refused is not None:
            return
        pad, trunc = a.crate.padding, a.crate.truncation
        if pad is None and trunc is None:
            return
        bits = []
        if isinstance(pad, dict):
            strategy = pad.get("strategy")
            fixed = strategy.get("Fixed") if isinstance(strategy, dict) else None
            bits.append(
                f"padding ({f'to {fixed}' if fixed is not None else 'to the longest'} with `{pad.get('pad_token')}`)"
            )
        elif pad is not None:
            bits.append("padding")
        length = trunc.get("max_length") if isinstance(trunc, dict) else None
        if isinstance(trunc, dict):
            bits.append(f"truncation (at {length})")
        elif trunc is not None:
            bits.append("truncation")
        what = " and ".join(bits)
        severity = None
        if pad is not None:
            tail = "transformers turns both off for a plain call: every text gets other ids"
        else:
            prompt = ctx.target.prefill_tokens
            cut = (
                f"every encode longer than {length} tokens is cut"
                if isinstance(length, int)
                else "long encodes are cut"
            )
            if prompt is None:
                plan = "; no prompt length is planned (`--max-prompt-tokens`)"
            else:
                plan = f"; you plan prompts of at most {prompt} tokens"
            reaches = prompt is not None and (not isinstance(length, int) or prompt > length)
            severity = "error" if reaches else "warning"
            tail = f"transformers does not truncate a plain call: {cut}{plan}"
        yield self.edit_finding(
            ctx,
            a,
            f"tokenizer.json saves {what}: candle's tokenizers crate applies {'them' if len(bits) > 1 else 'it'} to "
            f"every `encode`, {tail}",
            key="padding" if pad is not None else "truncation",
            transformers_value={"padding": None, "truncation": None},
            candle_value={"padding": pad, "truncation": trunc},
            edit={"padding": None, "truncation": None},
            expect="every-text" if pad is not None else "long-text",
            severity=severity,
        )

    def tokenizer_changes(self, finding: Finding, ctx: Context) -> dict[str, Any] | None:
        return {"padding": None, "truncation": None}
