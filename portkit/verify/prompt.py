"""The prompt `portkit verify` runs, and how many tokens it generates after it.

A prompt is `--ids`, `--text` or `--chat` (a text one as transformers' tokenizer encodes it,
with the tokenizers crate's ids beside it), else the model dir's prompt.json, the default text
when it has a tokenizer, or fixed ids. Every problem is bad input (exit 2, one line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portkit.verify.corpus import DEFAULT_TEXT
from portkit.verify.errors import BadInput, TokenizeError
from portkit.verify.model_dir import ModelDir, read_json

#: Without a tokenizer: 16 fixed ids, reduced modulo the vocabulary.
DEFAULT_IDS_LEN = 16


MIN_RECOMMENDED = 8


@dataclass(frozen=True)
class Prompt:
    ids: tuple[int, ...]
    source: str  # "--ids" | "--text" | "--chat" | "prompt.json" | "default text" | "default ids"
    text: str | None = None
    #: A text prompt's ids from the tokenizers crate on tokenizer.json (what a candle program
    #: feeds); `ids` are transformers' and run on both sides. None for ids given as ids.
    candle_ids: tuple[int, ...] | None = None

    def describe(self) -> str:
        head = " ".join(str(i) for i in self.ids[:12]) + (" ..." if len(self.ids) > 12 else "")
        what = f"{len(self.ids)} ids from {self.source}"
        if self.text is not None:
            shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
            what += f" ({shown!r})"
        return f"{what}: {head}"

    def short_warning(self) -> str | None:
        """Why a prompt under MIN_RECOMMENDED tokens proves little: position 0 hides RoPE and the
        attention scale (rotation angle 0; one key softmaxes to 1)."""
        if len(self.ids) >= MIN_RECOMMENDED:
            return None
        n = len(self.ids)
        return (
            f"the prompt has {n} token{'s' if n != 1 else ''}: position 0 has rotation angle 0 and attends to one key, "
            "so rotary-embedding and attention-scale errors show only from position 1 on; use at least "
            f"{MIN_RECOMMENDED}"
        )


def parse_ids(spec: str) -> list[int]:
    parts = [p.strip() for p in spec.replace(" ", ",").split(",") if p.strip()]
    if not parts:
        raise BadInput("--ids: no token ids given (expected e.g. --ids 1,2,3)")
    out = []
    for p in parts:
        try:
            if len(p) > 20:  # past int64, and never echoed whole
                raise ValueError
            v = int(p)
        except ValueError:
            raise BadInput(f"--ids: {p[:24] + ('...' if len(p) > 24 else '')!r} is not an integer token id") from None
        if v < 0:
            raise BadInput(f"--ids: {v} is negative")
        out.append(v)
    return out


def _encode(
    root: Path, text: str | None, source: str, chat: str | None = None, tokenizer: TokenizerSource | None = None
) -> Prompt:
    """A text prompt as transformers encodes it (the forward runs on these ids on both sides),
    with the tokenizers crate's own ids beside it (portkit.verify.sections.tokens.prompt_ids)."""
    tok_path = root / "tokenizer.json"
    if not tok_path.is_file():
        flag = "--chat" if chat is not None else "--text"
        raise BadInput(f"{flag} needs {tok_path} (the model dir has no tokenizer); pass --ids instead")
    from portkit.verify.sections.tokenize import prompt_ids

    try:
        p = prompt_ids(root, text=text, chat=chat, transformers=tokenizer() if tokenizer is not None else None)
    except TokenizeError as e:
        raise BadInput(str(e)) from None
    return Prompt(tuple(p.transformers), source, p.text, tuple(p.candle) if p.candle is not None else None)


def _default_ids(vocab: int | None, config: dict[str, Any]) -> list[int]:
    n = vocab or 256
    bos = config.get("bos_token_id")
    start = [bos] if isinstance(bos, int) and not isinstance(bos, bool) and 0 <= bos < n else []
    return start + [(37 * k + 11) % n for k in range(DEFAULT_IDS_LEN - len(start))]


#: gives (transformers' tokenizer, None) or (None, why): verify's comes from the reference's process
TokenizerSource = Callable[[], tuple[Any, "str | None"]]


def resolve_prompt(
    model: ModelDir,
    ids: str | Sequence[int] | None = None,
    text: str | None = None,
    chat: str | None = None,
    tokenizer: TokenizerSource | None = None,
) -> Prompt:
    """The prompt verify runs; a text one as transformers' tokenizer (`tokenizer`, by default
    loaded here) encodes it."""
    if sum(x is not None for x in (ids, text, chat)) > 1:
        raise BadInput("give one of --ids, --text or --chat")
    if ids is not None:
        prompt = Prompt(tuple(parse_ids(ids) if isinstance(ids, str) else [int(i) for i in ids]), "--ids")
    elif text is not None:
        if not text.strip():
            raise BadInput("--text is empty")
        prompt = _encode(model.root, text, "--text", tokenizer=tokenizer)
    elif chat is not None:
        if not chat.strip():
            raise BadInput("--chat is empty")
        prompt = _encode(model.root, None, "--chat", chat=chat, tokenizer=tokenizer)
    elif (model.root / "prompt.json").is_file():
        _, doc = read_json(model.root / "prompt.json", "prompt.json")
        got = doc.get("ids") if isinstance(doc, dict) else None
        if not isinstance(got, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in got):
            raise BadInput(f'{model.root / "prompt.json"}: expected {{"ids": [int, ...]}}')
        prompt = Prompt(tuple(got), "prompt.json")
    elif (model.root / "tokenizer.json").is_file():
        try:
            prompt = _encode(model.root, DEFAULT_TEXT, "default text", tokenizer=tokenizer)
        except BadInput:
            prompt = Prompt(tuple(_default_ids(model.vocab_size, model.config)), "default ids")
        if len(prompt.ids) < MIN_RECOMMENDED:
            prompt = Prompt(tuple(_default_ids(model.vocab_size, model.config)), "default ids")
    else:
        prompt = Prompt(tuple(_default_ids(model.vocab_size, model.config)), "default ids")
    if not prompt.ids:
        raise BadInput(f"the prompt from {prompt.source} has no tokens")
    vocab = model.vocab_size
    if vocab is not None:
        bad = [i for i in prompt.ids if i >= vocab]
        if bad:
            raise BadInput(f"prompt from {prompt.source}: id {bad[0]} is outside the vocabulary (vocab_size {vocab})")
    return prompt


def parse_tokens(n: int) -> int:
    if n < 0:
        raise BadInput(f"--tokens must be >= 0, got {n}")
    if n > 4096:
        raise BadInput(f"--tokens {n} is more than verify generates (at most 4096)")
    return n
