"""What `portkit verify` reads before running anything: the model directory (config.json, the
weight files) and the candle module it loads into; the prompt is `portkit.verify.prompt`.

Every problem here is bad input (exit 2, one line): never a traceback, nothing executed or
unpickled, no tensor data read.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.verify.errors import BadInput

if TYPE_CHECKING:
    from portkit.families import Family

MAX_CONFIG_BYTES = 16 * 1024 * 1024


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


def read_json(path: Path, what: str) -> Any:
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
        _, doc = read_json(index, "the safetensors index")
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
        text, cfg = read_json(cfg_path, "config.json")
        if not isinstance(cfg, dict):
            raise BadInput(f"{cfg_path}: the top level is not a JSON object")
        return ModelDir(root=root, config_text=text, config=cfg, weight_files=weight_files(root))
    except OSError as e:  # permission denied, symlink loop, ...
        raise BadInput(f"{root}: {e.strerror or e}") from None


def model_family(model: ModelDir) -> Family:
    """The candle module the checkpoint loads into (a config naming no model_type or
    architectures is llama, as lint reads it); one line and exit 2 for a model_type portkit
    does not check."""
    from portkit.candle_modules import MODULE_FOR
    from portkit.candle_release import RELEASES
    from portkit.families import detect_or_default

    fam = detect_or_default(model.config)
    if fam is not None:
        return fam
    mt = model.config.get("model_type", (model.config.get("architectures") or ["?"])[0])
    if mt in MODULE_FOR:
        raise BadInput(f"model_type `{mt}`: portkit does not verify candle's `{MODULE_FOR[mt]}` module yet")
    raise BadInput(
        f"model_type `{mt}`: no candle release portkit knows ({RELEASES[0]}-{RELEASES[-1]}) has a module for it, so "
        "there is nothing to verify"
    )


def json_beside(root: Path, name: str) -> dict[str, Any]:
    """`name` (generation_config.json, config.json) in the model directory as verify reads it everywhere:
    {} when absent, one line of bad input when it is not a JSON object lint could read."""
    from portkit.errors import PortkitError
    from portkit.model.jsonfile import load_json

    path = Path(root) / name
    try:
        doc = load_json(path, positions=False).value if path.is_file() else {}
    except PortkitError as e:  # lint reports the file itself
        raise BadInput(str(e)) from None
    return doc if isinstance(doc, dict) else {}
