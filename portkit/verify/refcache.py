"""The reference cache: transformers' numbers for a checkpoint and prompt, computed once.

An unchanged re-verify reads the reference from here and never imports torch. The key is the
content of everything that determines the reference:

- config.json's bytes (transformers builds the model from it; other files in the dir do not
  enter the reference);
- per weight file: its name, size, safetensors header bytes, and a digest of its content (the
  whole file up to `FULL_DIGEST_BYTES`; above that, its mtime and 16 evenly spaced 1 MiB blocks
  plus the first and last MiB, so a 16 GB checkpoint is not read end to end to look up a cache);
- the reference mode (streamed or whole-model), the prompt, the tokens fed after it (candle's
  greedy continuation) or "its own greedy" when there are none, the number of tokens;
- the transformers, torch and portkit versions (read from package metadata, not by import);
- `FORMAT` and the source of the modules that compute the reference (streamed.py,
  refproc.py, reference.py): a change to how the reference is computed is a new key.

Entries live under `$PORTKIT_CACHE/reference/` (default `~/.cache/portkit`), one file each:
a magic line, the SHA-256 of the payload, and the payload (an .npz, read with
`allow_pickle=False`). A truncated or corrupt entry fails that check; it is ignored (verify
computes the reference again) and rewritten. The total size is bounded (`PORTKIT_REFCACHE_MAX_MB`,
default 2048): after each write the least recently used entries go.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np

FORMAT = 1
MAGIC = b"portkit-reference-v1\n"
FULL_DIGEST_BYTES = 256 * 2**20
BLOCK = 2**20
SAMPLES = 16
MAX_HEADER_BYTES = 100 * 2**20
DEFAULT_MAX_MB = 2048
_LAYER = "layer:"


def cache_root() -> Path:
    return Path(os.environ.get("PORTKIT_CACHE") or Path.home() / ".cache" / "portkit") / "reference"


def max_bytes() -> int:
    try:
        return int(float(os.environ.get("PORTKIT_REFCACHE_MAX_MB", DEFAULT_MAX_MB)) * 2**20)
    except ValueError:
        return DEFAULT_MAX_MB * 2**20


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def _file_fingerprint(path: Path) -> dict[str, object]:
    st = path.stat()
    h = hashlib.sha256()
    header = b""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) == 8:
            (n,) = struct.unpack("<Q", raw)
            if n <= MAX_HEADER_BYTES:
                header = f.read(n)
        f.seek(0)
        if st.st_size <= FULL_DIGEST_BYTES:
            for chunk in iter(lambda: f.read(BLOCK * 8), b""):
                h.update(chunk)
            sampled = False
        else:
            offsets = [0, st.st_size - BLOCK] + [(st.st_size - BLOCK) * i // (SAMPLES + 1) for i in range(1, SAMPLES + 1)]
            for off in offsets:
                f.seek(off)
                h.update(f.read(BLOCK))
            sampled = True
    return {
        "name": path.name,
        "size": st.st_size,
        "header": hashlib.sha256(header).hexdigest(),
        "digest": h.hexdigest(),
        # a sampled digest alone could miss an edit between the samples: the mtime catches it
        "mtime_ns": st.st_mtime_ns if sampled else None,
    }


def _code_digest() -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ("streamed.py", "refproc.py", "reference.py"):
        try:
            h.update((here / name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()


def model_key(config_text: str, weight_files: Sequence[Path], mode: str) -> str:
    """Everything about the checkpoint and the software that determines the reference."""
    doc = {
        "format": FORMAT,
        "mode": mode,
        "config": hashlib.sha256(config_text.encode()).hexdigest(),
        "files": [_file_fingerprint(Path(p)) for p in weight_files],
        "versions": {p: _version(p) for p in ("transformers", "torch", "portkit")},
        "code": _code_digest(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _prompt_key(prompt: Sequence[int], tokens: int) -> str:
    return hashlib.sha256(json.dumps({"prompt": list(map(int, prompt)), "tokens": int(tokens)}).encode()).hexdigest()[:24]


def _forced_key(forced: Sequence[int] | None) -> str:
    doc = "own-greedy" if forced is None else list(map(int, forced))
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:24]


@dataclass
class CachedReference:
    greedy: list[int]
    rows: np.ndarray
    layers: dict[str, np.ndarray]
    nonfinite_weights: list[str]


class RefCache:
    def __init__(self, key: str, prompt: Sequence[int], tokens: int, root: Path | None = None) -> None:
        self.root = root or cache_root()
        self.dir = self.root / f"{key[:32]}-{_prompt_key(prompt, tokens)}"
        self.tokens = tokens

    def path(self, forced: Sequence[int] | None) -> Path:
        return self.dir / f"{_forced_key(None if forced is None else list(forced)[: self.tokens])}.ref"

    def likely(self) -> bool:
        """An entry for this checkpoint and prompt exists (a hit if candle's tokens are the same)."""
        try:
            return any(p.suffix == ".ref" for p in self.dir.iterdir())
        except OSError:
            return False

    def get(self, forced: Sequence[int] | None) -> CachedReference | None:
        """The entry, or None when there is none or it is damaged (then it is removed)."""
        path = self.path(forced)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        entry = _decode(blob)
        if entry is None:
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        return entry

    def put(self, forced: Sequence[int] | None, entry: CachedReference) -> None:
        """Write atomically (a reader never sees half an entry), then keep the cache in bounds."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            blob = _encode(entry)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.dir)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path(forced))
            evict(self.root, max_bytes())
        except OSError:
            pass  # a cache that cannot be written is only slower


def _encode(entry: CachedReference) -> bytes:
    buf = io.BytesIO()
    meta = json.dumps({"greedy": entry.greedy, "nonfinite_weights": entry.nonfinite_weights}).encode()
    np.savez(
        buf,
        meta=np.frombuffer(meta, dtype=np.uint8),
        rows=np.asarray(entry.rows, dtype=np.float32),
        **{_LAYER + k: np.asarray(v, dtype=np.float32) for k, v in entry.layers.items()},
    )
    payload = buf.getvalue()
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _decode(blob: bytes) -> CachedReference | None:
    if not blob.startswith(MAGIC):
        return None
    rest = blob[len(MAGIC) :]
    digest, sep, payload = rest.partition(b"\n")
    if not sep or hashlib.sha256(payload).hexdigest().encode() != digest:
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            rows = np.array(z["rows"])
            layers = {k.removeprefix(_LAYER): np.array(z[k]) for k in z.files if k.startswith(_LAYER)}
        return CachedReference(
            greedy=[int(t) for t in meta["greedy"]], rows=rows, layers=layers, nonfinite_weights=[str(n) for n in meta["nonfinite_weights"]]
        )
    except (ValueError, KeyError, OSError, TypeError):
        return None


def evict(root: Path, limit: int) -> list[Path]:
    """Remove the least recently used entries until the cache holds at most `limit` bytes."""
    entries = []
    for p in root.glob("*/*.ref"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime_ns, st.st_size, p))
    total = sum(s for _, s, _ in entries)
    removed = []
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size
        removed.append(p)
        try:
            p.parent.rmdir()
        except OSError:
            pass
    return removed
