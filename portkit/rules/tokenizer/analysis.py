"""What the tokenizer rules read, computed once per lint context: both readings of the tokenizer
files (`TokenizerAnalysis`) and the chat template with its scan (`ChatTemplateText`).

Every PK5xx rule asks `analysis(ctx)` or `chat_template_text(ctx)`; the first ask builds the
context's `TokenizerMemo` and every later one, from any rule or from `portkit fix`, gets the same
objects. The memo is keyed by the context itself (a weak mapping, so it lives exactly as long as
the context does) rather than stored under a private key in the context's `__dict__`: the rule
machinery's `Context` (`portkit.rules.base`) knows nothing of tokenizers.
"""

from __future__ import annotations

import weakref
from functools import cached_property

from portkit.rules.base import Context, location
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.model import ModelFacts
    from portkit.model.tokenizer_files import TokenizerFacts, TokenizerJson


class TokenizerAnalysis:
    """Both readings of one directory's tokenizer files, computed once per lint."""

    def __init__(self, facts: ModelFacts, release: str) -> None:
        self.facts = facts
        self.release = release  # the candle release whose tokenizers crate reads the files
        self.files: TokenizerFacts | None = facts.tokenizer
        self.tj: TokenizerJson | None = self.files.tokenizer if self.files else None

    @cached_property
    def config(self) -> dict[str, Any] | None:
        doc = self.facts.config
        return doc.value if doc is not None and isinstance(doc.value, dict) else None

    @cached_property
    def generation(self) -> dict[str, Any] | None:
        doc = self.facts.generation_config
        return doc.value if doc is not None and isinstance(doc.value, dict) else None

    @cached_property
    def crate(self) -> S.CrateTokenizer | None:
        return S.crate_tokenizer(self.tj, self.release) if self.tj is not None else None

    @cached_property
    def transformers(self) -> S.TransformersTokenizer | None:
        if self.crate is None or self.tj is None or self.files is None:
            return None
        stm = self.files.special_tokens_map.value if self.files.special_tokens_map else None
        return S.transformers_tokenizer(
            self.crate, self.files.config_value, stm if isinstance(stm, dict) else None, self.config, self.tj.text
        )

    @cached_property
    def differences(self) -> dict[str, S.Difference]:
        if self.crate is None or self.transformers is None or self.crate.refused is not None:
            return {}
        return {d.part: d for d in S.differences(self.crate, self.transformers)}

    def cls(self) -> str:
        """ "`LlamaTokenizer` (tokenizer_config.json names `LlamaTokenizer`)"."""
        tf = self.transformers
        assert tf is not None
        return f"`{tf.choice.name}` ({tf.choice.why})"


class ChatTemplateText:
    """The chat template transformers uses (chat_template.jinja over tokenizer_config.json's) and
    its scan (`portkit.semantics.chat_template`), once per lint."""

    def __init__(self, files: TokenizerFacts) -> None:
        from portkit.semantics import chat_template as T

        jinja = files.chat_template
        self.text: str | None = S.chat_template_source(files.config_value, jinja.text if jinja else None)
        self.in_jinja = jinja is not None
        self.path = (
            jinja.path
            if jinja is not None
            else (files.config.path if files.config is not None else files.root / "tokenizer_config.json")
        )
        self.key_position = (
            None if jinja is not None or files.config is None else files.config.position("chat_template")
        )
        self.scan = T.scan(self.text) if self.text is not None else None

    def location(self, line: int, column: int) -> Any:
        """Where a construct is: its line and column in chat_template.jinja, else the
        `chat_template` key of tokenizer_config.json (the message names the template line)."""
        return location((line, column) if self.in_jinja else self.key_position)


class TokenizerMemo:
    """The tokenizer rules' shared analysis of one lint context, each part built on first use.

    It holds the context's `ModelFacts`, never the context (the memo is the value of a weak
    mapping keyed by the context: a reference back would keep the context alive forever)."""

    def __init__(self, facts: ModelFacts, release: str) -> None:
        self.facts = facts
        self.release = release

    @cached_property
    def analysis(self) -> TokenizerAnalysis:
        return TokenizerAnalysis(self.facts, self.release)

    @cached_property
    def chat_template(self) -> ChatTemplateText | None:
        files = self.facts.tokenizer
        return ChatTemplateText(files) if files is not None else None


_MEMOS: weakref.WeakKeyDictionary[Context, TokenizerMemo] = weakref.WeakKeyDictionary()


def memo(ctx: Context) -> TokenizerMemo:
    """The context's memo, made on the first ask."""
    m = _MEMOS.get(ctx)
    if m is None:
        m = _MEMOS[ctx] = TokenizerMemo(ctx.facts, ctx.target.candle)
    return m


def analysis(ctx: Context) -> TokenizerAnalysis:
    """Both readings of the context's tokenizer files (one object per context)."""
    return memo(ctx).analysis


def chat_template_text(ctx: Context) -> ChatTemplateText | None:
    """The chat template transformers renders and its scan, None without tokenizer files."""
    return memo(ctx).chat_template


__all__ = ["ChatTemplateText", "TokenizerAnalysis", "TokenizerMemo", "analysis", "chat_template_text", "memo"]
