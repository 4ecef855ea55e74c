"""A batch's beginning (`ReferenceSession.candle_first`, `portkit verify A B`): its model requests
stay in verify's process until its candle runs are done, its tokenizer requests reach the child
at once, and every answer still goes to the request that asked for it."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.verify.reference import requests
from portkit.verify.reference.compute import ReferenceOutputs
from portkit.verify.reference.session import ReferenceSession


class _Child:
    """The child's protocol without a process: it answers the requests written to it in order."""

    def __init__(self) -> None:
        self.written: list[requests.Request] = []
        self.answered = 0
        self.threads = 2

    def submit(self, req: requests.Request) -> None:
        self.written.append(req)

    def _next(self) -> requests.Request:
        assert self.answered < len(self.written), "an answer waited for before its request was written: it would hang"
        req = self.written[self.answered]
        self.answered += 1
        return req

    def answer(self) -> tuple[dict, dict]:
        req = self._next()
        assert isinstance(req, requests.TokenizerRequest)
        return {"ok": True, "record": {"of": req.model_dir}}, {}

    def result(self) -> ReferenceOutputs:
        req = self._next()
        assert isinstance(req, requests.ForwardRequest)
        return ReferenceOutputs(
            greedy=[], rows=np.zeros((1, 2), np.float32), layers={}, nonfinite_weights=[req.model_dir]
        )

    def kill(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _in_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")  # every model's session (`next_target`) too


def _session() -> tuple[ReferenceSession, _Child]:
    session = ReferenceSession(lambda _s: None, start=False)
    child = _Child()
    session.served.child = child  # type: ignore[assignment]
    return session, child


def _forward(name: str) -> requests.ForwardRequest:
    return requests.ForwardRequest(name, [], "streamed", [1, 2], None, 1)


def _tokenizer(name: str) -> requests.TokenizerRequest:
    return requests.TokenizerRequest(name)


def test_tokenizer_requests_pass_the_model_requests_kept_back() -> None:
    session, child = _session()
    with session.candle_first():
        first = session.next_target(lambda _s: None)
        tok_a, fwd_a = first.submit(_tokenizer("a")), first.submit(_forward("a"))
        second = session.next_target(lambda _s: None)
        tok_b, fwd_b = second.submit(_tokenizer("b")), second.submit(_forward("b"))
        assert [type(r).__name__ for r in child.written] == ["TokenizerRequest", "TokenizerRequest"]
        assert second.wait(tok_b) == {"of": "b"}  # answered while candle runs: the models stay back
        assert [r.model_dir for r in child.written] == ["a", "b"]
    assert [r.model_dir for r in child.written] == ["a", "b", "a", "b"]  # then the models, in order
    assert first.wait(fwd_a).nonfinite_weights == ["a"] and second.wait(fwd_b).nonfinite_weights == ["b"]
    assert first.wait(tok_a) == {"of": "a"}


def test_waiting_for_a_model_kept_back_sends_it() -> None:
    session, child = _session()
    with session.candle_first():
        ticket = session.submit(_forward("a"))
        assert child.written == []
        assert session.wait(ticket).nonfinite_weights == ["a"]  # else it would wait forever
        later = session.submit(_forward("b"))  # the batch's beginning is over once verify waited
        assert child.written[-1].model_dir == "b"
    assert session.wait(later).nonfinite_weights == ["b"]


def test_without_candle_first_every_request_goes_in_the_order_sent() -> None:
    session, child = _session()
    session.submit(_forward("a"))
    session.submit(_tokenizer("a"))
    assert [type(r).__name__ for r in child.written] == ["ForwardRequest", "TokenizerRequest"]
