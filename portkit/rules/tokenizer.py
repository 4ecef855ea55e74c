"""PK5xx: the ids a candle program feeds its model, against the ids transformers 5 feeds.

A candle program loads tokenizer.json with the `tokenizers` crate (0.22.2, candle-core 0.11.0's
dependency) and encodes with every part of it; transformers 5 picks the class tokenizer_config.json
names and, for many classes, rebuilds the normalizer, pre-tokenizer and decoder in Python. These
rules read both (`portkit.semantics.tokenizer`) and name each difference, the texts it changes and
where each side's behaviour comes from. Then where generation stops (eos ids), and what
`generate()` applies that a candle loop does not (a template's BOS, sampling defaults).

Lint never runs the crate or transformers; `portkit verify` encodes a corpus on both sides and
confirms each finding from the ids.
"""

from __future__ import annotations

from functools import cached_property

from portkit.rules.base import Context, Rule, backticked, location
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, ClassVar, Iterable

    from portkit.findings import Finding
    from portkit.model.tokenizer_files import TokenizerFacts, TokenizerJson


class TokenizerAnalysis:
    """Both readings of one directory's tokenizer files, computed once per lint."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.files: TokenizerFacts | None = ctx.facts.tokenizer
        self.tj: TokenizerJson | None = self.files.tokenizer if self.files else None

    @cached_property
    def config(self) -> dict[str, Any] | None:
        doc = self.ctx.facts.config
        return doc.value if doc is not None and isinstance(doc.value, dict) else None

    @cached_property
    def generation(self) -> dict[str, Any] | None:
        doc = self.ctx.facts.generation_config
        return doc.value if doc is not None and isinstance(doc.value, dict) else None

    @cached_property
    def crate(self) -> S.CrateTokenizer | None:
        return S.crate_tokenizer(self.tj) if self.tj is not None else None

    @cached_property
    def transformers(self) -> S.TransformersTokenizer | None:
        if self.crate is None or self.tj is None or self.files is None:
            return None
        stm = self.files.special_tokens_map.value if self.files.special_tokens_map else None
        return S.transformers_tokenizer(self.crate, self.files.config_value, stm if isinstance(stm, dict) else None, self.config, self.tj.text)

    @cached_property
    def differences(self) -> dict[str, S.Difference]:
        if self.crate is None or self.transformers is None or self.crate.refused is not None:
            return {}
        return {d.part: d for d in S.differences(self.crate, self.transformers)}

    def cls(self) -> str:
        """"`LlamaTokenizer` (tokenizer_config.json names `LlamaTokenizer`)"."""
        tf = self.transformers
        assert tf is not None
        return f"`{tf.choice.name}` ({tf.choice.why})"


def analysis(ctx: Context) -> TokenizerAnalysis:
    cached = ctx.__dict__.get("_tokenizer_analysis")
    if cached is None:
        cached = ctx.__dict__["_tokenizer_analysis"] = TokenizerAnalysis(ctx)
    return cached


class _TokenizerRule(Rule):
    group = "tokenizer"
    probe_run = "tokens"  # verify's tokens section: the ids on both sides, before any forward
    families = ("*",)  # the tokenizer is read the same way whatever module runs the model
    needs = ("tokenizer",)
    probe_kind = "tokens"

    def at(self, a: TokenizerAnalysis, key: str) -> Any:
        assert a.tj is not None
        return location(a.tj.position(key))

    def edit_finding(self, ctx: Context, a: TokenizerAnalysis, message: str, *, key: str, transformers_value: Any, candle_value: Any,
                     edit: dict[str, Any], expect: str, location: Any = None, severity: Any = None) -> Finding:  # fmt: skip
        """A finding on tokenizer.json whose fix and whose verify probe are the same edit."""
        assert a.tj is not None
        return self.finding(
            ctx,
            message,
            filename=a.tj.path,
            location=location or self.at(a, key),
            transformers_value=transformers_value,
            candle_value=candle_value,
            fix_edits=edit,
            probe_patch=edit,
            expect=expect,
            severity=severity,
        )


class _RebuiltPart(_TokenizerRule):
    """A rule about one part of the pipeline the class transformers picks builds otherwise
    (`S.differences`): one finding at that part's key, whose edit is what transformers builds."""

    part: ClassVar[str]  # a `S.Difference.part`
    key: ClassVar[str]  # the tokenizer.json key the finding points at

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        d = a.differences.get(self.part)
        if d is None or a.crate is None or a.transformers is None:
            return
        message, edit, expect = self.describe(a, a.crate, a.transformers, d)
        yield self.edit_finding(ctx, a, message, key=self.key, transformers_value=d.transformers, candle_value=d.crate, edit=edit, expect=expect)

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        """(message, the edit that fixes and measures this finding, the texts it changes)."""
        raise NotImplementedError


# --------------------------------------------------------------------------- the pipeline


class NormalizerRebuiltByClass(_RebuiltPart):
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
    - https://github.com/huggingface/transformers/pull/47700 (`LlamaTokenizer`'s Metaspace against the `Prepend`/`Replace` normalizer Llama 2 ships)
    - https://github.com/huggingface/transformers/pull/24565 (`legacy`)
    """

    code = "PK501"
    name = "normalizer-rebuilt-by-class"
    part = key = "normalizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the normalizer and pre-tokenizer transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        r_pre, t_pre = crate.pre_tokenizer, tf.pre_tokenizer(crate)
        prepends = S.prepend_scheme(d.crate, None) == "always"
        t_scheme = S.prepend_scheme(d.transformers, t_pre)
        if prepends and t_scheme is not None:
            texts = "text with a leading space, repeated spaces or a space next to a special token gets other ids (` Hello` is `▁▁Hello` in candle, `▁Hello` in transformers)"
            # the edit that measures this finding alone: transformers' Metaspace in place of the
            # normalizer, with the crate's own prepend scheme (PK502 measures the scheme)
            r_scheme = S.prepend_scheme(d.crate, r_pre) or "always"
            meta = next((m for m in S.canonical(t_pre) if S.is_step(m, "Metaspace")), S.metaspace(r_scheme))
            edit = {"normalizer": d.transformers, "pre_tokenizer": {**S.metaspace(r_scheme), "replacement": meta["replacement"], "split": meta["split"]}}
            expect = "leading-space"
        elif prepends:
            # transformers adds no prefix at all (`GemmaTokenizer`: a `Replace` alone)
            texts = "every text gets other ids: candle puts \"▁\" before the text and after each special token (`Hello` is `▁Hello` in candle, `Hello` in transformers)"
            edit, expect = {"normalizer": d.transformers}, "every-text"
        else:
            texts = "text the two normalizers treat differently gets other ids" + (
                " (NFC composes decomposed accents: `e\\u0301` is one character in transformers, two in candle)"
                if any(S.is_step(s, "NFC") for s in S.canonical(d.transformers))
                else ""
            )
            edit, expect = {"normalizer": d.transformers}, "unicode"
        t_desc = f"normalizes with `{S.describe(d.transformers)}`" if S.canonical(d.transformers) else "uses no normalizer"
        r_desc = f"runs tokenizer.json's normalizer `{S.describe(d.crate)}`" if S.canonical(d.crate) else "runs none (tokenizer.json has no normalizer)"
        return f"transformers builds {a.cls()}, which {t_desc}; candle's tokenizers crate {r_desc}: {texts}", edit, expect


class PrependSchemeAfterSpecialToken(_RebuiltPart):
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

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        r_steps = S.canonical(crate.pre_tokenizer)
        if any(S.is_step(s, "Metaspace") for s in r_steps):
            steps = [dict(s, prepend_scheme=d.transformers) if S.is_step(s, "Metaspace") else s for s in r_steps]
            pre: Any = steps[0] if len(steps) == 1 else {"type": "Sequence", "pretokenizers": steps}
        else:
            pre = tf.pre_tokenizer(crate)
        after = "the text right after a special token (every chat turn)"
        where = "`Prepend(\"▁\")` normalizer" if S.prepend_scheme(crate.normalizer, None) == "always" else "pre-tokenizer"
        message = (
            f"transformers builds {a.cls()} with `Metaspace(prepend_scheme={d.transformers})`; candle's tokenizers crate adds "
            f"\"▁\" {'to every segment' if d.crate == 'always' else 'as ' + str(d.crate)} through tokenizer.json's {where}: "
            f"{after} starts with another id in candle (`▁Hi` vs `Hi`)"
        )
        return message, {"pre_tokenizer": pre}, "after-special"


class PreTokenizerRebuiltByClass(_RebuiltPart):
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
    - https://github.com/huggingface/transformers/issues/43062 (`GemmaTokenizer`'s `Split` on " " after its `Replace` is a no-op)
    """

    code = "PK503"
    name = "pre-tokenizer-rebuilt-by-class"
    part = key = "pre_tokenizer"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the pre-tokenizer transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        dropped, added = d.detail.get("dropped", []), d.detail.get("added", [])
        parts = []
        if dropped:
            parts.append(f"drops tokenizer.json's {backticked([S.describe(s) for s in dropped])}")
        if added:
            parts.append(f"uses {backticked([S.describe(s) for s in added])} instead")
        digits = any(S.is_step(s, "Digits") for s in dropped)
        texts = "numbers get other ids (candle splits every digit)" if digits else "text split at other boundaries gets other ids"
        message = f"transformers builds {a.cls()}, whose pre-tokenizer {' and '.join(parts)}: {texts}"
        return message, {"pre_tokenizer": d.transformers}, "digits" if digits else "every-text"


class DecoderRebuiltByClass(_RebuiltPart):
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
    name = "decoder-rebuilt-by-class"
    part = key = "decoder"
    severity = "warning"
    fix_availability = "always"
    fix_title = "Write the decoder transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        message = (
            f"transformers builds {a.cls()}, which decodes with `{S.describe(d.transformers)}`; candle's tokenizers crate "
            f"decodes with tokenizer.json's `{S.describe(d.crate)}`: the same ids decode to other text"
        )
        return message, {"decoder": d.transformers}, "decode"


class PostProcessorRebuiltByClass(_RebuiltPart):
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
    - https://github.com/huggingface/transformers/pull/47988 (OLMo-7B-hf: tokenizer.json's `TemplateProcessing` appends EOS, `add_eos_token` is false)
    - docs/tokenizers.md
    """

    code = "PK511"
    name = "post-processor-rebuilt-by-class"
    part = key = "post_processor"
    severity = "error"
    fix_availability = "always"
    fix_title = "Write the post-processor transformers builds into tokenizer.json (`portkit fix --write`)"

    def describe(self, a: TokenizerAnalysis, crate: S.CrateTokenizer, tf: S.TransformersTokenizer, d: S.Difference) -> tuple[str, dict[str, Any], str]:
        r_tpl, t_tpl = d.detail["crate"], d.detail["transformers"] or ["$A"]
        changes = []
        for side, ours, theirs in (("candle", r_tpl, t_tpl), ("transformers", t_tpl, r_tpl)):
            cut = ours.index("$A") if "$A" in ours else len(ours)
            for where, toks in (("before", ours[:cut]), ("after", ours[cut + 1 :])):
                extra = [t for t in toks if not t.startswith("$") and toks.count(t) > theirs.count(t)]
                if extra:
                    changes.append(f"{side} puts {backticked(extra)} {where} the text")
        message = (
            f"transformers builds {a.cls()}, whose post-processor makes a text `{' '.join(t_tpl)}`; candle's tokenizers crate "
            f"runs tokenizer.json's `{' '.join(r_tpl)}`: every text encoded with special tokens gets other ids "
            f"({'; '.join(changes) or 'other special tokens'})"
        )
        return message, {"post_processor": d.transformers}, "every-text"


class SpecialTokenNormalized(_TokenizerRule):
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
    name = "special-token-normalized"
    severity = "error"
    fix_availability = "always"
    fix_title = "Set `normalized` to false on the special tokens in tokenizer.json (`portkit fix --write`)"

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
            if f.get("special") and f.get("normalized") and (not same_norm or not a.transformers.added.get(c, {}).get("normalized"))
        ]
        if not tokens:
            return
        why = (
            f"transformers builds {a.cls()}, which " + (f"normalizes with `{S.describe(t_norm)}`" if S.canonical(t_norm) else "uses no normalizer")
            if not same_norm
            else "tokenizer_config.json's `added_tokens_decoder` has transformers match them on the raw text"
        )
        yield self.edit_finding(
            ctx,
            a,
            f"special token{'s' if len(tokens) > 1 else ''} {backticked(tokens)} {'are' if len(tokens) > 1 else 'is'} `normalized: true`: "
            f"candle's tokenizers crate looks for {'them' if len(tokens) > 1 else 'it'} after tokenizer.json's normalizer "
            f"`{S.describe(a.crate.normalizer)}`, {why}: text with {'them' if len(tokens) > 1 else 'it'} inside gets other ids",
            key="added_tokens",
            location=location(a.tj.added_token_position(tokens[0])),
            transformers_value={c: False for c in tokens},
            candle_value={c: True for c in tokens},
            edit={"normalized_false": tokens},
            expect="special-inside",
        )


class PaddingSavedInTokenizer(_TokenizerRule):
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
            bits.append(f"padding ({f'to {fixed}' if fixed is not None else 'to the longest'} with `{pad.get('pad_token')}`)")
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
            cut = f"every encode longer than {length} tokens is cut" if isinstance(length, int) else "long encodes are cut"
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
            f"tokenizer.json saves {what}: candle's tokenizers crate applies {'them' if len(bits) > 1 else 'it'} to every "
            f"`encode`, {tail}",
            key="padding" if pad is not None else "truncation",
            transformers_value={"padding": None, "truncation": None},
            candle_value={"padding": pad, "truncation": trunc},
            edit={"padding": None, "truncation": None},
            expect="every-text" if pad is not None else "long-text",
            severity=severity,
        )


class TokenizerRefusedByCrate(_TokenizerRule):
    """The tokenizers crate candle uses cannot load tokenizer.json.

    ## What it does
    Reads tokenizer.json the way the crate's serde deserializer does and predicts its refusal:
    a `version` other than "1.0", no `model`, an unknown model or component `type`, BPE without
    vocab or merges, a merge string that does not split into two tokens at one space.

    ## Why is this bad?
    `Tokenizer::from_file` fails in the candle program before anything runs. A merge of three
    spaces (`"   "`) fails in both runtimes; a file with merges saved as pairs loads in 0.22 but
    fails in programs pinned to tokenizers 0.19 or older ("data did not match any variant of
    untagged enum ModelWrapper").

    ## Example
    `"merges": ["▁ t", "   ", ...]`.

    Use instead: merges that each hold two tokens separated by one space (or as pairs).

    ## Fix
    None automatic: regenerate tokenizer.json with the `tokenizers` library.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/serialization.rs:108-151, src/models/mod.rs:73-135,
    src/models/bpe/model.rs:286-303, src/models/bpe/serialization.rs:131-154.

    ## Verification
    crash: verify loads tokenizer.json with the crate; CRASH-CONFIRMED when it fails with the
    predicted message.

    ## References
    - https://github.com/huggingface/tokenizers/pull/909 (merges and spaces)
    - https://github.com/allenai/open-instruct/issues/738 (merges saved as pairs, read by tokenizers 0.19: "data did not match any variant of untagged enum ModelWrapper")
    """

    code = "PK507"
    name = "tokenizer-refused-by-crate"
    severity = "error"
    effect = "load-error"
    fix_title = "Regenerate tokenizer.json with the `tokenizers` library; no edit portkit can make fixes it"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.crate.refused is None or a.tj is None:
            return
        msg = a.crate.refused
        key = "merges" if msg.startswith(("Merges", "Missing vocab")) else "model" if "Model" in msg else "version" if msg.startswith("Unknown tokenizer version") else None
        for k, _, _, enum in S._COMPONENTS:
            if enum in msg:
                key = k
        yield self.finding(
            ctx,
            f"the tokenizers crate 0.22.2 that candle uses refuses tokenizer.json: `{msg}`; `Tokenizer::from_file` fails before anything runs",
            filename=a.tj.path,
            location=self.at(a, key) if key else location(None),
            candle_value=msg,
            expect=msg,
        )


# --------------------------------------------------------------------------- generation


class EosStopSetBeyondTokenizerEos(_TokenizerRule):
    """`generate()` stops on more (or other) ids than the tokenizer's eos token.

    ## What it does
    Compares the ids transformers' `generate()` stops on (generation_config.json's
    `eos_token_id`, else config.json's) with the id of the tokenizer's `eos_token`.

    ## Why is this bad?
    A candle program stops where it is told, usually on `tokenizer.token_to_id(eos_token)`.
    Llama 3.1 Instruct stops on [128001, 128008, 128009] while its tokenizer's eos is
    `<|eot_id|>` (128009); Qwen2.5 stops on [151645, 151643] (eos `<|im_end|>`); Phi-3's
    tokenizer eos `<|endoftext|>` is not how a turn ends (`<|end|>`). Stopping on the
    tokenizer's eos alone runs past the end of the answer.

    ## Example
    generation_config.json `{"eos_token_id": [128001, 128008, 128009]}` with tokenizer_config.json
    `"eos_token": "<|eot_id|>"`.

    ## Fix
    Stop your candle loop on every id the message lists (`LlamaEosToks::Multiple` for
    candle's llama). No file edit: both files are right for transformers.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:31-36 (`LlamaEosToks`: single or multiple);
    candle-transformers-0.11.0/src/generation/mod.rs:114 (`sample` knows no eos).

    ## Verification
    static-only, reported NOT-PROBED with why: a fact about the files; verify's greedy reference stops on generation_config's ids.

    ## References
    - https://github.com/huggingface/candle/issues/2085 (llama3 instruct ends turns with `<|eot_id|>`)
    - docs/tokenizers.md
    """

    code = "PK508"
    name = "eos-stop-set-beyond-tokenizer-eos"
    severity = "warning"
    fix_title = "Stop the candle generation loop on every id `generate()` stops on"
    probe_kind = "static-only"
    not_probed = "the ids a candle loop stops on are the program's choice, not a number candle computes (verify's greedy comparison already stops where `generate()` does)"

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.semantics.transformers import eos_ids

        a = analysis(ctx)
        if a.crate is None or a.transformers is None or a.tj is None:
            return
        gen, cfg = a.generation, a.config
        if gen is not None and "eos_token_id" in gen:
            stop, src, doc = eos_ids(gen["eos_token_id"]), "generation_config.json", ctx.facts.generation_config
        elif cfg is not None and "eos_token_id" in cfg:
            stop, src, doc = eos_ids(cfg["eos_token_id"]), "config.json", ctx.facts.config
        else:
            return
        eos = a.transformers.eos_token
        eos_id = S.token_id(a.tj, a.crate, eos)
        if not stop or eos_id is None or set(stop) == {eos_id}:
            return
        missed = [i for i in stop if i != eos_id]
        id_to_token = {v: k for k, v in a.crate.added_ids.items()}
        named = ", ".join(f"{i} (`{id_to_token[i]}`)" if i in id_to_token else str(i) for i in missed)
        if eos_id in stop:
            tail = f"a candle loop that stops on it never stops on {named}"
        else:
            tail = f"a candle loop that stops on it stops where `generate()` does not, and never on {named}"
        assert doc is not None
        yield self.finding(
            ctx,
            f"transformers' `generate()` stops on `eos_token_id` {stop} ({src}); the tokenizer's eos token `{eos}` is {eos_id}: {tail}",
            filename=doc.path,
            location=location(doc.position("eos_token_id")),
            transformers_value=stop,
            candle_value=[eos_id],
        )


class ChatTemplateWritesBos(_TokenizerRule):
    """The chat template writes the BOS text and the post-processor adds BOS too.

    ## What it does
    Flags a chat template that writes `{{ bos_token }}` (or the BOS text itself) when
    tokenizer.json's post-processor also puts the BOS token first.

    ## Why is this bad?
    Encoding the rendered conversation with special tokens (`encode(text, true)` in candle, the
    default in transformers) gives the BOS twice: `[128000, 128000, ...]` for Llama 3.1,
    `[1, 1, ...]` for Mistral. Both runtimes agree, and both feed the model a prompt it was
    not trained on.

    ## Example
    Llama 3.1's template starts with `{{- bos_token }}`; its tokenizer.json's
    `TemplateProcessing` starts every sequence with `<|begin_of_text|>`.

    ## Fix
    Encode the rendered template with `add_special_tokens` false (`encode(text, false)` in
    candle), or drop `{{ bos_token }}` from the template.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/processors/template.rs (`TemplateProcessing` adds the special
    tokens when `add_special_tokens` is true). transformers 5.24
    tokenization_utils_base.py:1818-1820 (`add_bos_token` is dropped when tokenizer.json exists).

    ## Verification
    tokens: verify renders a two-turn conversation with transformers and encodes it on both
    sides; CONFIRMED when both start with BOS twice.

    ## References
    - https://github.com/vllm-project/vllm/pull/27515, https://github.com/abetlen/llama-cpp-python/issues/1501 (Llama 3 double BOS)
    - docs/tokenizers.md
    """

    code = "PK509"
    name = "chat-template-writes-bos"
    severity = "warning"
    fix_title = "Encode the rendered chat template without special tokens, or drop `{{ bos_token }}` from it"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.transformers is None or a.files is None or a.tj is None:
            return
        jinja = a.files.chat_template
        template = S.chat_template_source(a.files.config_value, jinja.text if jinja else None)
        bos = S.adds_bos(a.crate.post_processor)
        if template is None or bos is None or bos != a.transformers.bos_token:
            return
        how = S.template_writes_bos(template, bos)
        if how is None:
            return
        if jinja is not None:
            filename, loc = jinja.path, location(None)
        else:
            assert a.files.config is not None
            filename, loc = a.files.config.path, location(a.files.config.position("chat_template"))
        yield self.finding(
            ctx,
            f"the chat template writes `{how}` and tokenizer.json's post-processor adds `{bos}` too: with special tokens on, "
            f"candle and transformers both feed `{bos}` twice",
            filename=filename,
            location=loc,
            transformers_value=[bos, bos],
            candle_value=[bos, bos],
            expect="chat",
        )


class GenerationSamplingDefaults(_TokenizerRule):
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


# --------------------------------------------------------------------------- the chat template in Rust


class ChatTemplateText:
    """The chat template transformers uses (chat_template.jinja over tokenizer_config.json's) and
    its scan (`portkit.semantics.chat_template`), once per lint."""

    def __init__(self, files: TokenizerFacts) -> None:
        from portkit.semantics import chat_template as T

        jinja = files.chat_template
        self.text: str | None = S.chat_template_source(files.config_value, jinja.text if jinja else None)
        self.in_jinja = jinja is not None
        self.path = jinja.path if jinja is not None else (files.config.path if files.config is not None else files.root / "tokenizer_config.json")
        self.key_position = None if jinja is not None or files.config is None else files.config.position("chat_template")
        self.scan = T.scan(self.text) if self.text is not None else None

    def location(self, line: int, column: int) -> Any:
        """Where a construct is: its line and column in chat_template.jinja, else the
        `chat_template` key of tokenizer_config.json (the message names the template line)."""
        return location((line, column) if self.in_jinja else self.key_position)


def chat_template_text(ctx: Context) -> ChatTemplateText | None:
    files = ctx.facts.tokenizer
    if files is None:
        return None
    cached = ctx.__dict__.get("_chat_template_text")
    if cached is None:
        cached = ctx.__dict__["_chat_template_text"] = ChatTemplateText(files)
    return cached


_HOW = {"refuses": "refuses to render it", "differs": "renders another text"}


class _ChatTemplateRule(_TokenizerRule):
    """A construct of the chat template that a Rust environment (candle-examples, mistral.rs)
    refuses or renders otherwise than transformers: one finding at its first place, the others
    counted, each environment it breaks named with what it does."""

    construct: ClassVar[str]  # a `portkit.semantics.chat_template.SCANNERS` key
    probe_kind = "template"
    fix_availability = "none"

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.semantics import chat_template as T

        tpl = chat_template_text(ctx)
        if tpl is None or tpl.scan is None:
            return
        found = T.constructs(tpl.scan, self.construct)
        if not found:
            return
        effects: dict[str, str] = {}
        expect: dict[str, str] = {}
        for c in found:
            for env, what in c.effects.items():
                if effects.get(env) != "refuses":  # a refusal anywhere is what that environment does
                    effects[env] = what
                if env in c.expect:
                    expect.setdefault(env, c.expect[env])
        envs = [e for e in T.ENVIRONMENTS if e in effects]
        first = found[0]
        where = f"line {first.line}" if tpl.in_jinja else f"template line {first.line}"
        more = ""
        if len(found) > 1:
            lines = sorted({c.line for c in found[1:]})
            shown = ", ".join(map(str, lines[:4])) + (f" and {len(lines) - 4} more" if len(lines) > 4 else "")
            more = f"; {len(found) - 1} more at line{'s' if len(lines) > 1 else ''} {shown}"
        message = self.describe(first, found, effects, f"{where}{more}")
        yield self.finding(
            ctx,
            message,
            filename=tpl.path,
            location=tpl.location(first.line, first.column),
            transformers_value="renders it",
            candle_value={e: _HOW[effects[e]] for e in envs},
            probe_patch={"environments": {e: effects[e] for e in envs}, "expect": expect, "lines": sorted({c.line for c in found})},
            expect=self.construct,
        )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        raise NotImplementedError


class ChatTemplatePythonMethod(_ChatTemplateRule):
    """The chat template calls Python string or dict methods, which minijinja has only through pycompat.

    ## What it does
    Finds calls of Python `str`/`dict` methods in the chat template's code (`.strip()`,
    `.startswith(...)`, `.split(...)`, `.items()`, `.get(...)`, ...; not inside string literals)
    and says which Rust environment refuses each: candle-examples' minijinja has no Python
    methods at all; mistral.rs installs minijinja-contrib's pycompat callback, which answers a
    list of them (2.14.0: `strip`, `lstrip`, `rstrip`, `split`, `splitlines`, `startswith`,
    `endswith`, `replace`, `title`, `upper`, `lower`, `capitalize`, `count`, `find`, `rfind`,
    `format`, `join`, the `is...` tests, `items`, `keys`, `values`, `get` with one argument).

    ## Why is this bad?
    jinja2 calls the method on the Python object, so transformers renders it. A Rust program on
    minijinja stops with `unknown method: string has no method named strip` when the line runs
    (Qwen, DeepSeek and Llama 3.1's tool templates call `.strip()`, `.startswith()`, `.items()`).
    With pycompat, a method outside its list (`zfill`, `rsplit`, ...) still fails, and 2.14.0's
    `get` takes no default (`m.get('x', '')` is `too many arguments`; the default came in 2.15.0).

    ## Example
    `{{- message['content'].strip() }}`

    Use instead: `{{- message['content'] | trim }}` (and `| items`, `x.y is defined`, `x.y | default('')`).

    ## Fix
    Write the template with jinja filters instead of Python methods, or render it with
    minijinja-contrib's `pycompat::unknown_method_callback` installed (as mistral.rs does).

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:167-177 (`Environment::new()`,
    no unknown-method callback); mistral.rs mistralrs-core/src/pipeline/chat_template.rs:712
    (pycompat); minijinja 2.14.0 src/value/mod.rs:1586-1613 (`unknown method`),
    minijinja-contrib 2.14.0 src/pycompat.rs:49-336.

    ## Verification
    template: verify renders the template through each environment and transformers on its
    conversations; CRASH-CONFIRMED when the environment the finding names refuses with
    `has no method named ...` (or `too many arguments`), NOT-REPRODUCED when no conversation
    reaches the call.

    ## References
    - docs/chat-templates.md
    - https://github.com/huggingface/text-generation-inference/issues/1545 (`.title()`/`.strip()` in Rust without pycompat)
    """

    code = "PK512"
    name = "chat-template-python-method"
    construct = "python-method"
    severity = "error"
    fix_title = "Use jinja filters (`| trim`, `| items`, `| default`) instead of Python methods, or install pycompat's unknown-method callback"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        names = list(dict.fromkeys(f"`.{c.detail}`" if "(" in c.detail else f"`.{c.detail}()`" for c in found))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        tail = "candle-examples' minijinja has no Python methods and refuses to render it (`unknown method`)"
        if "mistral.rs" in effects:
            bad = [c.detail for c in found if "mistral.rs" in c.effects]
            tail += f"; so does mistral.rs, whose pycompat has no `{bad[0]}`" if not bad[0].startswith("get(") else (
                "; so does mistral.rs: pycompat 2.14.0's `get` takes no default (`too many arguments`)"
            )
        else:
            tail += "; mistral.rs answers it through minijinja-contrib's pycompat"
        return f"the chat template calls the Python method{'s' if len(names) > 1 else ''} {shown} ({where}): {tail}"


class ChatTemplateGenerationTag(_ChatTemplateRule):
    """The chat template has `{% generation %}` blocks, a transformers extension minijinja does not know.

    ## What it does
    Finds `{% generation %}` / `{% endgeneration %}` tags (transformers' `AssistantTracker`
    extension, which marks the assistant's tokens for `return_assistant_tokens_mask`).

    ## Why is this bad?
    transformers renders the block's body as it is. candle-examples' minijinja refuses the
    whole template when it is added (`syntax error: unknown statement generation`), so no
    conversation renders. mistral.rs deletes the tags before adding the template, as a
    regex, and renders what transformers renders. SmolLM3's template has them.

    ## Example
    `{% generation %}{{ message['content'] }}{% endgeneration %}`

    Use instead: `{{ message['content'] }}` in the template a Rust program renders.

    ## Fix
    Delete the two tags from the template the Rust program renders (they only mark tokens
    for training masks).

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:176-177 (the template is added as is);
    mistral.rs mistralrs-core/src/pipeline/chat_template.rs:800-801 (the tags deleted);
    transformers 5.24 utils/chat_template_utils.py:575-611 (`AssistantTracker`).

    ## Verification
    template: CRASH-CONFIRMED when candle-examples refuses with `unknown statement generation`.

    ## References
    - docs/chat-templates.md
    - https://github.com/mitsuhiko/minijinja/issues/815 (SmolLM3's `{% generation %}`)
    """

    code = "PK513"
    name = "chat-template-generation-tag"
    construct = "generation"
    severity = "error"
    fix_title = "Delete `{% generation %}` and `{% endgeneration %}` from the template a Rust program renders"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        return (
            f"the chat template has `{{% {first.detail} %}}` ({where}), transformers' assistant-mask tag: candle-examples' minijinja "
            "refuses the whole template (`unknown statement generation`); mistral.rs deletes the tags and renders it"
        )


class ChatTemplateLoopControl(_ChatTemplateRule):
    """The chat template uses `{% break %}` or `{% continue %}`, which minijinja parses only with `loop_controls`.

    ## What it does
    Finds `{% break %}` and `{% continue %}` (jinja2's `loopcontrols` extension, which
    transformers enables).

    ## Why is this bad?
    minijinja knows the two statements only when it is built with its `loop_controls` feature;
    neither candle-examples nor mistral.rs enables it, so both refuse the whole template
    (`syntax error: unknown statement break`) and no conversation renders. Command-R7B's
    template has `{% break %}`.

    ## Example
    `{% for m in messages %}{% if m.role == 'system' %}{% break %}{% endif %}...{% endfor %}`

    Use instead: a `namespace` flag set in the loop and tested with `{% if %}`.

    ## Fix
    Rewrite the loop without the statements, or build minijinja with `loop_controls`.

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:176-177 (the template added as is) and
    candle-examples-0.11.0/Cargo.toml:658-660 (`minijinja` "2" with `loader`);
    mistral.rs Cargo.toml:118 (`features = ["builtins", "json", "preserve_order"]`); minijinja
    2.14.0 Cargo.toml (`loop_controls` is not a default feature); transformers 5.24
    utils/chat_template_utils.py:662-664 (`jinja2.ext.loopcontrols`).

    ## Verification
    template: CRASH-CONFIRMED when the environment refuses with `unknown statement break` (or `continue`).

    ## References
    - docs/chat-templates.md
    - https://github.com/huggingface/text-generation-inference/issues/2998 (Command-R7B's `{% break %}`)
    """

    code = "PK514"
    name = "chat-template-loop-control"
    construct = "loop-control"
    severity = "error"
    fix_title = "Rewrite the loop without `{% break %}`/`{% continue %}` (a namespace flag), or build minijinja with `loop_controls`"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        return (
            f"the chat template uses `{{% {first.detail} %}}` ({where}): minijinja without its `loop_controls` feature refuses "
            f"the whole template (`unknown statement {first.detail}`) in candle-examples and in mistral.rs"
        )


class ChatTemplateNegativeStep(_ChatTemplateRule):
    """The chat template walks a sequence backwards in a form mistral.rs rewrites into another template.

    ## What it does
    Finds `range(n, -1, -1)` and `[::-1]` followed by a subscript or an attribute: the two
    places where mistral.rs's text rewrites (`range(n)|reverse`, `|reverse`) change what the
    template means. minijinja itself (2.10.0 and later) handles negative steps as jinja2 does,
    so candle-examples renders both as transformers does, and a plain `messages[::-1]` is
    rewritten to an equivalent.

    ## Why is this bad?
    `range(n, -1, -1)` counts n, n-1, ..., 0; mistral.rs's `range(n)|reverse` counts n-1, ...,
    0: one item fewer, so a Qwen 2.5-style search for the last user turn starts one message
    early. `messages[::-1][0]` becomes `messages|reverse[0]`, a syntax error: mistral.rs
    refuses the template.

    ## Example
    `{% for i in range(messages|length - 1, -1, -1) %}`

    Use instead: `{% for i in range(messages|length)|reverse %}` (the same indices, no rewrite).

    ## Fix
    Write the reversal with `|reverse` yourself: `range(n + 1)|reverse`, `(seq|reverse|list)[i]`.

    ## Candle source
    mistral.rs mistralrs-core/src/pipeline/chat_template.rs:784-793 (the rewrites); minijinja
    2.14.0 CHANGELOG 2.10.0 (#781: negative slice steps) and 2.11.0 (#799: negative `range`
    arguments); candle-examples-0.11.0/src/chat_template.rs:176 (no rewrite).

    ## Verification
    template: `range`: CONFIRMED when mistral.rs renders other texts and mistral.rs without the
    rewrite renders transformers' text; `[::-1]` followed by a subscript: CRASH-CONFIRMED when
    mistral.rs refuses with a syntax error.

    ## References
    - docs/chat-templates.md
    - https://github.com/EricLBuehler/mistral.rs/issues/1934 (Qwen 2.5's `range(n, -1, -1)`), fixed by the rewrite in https://github.com/EricLBuehler/mistral.rs/pull/1941
    - https://github.com/mitsuhiko/minijinja/issues/780 (Qwen3's `messages[::-1]`)
    """

    code = "PK515"
    name = "chat-template-negative-step"
    construct = "negative-step"
    severity = "error"
    fix_title = "Write the reversal with `|reverse` yourself: `range(n + 1)|reverse`, `(seq|reverse|list)[i]`"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        if first.detail.startswith("range"):
            expr = first.detail[len("range(") :].rsplit(",", 2)[0]
            return (
                f"the chat template has `{first.detail}` ({where}): mistral.rs rewrites it to `range({expr})|reverse`, "
                "one item fewer than transformers counts (it never reaches index "
                f"`{expr.strip()}`): another text wherever the loop's first index matters"
            )
        return (
            f"the chat template subscripts a reversed sequence, `{first.detail}` ({where}): mistral.rs rewrites `[::-1]` to "
            "`|reverse` and a subscript after a filter is a syntax error: it refuses the whole template"
        )


class ChatTemplateTojson(_ChatTemplateRule):
    """The chat template uses `tojson`, which candle-examples lacks and mistral.rs implements with `indent` only.

    ## What it does
    Finds the `tojson` filter and its keyword arguments.

    ## Why is this bad?
    transformers' own `tojson` is `json.dumps(x, ensure_ascii=False, indent=..., separators=...,
    sort_keys=...)`. candle-examples builds minijinja without its `json` feature: there is no
    `tojson` filter, and rendering stops (`unknown filter: filter tojson is unknown`) when the
    line runs (every tool template). mistral.rs registers its own `tojson` with Python's
    separators and `indent`, and accepts and ignores every other argument: `sort_keys=true`,
    `separators=(',', ':')` or `ensure_ascii=true` give another text than transformers'.
    (minijinja's built-in `tojson`, which neither environment uses, also HTML-escapes `<`, `>`,
    `&`, `'` and writes no spaces.)

    ## Example
    `{{ tools | tojson(indent=4, sort_keys=true) }}`

    Use instead: in the Rust program, a `tojson` filter with transformers' arguments.

    ## Fix
    Register a `tojson` filter that does what `json.dumps(x, ensure_ascii=False, indent,
    separators, sort_keys)` does.

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:167 and Cargo.toml:658-660 (no `json` feature); minijinja 2.14.0 src/defaults.rs:128 (the
    filter exists only with `json`), src/filters.rs:991-1031; mistral.rs
    mistralrs-core/src/pipeline/chat_template.rs:358-394 and :805; transformers 5.24
    utils/chat_template_utils.py:623-626.

    ## Verification
    template: candle-examples: CRASH-CONFIRMED when it refuses with `filter tojson is unknown`;
    mistral.rs: CONFIRMED when it renders other texts and transformers, given the template
    without the arguments mistral.rs ignores, renders mistral.rs's texts.

    ## References
    - docs/chat-templates.md
    - https://github.com/EricLBuehler/mistral.rs/issues/2363 (`tojson` escaping and key order)
    """

    code = "PK516"
    name = "chat-template-tojson"
    construct = "tojson"
    severity = "error"
    fix_title = "Register a `tojson` filter with transformers' arguments (`json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)`)"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        shown = ", ".join(dict.fromkeys(f"`{c.detail}`" for c in found))
        text = (
            f"the chat template uses {shown} ({where}): candle-examples' minijinja has no `json` feature and refuses "
            "to render it (`filter tojson is unknown`)"
        )
        if "mistral.rs" in effects:
            ignored = sorted({a for c in found for a in c.detail[len("tojson(") :].rstrip(")").replace("=", "").split(", ") if a in ("sort_keys", "separators", "ensure_ascii")})
            text += f"; mistral.rs's `tojson` ignores {', '.join(f'`{a}`' for a in ignored)}: another text than transformers' `json.dumps`"
        else:
            text += "; mistral.rs's own `tojson` writes what transformers' does"
        return text


class ChatTemplateStrftimeNow(_ChatTemplateRule):
    """The chat template calls `strftime_now`, a function transformers defines and candle-examples does not.

    ## What it does
    Finds calls of `strftime_now(format)` (transformers' template global: today's date).

    ## Why is this bad?
    candle-examples' environment defines `raise_exception` only: rendering stops with
    `unknown function: strftime_now is unknown` when the line runs (Llama 3.2, Mistral-Small
    and Granite templates date their system prompt with it). mistral.rs defines it on the UTC
    clock, transformers on the local one: the same text where the two dates agree.

    ## Example
    `{%- set today = strftime_now("%d %b %Y") %}`

    Use instead: a `strftime_now` function in the Rust program, or the date passed as a variable
    (`date_string`) that the template tests with `is defined`.

    ## Fix
    Register `strftime_now` (the local date, as `datetime.now().strftime(format)`) in the
    Rust program's environment.

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:167-174 (`raise_exception` only); mistral.rs
    mistralrs-core/src/pipeline/chat_template.rs:430-434 and :806; transformers 5.24
    utils/chat_template_utils.py:628-629, 667.

    ## Verification
    template: CRASH-CONFIRMED when candle-examples refuses with `strftime_now is unknown`.

    ## References
    - docs/chat-templates.md
    - https://github.com/huggingface/text-generation-inference/issues/2987 (Mistral-Small's `strftime_now`)
    """

    code = "PK517"
    name = "chat-template-strftime-now"
    construct = "strftime"
    severity = "error"
    fix_title = "Register `strftime_now` (the local date, as transformers' `datetime.now().strftime`) in the Rust program"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        return (
            f"the chat template calls `strftime_now` ({where}): candle-examples defines no such function and refuses to render "
            "it (`unknown function`); mistral.rs renders it from the UTC clock, transformers from the local one"
        )


class ChatTemplateBlockWhitespace(_ChatTemplateRule):
    """The chat template's whitespace depends on `trim_blocks` and `lstrip_blocks`, which candle-examples does not set.

    ## What it does
    Finds the whitespace that transformers' `trim_blocks=True, lstrip_blocks=True` remove and
    candle-examples keeps: the newline right after a `{% ... %}` or `{# ... #}` tag without
    `-`, the blanks before such a tag at the start of a line, and whitespace at the very start
    of the render (which candle-examples' `trim_start()` removes and transformers keeps).

    ## Why is this bad?
    Templates written one statement a line (`{% if ... %}` then a newline) rely on trim_blocks
    to leave those newlines out, and on lstrip_blocks for their indentation. candle-examples'
    `Environment::new()` sets neither, so its prompt has newlines and spaces the model never
    saw in training, wherever those lines render. mistral.rs sets both, as transformers does.

    ## Example
    ```
    {% for message in messages %}
      {% if message['role'] == 'user' %}
    {{ '<|user|>' + message['content'] }}
      {% endif %}
    {% endfor %}
    ```

    Use instead: `{%- ... %}` / `{% ... -%}` on those tags, so every environment drops the whitespace.

    ## Fix
    Add `-` whitespace control to the tags, or call `set_trim_blocks(true)` and
    `set_lstrip_blocks(true)` on the Rust program's minijinja `Environment`.

    ## Candle source
    candle-examples-0.11.0/src/chat_template.rs:167 (`Environment::new()`: minijinja's defaults, both
    off) and :353 (`trim_start()`); mistral.rs mistralrs-core/src/pipeline/chat_template.rs:715-716;
    transformers 5.24 utils/chat_template_utils.py:662-664.

    ## Verification
    template: CONFIRMED when candle-examples renders other texts and candle-examples with
    trim_blocks and lstrip_blocks set renders fewer of them otherwise.

    ## References
    - docs/chat-templates.md
    """

    code = "PK518"
    name = "chat-template-block-whitespace"
    construct = "whitespace"
    severity = "error"
    fix_title = "Add `-` whitespace control to those tags, or set `trim_blocks` and `lstrip_blocks` on the Rust program's Environment"

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        n = len(found)
        return (
            f"the chat template's whitespace depends on trim_blocks/lstrip_blocks at {n} place{'s' if n != 1 else ''} (first: the "
            f"{first.detail}, {where}): candle-examples sets neither and keeps newlines and blanks that transformers and "
            "mistral.rs leave out"
        )


RULES = (
    NormalizerRebuiltByClass,
    PrependSchemeAfterSpecialToken,
    PreTokenizerRebuiltByClass,
    DecoderRebuiltByClass,
    SpecialTokenNormalized,
    PaddingSavedInTokenizer,
    TokenizerRefusedByCrate,
    EosStopSetBeyondTokenizerEos,
    ChatTemplateWritesBos,
    GenerationSamplingDefaults,
    PostProcessorRebuiltByClass,
    ChatTemplatePythonMethod,
    ChatTemplateGenerationTag,
    ChatTemplateLoopControl,
    ChatTemplateNegativeStep,
    ChatTemplateTojson,
    ChatTemplateStrftimeNow,
    ChatTemplateBlockWhitespace,
)
