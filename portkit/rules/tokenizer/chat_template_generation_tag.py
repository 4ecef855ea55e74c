"""PK513 chat-template-generation-tag: The chat template has `{% generation %}` blocks, a
transformers extension minijinja does not know."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateGenerationTag(ChatTemplateRule):
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
            f"the chat template has `{{% {first.detail} %}}` ({where}), transformers' assistant-mask tag: "
            "candle-examples' minijinja "
            "refuses the whole template (`unknown statement generation`); mistral.rs deletes the tags and renders it"
        )
