"""The reference cache: transformers' numbers for a checkpoint and prompt, computed once.

An unchanged re-verify reads the reference from here and never imports torch. The key is the
content of everything that determines the reference:

- config.json's bytes (transformers builds the model from it; other files in the dir do not
  enter the reference);
- per weight file, `cachefiles.file_fingerprint`: its name, size, safetensors header bytes, and
  a digest of its content (sampled above 256 MiB, with the mtime, ctime and inode);
- the reference mode (streamed or whole-model), the prompt, the tokens fed after it (candle's
  greedy continuation) or "its own greedy" when there are none, the number of tokens, and a
  continuation's or a batch's inputs when verify asked for their rows (`portkit.verify.reference.extra`);
- the transformers, torch and portkit versions (read from package metadata, not by import);
- `FORMAT` and the source of every portkit module the reference's computation imports
  (`CODE_ROOTS`, followed by `portkit.verify.code_closure`): a change to how the reference is
  computed is a new key.

Entries live under `$PORTKIT_CACHE/reference/` (default `~/.cache/portkit`), one checked file
each (`portkit.verify.cachefiles`): a truncated or corrupt entry is ignored (verify computes the
reference again) and rewritten; the directory's size is bounded (`PORTKIT_REFCACHE_MAX_MB`,
default 2048), least recently used out first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portkit.verify import cachefiles, code_closure
from portkit.verify.reference.compute import ReferenceOutputs

FORMAT = 1
MAGIC = b"portkit-reference-v2\n"
SUFFIX = ".ref"
#: where the computation of an entry starts: the source of every portkit module these import keys it
#: (`portkit.verify.code_closure`), so a change to how it is computed is a new key
CODE_ROOTS = ("portkit.verify.reference.child", "portkit.verify.reference.compute")


def cache_root() -> Path:
    return cachefiles.cache_base() / "reference"


def model_key(
    config_text: str,
    weight_files: Sequence[Path],
    mode: str,
    *,
    fingerprints: list[dict[str, object]] | None = None,
    sublayers: Sequence[str] = (),
    truth: bool = False,
) -> str:
    """Everything about the checkpoint and the software that determines the reference
    (`fingerprints`: `cachefiles.fingerprints(weight_files)` when the caller has them already;
    `sublayers`: the sub-layer outputs recorded with the layers; `truth`: the f64 run's
    differences recorded too, `compute.truth_deltas`)."""
    return cachefiles.digest(
        {
            "format": FORMAT,
            "mode": mode,
            "sublayers": list(sublayers),
            **({"truth": True} if truth else {}),
            "config": hashlib.sha256(config_text.encode()).hexdigest(),
            "files": fingerprints if fingerprints is not None else cachefiles.fingerprints(weight_files),
            "versions": {p: cachefiles.package_version(p) for p in ("transformers", "torch", "portkit")},
            "code": code_closure.code_digest(CODE_ROOTS),
        }
    )


def _prompt_key(prompt: Sequence[int], tokens: int) -> str:
    return hashlib.sha256(json.dumps({"prompt": list(map(int, prompt)), "tokens": int(tokens)}).encode()).hexdigest()[
        :24
    ]


def _forced_key(forced: Sequence[int] | None, extra: dict[str, Any] | None = None, refeed: str | None = None) -> str:
    doc: Any = "own-greedy" if forced is None else list(map(int, forced))
    if extra is not None:  # a continuation's or a batch's rows too (`portkit.verify.reference.extra`): another entry
        doc = {"forced": doc, "extra": extra}
    if refeed is not None:  # each layer on candle's inputs too (their digest): another entry
        doc = {"forced": doc, "refeed": refeed}
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:24]


class RefCache:
    def __init__(
        self, key: str, prompt: Sequence[int], tokens: int, root: Path | None = None, *, vocab: int | None = None
    ) -> None:
        self.root = root or cache_root()
        self.dir = self.root / f"{key[:32]}-{_prompt_key(prompt, tokens)}"
        self.tokens = tokens
        self.vocab = vocab  # the logits' width an entry must have (None: not known here)

    def path(
        self, forced: Sequence[int] | None, extra: dict[str, Any] | None = None, refeed: str | None = None
    ) -> Path:
        return (
            self.dir / f"{_forced_key(None if forced is None else list(forced)[: self.tokens], extra, refeed)}{SUFFIX}"
        )

    def likely(self) -> bool:
        """An entry for this checkpoint and prompt exists (a hit if candle's tokens are the same)."""
        try:
            return any(p.suffix == SUFFIX for p in self.dir.iterdir())
        except OSError:
            return False

    def get(
        self, forced: Sequence[int] | None, extra: dict[str, Any] | None = None, refeed: str | None = None
    ) -> ReferenceOutputs | None:
        """The entry, or None when there is none or it is damaged (then it is removed)."""
        entry = cachefiles.read_entry(self.path(forced, extra, refeed), MAGIC)
        if entry is None:
            return None
        meta, arrays = entry
        try:
            hit = ReferenceOutputs(
                greedy=[int(t) for t in meta["greedy"]],
                rows=arrays["rows"],
                layers=cachefiles.layers_of(arrays),
                nonfinite_weights=[str(n) for n in meta["nonfinite_weights"]],
            )
            captured = bool(meta["captured"])
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        if not cachefiles.plausible(
            hit.greedy, hit.rows, hit.layers, tokens=self.tokens, vocab=self.vocab, captured=captured
        ):
            return None
        return hit

    def put(
        self,
        forced: Sequence[int] | None,
        entry: ReferenceOutputs,
        extra: dict[str, Any] | None = None,
        refeed: str | None = None,
    ) -> None:
        meta = {"greedy": entry.greedy, "nonfinite_weights": entry.nonfinite_weights, "captured": bool(entry.layers)}
        arrays = cachefiles.rows_and_layers(entry.rows, entry.layers)
        cachefiles.write_entry(
            self.path(forced, extra, refeed), cachefiles.encode(MAGIC, meta, arrays), self.root, SUFFIX
        )


def evict(root: Path, limit: int) -> list[Path]:
    """Remove the least recently used entries until the cache holds at most `limit` bytes."""
    return cachefiles.evict(root, limit, SUFFIX)
