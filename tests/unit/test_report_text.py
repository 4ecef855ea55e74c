"""The plain text reporter writes what rich wrote with colour off, without importing rich."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from portkit.report.text import _plain

# tabs, the control codes rich strips, other controls, wide and zero-width characters
ALPHABET = st.sampled_from(list("ab \t\n\r\x07\x08\x0b\x0c\x1b\x00\x7f|^:\"") + ["日", "本", "😀", "\u0301", "é", "\u200b"])


def rich_plain(text: str) -> str:
    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    con = Console(file=out, force_terminal=False, no_color=True, color_system=None, highlight=False, soft_wrap=True, emoji=False, markup=False)
    con.print(Text(text, style="blue"))
    return out.getvalue()


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=60).map("".join))
def test_plain_matches_rich_without_colour(text: str) -> None:
    assert _plain(text) + "\n" == rich_plain(text)


def test_plain_examples() -> None:
    for text in ("\tx", "ab\tc", "日本\tx", "a\r\tb", "x\n\ty", "        \t", "\x1b\tz"):
        assert _plain(text) + "\n" == rich_plain(text), repr(text)
