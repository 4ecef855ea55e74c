"""The real `pre-commit` hook on changed tokenizer files: each tokenizer is linted once, with the
tokenizer rules (PK5xx) alone, in a model directory and in a tokenizer-only one."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import skeleton as sk
from fixtures.tokenizer_shapes import write_tokenizer
from tests.precommit.test_precommit_one_model import _codes, _hooked_repo, _ok, _run, pytestmark  # noqa: F401


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    user, env = _hooked_repo(tmp_path)
    # a model whose config.json candle reads differently (PK101), committed without the hook
    sk.write_model(user / "llama", sk.config("tf5"))
    write_tokenizer(user / "llama", "llama2", "clean")
    write_tokenizer(user / "tok", "smollm", "clean")  # a tokenizer-only repository
    _ok(_run(["git", "add", "-A"], user, env))
    _ok(_run(["git", "commit", "-q", "--no-verify", "-m", "models"], user, env))
    return user, env


def test_changed_tokenizer_files_lint_their_tokenizer_once(repo: tuple[Path, dict[str, str]]) -> None:
    user, env = repo
    write_tokenizer(user / "llama", "llama2", "trigger")  # tokenizer.json and tokenizer_config.json change
    _ok(_run(["git", "add", "-A"], user, env))
    staged = _ok(_run(["git", "diff", "--cached", "--name-only"], user, env)).stdout.split()
    assert staged == ["llama/tokenizer.json", "llama/tokenizer_config.json"]
    commit = _run(["git", "commit", "-m", "old tokenizer"], user, env)
    assert commit.returncode != 0 and "Failed" in commit.stdout, commit.stdout
    found = _codes(commit.stdout)
    # the tokenizer's findings once each; config.json's PK101 is not this commit's concern
    assert sorted(c for c, _ in found) == ["PK501", "PK502", "PK505", "PK519"], commit.stdout
    assert {f for _, f in found} == {"llama/tokenizer.json"}


def test_tokenizer_only_directory(repo: tuple[Path, dict[str, str]]) -> None:
    user, env = repo
    write_tokenizer(user / "tok", "smollm", "trigger")
    _ok(_run(["git", "add", "-A"], user, env))
    commit = _run(["git", "commit", "-m", "padded tokenizer"], user, env)
    assert commit.returncode != 0, commit.stdout
    assert sorted(c for c, _ in _codes(commit.stdout)) == ["PK503", "PK506"], commit.stdout
    write_tokenizer(user / "tok", "smollm", "clean")
    cfg = user / "tok" / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace('"unk_token"', '"model_max_length": 2048,\n  "unk_token"'))
    _ok(_run(["git", "add", "-A"], user, env))
    again = _run(["git", "commit", "-m", "a transformers 5 save"], user, env)
    assert again.returncode == 0 and "Passed" in again.stdout, again.stdout
