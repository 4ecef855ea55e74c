"""PK502 prefix-space-after-special-token: candle's crate puts "▁" before the text right after a
special token; transformers does not."""

from __future__ import annotations

from portkit.rules.tokenizer.base import RebuiltPart
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.rules.tokenizer.analysis import TokenizerAnalysis


class PrependSchemeAfterSpecialToken(RebuiltPart):
    """candle's crate puts "▁" before the text right after a special token; transformers does not.

    ## What it does
    Compares where each side adds SentencePiece's "▁" prefix: a `Prepend("▁")` normalizer or a
    `Metaspace` with `prepend_scheme: "always"` adds it to every segment the special tokens
    leave, `"first"` only at the start of the input. `LlamaTokenizer` uses `"first"` unless
    tokenizer_config.json says `"legacy": true` (the default is `false`).

    ## Why is this bad?
    Every chat template puts text right after a special token. Phi-3 `"<|user|>\\nHi!"` starts
    the turn with `▁Hi` (6324) in candle and `Hi` (18567) in transformers, so every turn of
    every conversation differs; TinyLlama `"Hello</s>world"` ends in `▁world` in candle and
    `world` in transformers.

    ## Example
    tokenizer_config.json `"tokenizer_class": "LlamaTokenizer", "legacy": false` over a
    tokenizer.json whose normalizer is `Prepend("▁") + Replace(" " -> "▁")`.

    Use instead: tokenizer.json with `"pre_tokenizer": {"type": "Metaspace", "replacement":
    "▁", "prepend_scheme": "first", "split": false}` and no normalizer.

    ## Fix
    `portkit fix --write` writes the pre-tokenizer transformers builds into tokenizer.json.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/normalizers/prepend.rs (prepends to every normalized segment),
    src/pre_tokenizers/metaspace.rs (`PrependScheme::First` only for the first segment).
    transformers 5.24 models/llama/tokenization_llama.py:120-122,
    tokenization_utils_base.py:3770-3777 (`legacy` false: `"first"`).

    ## Verification
    tokens: verify's corpus has text right after each special token and the chat template
    rendered by transformers; CONFIRMED when this edit removes differing ids there.

    ## References
    - docs/tokenizers.md
    - https://github.com/huggingface/transformers/pull/24565 (`legacy=False`: no extra space after a special token)
    - https://github.com/ggml-org/llama.cpp/issues/7094 (spaces after added tokens with `legacy: true`)
    """

    code = "PK502"
    name = "prefix-space-after-special-token"
    part, key = "prepend_scheme", "pre_tokenizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the pre-tokenizer transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        r_steps = S.canonical(crate.pre_tokenizer)
        if any(S.is_step(s, "Metaspace") for s in r_steps):
            steps = [dict(s, prepend_scheme=d.transformers) if S.is_step(s, "Metaspace") else s for s in r_steps]
            pre: Any = steps[0] if len(steps) == 1 else {"type": "Sequence", "pretokenizers": steps}
        else:
            pre = tf.pre_tokenizer(crate)
        after = "the text right after a special token (every chat turn)"
        where = '`Prepend("▁")` normalizer' if S.prepend_scheme(crate.normalizer, None) == "always" else "pre-tokenizer"
        message = (
            f"transformers builds {a.cls()} with `Metaspace(prepend_scheme={d.transformers})`; candle's tokenizers "
            "crate adds "
            f'"▁" {"to every segment" if d.crate == "always" else "as " + str(d.crate)} through tokenizer.json\'s '
            f"{where}: {after} starts with another id in candle (`▁Hi` vs `Hi`)"
        )
        return message, {"pre_tokenizer": pre}, "after-special"
