"""PK511 post-processor-rebuilt-by-class: The tokenizer class transformers 5 picks adds other
special tokens than tokenizer.json's post-processor."""

from __future__ import annotations

from portkit.rules.base import backticked
from portkit.rules.tokenizer.base import RebuiltPart
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.rules.tokenizer.analysis import TokenizerAnalysis


class PostProcessorRebuiltByClass(RebuiltPart):
    """The tokenizer class transformers 5 picks adds other special tokens than tokenizer.json's post-processor.

    ## What it does
    For a class that rebuilds the post-processor (`GPTNeoXTokenizer`: a `TemplateProcessing`
    that adds no special token, since transformers drops `add_bos_token`/`add_eos_token` from
    tokenizer_config.json when tokenizer.json exists), compares the special tokens it puts
    around a text with those tokenizer.json's post-processor puts there.

    ## Why is this bad?
    A candle program encodes its prompt with `encode(text, true)`, which runs tokenizer.json's
    post-processor. OLMo-7B-hf's tokenizer.json appends `<|endoftext|>` to every sequence while
    its tokenizer_config.json says `add_eos_token: false`: transformers feeds the prompt as is,
    candle feeds it followed by an end of text, and the model answers as if the document had
    ended.

    ## Example
    tokenizer.json `"post_processor": {"type": "TemplateProcessing", "single": [{"Sequence":
    {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}], ...}`
    with tokenizer_config.json `"tokenizer_class": "GPTNeoXTokenizer"`.

    Use instead: the post-processor transformers builds (`"single": [{"Sequence": {"id": "A",
    "type_id": 0}}]`, no special tokens) in tokenizer.json, and `"tokenizer_class":
    "TokenizersBackend"`.

    ## Fix
    `portkit fix --write` writes the post-processor transformers builds into tokenizer.json.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/mod.rs:1231-1233 (`post_process` runs tokenizer.json's
    post-processor), src/processors/template.rs:544-575 (special tokens added when
    `add_special_tokens` is true). transformers 5.24 models/gpt_neox/tokenization_gpt_neox.py:142-148
    (`update_post_processor()` after the rebuild), tokenization_utils_tokenizers.py:636-660,
    tokenization_utils_base.py:1818-1820.

    ## Verification
    tokens: every text of verify's corpus encoded with special tokens; CONFIRMED when this edit
    removes differing ids.

    ## References
    - https://github.com/huggingface/transformers/pull/47988 (OLMo-7B-hf: tokenizer.json's `TemplateProcessing` appends
      EOS, `add_eos_token` is false)
    - docs/tokenizers.md
    """

    code = "PK511"
    name = "post-processor-rebuilt-by-class"
    part = key = "post_processor"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the post-processor transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        r_tpl, t_tpl = d.detail["crate"], d.detail["transformers"] or ["$A"]
        changes = []
        for side, ours, theirs in (("candle", r_tpl, t_tpl), ("transformers", t_tpl, r_tpl)):
            cut = ours.index("$A") if "$A" in ours else len(ours)
            for where, toks in (("before", ours[:cut]), ("after", ours[cut + 1 :])):
                extra = [t for t in toks if not t.startswith("$") and toks.count(t) > theirs.count(t)]
                if extra:
                    changes.append(f"{side} puts {backticked(extra)} {where} the text")
        message = (
            f"transformers builds {a.cls()}, whose post-processor makes a text `{' '.join(t_tpl)}`; candle's "
            "tokenizers crate "
            f"runs tokenizer.json's `{' '.join(r_tpl)}`: every text encoded with special tokens gets other ids "
            f"({'; '.join(changes) or 'other special tokens'})"
        )
        return message, {"post_processor": d.transformers}, "every-text"
