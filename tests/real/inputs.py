"""What the real-weight tests run: docs/measurements.md's prompts, and copies of the cached
checkpoint to edit."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

#: The prompts of docs/measurements.md's real-weight rows.
CAPITAL = "The capital of France is"
CAPITAL_TOKENS = 20
CHAT = "Explain how a CPU cache works."
CHAT_TOKENS = 40


def linked_copy(src: Path, dst: Path, config_edits: dict[str, Any] | None = None) -> Path:
    """A copy of a cached real directory: small files copied, model.safetensors a symlink (a hard
    link would change the shared file's ctime, and with it every verify cache key of the
    checkpoint: cachefiles.file_fingerprint), config.json with `config_edits` applied."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name == "model.safetensors":
            os.symlink(f.resolve(), dst / f.name)
        else:
            shutil.copy2(f, dst / f.name)
    if config_edits:
        cfg = json.loads((dst / "config.json").read_text(encoding="utf-8"))
        cfg.update(config_edits)
        (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    return dst
