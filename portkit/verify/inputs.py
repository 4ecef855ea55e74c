"""What `portkit verify` reads before running anything: the model directory and the prompt.

Every problem here is bad input (exit 2, one line): never a traceback, nothing executed or
unpickled, no tensor data read.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:
    from portkit.families import Family

#: Text used when the model dir has a tokenizer but no prompt.json (>= 8 tokens: RoPE errors
#: are invisible at position 0, whose rotation angle is 0).
DEFAULT_TEXT = "The capital of France is Paris, and the capital of Germany is"
#: Without a tokenizer: 16 fixed ids, reduced modulo the vocabulary.
DEFAULT_IDS_LEN = 16
MIN_RECOMMENDED = 8
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class BadInput(Exception):
    """Input verify cannot work with; the message is one line and ends the run with exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


@dataclass(frozen=True)
class ModelDir:
    root: Path
    config_text: str
    config: dict[str, Any]
    weight_files: tuple[Path, ...]

    @property
    def vocab_size(self) -> int | None:
        v = self.config.get("vocab_size")
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _read_json(path: Path, what: str) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise BadInput(f"{path}: {what} is {size} bytes, more than a config can be ({MAX_CONFIG_BYTES})")
        text = path.read_text(encoding="utf-8")
        return text, json.loads(text, parse_constant=_reject_constant)
    except BadInput:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadInput(f"{path}: cannot read {what}: {e}") from None


def weight_files(root: Path) -> tuple[Path, ...]:
    """The safetensors files candle and transformers load: the index's shards, else
    model.safetensors, else every *.safetensors in the directory."""
    index = root / "model.safetensors.index.json"
    if index.is_file():
        _, doc = _read_json(index, "the safetensors index")
        wm = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise BadInput(f"{index}: no `weight_map` of file names")
        files = []
        for name in sorted(set(wm.values())):
            p = (root / name).resolve()
            if root.resolve() not in p.parents:
                raise BadInput(f"{index}: shard {name!r} is outside the model directory")
            if not p.is_file():
                raise BadInput(f"{index}: shard {name} does not exist")
            files.append(p)
        return tuple(files)
    single = root / "model.safetensors"
    if single.is_file():
        return (single,)
    found = tuple(sorted(p for p in root.glob("*.safetensors") if p.is_file()))
    if found:
        return found
    pickles = sorted(p.name for p in root.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    if pickles:
        raise BadInput(
            f"{root}: only pickle weights ({', '.join(pickles[:3])}); verify never unpickles, "
            "convert them to safetensors first"
        )
    raise BadInput(f"{root}: no safetensors weights (model.safetensors or model.safetensors.index.json)")


def model_dir_arg(spec: str | Path) -> Path:
    """MODEL_DIR as verify and reference take it: a path, or ORG/NAME[@REV] resolved in the
    local Hugging Face cache (offline; a note on stderr names the snapshot)."""
    if os.path.lexists(spec):
        return Path(spec)
    from portkit.errors import InputError
    from portkit.hub import looks_like_repo_id, resolve

    if not looks_like_repo_id(str(spec)):
        return Path(spec)  # read_model_dir says what is wrong with it
    try:
        cached = resolve(str(spec))
    except InputError as e:
        raise BadInput(str(e)) from None
    print(f"portkit: note: {cached.describe()}", file=sys.stderr)
    return cached.path


def read_model_dir(path: str | Path) -> ModelDir:
    root = Path(path)
    try:
        if not root.exists():
            raise BadInput(f"{root}: no such directory")
        if not root.is_dir():
            raise BadInput(f"{root}: not a directory (verify takes the model directory holding config.json)")
        cfg_path = root / "config.json"
        if not cfg_path.is_file():
            raise BadInput(f"{root}: no config.json")
        text, cfg = _read_json(cfg_path, "config.json")
        if not isinstance(cfg, dict):
            raise BadInput(f"{cfg_path}: the top level is not a JSON object")
        return ModelDir(root=root, config_text=text, config=cfg, weight_files=weight_files(root))
    except OSError as e:  # permission denied, symlink loop, ...
        raise BadInput(f"{root}: {e.strerror or e}") from None


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
            f"so rotary-embedding and attention-scale errors show only from position 1 on; use at least {MIN_RECOMMENDED}"
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


def _encode(root: Path, text: str | None, source: str, chat: str | None = None, tokenizer: TokenizerSource | None = None) -> Prompt:
    """A text prompt as transformers encodes it (the forward runs on these ids on both sides),
    with the tokenizers crate's own ids beside it (portkit.verify.tokens.prompt_ids)."""
    tok_path = root / "tokenizer.json"
    if not tok_path.is_file():
        flag = "--chat" if chat is not None else "--text"
        raise BadInput(f"{flag} needs {tok_path} (the model dir has no tokenizer); pass --ids instead")
    from portkit.verify.tokenize import TokenizeError, prompt_ids

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
        _, doc = _read_json(model.root / "prompt.json", "prompt.json")
        got = doc.get("ids") if isinstance(doc, dict) else None
        if not isinstance(got, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in got):
            raise BadInput(f"{model.root / 'prompt.json'}: expected {{\"ids\": [int, ...]}}")
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


def finite(x: float) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def model_family(model: ModelDir) -> Family:
    """The candle module the checkpoint loads into (a config naming no model_type or
    architectures is llama, as lint reads it); one line and exit 2 for a model_type candle
    0.11.0 has no module for."""
    from portkit.families import UNCOVERED_CANDLE_MODULES, detect_or_default

    fam = detect_or_default(model.config)
    if fam is not None:
        return fam
    mt = model.config.get("model_type", (model.config.get("architectures") or ["?"])[0])
    if mt in UNCOVERED_CANDLE_MODULES:
        raise BadInput(f"model_type `{mt}`: portkit does not verify candle's `{UNCOVERED_CANDLE_MODULES[mt]}` module yet")
    raise BadInput(f"model_type `{mt}`: candle 0.11.0 has no module for it, so there is nothing to verify")
