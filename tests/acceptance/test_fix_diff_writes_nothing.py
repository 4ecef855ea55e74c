"""`portkit fix --diff` (the default) prints and never writes: after every form of it, every file
of the model directory (and of the Hugging Face cache, for a repo id) has the same bytes and the
same mtime to the nanosecond, each symlink is still that symlink, and nothing was added or
removed (not even a killed writer's temporary file, which only `--write` sweeps).

Every file's mtime is first set to a fixed time in the past, so a write of the same bytes in the
same clock tick still shows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk
from fixtures.tokenizer_shapes import write_tokenizer
from portkit.cli import main

BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102: fixable
PAST_NS = 1_000_000_000 * 10**9  # 2001-09-09: no write made now has this mtime


def state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under `root`: a symlink's target and mtime, a file's bytes and mtime, a directory's mtime."""
    out: dict[str, tuple[Any, ...]] = {}
    for p in sorted(root.rglob("*")):
        st = os.lstat(p)
        name = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[name] = ("link", os.readlink(p), st.st_mtime_ns)
        elif p.is_dir():
            out[name] = ("dir", st.st_mtime_ns)
        else:
            out[name] = ("file", p.read_bytes(), st.st_mtime_ns)
    return out


def age(root: Path) -> None:
    """Set every mtime under `root` (and its own) to PAST_NS, links themselves not followed."""
    for p in [*sorted(root.rglob("*"), reverse=True), root]:
        os.utime(p, ns=(PAST_NS, PAST_NS), follow_symlinks=False)


def model_dir(tmp_path: Path) -> Path:
    """A model with edits for both config.json (PK101, PK102) and tokenizer.json (PK503, PK506),
    one finding no edit fixes (PK508), and a dead writer's temporary file that only --write sweeps."""
    d = write_tokenizer(tmp_path / "m", "smollm", "trigger")
    sk.write_model(d, BAD(), weights=False)
    (d / ".config.json.portkit-999999999-abcd.tmp").write_bytes(b"a killed writer's")
    return d


def fix_diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["fix", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["{d}"],  # the default
        ["{d}", "--diff"],
        ["--diff", "{d}"],
        ["{d}/config.json", "--diff"],
        ["{d}/tokenizer.json"],
        ["{d}/tokenizer_config.json", "--diff"],
        ["m", "--diff"],  # relative to the working directory
        ["m/"],
    ],
    ids=[
        "default",
        "diff",
        "diff-first",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "relative",
        "relative-slash",
    ],
)
def test_every_diff_form_leaves_the_directory_as_it_was(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = model_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    age(d)
    before = state(d)
    code, out, err = fix_diff(capsys, *(a.format(d=d) for a in argv))
    assert state(d) == before
    assert code == 1, err
    # the diff of both files was printed, and the finding no edit fixes is named
    assert "+++ b/m/config.json\n" in out and "+++ b/m/tokenizer.json\n" in out and '+  "padding": null,' in out, out[
        :400
    ]
    assert "would remain" in err and "PK508" in err


def test_diff_with_nothing_to_change_or_only_refusals_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = sk.write_model(tmp_path / "clean", sk.config("tf4"), weights=False)
    refused = sk.write_model(
        tmp_path / "refused", sk.config("tf4", head_dim=32), weights=False
    )  # PK104: no config edit
    for d, code in ((clean, 0), (refused, 1)):
        age(d)
        before = state(d)
        for argv in ([str(d)], [str(d), "--diff"]):
            rc, out, err = fix_diff(capsys, *argv)
            assert state(d) == before
            assert (rc, out) == (code, ""), err


huggingface_hub = pytest.importorskip("huggingface_hub", reason="repo ids need huggingface_hub (the verify extra)")


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """acme/bad in a hub cache this process's huggingface_hub reads: main and tag v1, both the
    model of `model_dir` (config.json and tokenizer.json symlinks into shared blobs)."""
    from huggingface_hub import constants

    c = tmp_path / "hub"
    files = hc.model_files(model_dir(tmp_path / "src"))
    hc.add_revision(c, "acme/bad", {k: v for k, v in files.items() if not k.startswith(".")}, refs=("main", "v1"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(c))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)  # resolving sets it: undo that after
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return c


@pytest.mark.parametrize(
    "argv",
    [["acme/bad"], ["acme/bad", "--diff"], ["--diff", "acme/bad@v1"], ["acme/bad@main"]],
    ids=["default", "diff", "tag", "main"],
)
def test_every_diff_form_of_a_repo_id_leaves_the_cache_as_it_was(
    argv: list[str], cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = next((hc.repo_dir(cache, "acme/bad") / "snapshots").iterdir())
    assert (snap / "config.json").is_symlink() and (snap / "tokenizer.json").is_symlink()
    age(cache)
    before = state(cache)
    code, out, err = fix_diff(capsys, *argv)
    assert state(cache) == before
    assert code == 1, err
    assert f"{snap.name}/config.json\n" in out and f"{snap.name}/tokenizer.json\n" in out, out[:400]
    assert "in the Hugging Face cache" in err and "is now a file of its own" not in err
