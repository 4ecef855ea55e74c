"""The real `pre-commit` hook on the files a commit changes: one model, once, and one GGUF alone.

A temporary git repository holds a Hugging Face model saved by transformers 5 (PK101) and a
directory of GGUF quantizations, one of them broken. The hook is the `language: system` variant
of `.pre-commit-hooks.yaml` (offline; `test_precommit_e2e.py` also covers the PyPI-built one).

- a commit that changes two files of the model (config.json and model.safetensors) is refused
  with each finding reported once, exactly what `portkit lint <dir>` reports;
- a commit that changes one good GGUF passes although a broken one sits beside it; a commit that
  changes the broken one is refused and blames only that file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures import skeleton as sk

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"
PORTKIT = BIN / "portkit"

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(not PRE_COMMIT.exists(), reason="needs pre-commit in the test env (pip install -e '.[test]')"),
    pytest.mark.skipif(not PORTKIT.exists(), reason="needs the portkit console script (pip install -e .)"),
]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT", "HF_"))}
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


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180
    )


def _ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, f"{p.args} exited {p.returncode}:\n{p.stdout}"
    return p


def _local_hook_config() -> dict:
    hook = next(h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "portkit-lint")
    exe, *rest = shlex.split(hook["entry"])
    assert exe == "portkit"
    local = {
        "id": hook["id"],
        "name": hook["name"],
        "entry": shlex.join([str(PORTKIT), *rest]),
        "language": "system",
        "files": hook["files"],
        "pass_filenames": hook.get("pass_filenames", True),
        "require_serial": hook.get("require_serial", False),
    }
    return {"repos": [{"repo": "local", "hooks": [local]}]}


def _codes(text: str) -> list[tuple[str, str]]:
    """(code, file) of every finding in the text report: `PK101 ...` then ` --> FILE[:row:col]`."""
    out = []
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = re.match(r"^(PK\d{3}) ", ln)
        if m and i + 1 < len(lines) and lines[i + 1].startswith(" --> "):
            out.append((m.group(1), lines[i + 1][5:].split(":")[0]))
    return out


def _hooked_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A new git repository with the local portkit hook installed, and the environment to run in it."""
    env = _env(tmp_path)
    user = tmp_path / "model-repo"
    user.mkdir()
    _ok(_run(["git", "init", "-q"], user, env))
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump(_local_hook_config(), sort_keys=False))
    _ok(_run([str(PRE_COMMIT), "install"], user, env))
    return user, env


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    user, env = _hooked_repo(tmp_path)
    (user / "README.md").write_text("# a model repository\n")
    # the first commit holds clean models only, made without the hook
    sk.write_model(user / "models" / "llama", sk.config("tf4", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING))
    cfg = sk.config("tf4")
    q = sk.write_model(user / "gguf", cfg, weights=False)
    for name in ("tiny-f32.gguf", "tiny-q8_0.gguf", "tiny-q4_0.gguf"):
        sk.write_gguf(q / name, sk.llama_metadata(cfg), sk.gguf_tensors(cfg))
    _ok(_run(["git", "add", "-A"], user, env))
    _ok(_run(["git", "commit", "-q", "--no-verify", "-m", "clean models"], user, env))
    return user, env


def test_two_changed_files_of_one_model_are_linted_once(repo: tuple[Path, dict[str, str]]) -> None:
    user, env = repo
    # transformers 5 resaves the model: config.json (rope_theta and llama3 scaling only in
    # rope_parameters) and model.safetensors change together
    cfg = sk.config("tf5", rope_theta=500000.0, scaling=sk.LLAMA3_SCALING)
    sk.write_model(user / "models" / "llama", cfg, dtype="F16")
    _ok(_run(["git", "add", "-A"], user, env))
    staged = _ok(_run(["git", "diff", "--cached", "--name-only"], user, env)).stdout.split()
    assert staged == ["models/llama/config.json", "models/llama/model.safetensors"]

    commit = _run(["git", "commit", "-m", "resave with transformers 5"], user, env)
    assert commit.returncode != 0 and "Failed" in commit.stdout, commit.stdout
    in_hook = _codes(commit.stdout)
    direct = _run([str(PORTKIT), "lint", "models/llama"], user, env)
    assert direct.returncode == 1
    assert sorted(in_hook) == sorted(_codes(direct.stdout)), commit.stdout
    assert len(in_hook) == len(set(in_hook)) and {c for c, _ in in_hook} == {"PK101", "PK102"}, commit.stdout
    assert f"Found {len(in_hook)} findings" in commit.stdout and commit.stdout.count("Found ") == 1


def test_one_changed_gguf_is_linted_alone(repo: tuple[Path, dict[str, str]]) -> None:
    user, env = repo
    cfg = sk.config("tf4")
    # an old q4_0 without `llama.block_count` (PK401) is already in the repository
    sk.write_gguf(
        user / "gguf" / "tiny-q4_0.gguf", sk.llama_metadata(cfg, drop=["llama.block_count"]), sk.gguf_tensors(cfg)
    )
    _ok(_run(["git", "commit", "-q", "--no-verify", "-am", "old q4_0"], user, env))
    assert _run([str(PORTKIT), "lint", "gguf"], user, env).returncode == 1

    # re-converting the f32 is fine: its commit passes, the broken q4_0 beside it is not its concern
    md = sk.llama_metadata(cfg)
    md["general.name"] = "tiny v2"
    sk.write_gguf(user / "gguf" / "tiny-f32.gguf", md, sk.gguf_tensors(cfg))
    _ok(_run(["git", "add", "gguf/tiny-f32.gguf"], user, env))
    first = _run(["git", "commit", "-m", "re-convert f32"], user, env)
    assert first.returncode == 0 and "Passed" in first.stdout, first.stdout

    # touching the q4_0 (still without block_count) is refused, and only it is blamed
    md = sk.llama_metadata(cfg, drop=["llama.block_count"])
    md["general.name"] = "tiny v2"
    sk.write_gguf(user / "gguf" / "tiny-q4_0.gguf", md, sk.gguf_tensors(cfg))
    _ok(_run(["git", "add", "gguf/tiny-q4_0.gguf"], user, env))
    second = _run(["git", "commit", "-m", "re-convert q4_0"], user, env)
    assert second.returncode != 0 and "Failed" in second.stdout, second.stdout
    blamed = _codes(second.stdout)
    assert blamed and {f for _, f in blamed} == {"gguf/tiny-q4_0.gguf"} and "PK401" in {c for c, _ in blamed}, (
        second.stdout
    )
