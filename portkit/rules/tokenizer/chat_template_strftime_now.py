"""PK517 chat-template-strftime-now: The chat template calls `strftime_now`, a function transformers
defines and candle-examples does not."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateStrftimeNow(ChatTemplateRule):
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
    fix_title = (
        "Register `strftime_now` (the local date, as transformers' `datetime.now().strftime`) in the Rust program"
    )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        return (
            f"the chat template calls `strftime_now` ({where}): candle-examples defines no such function and refuses "
            "to render "
            "it (`unknown function`); mistral.rs renders it from the UTC clock, transformers from the local one"
        )
