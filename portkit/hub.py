"""Repo ids in the local Hugging Face hub cache: `ORG/NAME[@REV]` to the snapshot directory it names.

Everything goes through huggingface_hub's own cache API (`snapshot_download(...,
local_files_only=True)`, `scan_cache_dir`, `constants.HF_HUB_CACHE`), so `HF_HUB_CACHE` and
`HF_HOME` mean what they mean to transformers, and the cache layout (blobs, refs, snapshots
of symlinks) is never guessed. `HF_HUB_OFFLINE=1` is set before anything of the hub is used:
portkit never touches the network and never downloads a model.

huggingface_hub is imported only here, and this module only when a string names no existing
path but reads as a repo id, or for `--hf-cache` (`portkit.hf_cache`, which scans the cache and
lints each snapshot): plain `portkit lint DIR` never pays for it. This module sits below lint: it
resolves names and lints nothing.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from portkit.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from types import ModuleType

# huggingface_hub's repo id rules (`validate_repo_id`): ORG/NAME of letters, digits, `-_.`;
# then an optional `@REVISION` (a branch, tag or commit hash; `refs/pr/1` has slashes).
REPO_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<rev>[A-Za-z0-9._/-]+))?$")


def looks_like_repo_id(s: str) -> bool:
    """`ORG/NAME` or `ORG/NAME@REV`. Callers ask only for strings that are no existing path."""
    m = REPO_ID.match(s)
    return bool(m) and ".." not in s and not s.endswith((".json", ".safetensors", ".gguf"))


def _hub(spec: str | None = None) -> ModuleType:
    """huggingface_hub, offline. One line and exit 2 when it is not installed; for `spec` (a
    string that is no path) the line says that first: it may be a mistyped path."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        need = "pip install huggingface_hub"
        if spec is not None:
            raise InputError(spec, f"no such path; reading it as a Hugging Face repo id needs huggingface_hub ({need})") from None
        raise InputError("--hf-cache", f"reading the Hugging Face cache needs huggingface_hub ({need})") from None
    # It reads HF_HUB_OFFLINE once, at import: when something imported it before us, say it again.
    constants.HF_HUB_OFFLINE = True
    return huggingface_hub


offline_hub = _hub  # for `portkit.hf_cache`, which scans the cache with the same module


def cache_dir() -> Path:
    """The hub cache huggingface_hub uses (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub)."""
    _hub()
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


@dataclass(frozen=True, slots=True)
class CachedModel:
    """One revision of a model repo in the cache: its snapshot directory and how it was named."""

    repo_id: str
    revision: str  # as asked or as the refs name it: `main`, a tag, or a commit hash
    commit: str
    path: Path
    refs: tuple[str, ...] = ()
    partial: bool = False  # huggingface_hub knows files of this revision that were not downloaded

    @property
    def spec(self) -> str:
        return f"{self.repo_id}@{self.revision}"

    def describe(self) -> str:
        part = ", a partial download: the files that are there are linted" if self.partial else ""
        return f"{self.spec} is {self.path} in the Hugging Face cache (commit {self.commit[:12]}{part})"


def resolve(spec: str) -> CachedModel:
    """`ORG/NAME[@REV]` -> its snapshot in the local cache, offline. InputError when it is not there."""
    m = REPO_ID.match(spec)
    if m is None:
        raise InputError(spec, "not a path, and not a Hugging Face repo id (ORG/NAME[@REVISION])")
    repo_id, rev = m["repo"], m["rev"] or "main"
    hub = _hub(spec)
    from huggingface_hub.errors import (
    HFValidationError,
    IncompleteSnapshotError,
    LocalEntryNotFoundError,
)

    cache = cache_dir()
    get = f"hf download {repo_id}" + (f" --revision {rev}" if rev != "main" else "")
    partial = False
    try:
        path = Path(hub.snapshot_download(repo_id, revision=rev, local_files_only=True))
    except IncompleteSnapshotError as e:
        # A partial download (one GGUF of many, config.json alone) is normal: lint what is there.
        path, partial = Path(e.snapshot_path), True
    except LocalEntryNotFoundError:
        repo_dir = cache / f"models--{repo_id.replace('/', '--')}"
        where = f"revision `{rev}` of {repo_id} is not" if repo_dir.is_dir() else f"{repo_id} is not"
        raise InputError(
            spec, f"no such path, and {where} in the Hugging Face cache ({cache}); portkit never downloads: get it with `{get}`"
        ) from None
    except HFValidationError as e:
        raise InputError(spec, f"no such path, and not a valid Hugging Face repo id: {e}") from None
    return CachedModel(repo_id=repo_id, revision=rev, commit=path.name, path=path, partial=partial)
