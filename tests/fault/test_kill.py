"""`kill -9` at chosen points of `fix --write`, `reference --out` and `verify`: nothing is lost, nothing is left.

Each case runs the command through `killpoint.py`, which SIGKILLs it at the N-th call of a
chosen function (before or after it), then checks:

- lost: config.json (or reference's output) is the old bytes or the new ones, never a mix; no
  blob of a Hugging Face cache changed; every cache entry on disk reads as a whole entry; the
  model directory is as it was;
- left: no temporary file outside the directory being written (each run has a working
  directory and a $TMPDIR of its own, both checked empty: a temporary created where the user
  stands, not beside its target, would be left there and renamed across filesystems), no
  process of the run alive (verify's reference child dies with it); what a writer left in the
  directory it writes is removed by the next run of the same command, which then succeeds with
  the right verdict.

Linux only for the child's death (PR_SET_PDEATHSIG) and for /proc, which finds the processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk
from portkit import atomicfile

ROOT = Path(__file__).resolve().parents[2]
KILLPOINT = Path(__file__).with_name("killpoint.py")
BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102: fixable


def env_for(tmp: Path, cache: Path, tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PORTKIT_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        NO_COLOR="1",
        PYTHONDONTWRITEBYTECODE="1",
        HF_HUB_CACHE=str(tmp / "hub"),
        PORTKIT_CACHE=str(cache),
        TMPDIR=str(tmp / "tmp"),
        PORTKIT_FAULT_TAG=tag,
    )
    return env


def killed(
    point: str, n: int, when: str, args: list[str], env: dict[str, str], cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, str(KILLPOINT), point, str(n), when, *extra, "--", *args],
        env=env,
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == -signal.SIGKILL, f"not killed at {point}#{n} {when}: exit {r.returncode}\n{r.stderr[-2000:]}"
    return r


def portkit(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "portkit", *args], env=env, cwd=cwd, text=True, capture_output=True, timeout=300
    )


def left_in(d: Path) -> list[str]:
    """What a run left in a directory that must stay empty (torch's compile cache aside)."""
    return sorted(p.name for p in d.iterdir() if not p.name.startswith("torchinductor_"))


def alive_with(tag: str) -> list[int]:
    """Processes whose environment carries `tag` (what the killed run started)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if f"PORTKIT_FAULT_TAG={tag}".encode() in (d / "environ").read_bytes().split(b"\0"):
                stat = (d / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":  # a zombie holds nothing
                    pids.append(int(d.name))
        except OSError:
            continue
    return pids


def files(d: Path) -> dict[str, bytes]:
    return {
        p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and not p.is_symlink()
    }


# ------------------------------------------------------------------ fix --write

FIX_POINTS = [
    # (function, call, when, named temporary files: what the system offers)
    ("portkit.atomicfile._write_all", 1, "after", False),  # the new bytes written, not synced, no name yet
    ("os.fsync", 1, "after", False),  # synced, no name yet
    ("portkit.atomicfile._name_unnamed", 1, "after", False),  # named, not renamed: a temporary file is there
    ("os.replace", 1, "before", False),
    ("os.replace", 1, "after", False),  # renamed, the directory not synced
    ("os.fsync", 1, "after", True),  # no O_TMPFILE: a named temporary file from the start
    ("os.replace", 1, "before", True),
]


@pytest.fixture()
def snapshot_world(tmp_path: Path) -> tuple[Path, Path]:
    """(tmp, snapshot): a cached revision whose config.json is a symlink to a blob, as fix finds it;
    tmp/tmp is the runs' $TMPDIR and tmp/cwd their working directory, both empty."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "cwd").mkdir()
    snap = hc.add_revision(tmp_path / "hub", "acme/bad", hc.model_files(sk.write_model(tmp_path / "src", BAD())))
    return tmp_path, snap


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kill points are SIGKILL; /proc finds leftover processes"
)
@pytest.mark.parametrize(
    "point,n,when,named", FIX_POINTS, ids=[f"{p}#{n}-{w}{'-named' if nm else ''}" for p, n, w, nm in FIX_POINTS]
)
def test_fix_write_killed(point: str, n: int, when: str, named: bool, snapshot_world: tuple[Path, Path]) -> None:
    tmp, snap = snapshot_world
    env = env_for(tmp, tmp / "cache", uuid.uuid4().hex)
    old = (snap / "config.json").read_bytes()
    blobs = files(tmp / "hub" / "models--acme--bad" / "blobs")
    names = sorted(p.name for p in snap.iterdir())

    cwd = tmp / "cwd"
    killed(point, n, when, ["fix", "--write", "acme/bad"], env, cwd, *(["--no-tmpfile"] if named else []))

    now = (snap / "config.json").read_bytes()
    fixed = json.loads(now)
    assert now == old or (fixed["rope_theta"] == 500000.0 and "rope_scaling" in fixed), (
        "config.json is neither the old nor the new one"
    )
    assert files(tmp / "hub" / "models--acme--bad" / "blobs") == blobs, "a blob changed"
    assert list((tmp / "tmp").iterdir()) == []
    assert left_in(cwd) == [], "the killed fix left a file in its working directory"
    # the next fix finishes the job (or finds nothing to do) and removes what the killed one left
    r = portkit(["fix", "--write", "acme/bad"], env, cwd)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in snap.iterdir()) == names, "a temporary file was left in the snapshot"
    assert json.loads((snap / "config.json").read_bytes())["rope_theta"] == 500000.0
    assert portkit(["lint", "acme/bad"], env, cwd).returncode == 0
    assert files(tmp / "hub" / "models--acme--bad" / "blobs") == blobs
    assert left_in(cwd) == [] and list((tmp / "tmp").iterdir()) == []


# ------------------------------------------------------------------ reference --out

REFERENCE_POINTS = [
    # (function, call, when, named temporary files); each reference run renames once (its output)
    ("portkit.atomicfile._write_all", 1, "after", True),  # no O_TMPFILE: a named temporary file, written, not synced
    ("portkit.atomicfile._name_unnamed", 1, "after", False),  # written, named beside the output, not renamed
    ("os.replace", 1, "before", True),  # no O_TMPFILE: a named temporary file, whole, not renamed
    ("os.replace", 1, "after", False),  # renamed, the directory not synced
]
EARLIER = b"an earlier reference"


def whole_reference(path: Path) -> bool:
    from portkit.porting.dumpfile import read_safetensors_dump

    dump = read_safetensors_dump(path)
    return dump.metadata.get("format") == "portkit-reference/1" and {"ids", "logits", "greedy"} <= set(dump.names())


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kill points are SIGKILL; /proc finds leftover processes"
)
@pytest.mark.parametrize(
    "point,n,when,named",
    REFERENCE_POINTS,
    ids=[f"{p}#{n}-{w}{'-named' if nm else ''}" for p, n, w, nm in REFERENCE_POINTS],
)
def test_reference_out_killed(
    point: str, n: int, when: str, named: bool, tmp_path: Path, healthy_tied_dir: Path
) -> None:
    """`portkit reference --out` killed while it writes: the output is the earlier file or the
    whole new one, nothing is left in the working directory or $TMPDIR, and what is left beside
    the output is removed by the next run writing there."""
    for sub in ("tmp", "cwd", "out"):
        (tmp_path / sub).mkdir()
    cwd, out = tmp_path / "cwd", tmp_path / "out" / "ref.safetensors"
    out.write_bytes(EARLIER)
    env = env_for(tmp_path, tmp_path / "cache", uuid.uuid4().hex)
    args = ["reference", str(healthy_tied_dir), "--out", str(out), "--tokens", "1"]

    killed(point, n, when, args, env, cwd, *(["--no-tmpfile"] if named else []))

    assert out.read_bytes() == EARLIER or whole_reference(out), (
        "the output is neither the earlier file nor a whole reference"
    )
    assert left_in(cwd) == [] and left_in(tmp_path / "tmp") == []
    beside = sorted(p.name for p in out.parent.iterdir() if p.name != out.name)
    assert all(atomicfile.stale(name) for name in beside), (
        f"left beside the output, and no dead writer's temporary file a sweep removes: {beside}"
    )
    r = portkit(args, env, cwd)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["ref.safetensors"], (
        "a killed reference's temporary file is still beside the output"
    )
    assert whole_reference(out)
    assert left_in(cwd) == [] and left_in(tmp_path / "tmp") == []


# ------------------------------------------------------------------ verify


def cache_state(cache: Path) -> tuple[list[str], list[str]]:
    """(entries that do not read whole, temporary files) in verify's caches."""
    from portkit.verify import cachefiles
    from portkit.verify.candle import cache as runcache
    from portkit.verify.reference import cache as refcache

    broken, temps = [], []
    for sub, magic in (("reference", refcache.MAGIC), ("candle", runcache.MAGIC)):
        for p in sorted((cache / sub).glob("*/*")):
            if p.name.startswith("."):
                temps.append(p.name)
            elif cachefiles.decode(magic, p.read_bytes()) is None:
                broken.append(p.name)
    return broken, temps


VERIFY_POINTS = [
    # candle's run entry: named, not renamed (the first entry verify writes)
    ("portkit.atomicfile._name_unnamed", 1, "after"),
    # while the reference's child computes: the child must die with verify
    ("portkit.verify.reference.child.ServedReference.result", 1, "before"),
    # the reference's entry renamed, the directory not synced (candle's entry is a hit by now,
    # so this is the run's only write)
    ("os.replace", 1, "after"),
]


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="the child's death with its parent (PR_SET_PDEATHSIG) and /proc are Linux's",
)
def test_verify_killed_at_each_point_then_run_again(tmp_path: Path, healthy_tied_dir: Path) -> None:
    """One cache through all the kills, then one verify that must find everything in order."""
    model = tmp_path / "model"
    shutil.copytree(healthy_tied_dir, model)
    (tmp_path / "tmp").mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cache = tmp_path / "cache"
    before = files(model)
    args = ["verify", str(model), "--tokens", "3", "--no-lint", "--format", "json"]
    for point, n, when in VERIFY_POINTS:
        tag = uuid.uuid4().hex
        killed(point, n, when, args, env_for(tmp_path, cache, tag), cwd)
        deadline = time.monotonic() + 10
        while alive_with(tag) and time.monotonic() < deadline:  # the kernel delivers the child's SIGKILL
            time.sleep(0.05)
        assert alive_with(tag) == [], f"{point}: a process of the killed verify is still running"
        assert left_in(tmp_path / "tmp") == [], point
        assert left_in(cwd) == [], f"{point}: the killed verify left a file in its working directory"
        broken, _ = cache_state(cache)
        assert broken == [], f"{point}: a cache entry is not whole: {broken}"
        assert files(model) == before

    r = portkit(args, env_for(tmp_path, cache, uuid.uuid4().hex), cwd)
    assert r.returncode == 0, r.stderr
    assert cache_state(cache) == ([], []), "a killed writer's temporary file is still in the cache"
    assert left_in(tmp_path / "tmp") == [] and left_in(cwd) == []
    assert files(model) == before

    # a tampered entry (the checksum made to match) is only a slower verify with the right verdict
    from portkit.verify import cachefiles
    from portkit.verify.reference import cache as refcache

    (entry,) = sorted((cache / "reference").glob("*/*.ref"))
    meta, arrays = cachefiles.decode(refcache.MAGIC, entry.read_bytes())
    arrays["rows"] = arrays["rows"][:, :-1] * 0  # another vocabulary, all zeros: a "mismatch" if believed
    entry.write_bytes(cachefiles.encode(refcache.MAGIC, meta, arrays))
    r = portkit(args, env_for(tmp_path, cache, uuid.uuid4().hex), cwd)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reference"]["source"] == "computed"
    assert left_in(cwd) == []
