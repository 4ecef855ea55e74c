"""The real `pre-commit` tool runs the `portkit-lint` hook on a temporary git repository that
holds a transformers-5-saved fixture model: the commit is refused, `portkit fix --write`
repairs config.json, and the next commit goes through.

Two ways to get the hook, one test each:

- `repo`: what users do, with docs/pre-commit.md's snippet as written (`rev: main`, then
  `pre-commit autoupdate --freeze` pins the commit, as the docs say until a release is tagged),
  only the repository URL replaced by a git snapshot of this working
  tree (tracked files plus untracked, not ignored ones, committed in a temporary repository,
  so uncommitted work is tested too, like `pre-commit try-repo`) and pre-commit builds its own
  `language: python` virtualenv from it: `pip install .` fetches pydantic, numpy and the rest
  from PyPI (about 10 s). That env holds neither torch nor transformers, so this also proves
  lint runs without them. Skipped, with the reason, only when the index itself does not
  answer (`pypi_unreachable`) or `PORTKIT_OFFLINE=1`; any other install failure fails.
- `local`: offline. `repo: local`, `language: system`, `entry: <this venv>/bin/portkit lint`,
  with `name`, `files`, `pass_filenames` and `require_serial` read from the same
  `.pre-commit-hooks.yaml`.

`PRE_COMMIT_HOME`, the git config and both repositories live under `tmp_path`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"
PORTKIT = BIN / "portkit"
HOOK_ID = "portkit-lint"
VARIANT = "rope-theta-in-rope-parameters"  # what transformers 5 save_pretrained writes
MODEL = "models/llama-tf5"

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not PRE_COMMIT.exists(), reason="needs pre-commit in the test env (pip install -e '.[test]')"),
    pytest.mark.skipif(not PORTKIT.exists(), reason="needs the portkit console script (pip install -e .)"),
]

# Whether PyPI can be reached is asked of the index itself, never read from pip's output:
# "No matching distribution found" is what pip prints offline, but also what it prints for a
# wrong dependency of ours (a typo, an impossible pin), which must fail this test, not skip it.
PYPI_SIMPLE = "https://pypi.org/simple"


def pypi_unreachable(timeout: float = 15.0) -> str | None:
    """Why the package index pip uses cannot be reached (None when it answers): a GET of its
    page for `pip`, which every index has, through the proxy settings pip also honours."""
    import urllib.error
    import urllib.request

    index = os.environ.get("PIP_INDEX_URL", PYPI_SIMPLE).rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/pip/", timeout=timeout) as r:
            r.read(1)
    except urllib.error.HTTPError as e:
        return f"{index} answered HTTP {e.code}" if e.code >= 500 else None
    except (urllib.error.URLError, OSError) as e:
        return f"{index} cannot be reached: {getattr(e, 'reason', e)}"
    return None


def _hook() -> dict:
    for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()):
        if hook["id"] == HOOK_ID:
            return hook
    raise LookupError(HOOK_ID)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    gitconfig = tmp / "gitconfig"
    gitconfig.write_text("[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n")
    env.update(
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="portkit test",
        GIT_AUTHOR_EMAIL="test@portkit.invalid",
        GIT_COMMITTER_NAME="portkit test",
        GIT_COMMITTER_EMAIL="test@portkit.invalid",
        PRE_COMMIT_HOME=str(tmp / "pre-commit-home"),
        PRE_COMMIT_COLOR="never",
        NO_COLOR="1",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
    )


def _ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, f"{p.args} exited {p.returncode}:\n{p.stdout}"
    return p


def _snapshot_this_repo(dest: Path, env: dict[str, str]) -> str:
    """Commit this working tree (tracked + untracked-not-ignored files) into `dest`; return the sha."""
    listed = _ok(_run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT, env)).stdout
    for rel in sorted(set(filter(None, listed.split("\0")))):
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree but still in the index
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    _ok(_run(["git", "init", "-q", "-b", "main"], dest, env))  # this repository's branch, as the docs' `rev: main` says
    _ok(_run(["git", "add", "-A"], dest, env))
    _ok(_run(["git", "commit", "-q", "--no-verify", "-m", "snapshot of the portkit working tree"], dest, env))
    return _ok(_run(["git", "rev-parse", "HEAD"], dest, env)).stdout.strip()


DOCS = ROOT / "docs" / "pre-commit.md"
PUBLIC_URL = "https://github.com/portkit/portkit"


def docs_snippet() -> dict:
    """The first `.pre-commit-config.yaml` block of docs/pre-commit.md, parsed."""
    import re

    m = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", DOCS.read_text(), re.S)
    assert m, "docs/pre-commit.md has no `.pre-commit-config.yaml` block"
    return yaml.safe_load(m.group(1))


def test_the_docs_snippet_pins_nothing_that_does_not_exist() -> None:
    """No release is tagged yet: the snippet names the branch, and the docs say how to pin a
    commit (`pre-commit autoupdate --freeze`), not a `v0.1.0` that `git checkout` cannot find."""
    (repo,) = docs_snippet()["repos"]
    assert repo["repo"] == PUBLIC_URL and repo["rev"] == "main" and repo["hooks"] == [{"id": HOOK_ID}]
    text = DOCS.read_text()
    assert "pre-commit autoupdate --freeze" in text and "rev: v0.1.0" not in text
    assert "rev: v0.1.0" not in (ROOT / "README.md").read_text() + (ROOT / ".pre-commit-hooks.yaml").read_text()


def _config_repo(tmp: Path, env: dict[str, str]) -> dict:
    snap = tmp / "portkit-snapshot"
    snap.mkdir()
    _snapshot_this_repo(snap, env)
    cfg = docs_snippet()
    (repo,) = cfg["repos"]
    repo["repo"] = str(snap)  # the only change: a clone of this repository instead of the public URL
    return cfg


def _config_local(tmp: Path, env: dict[str, str]) -> dict:
    hook = _hook()
    exe, *rest = shlex.split(hook["entry"])
    assert exe == "portkit"
    local = {
        "id": HOOK_ID,
        "name": hook["name"],
        "entry": shlex.join([str(PORTKIT), *rest]),
        "language": "system",
        "files": hook["files"],
        "pass_filenames": hook.get("pass_filenames", True),
        "require_serial": hook.get("require_serial", False),
    }
    return {"repos": [{"repo": "local", "hooks": [local]}]}


def _install_hook_env(user: Path, env: dict[str, str], tmp: Path) -> None:
    import time

    t0 = time.monotonic()
    p = _run([str(PRE_COMMIT), "install-hooks"], user, env, timeout=300)
    if p.returncode == 0:
        # the hook's first run is this (clone + virtualenv + pip install portkit) plus one lint;
        # docs/measurements.md quotes it (`pytest -s` shows it); never asserted
        print(f"pre-commit install-hooks: {time.monotonic() - t0:.1f} s")
        return
    log = tmp / "pre-commit-home" / "pre-commit.log"
    text = p.stdout + (log.read_text(errors="replace") if log.exists() else "")
    why = pypi_unreachable()  # the network may have gone while pip ran
    if why:
        pytest.skip(f"pre-commit could not build the hook env: {why}; the `local` variant covers the hook offline")
    pytest.fail(
        f"pre-commit install-hooks exited {p.returncode} with PyPI reachable (a packaging bug?):\n{text[-6000:]}"
    )


@pytest.mark.parametrize("mode", ["repo", "local"])
def test_commit_refused_on_transformers5_config_then_passes_after_fix(
    mode: str, tmp_path: Path, fixture_dir: Callable[..., Path]
) -> None:
    if mode == "repo" and os.environ.get("PORTKIT_OFFLINE") == "1":
        pytest.skip("PORTKIT_OFFLINE=1: no PyPI for pre-commit's hook env")
    if mode == "repo" and (why := pypi_unreachable()):
        pytest.skip(f"no PyPI for pre-commit's hook env: {why}; the `local` variant covers the hook offline")
    env = _env(tmp_path)
    cfg = (_config_repo if mode == "repo" else _config_local)(tmp_path, env)

    user = tmp_path / "model-repo"
    user.mkdir()
    _ok(_run(["git", "init", "-q"], user, env))
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (user / "README.md").write_text("# a model repository\n")
    shutil.copytree(fixture_dir(VARIANT), user / MODEL)  # the cache is shared: copy, never edit in place
    config_json = user / MODEL / "config.json"
    before = json.loads(config_json.read_text())
    assert "rope_theta" not in before and before["rope_parameters"]["rope_theta"] == 100000.0

    _ok(_run([str(PRE_COMMIT), "install"], user, env))
    if mode == "repo":
        _install_hook_env(user, env, tmp_path)
        # the docs: until a release is tagged, pin the commit `rev: main` names. On a copy of the
        # config: the pinned rev is another pre-commit env to build, for the same commit.
        pinned_cfg = tmp_path / "pinned.yaml"
        shutil.copy(user / ".pre-commit-config.yaml", pinned_cfg)
        _ok(_run([str(PRE_COMMIT), "autoupdate", "--freeze", "-c", str(pinned_cfg)], user, env))
        pinned = yaml.safe_load(pinned_cfg.read_text())["repos"][0]["rev"]
        snap_sha = _ok(_run(["git", "rev-parse", "HEAD"], Path(cfg["repos"][0]["repo"]), env)).stdout.strip()
        assert pinned == snap_sha, pinned

    # 1. the transformers-5-saved config is refused
    _ok(_run(["git", "add", "-A"], user, env))
    first = _run(["git", "commit", "-m", "add llama saved by transformers 5"], user, env)
    assert first.returncode != 0, f"commit went through on a config candle misreads:\n{first.stdout}"
    assert "Failed" in first.stdout and "rope_theta" in first.stdout, first.stdout
    assert "config.json" in first.stdout, first.stdout
    assert _run(["git", "rev-parse", "--verify", "-q", "HEAD"], user, env).returncode != 0, "a commit was created"

    # 2. portkit fix --write, stage, commit again
    fix = _ok(_run([str(PORTKIT), "fix", "--write", MODEL], user, env))
    after = json.loads(config_json.read_text())
    assert after.get("rope_theta") == 100000.0, f"fix did not write a top-level rope_theta:\n{fix.stdout}"
    _ok(_run(["git", "add", f"{MODEL}/config.json"], user, env))
    second = _run(["git", "commit", "-m", "add llama saved by transformers 5 (portkit fix)"], user, env)
    assert second.returncode == 0, f"commit still refused after `portkit fix --write`:\n{second.stdout}"
    assert "Passed" in second.stdout, second.stdout
    committed = _ok(_run(["git", "show", f"HEAD:{MODEL}/config.json"], user, env)).stdout
    assert json.loads(committed).get("rope_theta") == 100000.0


@pytest.fixture
def index_server():
    """A local package index answering `status` for every page; yields its /simple URL."""
    import http.server
    import threading

    state = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(state["status"])
            self.end_headers()
            self.wfile.write(b"<html></html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", state
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status,unreachable", [(200, False), (404, False), (503, True)])
def test_pypi_reachability_is_asked_of_the_index(
    status: int, unreachable: bool, index_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, state = index_server
    state["status"] = status
    monkeypatch.setenv("PIP_INDEX_URL", url + "/")
    for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    why = pypi_unreachable(timeout=5)
    assert (why is not None) == unreachable, why
    if unreachable:
        assert why == f"{url} answered HTTP 503"


def test_a_closed_index_port_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    why = pypi_unreachable(timeout=5)
    assert why is not None and why.startswith(f"http://127.0.0.1:{port}/simple cannot be reached: ")
