"""The reference's child loads the f32 forwards' layers on its own thread and leaves the f64
truth to transformers' pool (`child._loading_for`); a user's own setting wins."""

from __future__ import annotations

import os

from portkit.verify.reference.child import ASYNC_LOAD_ENV, _loading_for
from portkit.verify.reference.requests import ForwardRequest, TruthRequest

FORWARD = ForwardRequest("m", [], "streamed", [1, 2], [3], 1)
TRUTH = TruthRequest("m", [], [1, 2], [3], 1)


def test_forwards_load_on_this_thread_and_the_truth_on_the_pool(monkeypatch) -> None:
    monkeypatch.delenv(ASYNC_LOAD_ENV, raising=False)
    with _loading_for(FORWARD):
        assert os.environ[ASYNC_LOAD_ENV] == "1"
    assert ASYNC_LOAD_ENV not in os.environ  # as it was, for the next request
    with _loading_for(TRUTH):
        assert ASYNC_LOAD_ENV not in os.environ


def test_the_users_setting_wins(monkeypatch) -> None:
    monkeypatch.setenv(ASYNC_LOAD_ENV, "0")
    with _loading_for(FORWARD):
        assert os.environ[ASYNC_LOAD_ENV] == "0"
    assert os.environ[ASYNC_LOAD_ENV] == "0"
