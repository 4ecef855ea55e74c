"""The fault audit's trials, rerun as they were run: each is a `portkit` process on hostile input
or a hostile setting, with its exit code and the first line it writes on stderr.

Every trial must end in an answer, never in "internal error ... (please report)", a traceback or
a numpy warning; bad input is one line naming the input, exit 2. After each trial no file has
changed outside the cache the trial named, and nothing is left in $TMPDIR. The table is what the
audit found (issue 20); `test_the_table_covers_the_audit` keeps it from shrinking.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from fixtures import hf_cache as hc
from fixtures import skeleton as sk

pytest.importorskip("huggingface_hub", reason="repo ids need huggingface_hub (the verify extra)")

ROOT = Path(__file__).resolve().parents[2]
BAD = lambda: sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)  # noqa: E731  PK101 + PK102


@dataclass(frozen=True)
class Trial:
    name: str
    argv: tuple[str, ...]  # `{w}` is the trial world's directory
    code: int
    first: str  # a regex the first stderr line must match from its start; "" = nothing on stderr
    env: dict[str, str] = field(default_factory=dict)
    unprivileged: bool = False  # run as a user who cannot write the world (root writes anywhere)
    errors: int = 1  # `portkit: error:` lines when it exits 2 (--hf-cache: one per unreadable repo)


TRIALS = [
    # -- the Hugging Face cache (items 1 and 3)
    Trial(
        "ref that is not UTF-8, with other ids",
        ("lint", "acme/bin", "acme/bad"),
        2,
        r"portkit: error: acme/bin: refs/main of acme/bin .*not a commit hash",
    ),
    Trial(
        "revision @.",
        ("lint", "acme/bad@."),
        2,
        r"portkit: error: acme/bad@\.: no such path, and `\.` is not a revision",
    ),
    Trial(
        "revision @/abs/dir",
        ("lint", "acme/bad@{w}/outside"),
        2,
        r"portkit: error: acme/bad@/.*/outside: no such path, and `/.*` is not a revision",
    ),
    Trial(
        "revision @../..",
        ("lint", "acme/bad@../.."),
        2,
        r"portkit: error: acme/bad@\.\./\.\.: no such file or directory$",
    ),
    Trial(
        "ref naming ../../../outside: lint",
        ("lint", "acme/esc"),
        2,
        r"portkit: error: acme/esc: refs/main .*b'\.\./\.\./\.\./outside', not a commit hash",
    ),
    Trial(
        "ref naming ../../../outside: fix --write",
        ("fix", "--write", "acme/esc"),
        2,
        r"portkit: error: acme/esc: refs/main ",
    ),
    Trial("ref naming an absolute path: verify", ("verify", "acme/abs"), 2, r"portkit: error: acme/abs: refs/main "),
    Trial(
        "300 MiB ref",
        ("lint", "acme/huge"),
        2,
        r"portkit: error: acme/huge: refs/main .*: 314572800 bytes, not a 40-character commit hash$",
    ),
    Trial(
        "--hf-cache with hostile repos",
        ("lint", "--hf-cache"),
        2,
        r"portkit: error: acme/abs: cannot scan this repo: refs/main: ",
        errors=4,
    ),
    # -- fix's write path (item 2)
    Trial(
        "fix --write in a read-only directory",
        ("fix", "--write", "{w}/readonly"),
        2,
        r"portkit: error: .*/readonly/config\.json: cannot write the fixed config: Permission denied$",
        unprivileged=True,
    ),
    # -- a cache setting never breaks verify (item 2)
    Trial(
        "PORTKIT_REFCACHE_MAX_MB=inf",
        ("verify", "{w}/model", "--tokens", "2", "--no-lint"),
        0,
        r"",
        env={"PORTKIT_REFCACHE_MAX_MB": "inf"},
    ),
    Trial(
        "PORTKIT_REFCACHE_MAX_MB=-1",
        ("verify", "{w}/model", "--tokens", "2", "--no-lint"),
        0,
        r"",
        env={"PORTKIT_REFCACHE_MAX_MB": "-1"},
    ),
    # -- dumps (items 2, 4, 9)
    Trial(
        "401-digit integer in a JSON candidate",
        ("compare", "{w}/ref.json", "{w}/digits.json"),
        2,
        r"portkit: error: .*digits\.json: JSON field `logits`: a number too large for a float$",
    ),
    Trial(
        "401-digit integer in a JSON reference",
        ("compare", "{w}/digits.json", "{w}/ref.json"),
        2,
        r"portkit: error: .*digits\.json: JSON field `logits`: a number too large for a float$",
    ),
    Trial(
        "reference with 0-d logits",
        ("compare", "{w}/ref-logits0d.st", "{w}/cand.st"),
        2,
        r"portkit: error: .*ref-logits0d\.st: `logits` has shape \[\], not \[vocab\] or \[T, vocab\]",
    ),
    Trial(
        "reference with 3-d logits",
        ("compare", "{w}/ref-logits3d.st", "{w}/cand.st"),
        2,
        r"portkit: error: .*ref-logits3d\.st: `logits` has shape \[1, 3, 4\]",
    ),
    Trial(
        "reference with 2-d greedy",
        ("compare", "{w}/ref-greedy2d.st", "{w}/cand.st"),
        2,
        r"portkit: error: .*ref-greedy2d\.st: `greedy` has shape \[1, 2\], not \[N\] token ids",
    ),
    Trial(
        "reference with 1-d greedy.logits",
        ("compare", "{w}/ref-steps1d.st", "{w}/cand-steps.st"),
        2,
        r"portkit: error: .*ref-steps1d\.st: `greedy\.logits` has shape \[8\]",
    ),
    Trial(
        "reference with no tensors",
        ("compare", "{w}/ref-empty.st", "{w}/cand.st"),
        2,
        r"portkit: error: .*ref-empty\.st: it holds no tensors",
    ),
    Trial(
        "sparse candidate claiming 1 GiB",
        ("compare", "{w}/ref.st", "{w}/sparse.st"),
        2,
        r"portkit: error: .*sparse\.st: `logits` has shape \[268435456\], the reference's is \[3, 4\]",
    ),
    Trial(
        "F32 ids of 1e30",
        ("compare", "{w}/ref.st", "{w}/ids1e30.st"),
        2,
        r"portkit: error: .*ids1e30\.st: tensor `ids`: `ids` holds token ids but has values out of range",
    ),
    Trial("JSON 1e400 on both sides", ("compare", "{w}/inf.json", "{w}/inf.json"), 1, r""),
    Trial("JSON 1e300 (beyond float32)", ("compare", "{w}/ref.json", "{w}/f64big.json"), 1, r""),
    Trial(
        "compare --plot on a read-only filesystem",
        ("compare", "{w}/ref.st", "{w}/ref.st", "--plot", "/proc/portkit-plot.png"),
        2,
        r"portkit: error: --plot /proc/portkit-plot\.png: cannot write it",
    ),
    # -- portkit reference (item 2)
    Trial(
        "reference on a hostile safetensors header",
        ("reference", "{w}/hostile", "--out", "{w}/out.st"),
        2,
        r"portkit: error: .*hostile/model\.safetensors: safetensors header length 1099511627776 exceeds",
    ),
    Trial(
        "reference --out on a read-only filesystem",
        ("reference", "{w}/model", "--out", "/proc/portkit-ref.safetensors", "--tokens", "1"),
        2,
        r"portkit: error: /proc/portkit-ref\.safetensors: ",
    ),
    # -- other inputs the audit fed
    Trial(
        "verify --plot on a read-only filesystem",
        ("verify", "{w}/model", "--tokens", "2", "--no-lint", "--plot", "/proc/portkit-plot.png"),
        2,
        r"portkit: error: --plot /proc/portkit-plot\.png: cannot write it",
    ),
    Trial(
        "verify --ids of 5000 digits",
        ("verify", "{w}/model", "--ids", "1" * 5000),
        2,
        r"portkit: error: --ids: '1{24}\.\.\.' is not an integer token id$",
    ),
    Trial(
        "lint --baseline /dev/zero",
        ("lint", "{w}/fixable", "--baseline", "/dev/zero"),
        2,
        r"portkit: error: /dev/zero: not a portkit baseline",
    ),
]


def _st(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, off, body = {}, 0, b""
    for k, (dt, shape, raw) in tensors.items():
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off, body = off + len(raw), body + raw
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + body)


def f32(a: object) -> bytes:
    return np.asarray(a, np.float32).tobytes()


def i64(a: object) -> bytes:
    return np.asarray(a, np.int64).tobytes()


def _world(w: Path, model: Path) -> None:
    """Everything the trials read: a Hugging Face cache with hostile repos, dumps, model dirs."""
    cache = w / "hub"
    files = hc.model_files(sk.write_model(w / "src", BAD()))
    sk.write_model(w / "outside", BAD())
    for repo in ("acme/bad", "acme/bin", "acme/esc", "acme/abs", "acme/huge"):
        hc.add_revision(cache, repo, files)
    for repo, content in (
        ("acme/bin", b"\xff\xfe\x00"),
        ("acme/esc", b"../../../outside"),
        ("acme/abs", str(w / "outside").encode()),
    ):
        (hc.repo_dir(cache, repo) / "refs" / "main").write_bytes(content)
    with open(hc.repo_dir(cache, "acme/huge") / "refs" / "main", "r+b") as f:
        f.truncate(300 * 2**20)  # sparse
    sk.write_model(w / "fixable", BAD())
    sk.write_model(w / "readonly", BAD())
    shutil.copytree(model, w / "model")
    shutil.copytree(model, w / "hostile")
    weights = w / "hostile" / "model.safetensors"
    weights.write_bytes(struct.pack("<Q", 2**40) + weights.read_bytes()[8:])

    (w / "digits.json").write_text('{"logits": [' + "1" * 401 + ", 2, 3, 4]}")
    (w / "ref.json").write_text('{"logits": [1, 2, 3, 4], "greedy": [1, 2]}')
    (w / "inf.json").write_text('{"logits": [1e400, 2, 3, 4]}')
    (w / "f64big.json").write_text('{"logits": [1e300, 2, 3, 4]}')
    _st(w / "ref.st", {"ids": ("I64", [3], i64([1, 2, 3])), "logits": ("F32", [3, 4], f32(np.arange(12)))})
    _st(w / "ids1e30.st", {"ids": ("F32", [3], f32([1e30, 2, 3])), "logits": ("F32", [3, 4], f32(np.arange(12)))})
    _st(w / "cand.st", {"logits": ("F32", [4], f32(np.arange(4)))})
    _st(w / "cand-steps.st", {"greedy": ("I64", [2], i64([1, 2])), "greedy.logits": ("F32", [2, 4], f32(np.arange(8)))})
    _st(w / "ref-logits0d.st", {"logits": ("F32", [], f32(1.0))})
    _st(w / "ref-logits3d.st", {"logits": ("F32", [1, 3, 4], f32(np.arange(12)))})
    _st(w / "ref-greedy2d.st", {"logits": ("F32", [4], f32(np.arange(4))), "greedy": ("I64", [1, 2], i64([[1, 2]]))})
    _st(
        w / "ref-steps1d.st",
        {
            "logits": ("F32", [4], f32(np.arange(4))),
            "greedy": ("I64", [2], i64([1, 2])),
            "greedy.logits": ("F32", [8], f32(np.arange(8))),
        },
    )
    _st(w / "ref-empty.st", {})
    n = 2**28  # 1 GiB of F32 claimed by a 4 KB file
    h = json.dumps({"logits": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    with open(w / "sparse.st", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + 4 * n)


def tree(d: Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime, mode) of everything under `d` (symlinks not followed)."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[p.relative_to(d).as_posix()] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture(scope="module")
def world(healthy_tied_dir: Path) -> Path:
    # under /tmp with o+rx, so that the unprivileged trial (as `nobody` when we are root) can read it
    w = Path(tempfile.mkdtemp(prefix="portkit-audit-"))
    w.chmod(0o755)
    _world(w, healthy_tied_dir)
    for p in [w, *w.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o005 | (0o050 if p.is_dir() else 0))
    (w / "readonly").chmod(0o555)
    yield w
    (w / "readonly").chmod(0o755)
    shutil.rmtree(w, ignore_errors=True)


def _unprivileged() -> list[str] | None:
    """How to run a command as someone who cannot write a 0555 directory: as we are, unless we are root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if setpriv else None


@pytest.fixture()
def scratch() -> Path:
    """The trial's working directory, $TMPDIR and $PORTKIT_CACHE: under /tmp and open to all,
    so that an unprivileged trial can use it too."""
    d = Path(tempfile.mkdtemp(prefix="portkit-trial-"))
    (d / "tmp").mkdir()
    for p in (d, d / "tmp"):
        p.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run_trial(t: Trial, w: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "PORTKIT_"))}
    env.update(
        NO_COLOR="1",
        PYTHONPATH=str(ROOT),
        PYTHONDONTWRITEBYTECODE="1",
        HF_HUB_CACHE=str(w / "hub"),
        PORTKIT_CACHE=str(scratch / "cache"),
        TMPDIR=str(scratch / "tmp"),
        **t.env,
    )
    prefix: list[str] = []
    if t.unprivileged:
        got = _unprivileged()
        if got is None:
            pytest.skip("running as root without setpriv: no way to be refused a write")
        prefix = got
        env["HOME"] = str(scratch / "tmp")
    argv = [a.format(w=w) for a in t.argv]
    return subprocess.run(
        [*prefix, sys.executable, "-m", "portkit", *argv],
        cwd=scratch,
        env=env,
        text=True,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize("trial", TRIALS, ids=[t.name for t in TRIALS])
def test_audit_trial(trial: Trial, world: Path, scratch: Path) -> None:
    before = tree(world)
    r = run_trial(trial, world, scratch)
    lines = r.stderr.splitlines()
    shown = f"exit {r.returncode}, stderr:\n{r.stderr[-2000:]}"
    assert r.returncode == trial.code, shown
    assert not re.search(r"internal error|Traceback|Warning:", r.stderr), shown
    if trial.first:
        assert lines and re.match(trial.first, lines[0]), shown
    else:
        assert r.stderr == "", shown
    if r.returncode == 2:
        assert sum(ln.startswith("portkit: error: ") for ln in lines) == trial.errors and max(map(len, lines)) < 600, (
            shown
        )
    assert tree(world) == before, "a file outside the cache changed"
    # torch makes its own inductor directory on import; portkit leaves nothing there
    left = [p.name for p in (scratch / "tmp").iterdir() if not p.name.startswith("torchinductor_")]
    assert left == [], left


def test_the_table_covers_the_audit() -> None:
    """The audit's cases by name (issue 20, item 2 and the ones beside it): none may be dropped."""
    names = " | ".join(t.name for t in TRIALS)
    for case in (
        "not UTF-8",
        "@.",
        "read-only directory",
        "MAX_MB=inf",
        "401-digit",
        "hostile safetensors header",
        "--out on a read-only",
        "reference with",
        "--hf-cache",
        "sparse",
        "1e30",
        "1e400",
    ):
        assert case in names, case
    assert len(TRIALS) >= 15
