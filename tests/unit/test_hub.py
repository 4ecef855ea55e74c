"""portkit.hub in process: what names a commit, what is a snapshot, and what a repo id resolves to.

A commit is exactly 40 lowercase hex characters, in a revision, a refs file and a snapshot
directory's name alike: `<40 hex>x`, `<40 hex>/../x` or a 41-hex name is not one, whatever
it starts with. The acceptance tests (tests/acceptance/test_hf_cache*.py) run the same
through a `portkit` subprocess; these call the functions themselves (and are what
`make mutation` sees call them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk
from portkit import hub
from portkit.errors import InputError

C = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"
BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102

#: refs that start like a commit, end like one, or hold one and something more: none is a commit
#: (named by plain ids: mutmut passes test ids on a command line, where a space or a backslash breaks them)
NOT_COMMIT_CASES = {
    "commit-then-x": C + "x",
    "41-hex": C + "0",
    "39-hex": C[:-1],
    "commit-then-up-x": C + "/../x",
    "commit-then-up-other": C + "/../" + OTHER,
    "commit-then-slash": C + "/",
    "two-commits": C + C,
    "commit-newline": C + "\n",
    "commit-crlf": C + "\r\n",
    "commit-space": C + " ",
    "space-commit": " " + C,
    "commit-nul": C + "\x00",
    "x-commit": "x" + C,
    "up-commit": "../" + C,
    "refs-commit": "refs/" + C,
    "upper": C.upper(),
    "non-hex": C[:-1] + "g",
    "empty": "",
}
NOT_COMMITS = list(NOT_COMMIT_CASES.values())


def test_commit_is_exactly_40_lowercase_hex() -> None:
    assert hub.COMMIT.fullmatch(C) and hub.COMMIT.fullmatch(OTHER)
    for s in NOT_COMMITS:
        assert hub.COMMIT.fullmatch(s) is None, repr(s)


# ------------------------------------------------------------------ read_ref


@pytest.mark.parametrize("content", NOT_COMMITS, ids=list(NOT_COMMIT_CASES))
def test_read_ref_refuses_what_only_starts_or_ends_like_a_commit(content: str, tmp_path: Path) -> None:
    ref = tmp_path / "main"
    ref.write_bytes(content.encode("latin-1"))
    with pytest.raises(hub.BadRef) as e:
        hub.read_ref(ref)
    assert (
        str(e.value) == f"holds {hub.short(repr(content.encode('latin-1')), 60)}, not a commit hash (40 hex characters)"
    )


def test_read_ref_returns_the_commit_and_none_when_absent(tmp_path: Path) -> None:
    (tmp_path / "main").write_text(C)
    assert hub.read_ref(tmp_path / "main") == C
    assert hub.read_ref(tmp_path / "absent") is None
    assert hub.read_ref(tmp_path / "main" / "below-a-file") is None  # NotADirectoryError: no such ref either


def test_read_ref_names_what_it_is_when_it_is_no_small_file(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")  # never opened: that would block
    for name in ("dir", "fifo"):
        with pytest.raises(hub.BadRef, match=r"^not a regular file, so no commit hash$"):
            hub.read_ref(tmp_path / name)
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(hub.REF_MAX_BYTES + 1)
    with pytest.raises(hub.BadRef, match=rf"^{hub.REF_MAX_BYTES + 1} bytes, not a 40-character commit hash$"):
        hub.read_ref(big)
    edge = tmp_path / "edge"  # exactly the limit is read (and is then no commit)
    edge.write_bytes(b"a" * hub.REF_MAX_BYTES)
    with pytest.raises(hub.BadRef, match=r"^holds b'aaaa.*, not a commit hash"):
        hub.read_ref(edge)


def test_read_ref_reads_a_ref_that_grew_after_its_stat_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The size check and the read are two steps: a ref that grows between them is still read
    at most REF_MAX_BYTES + 1 bytes (300 MiB here, never read)."""
    import tracemalloc

    ref = tmp_path / "main"
    ref.write_text(C)
    small = os.stat(ref)
    with open(ref, "r+b") as f:
        f.truncate(300 * 2**20)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: small if Path(p) == ref else real_stat(p, *a, **k))
    tracemalloc.start()
    try:
        with pytest.raises(hub.BadRef, match=r"^holds b'0123456789abcdef0123456789abcdef0123456"):
            hub.read_ref(ref)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak} bytes allocated to read a ref"


def test_read_ref_an_unreadable_ref_is_a_bad_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = tmp_path / "main"
    ref.write_text(C)

    def refused(*_a: object, **_k: object) -> None:  # what a mode of 000 does to anyone but root
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(hub, "open", refused, raising=False)
    with pytest.raises(hub.BadRef, match=r"^cannot read it: Permission denied$"):
        hub.read_ref(ref)


def test_read_ref_a_ref_below_an_unsearchable_directory_is_a_bad_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_a: object, **_k: object) -> None:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m, pytest.raises(hub.BadRef, match=r"^cannot read it: Permission denied$"):
        m.setattr(os, "stat", refused)
        hub.read_ref(tmp_path / "main")


# ------------------------------------------------------------------ is_snapshot


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "models--acme--m"
    (r / "snapshots" / C).mkdir(parents=True)
    return r


@pytest.mark.parametrize(
    "name",
    [C + "0", C + "a", C[:-1], C.upper(), C + "x", "x" + C],
    ids=["41-hex", "41-hex-a", "39-hex", "upper", "commit-then-x", "x-commit"],
)
def test_is_snapshot_refuses_a_name_that_is_no_40_hex_commit(name: str, repo: Path) -> None:
    (repo / "snapshots" / name).mkdir()
    assert hub.is_snapshot(repo / "snapshots" / C, repo)
    assert not hub.is_snapshot(repo / "snapshots" / name, repo)


def test_is_snapshot_follows_links_and_wants_the_repos_own_snapshots(repo: Path, tmp_path: Path) -> None:
    snaps = repo / "snapshots"
    (snaps / (C + "a")).mkdir()
    (snaps / OTHER).symlink_to(C + "a", target_is_directory=True)  # a commit's name, a 41-hex directory
    assert not hub.is_snapshot(snaps / OTHER, repo)
    other_repo = tmp_path / "models--acme--other"
    (other_repo / "snapshots" / OTHER).mkdir(parents=True)
    assert not hub.is_snapshot(other_repo / "snapshots" / OTHER, repo)  # another repo's snapshot
    (snaps / C / C).mkdir()
    assert not hub.is_snapshot(snaps / C / C, repo)  # below a snapshot, not one
    linked = tmp_path / "linked-repo"
    linked.symlink_to(repo, target_is_directory=True)
    assert hub.is_snapshot(linked / "snapshots" / C, repo) and hub.is_snapshot(snaps / C, linked)


# ------------------------------------------------------------------ names, and huggingface_hub itself


def test_looks_like_repo_id_leaves_file_names_to_be_paths() -> None:
    for s in ("acme/config.json", "acme/model.safetensors", "acme/tiny.gguf", "acme/x@main.json"):
        assert not hub.looks_like_repo_id(s), s  # a mistyped path, not a repo
    for s in ("acme/tiny-GGUF", "acme/m.JSON", "acme/m.GGUF", "acme/m.Safetensors", "acme/json", "acme/m@v1.0"):
        assert hub.looks_like_repo_id(s), s  # repo names may hold these (the suffixes are lower case file names)


def test_short_is_one_bounded_line() -> None:
    assert hub.short("a\n b\t\tc ") == "a b c"
    assert hub.short("x" * hub.NOTE_MAX_CHARS) == "x" * hub.NOTE_MAX_CHARS
    assert hub.short("x" * (hub.NOTE_MAX_CHARS + 1)) == "x" * (hub.NOTE_MAX_CHARS - 3) + "..."
    assert hub.short("abcdefgh", 6) == "abc..." and hub.short("abcdef", 6) == "abcdef" and hub.short(12345, 4) == "1..."


def test_describe_names_the_revision_its_commit_and_a_partial_download(tmp_path: Path) -> None:
    m = hub.CachedModel(repo_id="acme/m", revision="v1", commit=C, path=tmp_path)
    assert m.describe() == f"acme/m@v1 is {tmp_path} in the Hugging Face cache (commit {C[:12]})"
    partial = hub.CachedModel(repo_id="acme/m", revision="main", commit=C, path=tmp_path, partial=True)
    assert (
        partial.describe()
        == f"acme/m@main is {tmp_path} in the Hugging Face cache (commit {C[:12]}, a partial download: the files that "
        "are there are linted)"
    )
    assert (
        hub.CachedModel(repo_id="acme/m", revision="-", commit="", path=tmp_path).spec == "acme/m"
    )  # a repo the scan could not read


@pytest.mark.parametrize("spec,where", [("acme/m", "acme/m"), (None, "--hf-cache")])
def test_without_huggingface_hub_one_line_says_what_to_install(
    spec: str | None, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import huggingface_hub` raises ImportError
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(InputError) as e:
        hub.offline_hub(spec) if spec is not None else hub.offline_hub()
    assert e.value.path == where
    what = (
        "no such path; reading it as a Hugging Face repo id needs" if spec else "reading the Hugging Face cache needs"
    )
    assert e.value.what == f"{what} huggingface_hub (pip install huggingface_hub)"
    assert os.environ["HF_HUB_OFFLINE"] == "1"  # set before anything of the hub is imported
    if spec:
        with pytest.raises(InputError) as r:
            hub.resolve(spec)
        assert (r.value.path, r.value.what) == (e.value.path, e.value.what)


# ------------------------------------------------------------------ resolve, in process

huggingface_hub = pytest.importorskip("huggingface_hub", reason="repo ids need huggingface_hub (the verify extra)")


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache that huggingface_hub, in this process, reads (it reads HF_HUB_CACHE at import)."""
    from huggingface_hub import constants

    c = tmp_path / "hub"
    c.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(c))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # resolve sets it: undo that after
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return c


def _repo(cache: Path, repo_id: str, tmp_path: Path) -> Path:
    """A cached repo with one snapshot of a model with two fixable findings; returns its snapshot."""
    return hc.add_revision(
        cache, repo_id, hc.model_files(sk.write_model(tmp_path / "src" / repo_id.replace("/", "-"), BAD()))
    )


def test_resolve_finds_main_a_tag_and_a_commit(cache: Path, tmp_path: Path) -> None:
    snap = _repo(cache, "acme/m", tmp_path)
    tag = hc.add_revision(cache, "acme/m", {"config.json": b"{}"}, refs=("v1",), commit=OTHER)
    m = hub.resolve("acme/m")
    assert (m.repo_id, m.revision, m.commit, m.path, m.partial) == ("acme/m", "main", snap.name, snap, False)
    assert (
        m.spec == "acme/m@main"
        and m.describe() == f"acme/m@main is {snap} in the Hugging Face cache (commit {snap.name[:12]})"
    )
    t = hub.resolve("acme/m@v1")
    assert (t.revision, t.commit, t.path) == ("v1", OTHER, tag)
    by_hash = hub.resolve(f"acme/m@{OTHER}")
    assert (by_hash.revision, by_hash.commit, by_hash.path) == (OTHER, OTHER, tag)


@pytest.mark.parametrize(
    "case", ["commit-then-up-x", "commit-then-x", "41-hex", "commit-then-up-other", "commit-newline", "up-commit"]
)
def test_resolve_refuses_a_ref_that_only_starts_or_ends_like_a_commit(case: str, cache: Path, tmp_path: Path) -> None:
    content = NOT_COMMIT_CASES[case]
    snap = _repo(cache, "acme/m", tmp_path)
    hc.add_revision(cache, "acme/m", {"config.json": b"{}"}, refs=(), commit=OTHER)  # what `/../<OTHER>` would name
    (snap.parent / (C + "0")).mkdir()
    ref = hc.repo_dir(cache, "acme/m") / "refs" / "main"
    ref.write_text(content)
    with pytest.raises(InputError) as e:
        hub.resolve("acme/m")
    assert e.value.path == "acme/m"
    assert e.value.what.startswith(f"refs/main of acme/m in the Hugging Face cache ({ref}): holds b"), e.value.what
    assert e.value.what.endswith(", not a commit hash (40 hex characters)"), e.value.what


def test_resolve_refuses_a_snapshot_linked_to_a_41_hex_directory(cache: Path, tmp_path: Path) -> None:
    snap = _repo(cache, "acme/m", tmp_path)
    real = snap.parent / (snap.name + "a")
    snap.rename(real)
    snap.symlink_to(real.name, target_is_directory=True)
    with pytest.raises(InputError) as e:
        hub.resolve("acme/m")
    repo_dir = hc.repo_dir(cache, "acme/m")
    assert (
        e.value.what == f"the Hugging Face cache names {snap} for it, which is not a snapshot of acme/m "
        f"({repo_dir / 'snapshots'}/<commit>)"
    )
    assert e.value.path == "acme/m"


def test_resolve_a_41_hex_revision_is_a_branch_name_that_is_not_cached(cache: Path, tmp_path: Path) -> None:
    snap = _repo(cache, "acme/m", tmp_path)
    (snap.parent / (snap.name + "a")).symlink_to(snap.name, target_is_directory=True)
    with pytest.raises(InputError) as e:
        hub.resolve(f"acme/m@{snap.name}a")
    assert e.value.what.startswith(
        f"no such path, and revision `{snap.name}a` of acme/m is not in the Hugging Face cache ({cache})"
    )


def test_resolve_goes_offline_even_when_huggingface_hub_was_imported_online(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub reads HF_HUB_OFFLINE at import; one imported before portkit is told again,
    and asked for local files only (either alone keeps it off the network)."""
    from huggingface_hub import constants

    _repo(cache, "acme/m", tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    asked: list[dict[str, object]] = []
    real = huggingface_hub.snapshot_download
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: (asked.append(k), real(*a, **k))[1])
    assert hub.resolve("acme/m").repo_id == "acme/m"
    assert constants.HF_HUB_OFFLINE is True and os.environ["HF_HUB_OFFLINE"] == "1"
    assert [k.get("local_files_only") for k in asked] == [True]


@pytest.mark.parametrize(
    "spec,what",
    [
        ("acme", "not a path, and not a Hugging Face repo id (ORG/NAME[@REVISION])"),
        (
            "acme/m@..",
            "no such path, and `..` is not a revision (a branch, tag or commit hash; `.`, `..` and `/dir` are paths)",
        ),
        (
            "acme/m@main//x",
            "no such path, and `main//x` is not a revision (a branch, tag or commit hash; `.`, `..` and `/dir` are "
            "paths)",
        ),
        (
            "acme/a--b",
            "no such path, and not a valid Hugging Face repo id: Cannot have -- or .. in repo_id: 'acme/a--b'.",
        ),
        (
            "acme/x.git",
            "no such path, and not a valid Hugging Face repo id: Repo_id cannot end by '.git': 'acme/x.git'.",
        ),
    ],
    ids=["no-slash", "dot-dot-revision", "empty-revision-part", "double-dash", "dot-git"],
)
def test_resolve_refuses_what_is_no_repo_id_or_revision(spec: str, what: str, cache: Path) -> None:
    with pytest.raises(InputError) as e:
        hub.resolve(spec)
    assert (e.value.path, e.value.what) == (spec, what)


def test_resolve_says_how_to_get_what_is_not_cached(cache: Path, tmp_path: Path) -> None:
    _repo(cache, "acme/m", tmp_path)
    hc.add_revision(cache, "acme/pinned", {"config.json": b"{}"}, refs=())
    cases = {
        "acme/absent": f"no such path, and acme/absent is not in the Hugging Face cache ({cache}); portkit never "
        "downloads: get it with `hf download acme/absent`",
        "acme/m@v9": f"no such path, and revision `v9` of acme/m is not in the Hugging Face cache ({cache}); portkit "
        "never downloads: get it with `hf download acme/m --revision v9`",
        "acme/pinned": f"no such path, and revision `main` of acme/pinned is not in the Hugging Face cache ({cache}); "
        "portkit never downloads: get it with `hf download acme/pinned`",
        f"acme/m@{OTHER}": f"no such path, and revision `{OTHER}` of acme/m is not in the Hugging Face cache "
        f"({cache}); portkit never downloads: get it with `hf download acme/m --revision {OTHER}`",
    }
    for spec, what in cases.items():
        with pytest.raises(InputError) as e:
            hub.resolve(spec)
        assert (e.value.path, e.value.what) == (spec, what)


def test_resolve_a_partial_download_is_resolved_and_said_so(cache: Path, tmp_path: Path) -> None:
    """huggingface_hub's cached tree listing names a file that was not downloaded (one GGUF of many)."""
    import hashlib

    from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache

    snap = _repo(cache, "acme/m", tmp_path)
    files = {p.name: p.read_bytes() for p in snap.iterdir()}
    listing = {n: TreeCacheEntry(size=len(b), blob_id=hashlib.sha1(b).hexdigest()) for n, b in files.items()}
    listing["model-q4_0.gguf"] = TreeCacheEntry(size=1, blob_id="0" * 40)
    write_tree_cache(str(hc.repo_dir(cache, "acme/m")), snap.name, listing)
    m = hub.resolve("acme/m")
    assert (m.path, m.partial, m.commit) == (snap, True, snap.name)
    assert m.describe().endswith(", a partial download: the files that are there are linted)")


@pytest.mark.parametrize(
    "raised,what",
    [
        ("validation", "no such path, and not a valid Hugging Face repo id: the hub refuses it"),
        ("oserror", "cannot read it in the Hugging Face cache ({cache}): [Errno 5] Input/output error: 'snapshots'"),
        (
            "valueerror",
            "cannot read it in the Hugging Face cache ({cache}): " + ("x " * 150)[:297] + "...",
        ),  # one line, cut
    ],
    ids=["validation", "oserror", "valueerror"],
)
def test_resolve_what_huggingface_hub_raises_is_one_line(
    raised: str, what: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub.errors import HFValidationError

    _repo(cache, "acme/m", tmp_path)
    errors = {
        "validation": HFValidationError("the hub refuses it"),
        "oserror": OSError(5, "Input/output error", "snapshots"),
        "valueerror": ValueError("x\n" * 400),
    }

    def refuses(*_a: object, **_k: object) -> None:
        raise errors[raised]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuses)
    with pytest.raises(InputError) as e:
        hub.resolve("acme/m")
    assert (e.value.path, e.value.what) == ("acme/m", what.format(cache=cache))
