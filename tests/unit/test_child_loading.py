"""The reference's child loads each streamed layer on its own thread (transformers' pool off,
`child._start`); a user's own setting wins."""

from __future__ import annotations

import subprocess

from portkit.verify.reference import child


def _child_env(monkeypatch) -> dict[str, str]:
    seen: dict[str, str] = {}

    def popen(argv, **kw):
        seen.update(kw["env"])
        raise RuntimeError("not started")

    monkeypatch.setattr(subprocess, "Popen", popen)
    try:
        child._start()
    except RuntimeError:
        pass
    return seen


def test_the_child_loads_on_its_own_thread(monkeypatch) -> None:
    monkeypatch.delenv(child.ASYNC_LOAD_ENV, raising=False)
    assert _child_env(monkeypatch)[child.ASYNC_LOAD_ENV] == "1"


def test_the_users_setting_wins(monkeypatch) -> None:
    monkeypatch.setenv(child.ASYNC_LOAD_ENV, "0")
    assert _child_env(monkeypatch)[child.ASYNC_LOAD_ENV] == "0"
