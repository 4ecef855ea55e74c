"""Repo ids and `--hf-cache` against a real Hugging Face cache layout, end to end.

The cache is written by `fixtures.hf_cache` the way huggingface_hub writes one (blobs named by
content, `refs/<name>` holding a commit hash, `snapshots/<commit>/<file>` relative symlinks)
and `huggingface_hub.scan_cache_dir` must accept it. Every run is a `portkit` subprocess:
huggingface_hub reads `HF_HUB_CACHE` / `HF_HOME` once, at import, as it does for users.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk

huggingface_hub = pytest.importorskip("huggingface_hub", reason="repo ids need huggingface_hub (the verify extra)")

PORTKIT = [sys.executable, "-m", "portkit"]


def _model(tmp: Path, name: str, cfg: dict, **kw: object) -> dict[str, bytes]:
    return hc.model_files(sk.write_model(tmp / "src" / name, cfg, **kw))


TINY_TOKENIZER = (
    b'{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},'
    b'"post_processor":null,"decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1},"unk_token":"[UNK]"}}\n'
)
BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102, both errors
GOOD = lambda: sk.config("tf4")  # noqa: E731


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    """acme/bad (main: errors), acme/good (main clean; tag v1 = the bad files, sharing blobs with
    acme/bad's content), acme/warn (a warning only), acme/tok (a tokenizer alone: the tokenizer
    rules, clean), acme/broken (config.json
    not JSON), acme/pinned (no `main`), and a dataset repo that is no model."""
    c = tmp_path / "hub"
    bad = _model(tmp_path, "bad", BAD())
    hc.add_revision(c, "acme/bad", bad)
    hc.add_revision(c, "acme/good", _model(tmp_path, "good", GOOD()))
    hc.add_revision(c, "acme/good", bad, refs=("v1",))
    hc.add_revision(c, "acme/warn", _model(tmp_path, "warn", GOOD(), generation_config={"eos_token_id": [2, 7]}))
    hc.add_revision(c, "acme/tok", {"tokenizer.json": TINY_TOKENIZER, "README.md": b"# tokenizer only\n"})
    hc.add_revision(c, "acme/broken", {"config.json": b'{"model_type": "llama",'})
    hc.add_revision(c, "acme/pinned", bad, refs=())
    hc.add_revision(c, "acme/data", {"train.jsonl": b"{}\n"}, repo_type="dataset")
    return c


def run(args: list[str], cache: Path | None, cwd: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.update(NO_COLOR="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    if cache is not None:
        env["HF_HUB_CACHE"] = str(cache)
    env.update(env_extra)
    return subprocess.run([*PORTKIT, *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=120)


def snapshot(cache: Path, repo: str, ref: str = "main") -> Path:
    r = hc.repo_dir(cache, repo)
    return r / "snapshots" / (r / "refs" / ref).read_text()


def blobs(cache: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(cache.glob("*/blobs/*"))}


def test_the_generated_cache_is_what_huggingface_hub_scans(cache: Path) -> None:
    info = huggingface_hub.scan_cache_dir(cache)
    assert info.warnings == []
    repos = {(r.repo_type, r.repo_id): r for r in info.repos}
    assert set(repos) == {("model", f"acme/{n}") for n in ("bad", "good", "warn", "tok", "broken", "pinned")} | {
        ("dataset", "acme/data")
    }
    good = repos[("model", "acme/good")]
    assert sorted(sorted(r.refs) for r in good.revisions) == [["main"], ["v1"]]
    for rev in good.revisions:
        for f in rev.files:
            assert f.file_path.is_symlink() and f.blob_path.parent.name == "blobs"
            assert f.blob_path.name == hashlib.sha256(f.blob_path.read_bytes()).hexdigest()
    # the v1 revision and acme/bad hold the same bytes: one blob per repo, named by content
    assert {f.blob_path.name for f in next(r for r in good.revisions if "v1" in r.refs).files} == {
        f.blob_path.name for r in repos[("model", "acme/bad")].revisions for f in r.files
    }


def test_repo_id_lints_main_from_the_cache(cache: Path, tmp_path: Path) -> None:
    r = run(["lint", "acme/bad", "--format", "json"], cache, tmp_path)
    assert r.returncode == 1, r.stderr
    found = json.loads(r.stdout)
    assert sorted(f["code"] for f in found) == ["PK101", "PK102"]
    # findings name the snapshot's file (what fix writes), never the blob it points at
    assert {f["filename"] for f in found} == {str(snapshot(cache, "acme/bad") / "config.json")}
    assert "acme/bad@main is" in r.stderr and "Hugging Face cache" in r.stderr
    clean = run(["lint", "acme/good"], cache, tmp_path)
    assert clean.returncode == 0 and "All checks passed!" in clean.stdout, clean.stdout + clean.stderr


def test_repo_id_at_revision(cache: Path, tmp_path: Path) -> None:
    assert run(["lint", "acme/good@main"], cache, tmp_path).returncode == 0
    tag = run(["lint", "acme/good@v1", "--format", "json"], cache, tmp_path)
    assert tag.returncode == 1 and {f["filename"] for f in json.loads(tag.stdout)} == {
        str(snapshot(cache, "acme/good", "v1") / "config.json")
    }
    commit = snapshot(cache, "acme/good", "v1").name
    by_hash = run(["lint", f"acme/good@{commit}", "--format", "json"], cache, tmp_path)
    assert by_hash.returncode == 1 and len(json.loads(by_hash.stdout)) == 2
    # a revision downloaded by hash only (no ref) is still found by its hash
    pinned = next((hc.repo_dir(cache, "acme/pinned") / "snapshots").iterdir()).name
    assert run(["lint", f"acme/pinned@{pinned}"], cache, tmp_path).returncode == 1


@pytest.mark.parametrize(
    "spec,what,hint",
    [
        ("acme/absent", "acme/absent is not in the Hugging Face cache", "`hf download acme/absent`"),
        (
            "acme/good@v9",
            "revision `v9` of acme/good is not in the Hugging Face cache",
            "`hf download acme/good --revision v9`",
        ),
        ("acme/pinned", "revision `main` of acme/pinned is not", "`hf download acme/pinned`"),
    ],
)
@pytest.mark.parametrize("command", ["lint", "fix", "verify"])
def test_uncached_id_is_one_line_exit_2_with_a_hint(
    command: str, spec: str, what: str, hint: str, cache: Path, tmp_path: Path
) -> None:
    r = run([command, spec], cache, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"portkit: error: {spec}: no such path"), r.stderr
    assert what in r.stderr and hint in r.stderr and str(cache) in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_hf_home_is_honoured_like_huggingface_hub_does(cache: Path, tmp_path: Path) -> None:
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "hub").symlink_to(cache, target_is_directory=True)
    r = run(["lint", "acme/bad"], None, tmp_path, HF_HOME=str(home))
    assert r.returncode == 1 and "PK101" in r.stdout, r.stderr
    # HF_HUB_CACHE wins over HF_HOME, as in huggingface_hub
    empty = tmp_path / "empty-hub"
    empty.mkdir()
    r = run(["lint", "acme/bad"], empty, tmp_path, HF_HOME=str(home))
    assert r.returncode == 2 and str(empty) in r.stderr


def test_an_existing_path_wins_over_a_repo_id(cache: Path, tmp_path: Path) -> None:
    # ./acme/good is a local directory holding the bad config; the cache's acme/good is clean
    sk.write_model(tmp_path / "acme" / "good", BAD())
    r = run(["lint", "acme/good", "--format", "json"], cache, tmp_path)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    assert {f["filename"] for f in json.loads(r.stdout)} == {
        str((tmp_path / "acme" / "good" / "config.json").absolute())
    }


def test_repo_ids_go_offline_and_plain_paths_never_import_huggingface_hub(cache: Path, tmp_path: Path) -> None:
    local = sk.write_model(tmp_path / "local", GOOD())
    prog = (
        "import json, os, sys\nfrom portkit.cli import main\nrc = main(sys.argv[1:])\n"
        "hub = sys.modules.get('huggingface_hub')\n"
        "print(json.dumps([rc, hub is not None, os.environ.get('HF_HUB_OFFLINE'), bool(hub and "
        "hub.constants.HF_HUB_OFFLINE)]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HUB_CACHE=str(cache), PYTHONPATH=str(Path(__file__).resolve().parents[2]))

    def go(*argv: str) -> list:
        r = subprocess.run(
            [sys.executable, "-c", prog, *argv], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120
        )
        return json.loads(r.stdout.splitlines()[-1])

    assert go("lint", str(local)) == [0, False, None, False]
    assert go("lint", "acme/good") == [0, True, "1", True]
    assert go("lint", "--hf-cache", "--output", str(tmp_path / "t.txt")) == [
        2,
        True,
        "1",
        True,
    ]  # acme/broken is unreadable


def test_hf_cache_summary_table(cache: Path, tmp_path: Path) -> None:
    r = run(["lint", "--hf-cache"], cache, tmp_path)
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["repo", "revision", "family", "error", "warning", "info"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:-1]}
    assert rows == {
        "acme/bad": ["main", "llama", "2", "0", "0"],
        "acme/broken": ["main", "-", "unreadable", "-", "-"],
        "acme/good": ["main", "llama", "0", "0", "0"],
        "acme/tok": ["main", "tokenizer", "0", "0", "0"],
        "acme/warn": ["main", "llama", "0", "1", "0"],
    }, r.stdout
    assert lines[-1] == "5 cached model revisions: 2 with findings (2 errors, 1 warning); 1 not linted."
    # acme/broken's config.json is unreadable: one error line, exit 2; acme/pinned has no main
    assert r.returncode == 2
    assert "portkit: error: acme/broken@main: " in r.stderr and "acme/pinned: no `main` in the cache" in r.stderr
    assert "acme/data" not in r.stdout + r.stderr  # datasets are not models


def test_hf_cache_exit_codes(cache: Path, tmp_path: Path) -> None:
    for repo in ("broken", "bad"):
        shutil.rmtree(hc.repo_dir(cache, f"acme/{repo}"))
    # what is left has a warning (acme/warn) but no error finding: exit 0, unlike plain lint
    r = run(["lint", "--hf-cache"], cache, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert run(["lint", "acme/warn"], cache, tmp_path).returncode == 1
    # --all-revisions adds acme/good@v1 (errors) and acme/pinned's hash-only revision
    r = run(["lint", "--hf-cache", "--all-revisions"], cache, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[1:-1]]
    assert ["acme/good", "v1", "llama", "2", "0", "0"] in rows and ["acme/good", "main", "llama", "0", "0", "0"] in rows
    pinned = [row for row in rows if row[0] == "acme/pinned"]
    assert len(pinned) == 1 and len(pinned[0][1]) == 12 and pinned[0][2:] == ["llama", "2", "0", "0"]
    # an absent cache is bad input: one line, exit 2
    r = run(["lint", "--hf-cache"], tmp_path / "nowhere", tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no Hugging Face cache" in r.stderr


def test_hf_cache_json_is_the_table_data(cache: Path, tmp_path: Path) -> None:
    text = run(["lint", "--hf-cache", "--all-revisions"], cache, tmp_path)
    r = run(["lint", "--hf-cache", "--all-revisions", "--format", "json"], cache, tmp_path)
    assert r.returncode == text.returncode == 2
    data = json.loads(r.stdout)
    assert data["cache_dir"] == str(cache)
    by = {(m["repo"], m["revision"]): m for m in data["models"]}
    table = {(ln.split()[0], ln.split()[1]): ln.split()[2:] for ln in text.stdout.splitlines()[1:-1]}
    assert len(by) == len(table) == 7
    for (repo, rev), m in by.items():
        shown = rev if rev != m["commit"] else m["commit"][:12]
        row = table[(repo, shown)]
        if m["status"] == "linted":
            assert row == [m["family"], *(str(m["findings"][s]) for s in ("error", "warning", "info"))]
        else:
            assert row[1] == m["status"] and m["message"]
    assert by[("acme/bad", "main")]["codes"] == ["PK101", "PK102"]
    assert by[("acme/bad", "main")]["path"] == str(snapshot(cache, "acme/bad"))


def test_hf_cache_usage_errors(cache: Path, tmp_path: Path) -> None:
    for argv in (["--hf-cache", "acme/bad"], ["--all-revisions"], ["--hf-cache", "--format", "sarif"], []):
        r = run(["lint", *argv], cache, tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("portkit: error: "), (
            argv,
            r.stderr,
        )


def test_hf_cache_shows_a_progress_bar_on_a_tty(cache: Path, tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: rich draws the bar there; stdout (a pipe) gets the plain table."""
    import pty

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "NO_COLOR"))}
    env.update(
        HF_HUB_CACHE=str(cache), PYTHONPATH=str(Path(__file__).resolve().parents[2]), TERM="xterm", COLUMNS="120"
    )
    p = subprocess.Popen(
        [*PORTKIT, "lint", "--hf-cache"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out, _ = p.communicate(timeout=120)
    os.close(master)
    assert p.returncode == 2
    assert "portkit lint --hf-cache" in err.decode(errors="replace") and "\x1b[" in err.decode(errors="replace")
    assert out.splitlines()[0].split() == ["repo", "revision", "family", "error", "warning", "info"]
    # without a terminal there is no bar
    assert "\x1b[" not in run(["lint", "--hf-cache"], cache, tmp_path).stderr


def test_fix_in_the_cache_replaces_the_snapshot_link_and_leaves_every_blob_byte_identical(
    cache: Path, tmp_path: Path
) -> None:
    before = blobs(cache)
    snap = snapshot(cache, "acme/good", "v1")
    shared_blob = (snap / "config.json").resolve()
    assert (snap / "config.json").is_symlink() and shared_blob.parent.name == "blobs"

    diff = run(["fix", "acme/good@v1"], cache, tmp_path)
    assert diff.returncode == 1 and "acme/good@v1 is" in diff.stderr
    assert f"snapshots/{snap.name}/config.json" in diff.stdout.splitlines()[0]  # the snapshot's path, not the blob's
    r = run(["fix", "--write", "acme/good@v1"], cache, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "fixed 2 findings (PK101, PK102)" in r.stderr and "acme/good@v1 is" in r.stderr and "blob" in r.stderr

    assert blobs(cache) == before  # no blob written, none added or removed
    assert not (snap / "config.json").is_symlink() and (snap / "config.json").is_file()
    assert json.loads((snap / "config.json").read_text())["rope_theta"] == 500000.0
    assert (snap / "model.safetensors").is_symlink()  # weights untouched
    # acme/bad's main holds the same bytes in its own blob: still the unfixed config
    assert run(["lint", "acme/bad"], cache, tmp_path).returncode == 1
    assert run(["lint", "acme/good@v1"], cache, tmp_path).returncode == 0
    # and huggingface_hub still reads the cache
    info = huggingface_hub.scan_cache_dir(cache)
    assert info.warnings == []
    good = next(r for r in info.repos if r.repo_id == "acme/good")
    assert {f.file_path.name for rev in good.revisions for f in rev.files if "v1" in rev.refs} == {
        "config.json",
        "model.safetensors",
    }


def test_fix_of_a_local_path_says_nothing_of_the_cache(tmp_path: Path) -> None:
    d = sk.write_model(tmp_path / "m", BAD())
    r = run(["fix", "--write", str(d)], None, tmp_path)
    assert r.returncode == 0 and r.stderr.count("\n") == 1 and "cache" not in r.stderr


@pytest.mark.parametrize(
    "argv,first",
    [
        (["lint", "acme/bad"], "acme/bad: no such path; "),
        (["fix", "acme/bad"], "acme/bad: no such path; "),
        (["lint", "--hf-cache"], "--hf-cache: "),
    ],
)
def test_without_huggingface_hub_a_repo_id_is_one_line(
    argv: list[str], first: str, cache: Path, tmp_path: Path
) -> None:
    """The base install has no huggingface_hub: a repo id (or a mistyped path) still gets one line."""
    prog = (
        "import sys; sys.modules['huggingface_hub'] = None\nfrom portkit.cli import main\nsys.exit(main(sys.argv[1:]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_CACHE=str(cache), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    r = subprocess.run(
        [sys.executable, "-c", prog, *argv], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"portkit: error: {first}") and "pip install huggingface_hub" in r.stderr, r.stderr


@pytest.mark.parametrize("arg", ["models/config.json", "models/m.gguf", "a/b/c", "/abs/path"])
def test_a_missing_path_that_is_no_repo_id_stays_a_path_error(arg: str, tmp_path: Path) -> None:
    prog = (
        "import sys\nfrom portkit.cli import main\nrc = main(sys.argv[1:])\nprint(rc, 'huggingface_hub' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), HF_HUB_CACHE=str(tmp_path / "hub"))
    r = subprocess.run(
        [sys.executable, "-c", prog, "lint", arg], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120
    )
    assert r.stdout.split() == ["2", "False"], r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Hugging Face" not in r.stderr, r.stderr


def test_verify_takes_a_repo_id_to_its_snapshot(cache: Path, tmp_path: Path) -> None:
    """verify resolves the id and goes on with the snapshot: acme/broken's config.json is not
    JSON, which verify's own input check then reports on that snapshot path."""
    r = run(["verify", "acme/broken"], cache, tmp_path)
    snap = snapshot(cache, "acme/broken")
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        f"acme/broken@main is {snap}" in r.stderr
        and f"portkit: error: {snap}" in r.stderr
        and "config.json" in r.stderr
    )


def test_one_gguf_downloaded_of_many_is_linted_as_it_is(tmp_path: Path) -> None:
    """`hf download acme/tiny-GGUF tiny-q8_0.gguf config.json`: huggingface_hub's cached tree
    listing names three GGUFs, one is there. The id still resolves; the GGUF there is linted."""
    from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache

    cache = tmp_path / "hub"
    cfg = GOOD()
    d = sk.write_model(tmp_path / "src" / "gguf", cfg, weights=False)
    sk.write_gguf(d / "tiny-q8_0.gguf", sk.llama_metadata(cfg, freq_base=1234.0), sk.gguf_tensors(cfg))  # PK409
    files = hc.model_files(d)
    snap = hc.add_revision(cache, "acme/tiny-GGUF", files)
    listing = {n: TreeCacheEntry(size=len(b), blob_id=hashlib.sha1(b).hexdigest()) for n, b in files.items()}
    listing.update({n: TreeCacheEntry(size=1, blob_id="0" * 40) for n in ("tiny-f32.gguf", "tiny-q4_0.gguf")})
    write_tree_cache(str(hc.repo_dir(cache, "acme/tiny-GGUF")), snap.name, listing)
    with pytest.raises(huggingface_hub.errors.IncompleteSnapshotError):  # what huggingface_hub says of it
        huggingface_hub.snapshot_download("acme/tiny-GGUF", cache_dir=cache, local_files_only=True)

    r = run(["lint", "acme/tiny-GGUF", "--format", "json"], cache, tmp_path)
    assert r.returncode == 1, r.stderr
    assert [(f["code"], Path(f["filename"]).name) for f in json.loads(r.stdout)] == [("PK409", "tiny-q8_0.gguf")]
    assert "a partial download" in r.stderr and r.stderr.count("\n") == 1
    assert run(["lint", "acme/bad"], cache, tmp_path).returncode == 2  # an absent repo is still an error


def test_reference_takes_a_repo_id_to_its_snapshot(cache: Path, tmp_path: Path, healthy_tied_dir: Path) -> None:
    """`portkit reference ORG/NAME[@REV]` resolves through the cache as lint, fix and verify do;
    an id the cache lacks is the same one line."""
    from portkit.porting.dumpfile import read_dump

    hc.add_revision(cache, "acme/tiny", hc.model_files(healthy_tied_dir))
    out = tmp_path / "ref.safetensors"
    r = run(["reference", "acme/tiny", "--out", str(out), "--tokens", "1", "--layers-only"], cache, tmp_path)
    snap = snapshot(cache, "acme/tiny")
    assert r.returncode == 0, r.stderr
    assert f"portkit: note: acme/tiny@main is {snap}" in r.stderr and r.stdout.startswith(f"wrote {out}")
    d = read_dump(out)
    assert d.metadata["model"] == str(snap.resolve()) and d.metadata["family"] == "llama"
    r = run(["reference", "acme/absent", "--out", str(tmp_path / "x.safetensors")], cache, tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(
        "portkit: error: acme/absent: no such path, and acme/absent is not in the Hugging Face cache"
    )
