"""PK515 chat-template-negative-step: The chat template walks a sequence backwards in a form
mistral.rs rewrites into another template."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateNegativeStep(ChatTemplateRule):
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
    - https://github.com/EricLBuehler/mistral.rs/issues/1934 (Qwen 2.5's `range(n, -1, -1)`), fixed by the rewrite in
      https://github.com/EricLBuehler/mistral.rs/pull/1941
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
            f"the chat template subscripts a reversed sequence, `{first.detail}` ({where}): mistral.rs rewrites "
            "`[::-1]` to `|reverse` and a subscript after a filter is a syntax error: it refuses the whole template"
        )
