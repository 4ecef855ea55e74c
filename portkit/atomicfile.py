"""Replace a file so that a reader, a crash or a `kill -9` never sees half of it, and nothing is left behind.

`replace(path, data)` writes the bytes to a file of the same directory, fsyncs it, renames it
over `path` and fsyncs the directory: after a power cut the file is the old one or the new one,
never empty. On Linux the bytes go to an unnamed file (`O_TMPFILE`) that gets a name only for
the rename, so a process killed while writing or syncing leaves nothing; elsewhere, and for
the instant between naming and renaming, the temporary file is `.<name>.portkit-<pid>-<hex>.tmp`.
`sweep(directory)` removes such files whose process is gone: the next writer of the directory
calls it, so what a killed writer left does not stay.

Used by `portkit fix --write` (config.json, possibly in a Hugging Face snapshot), `portkit
reference --out` and verify's cache entries.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

_TEMP = re.compile(r"\.(?P<name>.+)\.portkit-(?P<pid>[0-9]+)-[0-9a-f]+\.tmp")


def temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.portkit-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def is_temp(name: str) -> bool:
    return _TEMP.fullmatch(name) is not None


def stale(name: str) -> bool:
    """A temporary file of this module whose writer is gone."""
    m = _TEMP.fullmatch(name)
    return m is not None and not _alive(int(m["pid"]))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's live process
        return True
    return True


def sweep(directory: Path, name: str | None = None) -> list[Path]:
    """Remove the temporary files of dead writers in `directory` (of `name` only, when given).
    A failure to list or remove is ignored: this is housekeeping."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        m = _TEMP.fullmatch(e.name)
        if m is None or (name is not None and m["name"] != name) or not stale(e.name):
            continue
        try:
            os.unlink(e.path)
            removed.append(Path(e.path))
        except OSError:
            pass
    return removed


def _unnamed(directory: Path, mode: int) -> int | None:
    """A file in `directory` with no name yet (Linux O_TMPFILE, named later through /proc), or None."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_WRONLY, mode)
    except OSError:  # a filesystem without O_TMPFILE support: a named temporary file instead
        return None


def _write_all(fd: int, data: bytes | Sequence[bytes | memoryview]) -> None:
    for chunk in [data] if isinstance(data, bytes) else data:
        view = memoryview(chunk)
        while view:
            n = os.write(fd, view)
            view = view[n:]


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:  # some filesystems cannot sync a directory; the rename is still atomic
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _name_unnamed(fd: int, tmp: Path) -> bool:
    """Give the O_TMPFILE file `fd` the name `tmp` (linkat through /proc/self/fd, following the
    link; os.link uses linkat only when given a directory fd). False when the system refuses."""
    try:
        proc = os.open("/proc/self/fd", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return False
    try:
        os.link(str(fd), tmp, src_dir_fd=proc, follow_symlinks=True)
        return True
    except OSError:
        return False
    finally:
        os.close(proc)


def replace(path: Path, data: bytes | Sequence[bytes | memoryview], *, mode: int = 0o600) -> None:
    """Atomically and durably make `path` hold `data`, or the pieces of it in order, which are
    never joined (a symlink at `path` is replaced by a file; what it pointed at is never
    written). OSError when the directory cannot be written; no temporary file is left then."""
    path = Path(path)
    directory = path.parent
    sweep(directory, path.name)
    tmp = temp_name(path)
    fd = _unnamed(directory, mode)
    if fd is not None:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)  # O_TMPFILE and O_CREAT apply the umask; the caller's mode is meant
            os.fsync(fd)
            named = _name_unnamed(fd, tmp)
        finally:
            os.close(fd)
        if named:
            _rename(tmp, path)
            return
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _unlink(tmp)
        raise
    _rename(tmp, path)


def _rename(tmp: Path, path: Path) -> None:
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    fsync_dir(path.parent)


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def scratch_dir(prefix: str) -> Path:
    """A new private directory in $TMPDIR, `<prefix><pid>-<random>`; first, those of this
    prefix whose process is gone (killed before it could remove its own) are removed."""
    import shutil
    import tempfile

    base = Path(tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(?P<pid>[0-9]+)-[A-Za-z0-9_]+")
    try:
        entries = list(os.scandir(base))
    except OSError:
        entries = []
    for e in entries:
        m = pattern.fullmatch(e.name)
        if m is None or _alive(int(m["pid"])):
            continue
        try:
            if e.is_dir(follow_symlinks=False) and e.stat(follow_symlinks=False).st_uid == os.geteuid():
                shutil.rmtree(e.path, ignore_errors=True)
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
