"""verify's bad input, and the one line an error's text becomes wherever verify quotes it."""

from __future__ import annotations


class BadInput(Exception):
    """Input verify cannot work with; the message is one line and ends the run with exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class TokenizeError(Exception):
    """A text prompt cannot be tokenized: one line, which verify turns into bad input (exit 2)."""


def one_line(e: BaseException | str, limit: int = 300) -> str:
    """An error's text on one line (its whitespace runs as single spaces), at most `limit`
    characters: how verify quotes another program's message (transformers', the gguf
    package's, a template's) as evidence or in an error of its own."""
    return " ".join(str(e).split())[:limit]
