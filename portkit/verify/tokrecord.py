"""transformers' tokenizer as verify asks it, recorded where transformers is imported (the
reference's child) and answered from the record in the process that compares.

verify imports transformers once, in the reference's child (`portkit.verify.refproc`). The tokens
section and a text prompt's ids need transformers' tokenizer in the verify process; `record`
runs, in the child, every call they make on it (the corpus encodes, their pieces and decodes,
the chat template, the prompt's ids, the special tokens and their ids, the chat-template check's
renders: `portkit.verify.chat_templates`) and returns the answers as
JSON; `RecordedTokenizer` answers the same calls from that JSON. A call that was not recorded
raises `NotRecorded` naming it: a new use of the tokenizer in the tokens section is added to
`record` (tests/unit/test_tokrecord.py replays the section on every tokenizer shape).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

#: the attributes the tokens section reads
ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "pad_token", "all_special_tokens", "bos_token_id", "chat_template")


class NotRecorded(LookupError):
    """A tokenizer call `record` did not make (a bug in portkit, not in the model)."""


def _key(method: str, *args: Any) -> str:
    return json.dumps([method, *args], ensure_ascii=False)


def _template_key(messages: list[dict[str, str]], kw: dict[str, Any]) -> str:
    """`apply_chat_template`'s call in canonical form: its keyword arguments (`tokenize`,
    `add_generation_prompt`, and the chat-template check's `tools` and `chat_template`) with
    transformers' defaults filled in."""
    args = {"tokenize": True, "add_generation_prompt": False, **kw}
    args["tokenize"], args["add_generation_prompt"] = bool(args["tokenize"]), bool(args["add_generation_prompt"])
    return json.dumps(["apply_chat_template", messages, args], ensure_ascii=False, sort_keys=True)


def _plain(v: Any) -> Any:
    """A tokenizer's answer as JSON (apply_chat_template's BatchEncoding as its input_ids)."""
    if hasattr(v, "keys") and "input_ids" in v.keys():
        return {"input_ids": [int(i) for i in v["input_ids"]]}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, int):
        return int(v)
    return str(v)


class Recorder:
    """The real tokenizer, every answer kept (an exception as its text) under the call's
    canonical form."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.calls: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name in ATTRIBUTES:
            return getattr(self.tok, name, None)
        raise AttributeError(name)

    def _call(self, key: str, fn: Any) -> Any:
        try:
            out = fn()
        except Exception as e:  # the text is the evidence (a chat template may raise)
            self.calls[key] = {"raise": str(e)}
            raise
        self.calls[key] = {"value": _plain(out)}
        return out

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._call(_key("encode", text, bool(add_special_tokens)), lambda: list(self.tok.encode(text, add_special_tokens=add_special_tokens)))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        ids = [int(i) for i in ids]
        return self._call(_key("decode", ids, bool(skip_special_tokens)), lambda: self.tok.decode(ids, skip_special_tokens=skip_special_tokens))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        ids = [int(i) for i in ids]
        return self._call(_key("convert_ids_to_tokens", ids), lambda: list(self.tok.convert_ids_to_tokens(ids)))

    def convert_tokens_to_ids(self, token: str) -> Any:
        return self._call(_key("convert_tokens_to_ids", token), lambda: self.tok.convert_tokens_to_ids(token))

    def apply_chat_template(self, messages: list[dict[str, str]], **kw: Any) -> Any:
        return self._call(_template_key(messages, kw), lambda: self.tok.apply_chat_template(messages, **kw))

    def doc(self) -> dict[str, Any]:
        attrs = {a: _plain(getattr(self.tok, a, None)) for a in ATTRIBUTES}
        return {"class": type(self.tok).__name__, "attributes": attrs, "calls": self.calls}


class RecordedTokenizer:
    """transformers' tokenizer as `record` saw it: the same answers to the same calls."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.class_name: str = doc["class"]
        for a, v in doc["attributes"].items():
            setattr(self, a, v)

    def _answer(self, key: str) -> Any:
        got = self.doc["calls"].get(key)
        if got is None:
            raise NotRecorded(f"transformers' tokenizer was not asked {key} in the reference's process (portkit.verify.tokrecord.record)")
        if "raise" in got:
            raise RuntimeError(got["raise"])
        return got["value"]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._answer(_key("encode", text, bool(add_special_tokens))))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._answer(_key("decode", [int(i) for i in ids], bool(skip_special_tokens)))

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return list(self._answer(_key("convert_ids_to_tokens", [int(i) for i in ids])))

    def convert_tokens_to_ids(self, token: str) -> Any:
        return self._answer(_key("convert_tokens_to_ids", token))

    def apply_chat_template(self, messages: list[dict[str, str]], **kw: Any) -> Any:
        return self._answer(_template_key(messages, kw))


def record(root: Path, *, text: str | None = None, chat: str | None = None) -> dict[str, Any]:
    """In the process that imports transformers: {"error": why} when transformers cannot load
    the tokenizer, else the record of every call the tokens section (`portkit.verify.tokens`) and
    the prompt (`portkit.verify.tokenize.prompt_ids`, for `text` or `chat`, and verify's default
    text) make."""
    from portkit.verify import tokens as T
    from portkit.verify.tokenize import render_chat, transformers_prompt, transformers_tokenizer

    tok, err = transformers_tokenizer(root)
    if tok is None:
        return {"error": err}
    rec = Recorder(tok)
    chat_text, _ = render_chat(rec, T.CONVERSATION)
    samples = T.section_corpus(rec, root, chat_text)
    from portkit.verify.inputs import DEFAULT_TEXT

    # the prompt verify asked for, and the text it encodes when it is given no prompt
    for prompt in ({"text": text, "chat": chat}, {"text": DEFAULT_TEXT, "chat": None}):
        if prompt["text"] is not None or prompt["chat"] is not None:
            try:
                rec.convert_ids_to_tokens(transformers_prompt(rec, root, **prompt)[1])
            except Exception:  # noqa: BLE001 - recorded: the verify process raises it as its own bad input
                pass
    for s in samples:
        for special in (True, False):
            ids = rec.encode(s.text, special)
            rec.convert_ids_to_tokens(ids)
            if not special:
                rec.decode(ids, skip_special_tokens=False)
    for token in [*getattr(tok, "get_added_vocab", dict)(), *getattr(tok, "all_special_tokens", [])]:
        rec.convert_tokens_to_ids(token)
    from portkit.verify.chat_templates import transformers_renders

    transformers_renders(rec)  # the chat-template check's renders (and their counterfactuals')
    return rec.doc()


def recorded(doc: dict[str, Any]) -> tuple[RecordedTokenizer | None, str | None]:
    """`tokenize.transformers_tokenizer`'s answer from a record: (tokenizer, None) or (None, why)."""
    if "error" in doc:
        return None, doc["error"]
    return RecordedTokenizer(doc), None
