"""portkit.atomicfile: a replaced file is whole, synced, keeps the mode asked for, replaces a
symlink without writing through it, and a dead writer's temporary files and scratch
directories are removed by the next writer (a live writer's are not)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from portkit import atomicfile


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def probes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The signals sent through os.kill from now on (still sent: the fixture's child must live)."""
    sent: list[int] = []
    real_kill = os.kill
    monkeypatch.setattr(os, "kill", lambda pid, sig: (sent.append(sig), real_kill(pid, sig))[1])
    return sent


@pytest.fixture()
def live() -> Iterator[subprocess.Popen[bytes]]:
    """A live writer's process, our own child: a sweep must leave its files and never signal it.
    (Not os.getppid(): a sweep that signals would hit pytest's parent, under mutmut its fork server.)"""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield p
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named"])
def test_replace_writes_whole_synced_with_the_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool
) -> None:
    if not unnamed:
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    blob = tmp_path / "blob"
    blob.write_bytes(b"shared")
    (tmp_path / "config.json").symlink_to(blob)
    atomicfile.replace(tmp_path / "config.json", b"new", mode=0o640)
    assert (tmp_path / "config.json").read_bytes() == b"new" and not (tmp_path / "config.json").is_symlink()
    assert blob.read_bytes() == b"shared"  # what the link pointed at is never written
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == 0o640
    assert len(synced) == 2  # the file, then the directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob", "config.json"]


def test_replace_falls_back_when_the_unnamed_file_cannot_be_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomicfile, "_name_unnamed", lambda *_a: False)
    atomicfile.replace(tmp_path / "f", b"x")
    assert (tmp_path / "f").read_bytes() == b"x" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_bytes(b"old")

    def full(*_a: object) -> None:
        raise OSError(28, "No space left on device")

    for unnamed in (True, False):
        if not unnamed:
            monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
        monkeypatch.setattr(atomicfile, "_write_all", full)
        with pytest.raises(OSError):
            atomicfile.replace(tmp_path / "f", b"new")
        assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_bytes() == b"old"


def test_sweep_removes_dead_writers_files_only(
    tmp_path: Path, live: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    signals = probes(monkeypatch)
    dead = dead_pid()
    names = {
        f".config.json.portkit-{dead}-abcd.tmp": False,  # removed
        f".config.json.portkit-{live.pid}-abcd.tmp": True,  # its writer lives
        f".other.json.portkit-{dead}-abcd.tmp": True,  # another file's, when asked for config.json
        ".config.json.abcd1234": True,  # not ours (an editor's, or mkstemp's)
        "config.json": True,
    }
    for n in names:
        (tmp_path / n).write_bytes(b"")
    atomicfile.sweep(tmp_path, "config.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n, kept in names.items() if kept)
    atomicfile.sweep(tmp_path)
    assert not (tmp_path / f".other.json.portkit-{dead}-abcd.tmp").exists()
    assert live.poll() is None, "the sweep signalled a live writer"
    assert signals and set(signals) == {0}, f"a sweep only asks whether a writer lives (signal 0), it sent {signals}"


def test_scratch_dir_removes_dead_verifies_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: subprocess.Popen[bytes]
) -> None:
    signals = probes(monkeypatch)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    dead = dead_pid()
    left = tmp_path / f"portkit-verify-gguf-{dead}-x1y2"
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "patched-1.gguf").write_bytes(b"GGUF")
    mine = atomicfile.scratch_dir("portkit-verify-gguf-")
    other = tmp_path / f"portkit-verify-gguf-{live.pid}-live"
    other.mkdir()
    again = atomicfile.scratch_dir("portkit-verify-gguf-")
    assert not left.exists() and mine.is_dir() and again.is_dir() and other.is_dir()
    assert live.poll() is None, "the scan signalled a live verify"
    assert signals and set(signals) == {0}, f"the scan only asks whether a verify lives (signal 0), it sent {signals}"
    assert mine.name.startswith(f"portkit-verify-gguf-{os.getpid()}-") and mine.parent == tmp_path


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named"])
@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_the_temporary_file_is_beside_the_target_wherever_the_caller_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool, how: str
) -> None:
    """`os.replace` is atomic only within one filesystem, and a killed writer's temporary file is
    removed only from the target's directory: the temporary is there, never in the working directory."""
    if not unnamed:
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    target_dir = tmp_path / "model"
    target_dir.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    renamed: list[tuple[Path, Path]] = []
    real_replace = os.replace
    monkeypatch.setattr(
        os, "replace", lambda src, dst: (renamed.append((Path(src), Path(dst))), real_replace(src, dst))[1]
    )
    target = target_dir / "config.json" if how == "absolute" else Path("..", "model", "config.json")
    atomicfile.replace(target, b"new")
    ((src, dst),) = renamed
    assert src.parent == dst.parent == target.parent, (src, dst)
    assert src.name.startswith(f".config.json.portkit-{os.getpid()}-") and atomicfile.is_temp(src.name)
    assert (target_dir / "config.json").read_bytes() == b"new" and sorted(p.name for p in target_dir.iterdir()) == [
        "config.json"
    ]
    assert list(cwd.iterdir()) == []


def test_temp_name_is_in_the_targets_directory() -> None:
    for target in (Path("/a/b/config.json"), Path("a/b/config.json"), Path("config.json")):
        t = atomicfile.temp_name(target)
        assert t.parent == target.parent and atomicfile.is_temp(t.name), t
        assert atomicfile._TEMP.fullmatch(t.name)["name"] == "config.json"  # type: ignore[index]
    assert atomicfile.temp_name(Path("/a/x")) != atomicfile.temp_name(
        Path("/a/x")
    )  # a random part: two writers never collide


@pytest.mark.parametrize("how", ["O_TMPFILE", "named", "O_TMPFILE-unnameable"])
def test_replace_writes_pieces_in_order_never_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "named":
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    if how == "O_TMPFILE-unnameable":  # the pieces are written twice: once unnamed, again named
        monkeypatch.setattr(atomicfile, "_name_unnamed", lambda *_a: False)
    written: list[int] = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, b: (written.append(len(b)), real_write(fd, b))[1])
    big = memoryview(bytes(range(256)) * 4096)  # 1 MiB
    atomicfile.replace(tmp_path / "f", [b"head", big, memoryview(b""), b"tail"])
    assert (tmp_path / "f").read_bytes() == b"head" + bytes(big) + b"tail" and [p.name for p in tmp_path.iterdir()] == [
        "f"
    ]
    assert max(written) <= len(big) and sum(written) == (2 if how == "O_TMPFILE-unnameable" else 1) * (8 + len(big))


# ------------------------------------------------------------------ each step of replace, and what it does when a step
# fails


def _o_tmpfile_works(d: Path) -> bool:
    try:
        os.close(os.open(d, getattr(os, "O_TMPFILE", 0) | os.O_WRONLY, 0o600))
        return hasattr(os, "O_TMPFILE")
    except OSError:
        return False


def _listing_while_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """replace() of tmp_path/f, with what the directory holds each time the bytes are written."""
    seen: list[list[str]] = []
    real = atomicfile._write_all
    monkeypatch.setattr(
        atomicfile,
        "_write_all",
        lambda fd, data: (seen.append(sorted(p.name for p in tmp_path.iterdir())), real(fd, data))[1],
    )
    atomicfile.replace(tmp_path / "f", b"new")
    assert (tmp_path / "f").read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["f"]
    return seen


def test_on_linux_the_bytes_go_to_a_file_with_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """O_TMPFILE where the system has it: while the bytes are written nothing is in the directory,
    so a writer killed then leaves nothing at all."""
    if not (sys.platform.startswith("linux") and _o_tmpfile_works(tmp_path)):
        pytest.skip("no O_TMPFILE on this system or filesystem: the named path is tested below")
    assert _listing_while_writing(tmp_path, monkeypatch) == [[]]


def test_without_proc_the_bytes_go_to_a_named_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """O_TMPFILE's file is named through /proc/self/fd: without /proc, a named temporary file from the start."""
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: False if str(p) == "/proc/self/fd" else real_isdir(p))
    ((name,),) = _listing_while_writing(tmp_path, monkeypatch)
    assert atomicfile.stale(name) is False and name.startswith(f".f.portkit-{os.getpid()}-")


@pytest.mark.parametrize("refused", ["proc-fd", "link"])
def test_an_unnamed_file_the_system_will_not_name_falls_back_to_a_named_one(
    refused: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if refused == "link":

        def no_link(*_a: object, **_k: object) -> None:
            raise OSError(1, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
    else:
        real_open = os.open
        monkeypatch.setattr(
            os,
            "open",
            lambda p, *a, **k: (
                (_ for _ in ()).throw(OSError(13, "Permission denied"))
                if p == "/proc/self/fd"
                else real_open(p, *a, **k)
            ),
        )
    (tmp_path / "f").write_bytes(b"old")
    atomicfile.replace(tmp_path / "f", b"new")
    assert (tmp_path / "f").read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["f"]


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named"])
def test_the_file_is_never_more_open_than_its_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool
) -> None:
    """The mode is given when the file is created, not only set after the bytes are in: a config
    written 0600 is never readable by others, even for an instant."""
    if not unnamed:
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    modes: list[int] = []
    real_fchmod = os.fchmod
    monkeypatch.setattr(os, "fchmod", lambda fd, m: (modes.append(os.fstat(fd).st_mode & 0o777), real_fchmod(fd, m))[1])
    atomicfile.replace(tmp_path / "f", b"secret", mode=0o600)
    assert len(modes) == 1 and modes[0] & ~0o600 == 0, oct(modes[0])


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named"])
def test_short_writes_are_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
    if not unnamed:
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, b: real_write(fd, bytes(b[:3])))  # what a pipe or a signal can do
    atomicfile.replace(tmp_path / "f", [b"0123456789", memoryview(b"abcdefg")])
    assert (tmp_path / "f").read_bytes() == b"0123456789abcdefg"


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named"])
def test_a_failed_rename_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
    if not unnamed:
        monkeypatch.setattr(atomicfile, "_unnamed", lambda *_a: None)
    (tmp_path / "f").write_bytes(b"old")

    def refused(*_a: object) -> None:
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError, match="busy"):
        atomicfile.replace(tmp_path / "f", b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_bytes() == b"old"


def test_replace_sweeps_its_targets_dead_temporaries_in_the_targets_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = dead_pid()
    d, cwd = tmp_path / "d", tmp_path / "cwd"
    d.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    mine, other = f".f.portkit-{dead}-abcd.tmp", f".g.portkit-{dead}-abcd.tmp"
    for where in (d, cwd):
        for n in (mine, other):
            (where / n).write_bytes(b"half")
    atomicfile.replace(d / "f", b"new")
    assert sorted(p.name for p in d.iterdir()) == sorted(["f", other])  # the target's, not another file's
    assert sorted(p.name for p in cwd.iterdir()) == sorted([mine, other])  # nothing outside the target's directory


def test_sweep_returns_what_it_removed(tmp_path: Path) -> None:
    dead = dead_pid()
    for n in (f".a.portkit-{dead}-1.tmp", f".b.portkit-{dead}-2.tmp", "c"):
        (tmp_path / n).write_bytes(b"")
    assert sorted(atomicfile.sweep(tmp_path)) == [
        tmp_path / f".a.portkit-{dead}-1.tmp",
        tmp_path / f".b.portkit-{dead}-2.tmp",
    ]
    assert atomicfile.sweep(tmp_path / "absent") == []


def test_a_writer_that_cannot_be_signalled_is_alive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EPERM: someone else's live process; its temporary file is not removed."""
    (tmp_path / ".f.portkit-4242-abcd.tmp").write_bytes(b"")

    def eperm(pid: int, sig: int) -> None:
        assert (pid, sig) == (4242, 0)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", eperm)
    assert not atomicfile.stale(".f.portkit-4242-abcd.tmp") and atomicfile.sweep(tmp_path) == []
    assert (
        atomicfile.is_temp(".f.portkit-4242-abcd.tmp")
        and not atomicfile.is_temp("f")
        and not atomicfile.is_temp(".f.portkit-x-abcd.tmp")
    )


def test_fsync_dir_syncs_directories_and_tolerates_those_that_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    atomicfile.fsync_dir(tmp_path)
    assert len(synced) == 1
    (tmp_path / "file").write_bytes(b"")
    atomicfile.fsync_dir(tmp_path / "file")  # opened as a directory only: a file is not synced
    atomicfile.fsync_dir(tmp_path / "absent")
    assert len(synced) == 1
    for code in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):  # a filesystem that cannot sync a directory
        monkeypatch.setattr(os, "fsync", lambda fd, code=code: (_ for _ in ()).throw(OSError(code, os.strerror(code))))
        atomicfile.fsync_dir(tmp_path)
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(OSError, match="Input/output error"):
        atomicfile.fsync_dir(tmp_path)


def test_scratch_dir_when_tmpdir_cannot_be_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    real_scandir = os.scandir
    monkeypatch.setattr(
        os,
        "scandir",
        lambda p=".": (
            (_ for _ in ()).throw(PermissionError(13, "Permission denied")) if Path(p) == tmp_path else real_scandir(p)
        ),
    )
    d = atomicfile.scratch_dir("portkit-x-")
    assert d.parent == tmp_path and d.is_dir()


def test_scratch_dir_looks_at_every_entry_and_removes_only_its_own_dead_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: subprocess.Popen[bytes]
) -> None:
    """In listing order: entries that are not scratch directories, a live verify's, then dead ones;
    a dead one owned by another user, a file and a symlink with a dead one's name stay."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    dead = dead_pid()
    names = [
        "a-unrelated",
        f"portkit-x-{live.pid}-live",
        f"portkit-x-{dead}-other",
        f"portkit-x-{dead}-file",
        f"portkit-x-{dead}-link",
        f"portkit-x-{dead}-gone",
        f"portkit-x-{dead}-gone2",
    ]
    (tmp_path / "target").mkdir()
    for n in names:
        if n.endswith("-file"):
            (tmp_path / n).write_bytes(b"")
        elif n.endswith("-link"):
            (tmp_path / n).symlink_to(tmp_path / "target", target_is_directory=True)
        else:
            (tmp_path / n / "sub").mkdir(parents=True)
    real_scandir = os.scandir
    order = {n: i for i, n in enumerate([*names, "target"])}

    class Entry:  # os.DirEntry, with another owner for `-other`
        def __init__(self, e: os.DirEntry[str]) -> None:
            self._e, self.name, self.path = e, e.name, e.path

        def is_dir(self, *, follow_symlinks: bool = True) -> bool:
            return self._e.is_dir(follow_symlinks=follow_symlinks)

        def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
            st = self._e.stat(follow_symlinks=follow_symlinks)
            if self.name.endswith("-other"):
                return os.stat_result(
                    (st.st_mode, st.st_ino, st.st_dev, st.st_nlink, os.geteuid() + 1, st.st_gid, st.st_size, 0, 0, 0)
                )
            return st

    def listing(p: object = ".") -> Any:
        if Path(str(p)) != tmp_path:  # rmtree's own listing (by descriptor) stays the real one
            return real_scandir(p)  # type: ignore[arg-type]
        return sorted((Entry(e) for e in real_scandir(p)), key=lambda e: order.get(e.name, len(order)))

    monkeypatch.setattr(os, "scandir", listing)
    mine = atomicfile.scratch_dir("portkit-x-")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([mine.name, "target", *(n for n in names if not n.endswith(("-gone", "-gone2")))]), left
    assert (tmp_path / "target").is_dir() and live.poll() is None


def test_without_o_tmpfile_a_named_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS has no O_TMPFILE: the named path from the start."""
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    ((name,),) = _listing_while_writing(tmp_path, monkeypatch)
    assert name.startswith(f".f.portkit-{os.getpid()}-")


def test_without_o_directory_the_unnamed_file_is_still_named_and_the_directory_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (sys.platform.startswith("linux") and _o_tmpfile_works(tmp_path)):
        pytest.skip("no O_TMPFILE on this system or filesystem")
    monkeypatch.delattr(os, "O_DIRECTORY")
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    assert _listing_while_writing(tmp_path, monkeypatch) == [[]]  # written once, unnamed, then named through /proc
    assert len(synced) == 2  # the file, then the directory


def test_scratch_dir_removes_what_it_can_of_a_dead_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead verify's patched GGUFs can be gigabytes: one file that cannot be removed does not
    keep the others."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    left = tmp_path / f"portkit-x-{dead_pid()}-x1y2"
    left.mkdir()
    for i in range(5):
        (left / f"patched-{i}.gguf").write_bytes(b"GGUF")
    real_unlink, calls = os.unlink, [0]

    def first_refused(p: object, *a: object, **k: object) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise PermissionError(13, "Permission denied")
        real_unlink(p, *a, **k)  # type: ignore[arg-type]

    assert tempfile.gettempdir() == str(tmp_path)  # found (its probe unlinks a file) before unlinks are refused
    monkeypatch.setattr(os, "unlink", first_refused)
    atomicfile.scratch_dir("portkit-x-")
    assert len(list(left.iterdir())) == 1  # the one refused; the other four removed
