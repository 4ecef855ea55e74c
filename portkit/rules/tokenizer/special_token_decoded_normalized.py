"""PK519 special-token-decoded-normalized: A `normalized: true` special token the normalizer changes:
candle 0.11.1's crate decodes it as its normalized form and no longer skips it."""

from __future__ import annotations

from portkit.rules.base import Context, backticked, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import SpecialsNormalizedFalse
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class SpecialTokenDecodedNormalized(SpecialsNormalizedFalse):
    """A `normalized: true` special token the normalizer changes: candle 0.11.1 decodes it as its normalized form.

    ## What it does
    Flags special tokens in tokenizer.json's `added_tokens` marked `"normalized": true` whose
    content tokenizer.json's normalizer changes (`<s>` under `Prepend("▁")` is `▁<s>`), on candle
    0.11.1 and later, when transformers decodes them otherwise: its class matches them on the raw
    text (`added_tokens_decoder`'s `normalized: false`, what PK505 reads) or normalizes with
    another normalizer. (transformers 5 decodes with the same crate 0.23: a token it too matches
    normalized, under the same normalizer, decodes alike on both sides.)

    ## Why is this bad?
    The tokenizers crate 0.23 (candle-core 0.11.1's) remembers each such token's normalized form
    and decodes the id as that form; `decode(ids, skip_special_tokens=true)` then skips a token only
    when that string is a special token's content, which `▁<s>` is not. candle-examples'
    `TokenOutputStream` decodes with `skip_special_tokens=true`: on a Llama 2 style tokenizer the
    ids of "Hello world" decode to `<s> Hello world` in candle 0.11.1 and to `Hello world` in
    transformers (and in candle 0.11.0, whose crate 0.22.2 decodes the content). `id_to_token(1)`
    is `▁<s>` too, while `token_to_id("<s>")` is still 1.

    ## Example
    `{"id": 1, "content": "<s>", ..., "normalized": true, "special": true}` in `added_tokens`,
    with a `Prepend("▁")` normalizer.

    Use instead: `"normalized": false` on special tokens (what transformers 5 saves).

    ## Fix
    `portkit fix --write` clears `normalized` on those special tokens (the edit PK505 makes).

    ## Candle source
    candle-core-0.11.1/Cargo.toml:286-289 (`tokenizers` 0.23, used by
    candle-core-0.11.1/src/quantized/tokenizer.rs:4-18); tokenizers-0.23.2
    src/tokenizer/added_vocabulary.rs:316-324 (the normalized form cached when it differs),
    :233-246 (`simple_id_to_token` returns it), src/tokenizer/mod.rs:935-945 (`decode` filters
    specials by that string), :745-748 (`id_to_token`). tokenizers-0.22.2 (candle 0.11.0) decodes
    the content.

    ## Verification
    tokens: every encode of verify's corpus with special tokens, decoded skipping them on both
    sides; CONFIRMED when clearing the flag leaves fewer differing texts.

    ## References
    - docs/tokenizers.md
    - https://github.com/huggingface/candle/blob/main/candle-examples/src/token_output_stream.rs
      (`decode(tokens, true)`)
    """

    code = "PK519"
    holds = S.DECODES_NORMALIZED_FORM
    probe_measure = "skipped-decodes"
    name = "special-token-decoded-normalized"
    severity = "warning"
    effect = "silent"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.transformers is None or a.tj is None or a.crate.refused is not None:
            return
        transformers, t_norm = a.transformers, a.transformers.normalizer(a.crate)

        def transformers_form(content: str) -> str | None:
            """What transformers' tokenizer (the same crate, 0.23) decodes the token as: its content unless it
            matches the token normalized, under its own class's normalizer."""
            return (
                S.normalized_form(t_norm, content) if transformers.added.get(content, {}).get("normalized") else content
            )

        changed = {
            c: form
            for c, f in a.crate.added.items()
            if f.get("special")
            and f.get("normalized")
            and (form := S.normalized_form(a.crate.normalizer, c)) is not None
            and form != c
            and transformers_form(c) not in (form, None)
        }
        if not changed:
            return
        tokens = list(changed)
        many = len(tokens) > 1
        forms = ", ".join(f"`{changed[c]}`" for c in tokens)
        yield self.edit_finding(
            ctx,
            a,
            f"special token{'s' if many else ''} {backticked(tokens)} {'are' if many else 'is'} `normalized: true` "
            f"and tokenizer.json's normalizer `{S.describe(a.crate.normalizer)}` makes {'them' if many else 'it'} "
            f"{forms}: candle {ctx.target.candle}'s tokenizers crate decodes {'them' if many else 'it'} so, and "
            f"`decode(ids, skip_special_tokens=true)` keeps {'them' if many else 'it'} in the text where "
            "transformers drops "
            f"{'them' if many else 'it'}",
            key="added_tokens",
            location=location(a.tj.added_token_position(tokens[0])),
            transformers_value=dict.fromkeys(tokens, False),
            candle_value=dict.fromkeys(tokens, True),
            edit={"normalized_false": tokens},
            expect="skipped-decodes",
        )
