"""PK505 special-token-normalized: A special token with `normalized: true`: candle's crate looks for
it after normalization."""

from __future__ import annotations

from portkit.rules.base import Context, backticked, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import SpecialsNormalizedFalse
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class SpecialTokenNormalized(SpecialsNormalizedFalse):
    """A special token with `normalized: true`: candle's crate looks for it after normalization.

    ## What it does
    Flags special tokens in tokenizer.json's `added_tokens` marked `"normalized": true` when
    the file has a normalizer and transformers matches the token another way: its class drops
    that normalizer, or tokenizer_config.json's `added_tokens_decoder` says `normalized: false`.

    ## Why is this bad?
    The crate matches a normalized added token in the normalized text, against the normalized
    token: after `Prepend("▁") + Replace(" " -> "▁")`, `<s>` is looked for as `▁<s>`.
    transformers splits it out of the raw text first. Llama 2 `"Hello <s> world"` is
    `[1, 15043, 1, 3186]` in candle and `[1, 15043, 29871, 1, 3186]` in transformers;
    in `"Hello<s>world"` candle does not see `<s>` at all.

    ## Example
    `{"id": 1, "content": "<s>", ..., "normalized": true, "special": true}` in tokenizer.json's
    `added_tokens`, with a `Prepend`/`Replace` normalizer.

    Use instead: `"normalized": false` on special tokens (what transformers 5 matches with).

    ## Fix
    `portkit fix --write` clears `normalized` on those special tokens.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/added_vocabulary.rs (`extract_and_normalize`: non-normalized
    tokens are split from the raw text, normalized ones from the normalized text).
    transformers 5.24 tokenization_utils_base.py:1889-1899 (`added_tokens_decoder` flags),
    tokenization_utils_tokenizers.py:477-512 (tokens re-added with them).

    ## Verification
    tokens: verify's corpus has each special token inside text, with and without spaces;
    CONFIRMED when clearing the flag removes differing ids.

    ## References
    - docs/tokenizers.md
    - https://github.com/TransformerLensOrg/TransformerLens/issues/373 (Llama's `<s>` not recognised inside text)
    """

    code = "PK505"
    probe_measure = "special-placement"
    name = "special-token-normalized"
    severity = "error"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.transformers is None or a.tj is None or a.crate.refused is not None:
            return
        if not S.canonical(a.crate.normalizer):
            return  # without a normalizer the normalized text is the text: nothing to differ
        t_norm = a.transformers.normalizer(a.crate)
        same_norm = S.canonical(t_norm) == S.canonical(a.crate.normalizer)
        tokens = [
            c
            for c, f in a.crate.added.items()
            if f.get("special")
            and f.get("normalized")
            and (not same_norm or not a.transformers.added.get(c, {}).get("normalized"))
        ]
        if not tokens:
            return
        why = (
            f"transformers builds {a.cls()}, which "
            + (f"normalizes with `{S.describe(t_norm)}`" if S.canonical(t_norm) else "uses no normalizer")
            if not same_norm
            else "tokenizer_config.json's `added_tokens_decoder` has transformers match them on the raw text"
        )
        yield self.edit_finding(
            ctx,
            a,
            f"special token{'s' if len(tokens) > 1 else ''} {backticked(tokens)} {'are' if len(tokens) > 1 else 'is'} "
            "`normalized: true`: "
            f"candle's tokenizers crate looks for {'them' if len(tokens) > 1 else 'it'} after tokenizer.json's "
            "normalizer "
            f"`{S.describe(a.crate.normalizer)}`, {why}: text with {'them' if len(tokens) > 1 else 'it'} inside gets "
            "other ids",
            key="added_tokens",
            location=location(a.tj.added_token_position(tokens[0])),
            transformers_value={c: False for c in tokens},
            candle_value={c: True for c in tokens},
            edit={"normalized_false": tokens},
            expect="special-inside",
        )
