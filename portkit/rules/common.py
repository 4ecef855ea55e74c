"""What the config rules of every family share: where transformers took a value from, in
words, and at what sequence length an effect appears."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from portkit.findings import Severity
    from portkit.rules.base import Context


def source_words(path: tuple[str, ...]) -> str:
    """Where transformers took a value from, in words: 'from `rope_parameters`', 'by default'."""
    if not path:
        return "by default"
    if len(path) == 1:
        return f"from the top-level `{path[0]}`"
    return "from `" + ".".join(path[:-1]) + "`"


def length_severity(ctx: Context, length: int) -> tuple[Severity, str]:
    """(severity, clause) for an effect that appears only past `length` tokens: an error when
    the target's `--max-tokens` reaches past it, else a warning that names the length."""
    t = ctx.target.max_tokens
    if t is not None and t > length:
        return "error", f"the effect appears past {length} tokens, and --max-tokens {t} reaches it"
    return "warning", f"the effect appears only past {length} tokens" + (
        f"; --max-tokens {t} stays within" if t is not None else ""
    )
