"""PK509 chat-template-writes-bos: The chat template writes the BOS text and the post-processor adds BOS too."""

from __future__ import annotations

from portkit.rules.base import Context, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class ChatTemplateWritesBos(TokenizerRule):
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
    - https://github.com/vllm-project/vllm/pull/27515, https://github.com/abetlen/llama-cpp-python/issues/1501 (Llama 3
      double BOS)
    - docs/tokenizers.md
    """

    code = "PK509"
    probe_measure = "double-bos"
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
            f"the chat template writes `{how}` and tokenizer.json's post-processor adds `{bos}` too: with special "
            f"tokens on, candle and transformers both feed `{bos}` twice",
            filename=filename,
            location=loc,
            transformers_value=[bos, bos],
            candle_value=[bos, bos],
            expect="chat",
        )
