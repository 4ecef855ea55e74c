"""transformers' tokenizer as verify asks it: loaded as a transformers user loads it, its
renders and encodes, recorded where transformers is imported (the reference's child) and
answered from the record in the process that compares.

verify imports transformers once, in the reference's child (`portkit.verify.reference.child`).
The tokens section and a text prompt's ids need transformers' tokenizer in the verify process;
`record` runs, in the child, every call they make on it (the corpus encodes, their pieces and
decodes, the chat template, the prompt's ids, the special tokens and their ids, the
chat-template check's renders and their counterfactuals') and returns the answers as JSON;
`RecordedTokenizer` answers the same calls from that JSON. A call that was not recorded raises
`NotRecorded` naming it: a new use of the tokenizer in the tokens section is added to `record`
(tests/native/test_tokrecord.py replays the section on every tokenizer shape and template).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portkit.verify import corpus
from portkit.verify.corpus import Conversation, Render
from portkit.verify.errors import TokenizeError, one_line

#: the attributes the tokens section reads
ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "pad_token", "all_special_tokens", "bos_token_id", "chat_template")


def transformers_tokenizer(root: Path) -> tuple[Any, str | None]:
    """`AutoTokenizer.from_pretrained` on the directory (offline, no remote code): (tokenizer,
    None), or (None, why)."""
    from portkit.verify.reference.runtime import ReferenceLoadError, load_tokenizer

    try:
        return load_tokenizer(root), None
    except ReferenceLoadError as e:
        return None, str(e)


def render_chat(
    tok: Any, messages: list[dict[str, str]], *, generation_prompt: bool = False
) -> tuple[str | None, str | None]:
    """(text, note): the conversation rendered by transformers' chat template, or why not."""
    if not getattr(tok, "chat_template", None):
        return None, "no chat template"
    try:
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt), None
    except Exception as e:  # a template may raise (an unsupported role, a missing variable)
        return None, f"the chat template fails: {one_line(e, 160)}"


def transformers_prompt(
    tok: Any, root: Path, *, text: str | None = None, chat: str | None = None
) -> tuple[str, list[int]]:
    """(the text, transformers' ids) of `prompt_ids`'s prompt."""
    if chat is not None:
        rendered, note = render_chat(tok, [{"role": "user", "content": chat}], generation_prompt=True)
        if rendered is None:
            raise TokenizeError(f"--chat: {note} in {root}")
        return rendered, list(
            tok.apply_chat_template([{"role": "user", "content": chat}], tokenize=True, add_generation_prompt=True)[
                "input_ids"
            ]
        )
    assert text is not None
    return text, list(tok.encode(text, add_special_tokens=True))


def render_transformers(tok: Any, conv: Conversation, template: str | None = None) -> Render:
    """`conv` rendered by transformers' `apply_chat_template` (with `template` instead of the
    model's, for a counterfactual) and its ids without special tokens, as the check compares them."""
    kw: dict[str, Any] = {"add_generation_prompt": conv.add_generation_prompt, "tokenize": False}
    if conv.tools:
        kw["tools"] = list(conv.tools)
    if template is not None:
        kw["chat_template"] = template
    try:
        text = tok.apply_chat_template([dict(m) for m in conv.messages], **kw)
    except Exception as e:  # noqa: BLE001 - the template may raise (a role it does not take): that conversation is not compared
        return Render(error=one_line(e))
    return Render(text=text, ids=list(tok.encode(text, add_special_tokens=False)))


def transformers_renders(tok: Any) -> None:
    """Every render the chat-template check (`portkit.verify.sections.chat_templates`) may ask of
    transformers' tokenizer `tok`: each conversation with the model's template, and with every
    combination of the template edits its counterfactuals may make (`record` makes them in the
    reference's process, so the check runs on the record)."""
    template = getattr(tok, "chat_template", None)
    if not isinstance(template, str) or not template:
        return
    convs = corpus.conversations_for(template)
    for c in convs:
        render_transformers(tok, c)
    editable = sorted(c for c, (edit, _sw, _label) in corpus.template_edits().items() if edit is not None)
    for n in range(1, len(editable) + 1):
        for combo in itertools.combinations(editable, n):
            edited = corpus.edited_template(template, combo)
            if edited != template:
                for c in convs:
                    render_transformers(tok, c, edited)


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
        return self._call(
            _key("encode", text, bool(add_special_tokens)),
            lambda: list(self.tok.encode(text, add_special_tokens=add_special_tokens)),
        )

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        ids = [int(i) for i in ids]
        return self._call(
            _key("decode", ids, bool(skip_special_tokens)),
            lambda: self.tok.decode(ids, skip_special_tokens=skip_special_tokens),
        )

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
            raise NotRecorded(
                f"transformers' tokenizer was not asked {key} in the reference's process "
                "(portkit.verify.reference.tokenizer.record)"
            )
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
    the tokenizer, else the record of every call the tokens section (`portkit.verify.sections.tokens`
    and `sections.chat_templates`) and the prompt (`portkit.verify.sections.tokenize.prompt_ids`,
    for `text` or `chat`, and verify's default text) make."""
    tok, err = transformers_tokenizer(root)
    if tok is None:
        return {"error": err}
    rec = Recorder(tok)
    chat_text, _ = render_chat(rec, corpus.CONVERSATION)
    samples = corpus.section_corpus(rec, root, chat_text)
    # the prompt verify asked for, and the text it encodes when it is given no prompt
    for prompt in ({"text": text, "chat": chat}, {"text": corpus.DEFAULT_TEXT, "chat": None}):
        if prompt["text"] is not None or prompt["chat"] is not None:
            try:
                rec.convert_ids_to_tokens(transformers_prompt(rec, root, **prompt)[1])
            except Exception:  # noqa: BLE001 - recorded: the verify process raises it as its own bad input
                pass
    for s in samples:
        for special in (True, False):
            ids = rec.encode(s.text, special)
            rec.convert_ids_to_tokens(ids)
            # decoded as written (without special tokens), and skipping them as candle-examples' TokenOutputStream does
            rec.decode(ids, skip_special_tokens=special)
    for token in [*getattr(tok, "get_added_vocab", dict)(), *getattr(tok, "all_special_tokens", [])]:
        rec.convert_tokens_to_ids(token)
    transformers_renders(rec)  # the chat-template check's renders (and their counterfactuals')
    return rec.doc()


def recorded(doc: dict[str, Any]) -> tuple[RecordedTokenizer | None, str | None]:
    """`transformers_tokenizer`'s answer from a record: (tokenizer, None) or (None, why)."""
    if "error" in doc:
        return None, doc["error"]
    return RecordedTokenizer(doc), None
