"""PK516 chat-template-tojson: The chat template uses `tojson`, which candle-examples lacks and
mistral.rs implements with `indent` only."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplateTojson(ChatTemplateRule):
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
    candle-examples-0.11.0/src/chat_template.rs:167 and Cargo.toml:658-660 (no `json` feature); minijinja 2.14.0
    src/defaults.rs:128 (the
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
    fix_title = (
        "Register a `tojson` filter with transformers' arguments (`json.dumps(x, ensure_ascii=False, indent, "
        "separators, sort_keys)`)"
    )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        shown = ", ".join(dict.fromkeys(f"`{c.detail}`" for c in found))
        text = (
            f"the chat template uses {shown} ({where}): candle-examples' minijinja has no `json` feature and refuses "
            "to render it (`filter tojson is unknown`)"
        )
        if "mistral.rs" in effects:
            ignored = sorted(
                {
                    a
                    for c in found
                    for a in c.detail[len("tojson(") :].rstrip(")").replace("=", "").split(", ")
                    if a in ("sort_keys", "separators", "ensure_ascii")
                }
            )
            text += (
                f"; mistral.rs's `tojson` ignores {', '.join(f'`{a}`' for a in ignored)}: another text than "
                "transformers' `json.dumps`"
            )
        else:
            text += "; mistral.rs's own `tojson` writes what transformers' does"
        return text
