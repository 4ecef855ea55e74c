"""A hostile Hugging Face cache: refs and revisions that name paths, refs that are garbage or huge,
snapshots that loop or lie outside the repo.

A repo id resolves only to `models--ORG--NAME/snapshots/<40-hex commit>`; anything else is one
line and exit 2, and nothing outside the cache is read as the model or written by fix.
`--hf-cache` scans each repo on its own: one that cannot be read is one `unreadable` row, the
others are still linted, and nothing the cache holds is echoed beyond a few words.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk

huggingface_hub = pytest.importorskip("huggingface_hub", reason="repo ids need huggingface_hub (the verify extra)")

from portkit import hf_cache, hub  # noqa: E402

PORTKIT = [sys.executable, "-m", "portkit"]
BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102


def run(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.update(NO_COLOR="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]), HF_HUB_CACHE=str(cache))
    return subprocess.run([*PORTKIT, *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=120)


def tree(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `d` with its bytes and mtime: what 'nothing changed' means."""
    return {
        p.relative_to(d).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.rglob("*")) if p.is_file()
    }


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(cache, outside): acme/bad is a real cached model with two fixable findings; `outside`
    is a model directory with the same config next to the cache, which must never be touched."""
    cache = tmp_path / "hub"
    files = hc.model_files(sk.write_model(tmp_path / "src", BAD()))
    hc.add_revision(cache, "acme/bad", files)
    outside = sk.write_model(tmp_path / "outside", BAD())
    return cache, outside


def _ref(cache: Path, repo: str, content: str | bytes, name: str = "main") -> None:
    files = hc.model_files(sk.write_model(cache.parent / f"src-{repo.replace('/', '-')}", BAD()))
    hc.add_revision(cache, repo, files)
    ref = hc.repo_dir(cache, repo) / "refs" / name
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_bytes(content if isinstance(content, bytes) else content.encode())


def _one_error_line(r: subprocess.CompletedProcess[str], spec: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("portkit: error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"portkit: error: {spec}: "), r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr


# ------------------------------------------------------------------ repo ids (item 1)


@pytest.mark.parametrize("command", [["lint"], ["fix", "--write"], ["verify"]])
@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_ref_that_names_a_path_resolves_nowhere(
    command: list[str], how: str, world: tuple[Path, Path], tmp_path: Path
) -> None:
    cache, outside = world
    # huggingface_hub joins a ref's content onto snapshots/: ../../../outside is tmp_path/outside
    _ref(cache, "acme/esc", "../../../outside" if how == "relative" else str(outside))
    before = tree(outside)
    r = run([*command, "acme/esc"], cache, tmp_path)
    _one_error_line(r, "acme/esc")
    assert "refs/main" in r.stderr and "not a commit hash" in r.stderr
    assert tree(outside) == before and r.stdout == ""


@pytest.mark.parametrize("command", [["lint"], ["fix", "--write"], ["verify"]])
@pytest.mark.parametrize("rev", ["{outside}", ".", "..", "main/..", "main//x", "refs/../main"])
def test_a_revision_that_is_a_path_is_refused(
    command: list[str], rev: str, world: tuple[Path, Path], tmp_path: Path
) -> None:
    cache, outside = world
    spec = "acme/bad@" + rev.format(outside=outside)
    before = tree(outside), tree(cache)
    r = run([*command, spec], cache, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    named = str(Path(spec)) if command[0] == "fix" else spec  # fix takes a Path: `main//x` reads `main/x`
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"portkit: error: {named}: "), r.stderr
    assert "internal error" not in r.stderr
    assert (tree(outside), tree(cache)) == before


def test_a_snapshot_that_links_out_of_the_cache_is_refused(world: tuple[Path, Path], tmp_path: Path) -> None:
    cache, outside = world
    snap = next((hc.repo_dir(cache, "acme/bad") / "snapshots").iterdir())
    for f in snap.iterdir():
        f.unlink()
    snap.rmdir()
    snap.symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    for command in (["lint"], ["fix", "--write"]):
        r = run([*command, "acme/bad"], cache, tmp_path)
        _one_error_line(r, "acme/bad")
        assert "not a snapshot of acme/bad" in r.stderr
    assert tree(outside) == before


def test_a_ref_that_is_no_file_of_a_commit_is_one_line(world: tuple[Path, Path], tmp_path: Path) -> None:
    cache, _ = world
    _ref(cache, "acme/bin", b"\xff\xfe\x00garbage")
    _ref(cache, "acme/nl", hc.commit_hash("acme/nl", {}) + "\n")  # what a hand edit leaves
    # a commit and then more: a path out of snapshots/<commit>, or one character too many
    _ref(cache, "acme/up", hc.commit_hash("acme/up", {}) + "/../x")
    _ref(cache, "acme/tail", hc.commit_hash("acme/tail", {}) + "x")
    refs = hc.repo_dir(cache, "acme/dir") / "refs"
    _ref(cache, "acme/dir", "x")
    (refs / "main").unlink()
    (refs / "main").mkdir()
    for repo in ("acme/bin", "acme/nl", "acme/dir", "acme/up", "acme/tail"):
        r = run(["lint", repo], cache, tmp_path)
        _one_error_line(r, repo)
        assert "refs/main" in r.stderr
        assert repo in ("acme/bin", "acme/dir") or "not a commit hash (40 hex characters)" in r.stderr, r.stderr
    # several ids in one run: the bad one is an error, the others are still linted
    r = run(["lint", "acme/bin", "acme/bad"], cache, tmp_path)
    assert r.returncode == 2 and "PK101" in r.stdout and "internal error" not in r.stderr, r.stderr


def test_a_huge_ref_is_never_read(world: tuple[Path, Path], tmp_path: Path) -> None:
    cache, _ = world
    _ref(cache, "acme/huge", b"")
    with open(hc.repo_dir(cache, "acme/huge") / "refs" / "main", "r+b") as f:
        f.truncate(300 * 2**20)  # sparse: 300 MiB claimed, nothing written
    r = run(["lint", "acme/huge"], cache, tmp_path)
    _one_error_line(r, "acme/huge")
    assert "314572800 bytes" in r.stderr and len(r.stderr) < 400


def test_looks_like_repo_id_refuses_dot_dot() -> None:
    assert hub.looks_like_repo_id("acme/model") and hub.looks_like_repo_id("acme/model@refs/pr/1")
    for s in ("acme/a..b", "acme/b@../../outside", "acme/b@main/../x", "acme/b@..", "acme..x/b"):
        assert not hub.looks_like_repo_id(s), s


@pytest.mark.parametrize(
    "rev,ok",
    [
        ("main", True),
        ("v1.0", True),
        ("refs/pr/1", True),
        ("a" * 40, True),
        (".", False),
        ("..", False),
        ("/tmp", False),
        ("a//b", False),
        ("a/", False),
        ("a/.hidden", False),
    ],
)
def test_valid_revision(rev: str, ok: bool) -> None:
    assert hub.valid_revision(rev) is ok


def test_read_ref(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.write_text("0123456789abcdef0123456789abcdef01234567")
    assert hub.read_ref(good) == "0123456789abcdef0123456789abcdef01234567"
    assert hub.read_ref(tmp_path / "absent") is None
    os.mkfifo(tmp_path / "fifo")  # never opened: that would block
    for name, content in (("upper", "0123456789ABCDEF0123456789abcdef01234567"), ("short", "abc"), ("path", "../../x")):
        (tmp_path / name).write_text(content)
    for name in ("upper", "short", "path", "fifo"):
        with pytest.raises(hub.BadRef):
            hub.read_ref(tmp_path / name)


# ------------------------------------------------------------------ --hf-cache (item 3)


def test_hf_cache_lints_the_others_when_repos_are_hostile(world: tuple[Path, Path], tmp_path: Path) -> None:
    cache, outside = world
    hc.add_revision(cache, "acme/good", hc.model_files(sk.write_model(tmp_path / "src-good", sk.config("tf4"))))
    _ref(cache, "acme/garbage", b"\xff\xfe\x00")
    _ref(cache, "acme/escape", "../../../outside")
    _ref(cache, "acme/huge", b"")
    with open(hc.repo_dir(cache, "acme/huge") / "refs" / "main", "r+b") as f:
        f.truncate(300 * 2**20)
    _ref(cache, "acme/loop", hc.commit_hash("acme/loop", {}))
    looped = hc.repo_dir(cache, "acme/loop") / "snapshots" / ("1" * 40)
    looped.symlink_to(looped.name)  # a snapshot that is a symlink to itself
    _ref(cache, "acme/linked", b"")
    linked = hc.repo_dir(cache, "acme/linked")
    snap = next((linked / "snapshots").iterdir())
    (linked / "refs" / "main").write_text(snap.name)
    for f in snap.iterdir():
        f.unlink()
    snap.rmdir()
    snap.symlink_to(outside, target_is_directory=True)
    before = tree(outside)

    r = run(["lint", "--hf-cache"], cache, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()[1:-1]}
    assert rows["acme/bad"] == ["main", "llama", "2", "0", "0"] and rows["acme/good"] == [
        "main",
        "llama",
        "0",
        "0",
        "0",
    ], r.stdout
    for repo in ("acme/garbage", "acme/escape", "acme/huge", "acme/loop", "acme/linked"):
        assert rows[repo][2] == "unreadable", (repo, r.stdout)
        assert sum(ln.startswith(f"portkit: error: {repo}") for ln in r.stderr.splitlines()) == 1, r.stderr
    assert "internal error" not in r.stderr and len(r.stderr) < 3000, r.stderr  # nothing echoed whole
    assert tree(outside) == before

    data = json.loads(run(["lint", "--hf-cache", "--format", "json"], cache, tmp_path).stdout)
    by = {m["repo"]: m for m in data["models"]}
    assert by["acme/huge"]["status"] == "unreadable" and "314572800 bytes" in by["acme/huge"]["message"]
    assert by["acme/huge"]["commit"] is None and by["acme/bad"]["status"] == "linted"


def _forty_one_hex_snapshot(cache: Path) -> Path:
    """acme/bad's snapshot copied under a 41-hex name (its commit and one more hex digit), no ref to it."""
    snap = next((hc.repo_dir(cache, "acme/bad") / "snapshots").iterdir())
    odd = snap.with_name(snap.name + "0")
    odd.mkdir()
    for f in snap.iterdir():
        (odd / f.name).symlink_to(os.readlink(f))
    return odd


def test_hf_cache_a_41_hex_snapshot_directory_is_unreadable_not_linted(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    cache, _ = world
    odd = _forty_one_hex_snapshot(cache)
    r = run(["lint", "--hf-cache", "--all-revisions", "--format", "json"], cache, tmp_path)
    by = {m["commit"]: m for m in json.loads(r.stdout)["models"]}
    assert by[odd.name]["status"] == "unreadable" and by[odd.name]["findings"] == {
        "error": 0,
        "warning": 0,
        "info": 0,
    }, by
    assert by[odd.name]["message"] == f"snapshot {odd} is not a directory `snapshots/<40-hex commit>` of this repo"
    assert by[odd.name[:-1]]["status"] == "linted" and by[odd.name[:-1]]["findings"]["error"] == 2
    assert r.returncode == 2, r.stderr


def test_hf_cache_scan_in_process_marks_a_41_hex_snapshot(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same scan in this process (what `make mutation` sees call `is_snapshot`)."""
    from huggingface_hub import constants

    cache, _ = world
    odd = _forty_one_hex_snapshot(cache)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # the scan sets both: undo it after
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models, _ = hf_cache.cached_models(all_revisions=True)
    problems = {m.commit: m.problem for m in models}
    assert problems == {
        odd.name[:-1]: None,
        odd.name: f"snapshot {odd} is not a directory `snapshots/<40-hex commit>` of this repo",
    }


def test_hf_cache_notes_are_bounded(world: tuple[Path, Path], tmp_path: Path) -> None:
    """What huggingface_hub itself calls corrupt stays a note, cut to one short line."""
    cache, _ = world
    _ref(cache, "acme/missing", hc.commit_hash("acme/missing", {"x": b"y"}))  # a valid hash with no snapshot
    (hc.repo_dir(cache, "acme/missing") / "refs" / ("long-" + "x" * 200)).write_text("f" * 40)
    r = run(["lint", "--hf-cache"], cache, tmp_path)
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("portkit: note: ")]
    assert any(n.startswith("portkit: note: acme/missing: skipped: ") for n in notes) and all(
        len(n) <= 340 for n in notes
    ), r.stderr
    assert r.returncode == 1 and "acme/bad" in r.stdout


def test_hf_cache_without_the_per_repo_scan_falls_back_to_the_whole_scan(
    world: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A huggingface_hub that lacks `_scan_cached_repo` still gets every repo (through scan_cache_dir)."""
    from huggingface_hub import constants

    cache, _ = world
    hc.add_revision(cache, "acme/good", hc.model_files(sk.write_model(cache.parent / "src-good", sk.config("tf4"))))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    with_it, _ = hf_cache.cached_models(all_revisions=False)
    monkeypatch.setattr(hub, "PER_REPO_SCAN", "_no_such_function")
    without, _ = hf_cache.cached_models(all_revisions=False)
    assert [(m.repo_id, m.commit) for m in without] == [(m.repo_id, m.commit) for m in with_it] and len(with_it) == 2
