"""The only code in portkit that opens model files.

`load_model(dir)` returns one immutable `ModelFacts`: config.json as written (value, text,
key positions), generation_config.json, safetensors headers (single file or sharded through
`model.safetensors.index.json`), GGUF metadata and tensor infos, and the names of
pickle-only weight files (reported, never opened), and the tokenizer files
(`portkit.model.tokenizer_files`). `model_targets(paths)` turns the paths a user or pre-commit
passes (directories, config.json, .safetensors, index, .gguf, tokenizer files) into what to
lint in each model directory, each directory once: a directory means everything in it, a
`.gguf` that GGUF alone, a tokenizer file the tokenizer of its directory, any other file the
Hugging Face model (config.json and its safetensors) of its directory. A directory holding
tokenizer files and no config.json (a tokenizer-only repository) is a model to lint too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from portkit.errors import InputError, NoModelHere
from portkit.model.jsonfile import JsonDoc, _oserror, exists, load_json
from portkit.model.safetensors_header import (
    LfsPointer,
    SafetensorsFile,
    TensorInfo,
    read_safetensors_header,
)
from portkit.model.tokenizer_files import TOKENIZER_FILES, TokenizerFacts, has_tokenizer_files, read_tokenizer_files

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from portkit.model.gguf_header import GgufFile, GgufTensor, GgufValue
    from portkit.model.sentence_pipeline import SentencePipeline


def __getattr__(name: str) -> Any:
    # The GGUF reader loads when a directory holds a .gguf, not on every lint.
    if name in ("GgufFile", "GgufTensor", "GgufValue", "read_gguf"):
        from portkit.model import gguf_header

        return getattr(gguf_header, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GgufFile",
    "GgufTensor",
    "GgufValue",
    "JsonDoc",
    "ModelFacts",
    "SafetensorsFacts",
    "TensorInfo",
    "ModelTarget",
    "load_model",
    "model_dirs",
    "model_targets",
]

INDEX_NAME = "model.safetensors.index.json"
PICKLE_PATTERNS = re.compile(r"(^pytorch_model(-\d+-of-\d+)?\.bin$)|(\.(pt|pth|ckpt)$)|(^consolidated\.\d+\.pth$)")
SHARD_PATTERN = re.compile(r"^model(-\d+-of-\d+)?\.safetensors$")


@dataclass(frozen=True, slots=True)
class SafetensorsFacts:
    """The tensors candle's `VarBuilder::from_mmaped_safetensors` would see, from headers only."""

    files: tuple[SafetensorsFile, ...]
    index: JsonDoc | None
    tensors: Mapping[str, TensorInfo]

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(f.path for f in self.files)


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """One model directory as lint sees it: its JSON files, headers and what it skipped."""

    root: Path
    config: JsonDoc | None
    generation_config: JsonDoc | None = None
    safetensors: SafetensorsFacts | None = None
    ggufs: tuple[GgufFile, ...] = ()
    pickle_files: tuple[Path, ...] = ()
    lfs_pointers: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=())
    tokenizer: TokenizerFacts | None = None
    sentence_pipeline: SentencePipeline | None = None  # modules.json and its modules (portkit.model.sentence_pipeline)

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError as e:
        raise InputError(p, _oserror(e)) from None


def _dir_key(p: Path) -> tuple[str, Path]:
    """(resolved key, absolute path) of an existing path, or the InputError a user should see."""
    try:
        os.stat(p)  # follows symlinks: raises ELOOP on a loop, ENOENT when dangling
    except OSError as e:
        raise InputError(p, _oserror(e)) from None
    d = p.absolute()
    try:
        return str(d.resolve(strict=True)), d
    except (OSError, RuntimeError) as e:
        raise InputError(d, _oserror(e) if isinstance(e, OSError) else "symlink loop") from None


def model_dirs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Model directories for the given paths, in order, each once.

    A directory is a model directory; a file stands for the directory that holds it, so a
    pre-commit hook passing `config.json` and `model.safetensors` lints that directory once.
    """
    return [t.root for t in model_targets(paths)]


@dataclass(frozen=True, slots=True)
class ModelTarget:
    """What to lint in one model directory.

    `everything`: the directory was named, so all of it (the Hugging Face model and every
    GGUF). Otherwise `hf_model` (config.json, safetensors, index or another file of the model
    was named), `tokenizer` (a tokenizer file was named: the tokenizer rules' findings) and
    `ggufs`, the names of the GGUF files named: each GGUF is a whole model of its own, and a
    repository often holds many quantizations side by side.
    """

    root: Path
    everything: bool = False
    hf_model: bool = False
    ggufs: tuple[str, ...] = ()
    tokenizer: bool = False

    def wants(self, filename: str, group: str = "") -> bool:
        """Whether a finding in `filename` (a path under `root`) is about what was named.
        `group`: the group of the rule that found it (`Rule.group`): a named tokenizer file
        wants every tokenizer rule's finding, wherever it points (generation_config.json too)."""
        if self.everything:
            return True
        if self.tokenizer and group == "tokenizer":
            return True
        gguf_paths = {str(self.root / n) for n in self.ggufs}
        if filename in gguf_paths:
            return True
        return self.hf_model and not filename.lower().endswith(".gguf")


def model_targets(paths: Iterable[str | os.PathLike[str]]) -> list[ModelTarget]:
    """One `ModelTarget` per model directory the paths name, in first-seen order.

    Several files of one model (what pre-commit passes) merge into one target, so the model is
    read and linted once and each finding is reported once.
    """
    order: list[str] = []
    roots: dict[str, Path] = {}
    everything: set[str] = set()
    hf: set[str] = set()
    tok: set[str] = set()
    ggufs: dict[str, list[str]] = {}
    for raw in paths:
        p = Path(raw)
        key, absolute = _dir_key(p)
        is_dir = _is_dir(p)
        if is_dir:
            d, dkey = absolute, key
        else:
            d = absolute.parent
            dkey = _dir_key(d)[0]
        if dkey not in roots:
            roots[dkey] = d
            order.append(dkey)
        if is_dir:
            everything.add(dkey)
        elif p.name.lower().endswith(".gguf"):
            names = ggufs.setdefault(dkey, [])
            if p.name not in names:
                names.append(p.name)
        elif p.name in TOKENIZER_FILES:
            tok.add(dkey)
        else:
            hf.add(dkey)
    return [
        ModelTarget(
            root=roots[k],
            everything=k in everything,
            hf_model=k in hf,
            ggufs=tuple(ggufs.get(k, ())),
            tokenizer=k in tok,
        )
        for k in order
    ]


def _listdir(root: Path) -> list[str]:
    try:
        return sorted(os.listdir(root))
    except OSError as e:
        raise InputError(root, _oserror(e)) from None


def load_model(root: Path, gguf_names: Iterable[str] | None = None, *, hf_model: bool = True) -> ModelFacts:
    """Read everything lint needs from one model directory, headers only.

    `gguf_names`: which GGUF files to read (default: every `.gguf` in the directory).
    `hf_model=False`: the Hugging Face files are context for the GGUFs' cross-checks only, so
    one that cannot be read is left out with a note instead of failing the GGUFs' lint, and the
    tokenizer files are not read.
    """
    names = _listdir(root)
    nameset = set(names)
    notes: list[str] = []
    try:
        config = load_json(root / "config.json") if "config.json" in nameset and exists(root / "config.json") else None
    except InputError as e:
        if hf_model:
            raise
        config = None
        notes.append(f"config.json not used as context for the GGUF: {e.what}")
    gen = None
    if "generation_config.json" in nameset and exists(root / "generation_config.json"):
        try:
            gen = load_json(root / "generation_config.json")
        except InputError as e:
            if hf_model:
                raise
            notes.append(f"generation_config.json not used as context for the GGUF: {e.what}")
    ggufs: list[GgufFile] = []
    wanted = None if gguf_names is None else set(gguf_names)
    for n in names:
        if wanted is not None and n not in wanted:
            continue
        if n.lower().endswith(".gguf") and exists(root / n) and not _is_dir(root / n):
            from portkit.model.gguf_header import read_gguf

            ggufs.append(read_gguf(root / n))
    pickles = tuple(root / n for n in names if PICKLE_PATTERNS.search(n))
    lfs: list[Path] = []
    try:
        st = _load_safetensors(root, nameset, names, lfs)
    except InputError as e:
        if hf_model:
            raise
        st = None
        notes.append(f"safetensors not used as context for the GGUF: {e.what}")
    if not hf_model and ggufs:
        pickles = ()  # no HF model was asked for: its pickle-only weights are not this lint's concern
    tok = read_tokenizer_files(root, names) if hf_model and has_tokenizer_files(names) else None
    pipeline = None
    if hf_model and "modules.json" in nameset and exists(root / "modules.json"):
        from portkit.model.sentence_pipeline import read_sentence_pipeline  # embedding models only

        pipeline = read_sentence_pipeline(root)
    if config is None:
        if ggufs:
            pass  # a GGUF carries its own metadata; candle's quantized_llama never reads config.json
        elif tok is not None and not (pickles and st is None):
            pass  # a tokenizer-only directory: the tokenizer rules alone
        elif pickles and st is None:
            raise InputError(
                root,
                f"pickle-only weights ({', '.join(p.name for p in pickles[:3])}) and no config.json: "
                "portkit never unpickles; candle's llama reads safetensors only",
            )
        else:
            raise NoModelHere(root, "no config.json (and no .gguf file) in this directory")
    elif st is None and pickles and not lfs:
        raise InputError(
            root,
            f"pickle-only weights ({', '.join(p.name for p in pickles[:3])}): portkit never unpickles and candle's "
            "llama reads safetensors only; convert them to safetensors first",
        )
    if lfs:
        count = len(lfs)
        notes.append(
            f"{count} Git LFS pointer file{'' if count == 1 else 's'} skipped: weight rules did not run on "
            f"{'it' if count == 1 else 'them'}"
        )
    return ModelFacts(
        root=root,
        config=config,
        generation_config=gen,
        safetensors=st,
        ggufs=tuple(ggufs),
        pickle_files=pickles,
        lfs_pointers=tuple(lfs),
        notes=tuple(notes),
        tokenizer=tok,
        sentence_pipeline=pipeline,
    )


def _safe_member(root: Path, index_path: Path, name: object) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        raise InputError(
            index_path, f"`weight_map` names file {str(name)[:80]!r}, which is not a file name in this directory"
        )
    return root / name


def _load_safetensors(root: Path, nameset: set[str], names: list[str], lfs: list[Path]) -> SafetensorsFacts | None:
    index = None
    if INDEX_NAME in nameset and exists(root / INDEX_NAME):
        index = load_json(root / INDEX_NAME, positions=False)
        wm = index.value.get("weight_map") if isinstance(index.value, dict) else None
        if not isinstance(wm, dict) or not all(isinstance(k, str) for k in wm):
            raise InputError(index.path, "`weight_map` must be an object mapping tensor names to file names")
        files = list(dict.fromkeys(_safe_member(root, index.path, v) for v in wm.values()))
    else:
        files = [root / n for n in names if SHARD_PATTERN.match(n)]
    if not files:
        return None
    loaded: list[SafetensorsFile] = []
    for f in files:
        if not exists(f):
            raise InputError(f, f"listed in {INDEX_NAME} but missing" if index else "missing")
        try:
            loaded.append(read_safetensors_header(f))
        except LfsPointer:
            lfs.append(f)
    if not loaded:
        return None
    tensors: dict[str, TensorInfo] = {}
    for sf in loaded:
        for k, t in sf.tensors.items():
            tensors.setdefault(k, t)
    return SafetensorsFacts(files=tuple(loaded), index=index, tensors=MappingProxyType(tensors))
