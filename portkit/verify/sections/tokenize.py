"""The two tokenizers verify compares, loaded as their users load them, and a prompt's ids on both.

- candle: the `tokenizers` crate candle-core 0.11.0 depends on (`portkit_native.Tokenizer`,
  0.22.2) on tokenizer.json, as a candle program does;
- transformers: `AutoTokenizer.from_pretrained` on the directory (offline, no remote code:
  `portkit.verify.reference.tokenizer`, or its record from the reference's process).

`prompt_ids` gives a text prompt's (or a chat message's) ids on both sides; the section that
compares a whole corpus is `portkit.verify.sections.tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portkit.verify.errors import TokenizeError
from portkit.verify.reference.tokenizer import transformers_prompt, transformers_tokenizer


def _native() -> Any:
    # portkit_native itself, not portkit.verify.candle.native's wrapper: a missing wheel is a
    # TokenizeError here, which the prompt turns into its own bad input
    try:
        import portkit_native
    except ImportError as e:
        raise TokenizeError(f"portkit_native cannot be imported ({e}): build it with `make native`") from None
    return portkit_native


def crate_tokenizer(path: Path) -> tuple[Any, str | None]:
    """(the crate's tokenizer, None), or (None, the crate's own message) when it refuses the file."""
    pn = _native()
    try:
        return pn.Tokenizer.from_file(str(path)), None
    except pn.TokenizerError as e:
        return None, str(e)


def crate_from_text(text: str) -> Any:
    return _native().Tokenizer.from_str(text)


@dataclass(frozen=True)
class PromptIds:
    transformers: list[int]
    candle: list[int] | None  # None: the crate cannot load tokenizer.json
    text: str
    candle_error: str | None = None
    transformers_pieces: list[str] = field(default_factory=list)
    candle_pieces: list[str] = field(default_factory=list)


def prompt_ids(
    root: Path, *, text: str | None = None, chat: str | None = None, transformers: tuple[Any, str | None] | None = None
) -> PromptIds:
    """transformers' ids for `text` (special tokens on, as `tokenizer(text)`), or for `chat` as a
    one-message conversation rendered with the generation prompt (`apply_chat_template`, which
    adds no special tokens of its own); and the crate's ids for the same text, encoded with
    special tokens on, as a candle program encodes what it renders. `transformers`: (transformers'
    tokenizer, None) or (None, why) (verify's is `portkit.verify.reference.tokenizer`'s record), by default
    loaded here."""
    tok, err = transformers if transformers is not None else transformers_tokenizer(root)
    if tok is None:
        raise TokenizeError(f"{'--chat' if chat is not None else '--text'}: {err}")
    text, t_ids = transformers_prompt(tok, root, text=text, chat=chat)
    crate, crate_err = crate_tokenizer(root / "tokenizer.json")
    c_ids, c_pieces = crate.encode_pieces(text, True) if crate is not None else (None, [])
    return PromptIds(
        transformers=t_ids,
        candle=list(c_ids) if c_ids is not None else None,
        text=text,
        candle_error=crate_err,
        transformers_pieces=list(tok.convert_ids_to_tokens(t_ids)),
        candle_pieces=list(c_pieces),
    )
