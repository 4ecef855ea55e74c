"""Entry files of verify's caches under `$PORTKIT_CACHE` (the reference's and candle's runs).

One file per entry: a magic line naming the cache, the SHA-256 of the payload, and the payload,
a JSON `meta` and named float32 arrays (`portkit.verify.arrayblob`: no pickle, no compression).
A truncated or corrupt entry fails that check: it reads as absent and is removed, so the caller
computes it again and rewrites it. The checksum catches damage, not tampering (anyone who can
write the cache can write a matching one): an entry is also used only when it is what this
verify could have written, sizes that add up to the file's (a small file never claims
gigabytes), float32 arrays of the shapes the run has (`plausible`); anything else reads as
absent, like damage. Writes are atomic (a reader never sees half an entry). Each cache
directory is bounded by `PORTKIT_REFCACHE_MAX_MB` (default 2048): after each write its least
recently used entries go.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from portkit import atomicfile
from portkit.verify import arrayblob

FULL_DIGEST_BYTES = 256 * 2**20
BLOCK = 2**20
SAMPLES = 16
MAX_HEADER_BYTES = 100 * 2**20
DEFAULT_MAX_MB = 2048


def cache_base() -> Path:
    return Path(os.environ.get("PORTKIT_CACHE") or Path.home() / ".cache" / "portkit")


def max_bytes() -> int:
    """`PORTKIT_REFCACHE_MAX_MB` in bytes; the default for anything but a finite number >= 0
    (`inf`, `nan`, `-1`, `lots`): a cache setting only ever changes how much is kept."""
    try:
        mb = float(os.environ.get("PORTKIT_REFCACHE_MAX_MB", DEFAULT_MAX_MB))
    except ValueError:
        mb = DEFAULT_MAX_MB
    if not (math.isfinite(mb) and mb >= 0):
        mb = DEFAULT_MAX_MB
    return int(mb * 2**20)


def file_fingerprint(path: Path) -> dict[str, object]:
    """Name, size, safetensors header digest, and a digest of the content: the whole file up to
    `FULL_DIGEST_BYTES`; above that, the first and last MiB and 16 evenly spaced MiB blocks plus
    the mtime, ctime, inode and device, so a 16 GB checkpoint is not read end to end to look up a
    cache. An edit between the samples changes the mtime; `touch -r` puts the mtime back, but
    not the ctime (set by the kernel on every write), nor the inode of a file written anew."""
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
            offsets = [0, st.st_size - BLOCK] + [
                (st.st_size - BLOCK) * i // (SAMPLES + 1) for i in range(1, SAMPLES + 1)
            ]
            for off in offsets:
                f.seek(off)
                h.update(f.read(BLOCK))
            sampled = True
    return {
        "name": path.name,
        "size": st.st_size,
        "header": hashlib.sha256(header).hexdigest(),
        "digest": h.hexdigest(),
        # a sampled digest alone could miss an edit between the samples: these catch it
        "mtime_ns": st.st_mtime_ns if sampled else None,
        "ctime_ns": st.st_ctime_ns if sampled else None,
        "inode": [st.st_dev, st.st_ino] if sampled else None,
    }


def fingerprints(files: Iterable[Path]) -> list[dict[str, object]]:
    """Each weight file's `file_fingerprint`: taken once per verify, for every cache key it enters."""
    return [file_fingerprint(Path(p)) for p in files]


def package_version(pkg: str) -> str:
    """An installed package's version from its metadata (no import), "-" when it is not
    installed: what the caches key on and the reports name."""
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "-"


def digest(doc: Any) -> str:
    # default=str: a GGUF edit may carry the gguf package's numpy scalars, as verify's patch memo allows
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


_LAYER = "layer:"


def rows_and_layers(rows: np.ndarray, layers: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of an entry holding a side's logits rows and its per-layer values."""
    return {"rows": rows, **{_LAYER + k: v for k, v in layers.items()}}


def layers_of(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The per-layer values of such an entry, by layer name."""
    return {k.removeprefix(_LAYER): v for k, v in arrays.items() if k.startswith(_LAYER)}


def encode(magic: bytes, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    payload = arrayblob.pack({k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()}, meta)
    return magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode(magic: bytes, blob: bytes | bytearray) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """(meta, arrays), or None for anything but an intact entry of this cache: float32 arrays
    (`arrayblob`, which refuses sizes the entry does not hold) and a JSON object."""
    if not blob.startswith(magic):
        return None
    head = len(magic) + 64
    checksum, newline = bytes(blob[len(magic) : head]), blob[head : head + 1]
    payload = memoryview(blob)[head + 1 :]
    if newline != b"\n" or hashlib.sha256(payload).hexdigest().encode() != checksum:
        return None
    entry = arrayblob.unpack(payload, dtypes=("<f4",))
    if entry is None or not isinstance(entry[0], dict):
        return None
    return entry


def plausible(
    greedy: list[int],
    rows: np.ndarray,
    layers: dict[str, np.ndarray],
    *,
    tokens: int,
    vocab: int | None,
    captured: bool,
) -> bool:
    """An entry this verify could have written: rows `[1..max(tokens, 1), vocab]`, no more than
    `tokens` greedy ids, each in the vocabulary, and the per-layer values when they were captured."""
    if rows.ndim != 2 or not 1 <= rows.shape[0] <= max(tokens, 1) or rows.shape[1] < 1:
        return False
    if vocab is not None and rows.shape[1] != vocab:
        return False
    if len(greedy) > tokens or any(not 0 <= t < rows.shape[1] for t in greedy):
        return False
    return bool(layers) if captured else True


def read_entry(path: Path, magic: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The entry, or None when there is none or it is damaged (then it is removed)."""
    try:
        with path.open("rb") as f:  # into a writable buffer: the arrays are views of it
            blob = bytearray(os.fstat(f.fileno()).st_size)
            if f.readinto(blob) != len(blob):
                return None
    except OSError:
        return None
    entry = decode(magic, blob)
    try:
        if entry is None:
            path.unlink(missing_ok=True)
        else:
            os.utime(path)  # least recently used goes first
    except OSError:
        pass  # a read-only cache: the damaged entry stays, and is ignored again next time
    return entry


def write_entry(path: Path, blob: bytes, root: Path, suffix: str) -> None:
    """Write atomically and durably (`portkit.atomicfile`), then keep `root` within its bound."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomicfile.replace(path, blob)
        evict(root, max_bytes(), suffix)
    except OSError:
        pass  # a cache that cannot be written is only slower (atomicfile leaves no temporary file)


#: Temporary files of the writer before this one (`.tmp-*` from mkstemp) have no pid to ask:
#: older than this, their writer is gone.
LEGACY_TEMP_AGE_S = 3600


def _stale_temp(p: Path, st: os.stat_result) -> bool:
    if atomicfile.is_temp(p.name):
        return atomicfile.stale(p.name)
    return p.name.startswith(".tmp-") and time.time() - st.st_mtime > LEGACY_TEMP_AGE_S


def evict(root: Path, limit: int, suffix: str) -> list[Path]:
    """Remove the least recently used `*/*{suffix}` entries until `root` holds at most `limit`
    bytes. Temporary files count against the bound while their writer lives; a dead writer's
    are removed first."""
    entries = []
    temps = 0
    for p in sorted(root.glob("*/*")):
        try:
            st = p.stat()
        except OSError:  # removed by another process meanwhile: not counted, the rest still are
            continue
        if p.name.endswith(suffix) and not p.name.startswith("."):
            entries.append((st.st_mtime_ns, st.st_size, p))
        elif p.name.startswith("."):
            if _stale_temp(p, st):
                p.unlink(missing_ok=True)
            else:
                temps += st.st_size
    total = temps + sum(s for _, s, _ in entries)
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
