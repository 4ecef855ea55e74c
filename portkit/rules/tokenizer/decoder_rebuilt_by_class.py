"""PK504 decoder-rebuilt-by-class: The tokenizer class transformers 5 picks decodes ids with another
decoder than tokenizer.json's."""

from __future__ import annotations

from portkit.rules.tokenizer.base import RebuiltPart
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.rules.tokenizer.analysis import TokenizerAnalysis


class DecoderRebuiltByClass(RebuiltPart):
    """The tokenizer class transformers 5 picks decodes ids with another decoder than tokenizer.json's.

    ## What it does
    Compares the decoder the class `AutoTokenizer` picks builds with tokenizer.json's.

    ## Why is this bad?
    The ids are the same, the text is not: a candle program decodes its generated ids with
    tokenizer.json's decoder, and the text it prints differs from transformers' (a leading
    space kept or stripped, "▁" left in, bytes not fused).

    ## Example
    tokenizer.json `"decoder": {"type": "Metaspace", ...}` with `"tokenizer_class":
    "LlamaTokenizer"`, which decodes with `Replace("▁" -> " ") + ByteFallback + Fuse + Strip`.

    Use instead: the decoder transformers builds, in tokenizer.json. (`GemmaTokenizer` decodes
    without the `Strip`: a Gemma vocabulary written by the Llama converter drops the leading
    space of a decoded text in candle alone.)

    ## Fix
    `portkit fix --write` writes the decoder transformers builds into tokenizer.json.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/mod.rs:891-911 (`decode`). transformers 5.24
    models/llama/tokenization_llama.py:124-133, models/gpt2/tokenization_gpt2.py:120,
    models/gemma/tokenization_gemma.py:95-97, models/gpt_neox/tokenization_gpt_neox.py:130.

    ## Verification
    tokens: verify decodes the same ids on both sides; CONFIRMED when the texts differ.

    ## References
    - docs/tokenizers.md
    """

    code = "PK504"
    probe_measure = "decodes"
    name = "decoder-rebuilt-by-class"
    part = key = "decoder"
    severity = "warning"
    fix_availability = "always"
    fix_title = "Write the decoder transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        message = (
            f"transformers builds {a.cls()}, which decodes with `{S.describe(d.transformers)}`; candle's tokenizers "
            f"crate decodes with tokenizer.json's `{S.describe(d.crate)}`: the same ids decode to other text"
        )
        return message, {"decoder": d.transformers}, "decode"
