"""PK503 pre-tokenizer-rebuilt-by-class: The tokenizer class transformers 5 picks drops or changes
steps of tokenizer.json's pre-tokenizer."""

from __future__ import annotations

from portkit.rules.base import backticked
from portkit.rules.tokenizer.base import RebuiltPart
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.rules.tokenizer.analysis import TokenizerAnalysis


class PreTokenizerRebuiltByClass(RebuiltPart):
    """The tokenizer class transformers 5 picks drops or changes steps of tokenizer.json's pre-tokenizer.

    ## What it does
    Compares the pre-tokenizer steps of tokenizer.json with those the class `AutoTokenizer`
    picks builds (`GPT2Tokenizer`: a plain `ByteLevel`; `Qwen2Tokenizer`: its own `Split`
    regex then `ByteLevel`; `GPTNeoXTokenizer`: `ByteLevel` with tokenizer_config.json's
    `add_prefix_space`; `GemmaTokenizer`: a `Split` on " ") and names the steps one side has and
    the other lacks. A `Split` on " " after a normalizer that replaces every space is a no-op
    and counts as no step (Gemma's files with and without it give the same ids).

    ## Why is this bad?
    SmolLM-style files split digits one by one (`Digits(individual_digits=true)` before
    `ByteLevel`); `GPT2Tokenizer` rebuilds a plain `ByteLevel`, so transformers keeps `2024`
    whole where candle feeds four ids. A changed `Split` regex or `add_prefix_space` moves
    word boundaries the same way.

    ## Example
    tokenizer.json `"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits",
    "individual_digits": true}, {"type": "ByteLevel", ...}]}` with `"tokenizer_class":
    "GPT2Tokenizer"`.

    Use instead: the pre-tokenizer transformers builds in tokenizer.json and `"tokenizer_class":
    "TokenizersBackend"`.

    ## Fix
    `portkit fix --write` writes the pre-tokenizer transformers builds into tokenizer.json.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/pre_tokenizers/sequence.rs and digits.rs, src/tokenizer/mod.rs:724-728
    (the pre-tokenizer runs on the normalized text). transformers 5.24
    models/gpt2/tokenization_gpt2.py:109-120, models/qwen2/tokenization_qwen2.py:61-86,
    models/gpt_neox/tokenization_gpt_neox.py:127-129, models/gemma/tokenization_gemma.py:91-93.

    ## Verification
    tokens: verify's corpus has digits, code and spaces; CONFIRMED when this edit removes
    differing ids.

    ## References
    - docs/tokenizers.md
    - https://github.com/huggingface/transformers/issues/43062 (`GemmaTokenizer`'s `Split` on " " after its `Replace` is
      a no-op)
    """

    code = "PK503"
    name = "pre-tokenizer-rebuilt-by-class"
    part = key = "pre_tokenizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the pre-tokenizer transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        dropped, added = d.detail.get("dropped", []), d.detail.get("added", [])
        parts = []
        if dropped:
            parts.append(f"drops tokenizer.json's {backticked([S.describe(s) for s in dropped])}")
        if added:
            parts.append(f"uses {backticked([S.describe(s) for s in added])} instead")
        digits = any(S.is_step(s, "Digits") for s in dropped)
        texts = (
            "numbers get other ids (candle splits every digit)"
            if digits
            else "text split at other boundaries gets other ids"
        )
        message = f"transformers builds {a.cls()}, whose pre-tokenizer {' and '.join(parts)}: {texts}"
        return message, {"pre_tokenizer": d.transformers}, "digits" if digits else "every-text"
