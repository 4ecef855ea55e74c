"""portkit.semantics.chat_template: the scanner lint reads chat templates with (no jinja engine,
no native wheel). Each construct is found where it is, and only there: not in string literals,
not in literal text, not twice."""

from __future__ import annotations

import pytest

from portkit.semantics import chat_template as T


def kinds(text: str, kind: str) -> list[tuple[int, int, str, dict[str, str]]]:
    return [(c.line, c.column, c.detail, c.effects) for c in T.constructs(T.scan(text), kind)]


def test_tags_and_code_keep_offsets_and_blank_strings() -> None:
    s = T.scan("a {{ 'x}}' + b.strip() }}\n{%- if c -%}{# d #}{% endif %}")
    assert [(t.kind, t.statement, t.left, t.right) for t in s.tags] == [
        ("{", "", "", ""),
        ("%", "if", "-", "-"),
        ("#", "", "", ""),
        ("%", "endif", "", ""),
    ]
    assert len(s.code) == len(s.text) and "x}}" not in s.code and "b.strip()" in s.code
    assert s.rowcol(s.text.index("{%-")) == (2, 1)
    assert T.scan("{{ oops").error == "unclosed tag at line 1"


def test_raw_blocks_are_literal_text() -> None:
    assert kinds("{% raw %}{{ x.strip() }}{% endraw %}", "python-method") == []


def test_python_methods_and_who_answers_them() -> None:
    assert kinds("{{ m.content.strip() }}", "python-method") == [(1, 14, "strip", {"candle-examples": "refuses"})]
    assert kinds("{{ m.content.zfill(3) }}", "python-method")[0][3] == {
        "candle-examples": "refuses",
        "mistral.rs": "refuses",
    }
    # pycompat 2.14.0's get takes the key alone
    assert kinds("{{ m.get('a') }}", "python-method")[0][3] == {"candle-examples": "refuses"}
    assert kinds("{{ m.get('a', f(1, 2)) }}", "python-method")[0][2:] == (
        "get(key, default)",
        {"candle-examples": "refuses", "mistral.rs": "refuses"},
    )
    # not methods: a string literal, an attribute, a loop helper, a filter
    assert (
        kinds("{{ '.strip()' }}{{ m.strip }}{{ loop.cycle('a', 'b') }}{{ x | trim }}hello.strip()", "python-method")
        == []
    )


def test_statements() -> None:
    assert kinds("{% generation %}x{% endgeneration %}", "generation") == [
        (1, 1, "generation", {"candle-examples": "refuses"}),
        (1, 18, "endgeneration", {"candle-examples": "refuses"}),
    ]
    assert [c[2] for c in kinds("{% for x in y %}{%- break -%}{% continue %}{% endfor %}", "loop-control")] == [
        "break",
        "continue",
    ]
    assert kinds("{% set breakfast = 1 %}", "loop-control") == []


def test_negative_steps_as_mistral_rs_rewrites_them() -> None:
    got = kinds("{% for i in range(messages|length - 1, -1, -1) %}{% endfor %}", "negative-step")
    assert got == [(1, 13, "range(messages|length - 1, -1, -1)", {"mistral.rs": "differs"})]
    assert (
        kinds(
            "{{ (messages[::-1])[0] }}{{ messages[::-1] }}{% for i in range(3, 0, -1) %}{% endfor %}", "negative-step"
        )
        == []
    )
    assert kinds("{{ messages[::-1][0].content }}", "negative-step")[0][3] == {"mistral.rs": "refuses"}


def test_tojson_and_its_arguments() -> None:
    assert kinds("{{ x | tojson }}", "tojson") == [(1, 6, "tojson", {"candle-examples": "refuses"})]
    assert kinds("{{ x|tojson(indent=2) }}", "tojson")[0][3] == {"candle-examples": "refuses"}
    assert kinds("{{ x|tojson(indent=2, sort_keys=true) }}", "tojson")[0][2:] == (
        "tojson(indent=, sort_keys=)",
        {"candle-examples": "refuses", "mistral.rs": "differs"},
    )
    assert (
        T.without_tojson_arguments("{{ x|tojson(indent=2, sort_keys=true) }}{{ y | tojson(separators=(',', ':')) }}")
        == "{{ x|tojson(indent=2) }}{{ y | tojson }}"
    )


def test_candle_examples_never_reaches_a_tool_branch() -> None:
    text = (
        "{%- if tools %}{{ tools|tojson(sort_keys=true) }}{% else %}{{ a|tojson }}{% endif %}{% for m in messages "
        "%}{% for c in m.tool_calls %}{{ c.strip() }}{% endfor %}{% endfor %}"
    )
    assert kinds(text, "tojson") == [
        (1, 24, "tojson(sort_keys=)", {"mistral.rs": "differs"}),
        (1, 64, "tojson", {"candle-examples": "refuses"}),
    ]
    assert kinds(text, "python-method") == []
    # a condition that holds without tools is no tool branch
    assert kinds("{% if tools is not none %}{{ tools|tojson }}{% endif %}", "tojson")[0][3] == {
        "candle-examples": "refuses"
    }
    assert kinds("{% if not tools %}{{ x.strip() }}{% endif %}", "python-method")[0][3] == {
        "candle-examples": "refuses"
    }


def test_strftime_now() -> None:
    assert kinds("{%- set d = strftime_now('%Y') %}", "strftime") == [
        (1, 13, "strftime_now", {"candle-examples": "refuses"})
    ]
    assert kinds("{{ my.strftime_now('%Y') }}{{ 'strftime_now(' }}", "strftime") == []


@pytest.mark.parametrize(
    "text,expected",
    [
        ("{% if a %}\nx{% endif %}", ["newline after a block tag (trim_blocks)"]),
        ("{{ a }}\n  {% if b %}x{% endif %}", ["blanks before a block tag (lstrip_blocks)"]),
        ("{# c #}\nx", ["newline after a block tag (trim_blocks)"]),
        ("\n{{ a }}", ["whitespace at the start of the render (trim_start)"]),
        # the whitespace goes in every environment: `-`, or the template's one final newline
        ("{% if a -%}\nx{% endif %}", []),
        ("{% if a %}\n  {%- endif %}", []),
        ("{%- if a %}x{% endif %}\n", []),
        ("{{ a }}\n{{ b }}", []),  # no block tag: trim_blocks does not apply
        ("{% if a %}x{% endif %} {% if b %}y{% endif %}", []),  # not at the start of a line
    ],
)
def test_whitespace_trim_and_lstrip_depend_on(text: str, expected: list[str]) -> None:
    assert [c[2] for c in kinds(text, "whitespace")] == expected
    assert all(c[3] == {"candle-examples": "differs"} for c in kinds(text, "whitespace"))


def test_a_published_size_template_scans_in_one_pass() -> None:
    """Qwen3's shape (bench/lint_bench.py): every construct found once per place, none twice."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from lint_bench import qwen3_size_chat_template

    s = T.scan(qwen3_size_chat_template())
    assert s.error is None
    methods = [c.detail for c in T.constructs(s, "python-method")]
    assert methods == [
        "startswith",
        "endswith",
        "split",
        "rstrip",
        "split",
        "lstrip",
        "split",
        "lstrip",
        "strip",
        "lstrip",
    ]
    assert T.constructs(s, "negative-step") == [] and T.constructs(s, "whitespace") == []
    assert all("candle-examples" not in c.effects for c in T.constructs(s, "tojson"))  # both in tool branches
