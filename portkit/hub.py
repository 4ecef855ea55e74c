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
import stat
from dataclasses import dataclass
from pathlib import Path

from portkit.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

# huggingface_hub's repo id rules (`validate_repo_id`): ORG/NAME of letters, digits, `-_.`;
# then an optional `@REVISION` (a branch, tag or commit hash; `refs/pr/1` has slashes).
REPO_ID = re.compile(
    r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(?:@(?P<rev>[A-Za-z0-9._/-]+))?$"
)
# What the cache may name, and nothing else: a snapshot is `models--ORG--NAME/snapshots/<commit>`
# with a commit of 40 hex characters (what huggingface_hub's REGEX_COMMIT_HASH accepts), and a
# ref is a file holding one. huggingface_hub joins a revision and a ref's content as paths, so
# `@/some/dir` or a ref reading `../../outside` would otherwise name any directory on the disk.
COMMIT = re.compile(r"[0-9a-f]{40}")
# Each `/`-separated part of a branch or tag name; `.`, `..` and empty parts are refused.
_REVISION_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
REF_MAX_BYTES = 4096  # a ref holds 40 bytes; a larger file is not one (and is never read whole)
NOTE_MAX_CHARS = 300


class BadRef(ValueError):
    """A refs file that holds no commit hash; the message says why, in a few words."""


def short(text: object, limit: int = NOTE_MAX_CHARS) -> str:
    """One line of at most `limit` characters: what the cache says never floods stderr."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def looks_like_repo_id(s: str) -> bool:
    """`ORG/NAME` or `ORG/NAME@REV`. Callers ask only for strings that are no existing path."""
    m = REPO_ID.match(s)
    return bool(m) and ".." not in s and not s.endswith((".json", ".safetensors", ".gguf"))


def offline_hub(spec: str | None = None) -> ModuleType:
    """huggingface_hub, offline. One line and exit 2 when it is not installed; for `spec` (a
    string that is no path) the line says that first: it may be a mistyped path."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        need = "pip install huggingface_hub"
        if spec is not None:
            raise InputError(
                spec, f"no such path; reading it as a Hugging Face repo id needs huggingface_hub ({need})"
            ) from None
        raise InputError("--hf-cache", f"reading the Hugging Face cache needs huggingface_hub ({need})") from None
    # It reads HF_HUB_OFFLINE once, at import: when something imported it before us, say it again.
    constants.HF_HUB_OFFLINE = True
    return huggingface_hub


def cache_dir() -> Path:
    """The hub cache huggingface_hub uses (`HF_HUB_CACHE`, else `HF_HOME`/hub, else ~/.cache/huggingface/hub)."""
    offline_hub()
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
    problem: str | None = None  # why the cache scan could not read it (it is then not linted)

    @property
    def spec(self) -> str:
        return (
            f"{self.repo_id}@{self.revision}" if self.commit else self.repo_id
        )  # no commit: a repo the scan could not read

    def describe(self) -> str:
        part = ", a partial download: the files that are there are linted" if self.partial else ""
        return f"{self.spec} is {self.path} in the Hugging Face cache (commit {self.commit[:12]}{part})"


def valid_revision(rev: str) -> bool:
    """A commit hash, or a branch or tag name whose `/`-separated parts are names (never `.`,
    `..`, or empty: `@/abs/dir` and `@../x` are paths, not revisions)."""
    return all(_REVISION_PART.fullmatch(part) for part in rev.split("/"))


def read_ref(ref: Path) -> str | None:
    """The commit a refs file names, read bounded; None when there is no such ref. BadRef when
    it is anything but a small regular file holding 40 hex characters (a FIFO is never opened,
    a 300 MiB file never read)."""
    try:
        st = os.stat(ref)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise BadRef(f"cannot read it: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadRef("not a regular file, so no commit hash")
    if st.st_size > REF_MAX_BYTES:
        raise BadRef(f"{st.st_size} bytes, not a 40-character commit hash")
    try:
        with open(ref, "rb") as f:
            raw = f.read(REF_MAX_BYTES + 1)
    except OSError as e:
        raise BadRef(f"cannot read it: {e.strerror or e}") from None
    if not COMMIT.fullmatch(raw.decode("latin-1")):
        raise BadRef(f"holds {short(repr(raw), 60)}, not a commit hash (40 hex characters)")
    return raw.decode("ascii")


def is_snapshot(path: Path, repo_dir: Path) -> bool:
    """`path`, symlinks followed, is `repo_dir/snapshots/<40-hex commit>`."""
    real = os.path.realpath(path)
    return (
        os.path.dirname(real) == os.path.realpath(repo_dir / "snapshots")
        and COMMIT.fullmatch(os.path.basename(real)) is not None
    )


def resolve(spec: str) -> CachedModel:
    """`ORG/NAME[@REV]` -> its snapshot in the local cache, offline. InputError when it is not there,
    or when what the cache names for it is not one of that repo's snapshots."""
    m = REPO_ID.match(spec)
    if m is None:
        raise InputError(spec, "not a path, and not a Hugging Face repo id (ORG/NAME[@REVISION])")
    repo_id, rev = m["repo"], m["rev"] or "main"
    if not valid_revision(rev):
        raise InputError(
            spec,
            f"no such path, and `{rev}` is not a revision (a branch, tag or commit hash; `.`, `..` and `/dir` are "
            "paths)",
        )
    hub = offline_hub(spec)
    from huggingface_hub.errors import HFValidationError, IncompleteSnapshotError, LocalEntryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise InputError(spec, f"no such path, and not a valid Hugging Face repo id: {e}") from None
    cache = cache_dir()
    repo_dir = cache / f"models--{repo_id.replace('/', '--')}"
    get = f"hf download {repo_id}" + (f" --revision {rev}" if rev != "main" else "")
    not_cached = InputError(
        spec,
        f"no such path, and {f'revision `{rev}` of {repo_id} is not' if repo_dir.is_dir() else f'{repo_id} is not'} "
        f"in the Hugging Face cache ({cache}); portkit never downloads: get it with `{get}`",
    )
    # The ref is read here, bounded and checked, and huggingface_hub is given the commit: it
    # would read the file whole and join whatever it holds onto the snapshots directory.
    try:
        commit = rev if COMMIT.fullmatch(rev) else read_ref(repo_dir / "refs" / rev)
    except BadRef as e:
        raise InputError(
            spec, f"refs/{rev} of {repo_id} in the Hugging Face cache ({repo_dir / 'refs' / rev}): {e}"
        ) from None
    if commit is None:
        raise not_cached
    partial = False
    try:
        path = Path(hub.snapshot_download(repo_id, revision=commit, local_files_only=True))
    except IncompleteSnapshotError as e:
        # A partial download (one GGUF of many, config.json alone) is normal: lint what is there.
        path, partial = Path(e.snapshot_path), True
    except LocalEntryNotFoundError:
        raise not_cached from None
    except HFValidationError as e:
        raise InputError(spec, f"no such path, and not a valid Hugging Face repo id: {e}") from None
    except (OSError, ValueError) as e:
        raise InputError(spec, f"cannot read it in the Hugging Face cache ({cache}): {short(e)}") from None
    if not is_snapshot(path, repo_dir):
        raise InputError(
            spec,
            f"the Hugging Face cache names {short(path)} for it, which is not a snapshot of {repo_id} "
            f"({repo_dir / 'snapshots'}/<commit>)",
        )
    return CachedModel(repo_id=repo_id, revision=rev, commit=commit, path=path, partial=partial)


PER_REPO_SCAN = "_scan_cached_repo"  # huggingface_hub/utils/_cache_manager.py: scan_cache_dir's per-repo step


def cached_models(all_revisions: bool) -> tuple[list[CachedModel], list[str]]:
    """(the revisions to lint, notes). `main` of each model repo; every revision with `all_revisions`.

    Each repo is scanned on its own: one that cannot be read (a ref that is no commit hash, a
    snapshot that is a symlink loop or lies outside the repo) is one `unreadable` entry, and the
    others are still linted. What huggingface_hub calls corrupt is a note, as it is to `hf cache scan`.
    """
    hub = offline_hub()
    cache = cache_dir()
    if not cache.is_dir():
        raise InputError(cache, "no Hugging Face cache here (huggingface_hub reads HF_HUB_CACHE, else HF_HOME/hub)")
    try:
        repo_dirs = sorted(p for p in cache.iterdir() if p.name.startswith("models--"))
    except OSError as e:
        raise InputError(cache, f"cannot scan the Hugging Face cache: {short(e)}") from None
    notes: list[str] = []
    out: list[CachedModel] = []
    scan = _repo_scanner(hub, cache)
    for repo_dir in repo_dirs:
        repo_id = repo_dir.name.removeprefix("models--").replace("--", "/")
        try:
            repo = scan(repo_dir)
        except hub.CorruptedCacheException as e:
            notes.append(f"{repo_id}: skipped: {short(e)}")
            continue
        except (BadRef, OSError, ValueError) as e:
            why = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.strerror and e.filename else e
            out.append(
                CachedModel(
                    repo_id=repo_id,
                    revision="-",
                    commit="",
                    path=repo_dir,
                    problem=f"cannot scan this repo: {short(why)}",
                )
            )
            continue
        revs = sorted(repo.revisions, key=lambda r: (-r.last_modified, r.commit_hash))
        if not all_revisions:
            main = [r for r in revs if "main" in r.refs]
            if not main:
                shown = ", ".join(r.commit_hash[:12] for r in revs) or "none"
                notes.append(
                    f"{repo.repo_id}: no `main` in the cache (revisions: {short(shown)}); --all-revisions lints them"
                )
            revs = main
        for r in revs:
            refs = tuple(sorted(r.refs))
            name = "main" if "main" in refs else (refs[0] if refs else r.commit_hash)
            problem = None
            if not is_snapshot(r.snapshot_path, repo_dir):
                problem = (
                    f"snapshot {short(r.snapshot_path)} is not a directory `snapshots/<40-hex commit>` of this repo"
                )
            out.append(
                CachedModel(
                    repo_id=repo.repo_id,
                    revision=name,
                    commit=r.commit_hash,
                    path=Path(r.snapshot_path),
                    refs=refs,
                    problem=problem,
                )
            )
    return out, notes


def _repo_scanner(hub: ModuleType, cache: Path) -> Callable[[Path], Any]:
    """huggingface_hub's scan of one repo (`_scan_cached_repo`, what `scan_cache_dir` runs for
    each), after the repo's refs are checked bounded: huggingface_hub reads each ref whole and
    quotes it in its warnings. A huggingface_hub without that function gets the whole scan,
    once, each repo's part of it (one bad repo then fails them all, as it did before)."""
    from huggingface_hub.utils import _cache_manager

    scan_one = getattr(_cache_manager, PER_REPO_SCAN, None)
    if scan_one is None:
        try:
            info = hub.scan_cache_dir(cache)
        except (OSError, ValueError) as e:
            raise InputError(cache, f"cannot scan the Hugging Face cache: {short(e)}") from None
        whole = {Path(r.repo_path).name: r for r in info.repos}

        def scan_one(repo_dir: Path) -> Any:
            if repo_dir.name in whole:
                return whole[repo_dir.name]
            said = [str(w) for w in info.warnings if repo_dir.name in str(w)]
            raise hub.CorruptedCacheException(said[0] if said else f"{repo_dir}: not in huggingface_hub's scan")

    def scan(repo_dir: Path) -> Any:
        refs = repo_dir / "refs"
        if refs.is_dir():
            for ref in refs.glob("**/*"):
                if not ref.is_dir():
                    try:
                        read_ref(ref)
                    except BadRef as e:
                        raise BadRef(f"refs/{ref.relative_to(refs).as_posix()}: {e}") from None
        return scan_one(repo_dir)

    return scan
