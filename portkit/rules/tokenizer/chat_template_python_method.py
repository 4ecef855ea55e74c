"""PK512 chat-template-python-method: The chat template calls Python string or dict methods, which
minijinja has only through pycompat."""

from __future__ import annotations

from portkit.rules.tokenizer.base import ChatTemplateRule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any


class ChatTemplatePythonMethod(ChatTemplateRule):
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
    - https://github.com/huggingface/text-generation-inference/issues/1545 (`.title()`/`.strip()` in Rust without
      pycompat)
    """

    code = "PK512"
    name = "chat-template-python-method"
    construct = "python-method"
    severity = "error"
    fix_title = (
        "Use jinja filters (`| trim`, `| items`, `| default`) instead of Python methods, or install pycompat's "
        "unknown-method callback"
    )

    def describe(self, first: Any, found: list[Any], effects: dict[str, str], where: str) -> str:
        names = list(dict.fromkeys(f"`.{c.detail}`" if "(" in c.detail else f"`.{c.detail}()`" for c in found))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        tail = "candle-examples' minijinja has no Python methods and refuses to render it (`unknown method`)"
        if "mistral.rs" in effects:
            bad = [c.detail for c in found if "mistral.rs" in c.effects]
            tail += (
                f"; so does mistral.rs, whose pycompat has no `{bad[0]}`"
                if not bad[0].startswith("get(")
                else ("; so does mistral.rs: pycompat 2.14.0's `get` takes no default (`too many arguments`)")
            )
        else:
            tail += "; mistral.rs answers it through minijinja-contrib's pycompat"
        return f"the chat template calls the Python method{'s' if len(names) > 1 else ''} {shown} ({where}): {tail}"
