"""What verify feeds both sides' tokenizers and chat-template renderers: the texts, the
conversations, the edits of a template its counterfactuals make, and a render's result.

The tokens section (`portkit.verify.sections.tokens`, `sections.chat_templates`) compares
candle's side with transformers' on them; the reference's process records transformers' answers
to the same calls (`portkit.verify.reference.tokenizer.record`): both read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Text used when the model dir has a tokenizer but no prompt.json (>= 8 tokens: RoPE errors
#: are invisible at position 0, whose rotation angle is 0).
DEFAULT_TEXT = "The capital of France is Paris, and the capital of Germany is"


# ------------------------------------------------------------------ the tokens section's corpus


#: The conversation the chat template is rendered with: a user turn and an assistant turn, so the
#: markup the template writes around each role is encoded too.
CONVERSATION = [
    {"role": "user", "content": "Hi! What is 2 + 2?"},
    {"role": "assistant", "content": "2 + 2 is 4."},
]


#: (text, what it exercises)
BASE_TEXTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Hello world", ("plain",)),
    (" Hello world", ("leading-space",)),
    ("  Hello  world  twice", ("leading-space", "repeated-space")),
    ("Hello\nworld\n\nthen\ttabs\tand  spaces", ("whitespace",)),
    ("The year 2024 has 366 days; pi is 3.14159 and 1234567890 is long.", ("digits",)),
    ("émoji 🤗 ünïcode — naïve café, 日本語のテキスト", ("unicode",)),
    ("de\u0301composed accents: e\u0301te\u0301 and n\u0303", ("unicode",)),
    ("def f(x):\n    return x * 2  # double it\n", ("code",)),
    ('{"key": [1, 2, 3], "ok": true}', ("code",)),
    ("The capital of France is Paris, and the capital of Germany is", ("plain",)),
)


MAX_SPECIAL_TOKENS = 8


#: A saved truncation (`max_length`) up to this many tokens gets a text longer than it in the
#: corpus, so that PK506 is judged by ids; a longer one is left out (the text would cost more
#: than a prompt that long is likely to be fed).
MAX_LONG_TEXT_TOKENS = 8192


_LONG_WORDS = ("the", "model", "reads", "every", "token", "of", "this", "long", "text", "once")


@dataclass(frozen=True)
class Sample:
    text: str
    tags: tuple[str, ...]


def special_tokens_of(tok: Any, chat: str | None) -> list[str]:
    """The model's own special tokens, the named ones first, then those the chat template uses."""
    named = [t for t in (tok.bos_token, tok.eos_token, tok.unk_token, tok.pad_token) if isinstance(t, str) and t]
    rest = [t for t in getattr(tok, "all_special_tokens", []) if isinstance(t, str)]
    in_chat = [t for t in rest if chat and t in chat]
    out: list[str] = []
    for t in named + in_chat + rest:
        if t not in out:
            out.append(t)
    return out[:MAX_SPECIAL_TOKENS]


def long_text(tokens: int) -> str:
    """A text of more than `tokens` tokens in any tokenizer: more words than that, each at least
    one token (every tokenizer splits at spaces before it merges)."""
    return " ".join(_LONG_WORDS[i % len(_LONG_WORDS)] for i in range(tokens + 16))


def saved_truncation(path: Path) -> int | None:
    """tokenizer.json's saved truncation `max_length`, if any."""
    from portkit.model.tokenizer_files import read_tokenizer_json

    try:
        trunc = read_tokenizer_json(path).value.get("truncation")
    except Exception:  # noqa: BLE001 - the crate's own load reports a bad file
        return None
    length = trunc.get("max_length") if isinstance(trunc, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None


def section_corpus(tok: Any, root: Path, chat_text: str | None) -> list[Sample]:
    """The section's corpus for transformers' tokenizer `tok` on `root` (`tokrecord.record` encodes the same)."""
    return corpus(special_tokens_of(tok, chat_text), chat_text, saved_truncation(root / "tokenizer.json"))


def corpus(specials: Sequence[str], chat: str | None, longer_than: int | None = None) -> list[Sample]:
    """The built-in texts, each special token inside text, the rendered chat; with `longer_than`
    (a saved truncation's `max_length`), one text longer than that."""
    out = [Sample(t, tags) for t, tags in BASE_TEXTS]
    if longer_than is not None and longer_than <= MAX_LONG_TEXT_TOKENS:
        out.append(Sample(long_text(longer_than), ("longer-than-truncation",)))
    for s in specials:
        out += [
            Sample(f"Hello{s}world", ("special-inside", "after-special")),
            Sample(f"Hello {s} world", ("special-inside", "special-with-space")),
            Sample(f"{s}Hi there", ("after-special",)),
            Sample(f"Hi there {s}", ("special-inside",)),
        ]
    if chat is not None:
        out.append(Sample(chat, ("chat", "after-special")))
    return out


# ------------------------------------------------------------- the chat-template check's conversations


USER = "Hi! What is 2 + 2?"


SYSTEM = "You are a helpful assistant."


ANSWER = "2 + 2 is 4."


FOLLOW_UP = "And 3 + 3?"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
    },
}


WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}


@dataclass(frozen=True)
class Conversation:
    name: str
    messages: tuple[dict[str, Any], ...]
    add_generation_prompt: bool
    tools: tuple[dict[str, Any], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "messages": list(self.messages),
            "add_generation_prompt": self.add_generation_prompt,
            "tools": list(self.tools) if self.tools else None,
        }


def _user(text: str = USER) -> dict[str, Any]:
    return {"role": "user", "content": text}


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("one user turn", (_user(),), True),
    Conversation("one user turn, no generation prompt", (_user(),), False),
    Conversation("a system turn", ({"role": "system", "content": SYSTEM}, _user()), True),
    Conversation("a system turn, no generation prompt", ({"role": "system", "content": SYSTEM}, _user()), False),
    Conversation("several turns", (_user(), {"role": "assistant", "content": ANSWER}, _user(FOLLOW_UP)), True),
    Conversation(
        "several turns, ending with the assistant",
        ({"role": "system", "content": SYSTEM}, _user(), {"role": "assistant", "content": ANSWER}),
        False,
    ),
    # what the OpenAI SDK hands back: `tool_calls=None` on a plain answer
    Conversation(
        "a message with a None field",
        (_user(), {"role": "assistant", "content": ANSWER, "tool_calls": None}, _user(FOLLOW_UP)),
        True,
    ),
)


TOOL_CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation("tools", (_user("What is the weather in Paris?"),), True, (WEATHER_TOOL,)),
    Conversation(
        "tools, a call and its result",
        (
            _user("What is the weather in Paris?"),
            {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
            {"role": "tool", "content": '{"temperature": 21}'},
        ),
        True,
        (WEATHER_TOOL,),
    ),
)


_TAKES_TOOLS = re.compile(r"\btools\b")


def conversations_for(template: str) -> list[Conversation]:
    """The built-in conversations, with the tool ones when the template reads `tools`."""
    return list(CONVERSATIONS) + (list(TOOL_CONVERSATIONS) if _TAKES_TOOLS.search(template) else [])


@dataclass
class Render:
    text: str | None = None
    error: str | None = None  # the environment's refusal, its own text
    cannot: str | None = None  # a conversation the program cannot be given, or what portkit does not reproduce
    ids: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "error": self.error, "cannot": self.cannot, "ids": self.ids}


#: What removes a "differs" claim's cause, per construct: an edit of the template transformers
#: renders (what the environment does to it) or settings of the environment (what it lacks).
def template_edits() -> dict[str, tuple[Callable[[str], str] | None, dict[str, bool], str]]:
    from portkit.semantics import chat_template

    return {
        "whitespace": (None, {"trim_blocks": True, "lstrip_blocks": True}, "trim_blocks and lstrip_blocks set"),
        "negative-step": (
            lambda t: chat_template.MISTRAL_RS_DESCENDING_RANGE.sub(r"range(\g<expr>)|reverse", t),
            {},
            "transformers given mistral.rs's `range(n)|reverse` rewrite",
        ),
        "tojson": (
            chat_template.without_tojson_arguments,
            {},
            "transformers given the template without the `tojson` arguments mistral.rs ignores",
        ),
    }


def edited_template(template: str, constructs: Sequence[str], edits: dict[str, Any] | None = None) -> str:
    """`template` with the edits of `constructs` (`template_edits`), in their sorted order."""
    edits = edits if edits is not None else template_edits()
    for c in sorted(set(constructs)):
        edit = edits[c][0]
        template = edit(template) if edit is not None else template
    return template
