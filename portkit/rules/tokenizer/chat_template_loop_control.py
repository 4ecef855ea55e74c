"""PK514 chat-template-loop-control: The chat template uses `{% break %}` or `{% continue %}`, which
minijinja parses only with `loop_controls`."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateLoopControl(ChatTemplateRule):
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
    fix_title = (
        "Rewrite the loop without `{% break %}`/`{% continue %}` (a namespace flag), or build minijinja with "
        "`loop_controls`"
    )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        return (
            f"the chat template uses `{{% {first.detail} %}}` ({where}): minijinja without its `loop_controls` feature "
            f"refuses the whole template (`unknown statement {first.detail}`) in candle-examples and in mistral.rs"
        )
