"""The plain text reporter writes what rich wrote with colour off, without importing rich."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from portkit.report.text import _plain

# tabs, the control codes rich strips, other controls, wide and zero-width characters
ALPHABET = st.sampled_from(
    list('ab \t\n\r\x07\x08\x0b\x0c\x1b\x00\x7f|^:"') + ["日", "本", "😀", "\u0301", "é", "\u200b"]
)


def rich_plain(text: str) -> str:
    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    con = Console(
        file=out,
        force_terminal=False,
        no_color=True,
        color_system=None,
        highlight=False,
        soft_wrap=True,
        emoji=False,
        markup=False,
    )
    con.print(Text(text, style="blue"))
    return out.getvalue()


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=60).map("".join))
def test_plain_matches_rich_without_colour(text: str) -> None:
    assert _plain(text) + "\n" == rich_plain(text)


def test_plain_examples() -> None:
    for text in ("\tx", "ab\tc", "日本\tx", "a\r\tb", "x\n\ty", "        \t", "\x1b\tz"):
        assert _plain(text) + "\n" == rich_plain(text), repr(text)


def test_the_run_plan_line_reads_as_a_sentence_when_every_answer_came_from_the_caches() -> None:
    from portkit.verify.report.text import _plan_line

    cached = {
        "transformers": "not run (every answer from the caches)",
        "threads": {"candle": 2, "transformers": None},
        "overlap": "none",
    }
    assert _plan_line(cached) == "run plan: candle 2 threads; transformers not run: every answer came from the caches"
    child = {
        "transformers": "a child process, started first",
        "threads": {"candle": 1, "transformers": 2},
        "overlap": "none",
    }
    assert _plan_line(child) == "run plan: candle 1 thread; transformers in a child process, started first, 2 threads"
    gguf = {
        "transformers": "a child process, started first",
        "threads": {"candle": 2, "candle_quantized": 1, "transformers": 2},
        "overlap": "none",
    }
    assert (
        _plan_line(gguf)
        == "run plan: candle 2 threads (1 for quantized matmuls); transformers in a child process, started first, 2 "
        "threads"
    )


def test_a_long_line_is_cut_to_a_window_around_the_column() -> None:
    from portkit.report.text import ELLIPSIS, FRAME_WIDTH, _window

    line = "".join(chr(ord("a") + i % 26) for i in range(700_000))  # a minified tokenizer.json is one line
    for column in (1, 87, 350_000, 700_000):
        shown, caret = _window(line, column)
        assert len(shown) <= FRAME_WIDTH + 2 * len(ELLIPSIS)
        assert shown[caret] == line[column - 1]
        assert shown.startswith(ELLIPSIS) == (column - 1 > FRAME_WIDTH // 2)
        assert shown.endswith(ELLIPSIS) == (column < len(line) - FRAME_WIDTH // 2)
    assert _window("short", 3) == ("short", 2)


def test_a_minified_file_prints_a_bounded_frame(tmp_path) -> None:
    import json

    from portkit.lint import lint_dir
    from portkit.report.text import FRAME_WIDTH, TextReporter

    doc = {
        "version": "1.0",
        "truncation": {"max_length": 8, "strategy": "LongestFirst", "stride": 0},
        "padding": None,
        "added_tokens": [],
        "model": {"type": "WordLevel", "vocab": {f"tok{i}": i for i in range(20_000)}, "unk_token": "tok0"},
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc, separators=(",", ":")))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    out = io.StringIO()
    TextReporter(color=False).write(lint_dir(tmp_path), out)
    frames = [ln for ln in out.getvalue().splitlines() if ln.startswith("1 | ")]
    assert frames, out.getvalue()
    assert all(len(ln) <= FRAME_WIDTH + 10 for ln in out.getvalue().splitlines() if " | " in ln)
