"""PK501 normalizer-rebuilt-by-class: The tokenizer class transformers 5 picks replaces tokenizer.json's normalizer."""

from __future__ import annotations

from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import RebuiltPart
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.findings import Finding
    from portkit.rules.base import Context
    from portkit.rules.tokenizer.analysis import TokenizerAnalysis


class NormalizerRebuiltByClass(RebuiltPart):
    """The tokenizer class transformers 5 picks replaces tokenizer.json's normalizer.

    ## What it does
    Finds the class `AutoTokenizer` instantiates (tokenizer_config.json's `tokenizer_class`, or
    the one config.json's `model_type` forces) and, for a class that rebuilds the pipeline
    (`LlamaTokenizer`, `GPT2Tokenizer`, `Qwen2Tokenizer`, `CodeGenTokenizer`, `GemmaTokenizer`,
    `GPTNeoXTokenizer`), compares the normalizer it builds with the one tokenizer.json holds.

    ## Why is this bad?
    A candle program tokenizes with tokenizer.json as written. The classic Llama 2 / Mistral /
    Phi-3 file does SentencePiece's whitespace handling in a normalizer (`Prepend("▁")` then
    `Replace(" " -> "▁")`, no pre-tokenizer); `LlamaTokenizer` drops it and uses a `Metaspace`
    pre-tokenizer instead. Text with a leading space, repeated spaces, or a space next to a
    special token then gets other ids: Llama 2 `" Hello world"` is `[1, 29871, 15043, 3186]` in
    candle and `[1, 15043, 3186]` in transformers. `GemmaTokenizer` keeps only the `Replace`: a
    Gemma vocabulary written by the Llama converter gets "▁" before every text in candle alone.
    `Qwen2Tokenizer` and `GPTNeoXTokenizer` add `NFC` to a file saved without it: text with
    decomposed accents gets other ids.

    ## Example
    tokenizer.json `"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", ...},
    {"type": "Replace", ...}]}` with tokenizer_config.json `"tokenizer_class": "LlamaTokenizer"`.

    Use instead: the pipeline transformers builds, saved into tokenizer.json
    (`"normalizer": null`, `"pre_tokenizer": {"type": "Metaspace", ...}`, as transformers 5's
    `save_pretrained` writes it), and `"tokenizer_class": "TokenizersBackend"`, so that no class
    rebuilds it.

    ## Fix
    `portkit fix --write` writes the normalizer and pre-tokenizer transformers builds into
    tokenizer.json (every other key kept); `portkit verify` then shows equal ids.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (candle's `tokenizers::Tokenizer`: the
    crate 0.22 with `onig`, candle-core-0.11.0/Cargo.toml:273-276); tokenizers-0.22.2
    src/tokenizer/mod.rs:438-442 (`from_file` deserializes the file as is) and :827-846
    (`encode` runs its normalizer). transformers 5.24 tokenization_utils_tokenizers.py:114-199
    (only `TokenizersBackend` or a class without `__init__` loads the file as is),
    models/llama/tokenization_llama.py:116-133, models/qwen2/tokenization_qwen2.py:61-86,
    models/gemma/tokenization_gemma.py:91-98, models/gpt_neox/tokenization_gpt_neox.py:126-130.

    ## Verification
    tokens: verify encodes its corpus (leading and repeated spaces, special tokens with and
    without spaces around them, unicode) with the crate and with transformers; CONFIRMED when
    the finding's edit (this normalizer, with the other findings' edits applied) removes
    differing ids.

    ## References
    - docs/tokenizers.md
    - https://github.com/huggingface/transformers/pull/47700 (`LlamaTokenizer`'s Metaspace against the
      `Prepend`/`Replace` normalizer Llama 2 ships)
    - https://github.com/huggingface/transformers/pull/24565 (`legacy`)
    """

    code = "PK501"
    name = "normalizer-rebuilt-by-class"
    part = key = "normalizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the normalizer and pre-tokenizer transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(
        self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference
    ) -> tuple[str, dict[str, Any], str]:
        r_pre, t_pre = crate.pre_tokenizer, tf.pre_tokenizer(crate)
        prepends = S.prepend_scheme(d.crate, None) == "always"
        t_scheme = S.prepend_scheme(d.transformers, t_pre)
        if prepends and t_scheme is not None:
            texts = (
                "text with a leading space, repeated spaces or a space next to a special token gets other ids (` "
                "Hello` is `▁▁Hello` in candle, `▁Hello` in transformers)"
            )
            # the edit that measures this finding alone: transformers' Metaspace in place of the
            # normalizer, with the crate's own prepend scheme (PK502 measures the scheme)
            r_scheme = S.prepend_scheme(d.crate, r_pre) or "always"
            meta = next((m for m in S.canonical(t_pre) if S.is_step(m, "Metaspace")), S.metaspace(r_scheme))
            edit = {
                "normalizer": d.transformers,
                "pre_tokenizer": {**S.metaspace(r_scheme), "replacement": meta["replacement"], "split": meta["split"]},
            }
            expect = "leading-space"
        elif prepends:
            # transformers adds no prefix at all (`GemmaTokenizer`: a `Replace` alone)
            texts = (
                'every text gets other ids: candle puts "▁" before the text and after each special token (`Hello` '
                "is `▁Hello` in candle, `Hello` in transformers)"
            )
            edit, expect = {"normalizer": d.transformers}, "every-text"
        else:
            texts = "text the two normalizers treat differently gets other ids" + (
                " (NFC composes decomposed accents: `e\\u0301` is one character in transformers, two in candle)"
                if any(S.is_step(s, "NFC") for s in S.canonical(d.transformers))
                else ""
            )
            edit, expect = {"normalizer": d.transformers}, "unicode"
        t_desc = (
            f"normalizes with `{S.describe(d.transformers)}`" if S.canonical(d.transformers) else "uses no normalizer"
        )
        r_desc = (
            f"runs tokenizer.json's normalizer `{S.describe(d.crate)}`"
            if S.canonical(d.crate)
            else "runs none (tokenizer.json has no normalizer)"
        )
        return (
            f"transformers builds {a.cls()}, which {t_desc}; candle's tokenizers crate {r_desc}: {texts}",
            edit,
            expect,
        )

    def tokenizer_changes(self, finding: Finding, ctx: Context) -> dict[str, Any] | None:
        """The normalizer transformers builds, and its pre-tokenizer too when the finding's edit
        sets one (the probe patch keeps the crate's prepend scheme, to measure this finding
        alone; fix writes what transformers builds)."""
        a = analysis(ctx)
        assert a.transformers is not None and a.crate is not None
        out = {"normalizer": a.transformers.normalizer(a.crate)}
        if "pre_tokenizer" in (finding.fix.edits if finding.fix else {}):
            out["pre_tokenizer"] = a.transformers.pre_tokenizer(a.crate)
        return out
