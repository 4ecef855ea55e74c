"""transformers' tokenizer record (`portkit.verify.reference.tokenizer`), cached: an unchanged re-verify
of a model with a tokenizer does not import transformers for its tokens section.

The record is a function of the files `AutoTokenizer.from_pretrained` may read and of the
software that reads them. The key holds:
- every file of the model directory but the weights (safetensors, GGUF, pickles): its name and the
  SHA-256 of its bytes (tokenizer.json, tokenizer_config.json, the chat template, config.json
  for the class transformers picks, ...); a directory holding a file too large to be one of
  these is not cached;
- the prompt verify asked for (`--text`, `--chat`), whose ids the record holds;
- the transformers, tokenizers and portkit versions (package metadata, no import), `FORMAT` and
  the source of every portkit module that makes the record (`CODE_ROOTS` and what they import).
Entries live under `$PORTKIT_CACHE/tokenizer/`, one checked file each
(`portkit.verify.cachefiles`: a damaged entry reads as absent and is removed; the directory is
bounded like the others); an entry is used only when it has the record's shape. `--no-cache`
neither reads nor writes them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from portkit.verify import cachefiles, code_closure

FORMAT = 1
MAGIC = b"portkit-tokenizer-record-v2\n"
SUFFIX = ".tok"
#: where the record is made (`record`, in the reference child): the source of every portkit module these
#: import keys an entry (`portkit.verify.code_closure`), so a change to how it is made is a new key
CODE_ROOTS = ("portkit.verify.reference.tokenizer", "portkit.verify.reference.child")
#: tokenizer files are small; a directory with a larger non-weight file is not cached
MAX_FILE_BYTES = 64 * 2**20
_WEIGHTS = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".ckpt", ".npz", ".h5", ".msgpack", ".onnx")


def cache_root() -> Path:
    return cachefiles.cache_base() / "tokenizer"


def record_key(root: Path, text: str | None, chat: str | None) -> str | None:
    """The key of `tokrecord.record(root, text=text, chat=chat)`, or None (not cacheable)."""
    files = []
    try:
        for p in sorted(Path(root).iterdir()):
            if not p.is_file() or p.name.endswith(_WEIGHTS) or p.name == "model.safetensors.index.json":
                continue
            if p.stat().st_size > MAX_FILE_BYTES:
                return None
            files.append([p.name, hashlib.sha256(p.read_bytes()).hexdigest()])
    except OSError:
        return None
    return cachefiles.digest(
        {
            "format": FORMAT,
            "files": files,
            "prompt": {"text": text, "chat": chat},
            "versions": {p: cachefiles.package_version(p) for p in ("transformers", "tokenizers", "portkit")},
            "code": code_closure.code_digest(CODE_ROOTS),
        }
    )


def _plausible(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    if set(doc) == {"error"}:
        return isinstance(doc["error"], str)
    return (
        isinstance(doc.get("class"), str)
        and isinstance(doc.get("attributes"), dict)
        and isinstance(doc.get("calls"), dict)
        and all(isinstance(v, dict) and len(v) == 1 and set(v) <= {"value", "raise"} for v in doc["calls"].values())
    )


class TokenizerCache:
    def __init__(self, key: str, root: Path | None = None) -> None:
        self.root = root or cache_root()
        self.path = self.root / key[:2] / f"{key}{SUFFIX}"

    def get(self) -> dict[str, Any] | None:
        entry = cachefiles.read_entry(self.path, MAGIC)
        if entry is None:
            return None
        meta, arrays = entry
        doc = meta.get("record")
        return doc if not arrays and _plausible(doc) else None

    def put(self, doc: dict[str, Any]) -> None:
        cachefiles.write_entry(self.path, cachefiles.encode(MAGIC, {"record": doc}, {}), self.root, SUFFIX)


def for_dir(root: Path, text: str | None, chat: str | None, use_cache: bool) -> TokenizerCache | None:
    """The cache entry of this directory's record, or None (`--no-cache`, or not cacheable)."""
    if not use_cache:
        return None
    key = record_key(root, text, chat)
    return TokenizerCache(key) if key is not None else None


def through(cache: TokenizerCache | None, compute: Any) -> dict[str, Any]:
    """The cached record, else `compute()`'s, stored when it is a record (a tokenizer transformers
    could not load is not kept: why may lie outside the key, a package not installed)."""
    doc = cache.get() if cache is not None else None
    if doc is None:
        doc = compute()
        if cache is not None and "error" not in doc:
            cache.put(doc)
    return doc


class TransformersTokenizer:
    """transformers' tokenizer as the reference's process records it: the tokenizer cache's
    entry, else one request to verify's transformers process, sent once (`send`: when verify
    opens the model, so it is recorded as soon as the child has imported, while candle runs) and
    waited for when first asked."""

    def __init__(
        self, session: Any, cache: TokenizerCache | None, root: Path, text: str | None, chat: str | None
    ) -> None:
        self.session, self.cache, self.root, self.text, self.chat = session, cache, root, text, chat
        self.record: dict[str, Any] | None = cache.get() if cache is not None else None
        self.ticket: Any = None

    def send(self) -> None:
        if self.record is None and self.ticket is None:
            from portkit.verify.reference.requests import TokenizerRequest

            self.ticket = self.session.submit(TokenizerRequest(str(self.root), self.text, self.chat))

    def __call__(self) -> tuple[Any, str | None]:
        """(the tokenizer, None) or (None, why transformers could not give it)."""
        from portkit.verify.reference.compute import ReferenceFailed
        from portkit.verify.reference.tokenizer import recorded

        if self.record is None:
            self.send()
            try:
                doc = self.session.wait(self.ticket)
            except ReferenceFailed as e:
                return None, str(e)
            if self.cache is not None and "error" not in doc:
                self.cache.put(doc)
            self.record = doc
        return recorded(self.record)
