"""portkit_native.render_chat_template: the two Rust environments, against transformers' own
render_jinja_template on the same template (native/src/chat_template.rs holds the Rust tests of
each setting; these check the binding and the errors it raises)."""

from __future__ import annotations

import pytest

pn = pytest.importorskip("portkit_native")

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def transformers_render(template: str, messages: list[dict], **kw: object) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    return render_jinja_template([messages], chat_template=template, **kw)[0][0]


def test_environments_are_named_after_what_users_run() -> None:
    assert pn.chat_environments() == ["candle-examples", "mistral.rs"]
    with pytest.raises(ValueError, match="unknown chat-template environment"):
        pn.render_chat_template("jinja2", "x", MESSAGES)


@pytest.mark.parametrize("env", ["candle-examples", "mistral.rs"])
def test_a_plain_template_renders_as_transformers_does(env: str) -> None:
    t = (
        "{%- for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}{% endfor %}{% if add_generation_prompt "
        "%}<|assistant|>{% endif %}"
    )
    for agp in (True, False):
        assert pn.render_chat_template(env, t, MESSAGES, add_generation_prompt=agp) == transformers_render(
            t, MESSAGES, add_generation_prompt=agp
        )


def test_refusals_raise_chat_template_error_with_the_programs_text() -> None:
    with pytest.raises(
        pn.ChatTemplateError, match=r"^Template error: syntax error: unknown statement break \(in chat:1\)"
    ):
        pn.render_chat_template("candle-examples", "{% for m in messages %}{% break %}{% endfor %}", MESSAGES)
    with pytest.raises(pn.ChatTemplateError, match=r"^syntax error: unknown statement break \(in chat_template:1\)"):
        pn.render_chat_template("mistral.rs", "{% for m in messages %}{% break %}{% endfor %}", MESSAGES)
    assert issubclass(pn.ChatTemplateError, pn.NativeError)


def test_what_a_program_cannot_be_given() -> None:
    with pytest.raises(ValueError, match="no `tools`"):
        pn.render_chat_template(
            "candle-examples", "x", MESSAGES, tools=[{"type": "function", "function": {"name": "f"}}]
        )
    with pytest.raises(NotImplementedError, match="Gemma 4"):
        pn.render_chat_template("mistral.rs", "<|tool_call>{{ x }}<tool_call|>", MESSAGES)


def test_the_switches_are_the_counterfactual() -> None:
    t = "{% for m in messages %}\n{{ m['content'] }}\n{% endfor %}"
    as_written = pn.render_chat_template("candle-examples", t, MESSAGES)
    switched = pn.render_chat_template("candle-examples", t, MESSAGES, trim_blocks=True, lstrip_blocks=True)
    assert as_written != transformers_render(t, MESSAGES) and switched == transformers_render(t, MESSAGES)


def test_special_tokens_as_each_program_passes_them() -> None:
    t = "[{{ bos_token }}|{{ eos_token }}|{{ unk_token }}]"
    assert pn.render_chat_template("candle-examples", t, MESSAGES, bos_token="<s>") == "[<s>||]"
    assert pn.render_chat_template("mistral.rs", t, MESSAGES, bos_token="<s>") == "[<s>|none|none]"
    assert transformers_render(t, MESSAGES, bos_token="<s>") == "[<s>||]"
