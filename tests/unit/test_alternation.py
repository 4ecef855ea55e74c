"""`portkit verify A B`'s alternation of candle's runs and transformers' models
(`portkit.verify.reference.alternation`): who waits for whom, and when candle's freed heap goes
back to the system. The child's side is tests/acceptance/test_reference_queue.py."""

from __future__ import annotations

import threading

from portkit.verify.reference.alternation import Alternation


def _trimmed() -> tuple[Alternation, list[int]]:
    calls: list[int] = []
    return Alternation(trim=lambda: calls.append(1)), calls


def test_one_verify_trims_after_each_run_and_nothing_waits() -> None:
    a, calls = _trimmed()
    a.hold()
    assert not a.candle
    assert a.done() is False  # the caller hands the heap back itself, now
    a._writing(True)  # not ready, yet nothing waits
    assert a.computing == 1 and calls == []


def test_the_heap_goes_back_when_transformers_takes_the_turn() -> None:
    a, calls = _trimmed()
    a.on = True
    a._set(ready=True)
    a.hold()
    assert a.candle
    assert a.done() is True and calls == []  # kept for the next run's weights
    a.hold()
    a.done()
    a._writing(False)  # a tokenizer request: no turn, no trim
    assert calls == [] and a.computing == 0
    a._writing(True)
    assert calls == [1] and a.computing == 1
    a._answered(True)
    a._writing(True)
    assert calls == [1]  # nothing freed since


def _waiting(target, *args) -> threading.Thread:
    """`target(*args)` on a thread, 0.2 s after it started (still alive: it waits)."""
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    t.join(0.2)
    return t


def _let_go(t: threading.Thread) -> None:
    t.join(5)
    assert not t.is_alive()


def test_a_model_request_waits_for_the_imports_and_for_candle() -> None:
    a, _ = _trimmed()
    a.on = True
    writing = _waiting(a._writing, True)
    assert writing.is_alive()  # the child is still importing
    a._set(ready=True)
    _let_go(writing)
    a._answered(True)
    a.hold()
    writing = _waiting(a._writing, True)
    assert writing.is_alive()  # candle holds the turn
    a.done()
    _let_go(writing)
    assert a.computing == 1 and a.written == 2


def test_a_candle_load_waits_for_the_model_written_and_goes_before_the_next() -> None:
    a, _ = _trimmed()
    a.on = True
    a._set(ready=True)
    a._writing(True)
    holding = _waiting(a.hold)
    assert holding.is_alive() and a.candle_waiting == 1
    next_request = _waiting(a._writing, True)
    assert next_request.is_alive()  # a waiting candle load goes first
    a._answered(True)
    _let_go(holding)
    assert a.candle and next_request.is_alive()
    a.done()
    _let_go(next_request)
