"""PK518 chat-template-block-whitespace: The chat template's whitespace depends on `trim_blocks` and
`lstrip_blocks`, which candle-examples does not set."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateBlockWhitespace(ChatTemplateRule):
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
    fix_title = (
        "Add `-` whitespace control to those tags, or set `trim_blocks` and `lstrip_blocks` on the Rust "
        "program's Environment"
    )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        n = len(found)
        return (
            f"the chat template's whitespace depends on trim_blocks/lstrip_blocks at {n} place{'s' if n != 1 else ''} "
            "(first: the "
            f"{first.detail}, {where}): candle-examples sets neither and keeps newlines and blanks that transformers "
            "and mistral.rs leave out"
        )
