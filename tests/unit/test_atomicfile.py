"""portkit.atomicfile: a replaced file is whole, synced, keeps the mode asked for, replaces a
symlink without writing through it, and a dead writer's temporary files and scratch
directories are removed by the next writer (a live writer's are not)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typing import Iterator

import pytest

from portkit import atomicfile


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


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
def test_replace_writes_whole_synced_with_the_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool) -> None:
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


def test_replace_falls_back_when_the_unnamed_file_cannot_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_sweep_removes_dead_writers_files_only(tmp_path: Path, live: subprocess.Popen[bytes]) -> None:
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


def test_scratch_dir_removes_dead_verifies_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: subprocess.Popen[bytes]) -> None:
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
    monkeypatch.setattr(os, "replace", lambda src, dst: (renamed.append((Path(src), Path(dst))), real_replace(src, dst))[1])
    target = target_dir / "config.json" if how == "absolute" else Path("..", "model", "config.json")
    atomicfile.replace(target, b"new")
    ((src, dst),) = renamed
    assert src.parent == dst.parent == target.parent, (src, dst)
    assert src.name.startswith(f".config.json.portkit-{os.getpid()}-") and atomicfile.is_temp(src.name)
    assert (target_dir / "config.json").read_bytes() == b"new" and sorted(p.name for p in target_dir.iterdir()) == ["config.json"]
    assert list(cwd.iterdir()) == []


def test_temp_name_is_in_the_targets_directory() -> None:
    for target in (Path("/a/b/config.json"), Path("a/b/config.json"), Path("config.json")):
        t = atomicfile.temp_name(target)
        assert t.parent == target.parent and atomicfile.is_temp(t.name), t
        assert atomicfile._TEMP.fullmatch(t.name)["name"] == "config.json"  # type: ignore[index]
    assert atomicfile.temp_name(Path("/a/x")) != atomicfile.temp_name(Path("/a/x"))  # a random part: two writers never collide


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
    assert (tmp_path / "f").read_bytes() == b"head" + bytes(big) + b"tail" and [p.name for p in tmp_path.iterdir()] == ["f"]
    assert max(written) <= len(big) and sum(written) == (2 if how == "O_TMPFILE-unnameable" else 1) * (8 + len(big))
