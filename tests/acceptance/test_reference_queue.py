"""Requests wait in line for transformers' process: `portkit verify A B` sends the next model's
reference while the child still computes this one's. Each answer, and each request's own arrays
(candle's layer inputs), travel in the child's pipes with the line that names them, so a request
queued behind another is answered exactly as when it is sent alone."""

from __future__ import annotations

import json

import numpy as np

from portkit.verify.reference.requests import ForwardRequest
from portkit.verify.reference.session import ReferenceSession

PROMPT = [3, 17, 42, 9, 5]


def test_queued_requests_are_each_answered_as_alone(fixture_dir, monkeypatch) -> None:
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")
    d = fixture_dir("healthy-tied")
    hidden = json.loads((d / "config.json").read_text())["hidden_size"]
    files = [str(p) for p in sorted(d.glob("*.safetensors"))]

    def request(forced: list[int], fill: float) -> ForwardRequest:
        # truth with layer 0 re-run on an input of our own (as candle's would be): arrays both ways
        refeed = {0: np.full((len(PROMPT), hidden), fill, dtype=np.float32)}
        return ForwardRequest(str(d), files, "streamed", PROMPT, forced, 3, [], None, True, refeed)

    a, b = request([5, 6, 7], 0.5), request([8, 9, 10], -0.5)
    one_at_a_time = ReferenceSession(lambda _s: None)
    try:
        alone = [one_at_a_time.wait(one_at_a_time.submit(r)) for r in (a, b)]
    finally:
        one_at_a_time.close()
    queued = ReferenceSession(lambda _s: None)
    try:
        ta, tb = queued.submit(a), queued.submit(b)  # b is sent before a is answered
        got_b, got_a = queued.wait(tb), queued.wait(ta)  # waiting for b keeps a's answer for its own wait
    finally:
        queued.close()
    for got, want in zip((got_a, got_b), alone):
        assert got.greedy == want.greedy
        np.testing.assert_array_equal(got.rows, want.rows)
        assert sorted(got.layers) == sorted(want.layers)
        for name, value in want.layers.items():
            np.testing.assert_array_equal(got.layers[name], value, err_msg=name)
    # the two requests' own inputs reached the child apart: layer 0 re-run on each differs
    assert not np.array_equal(got_a.layers["refeed.layer.0"], got_b.layers["refeed.layer.0"])


def test_a_candle_load_waits_for_the_truths_sent(fixture_dir, monkeypatch) -> None:
    """`portkit verify A B` sends the f64 truths once candle's runs are over; a candle run after
    that (a finding's counterfactual while a model is judged) waits until transformers has
    answered them, so candle's weights and the f64 model are never held at once."""
    from portkit.families import by_name
    from portkit.verify.candle.native import holding_back, load_runner
    from portkit.verify.reference.requests import TruthRequest

    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")
    d = fixture_dir("healthy-tied")
    files = sorted(d.glob("*.safetensors"))
    session = ReferenceSession(lambda _s: None)  # importing torch: the truth takes seconds yet
    try:
        ticket = session.submit(TruthRequest(str(d), [str(f) for f in files], PROMPT, [5, 6, 7], 3))
        load_runner(by_name("llama"), files, (d / "config.json").read_text())
        assert not ticket.done  # outside: candle does not wait
        with holding_back(session.settle_truths):
            load_runner(by_name("llama"), files, (d / "config.json").read_text())
            assert ticket.done  # inside: the load waited for the answer, kept for its own wait
        assert session.wait(ticket).rows.dtype.name == "float64"
    finally:
        session.close()


def test_a_library_writing_to_stdout_does_not_garble_the_answers(fixture_dir, tmp_path, monkeypatch) -> None:
    """The child's stdout carries the answers only: a print (or C code writing to fd 1) while it
    computes goes to its stderr, and the answer still arrives whole."""
    import os

    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\n"
        "from portkit.verify.reference import requests\n"
        "_answer = requests.answer\n"
        "def noisy(req, progress):\n"
        "    print('a library says hello')\n"
        "    sys.stdout.flush()\n"
        "    os.write(1, b'and C code too\\n')\n"
        "    return _answer(req, progress)\n"
        "requests.answer = noisy\n"
    )
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")
    d = fixture_dir("healthy-tied")
    files = [str(p) for p in sorted(d.glob("*.safetensors"))]
    req = ForwardRequest(str(d), files, "streamed", PROMPT, [5, 6, 7], 3)

    def answered() -> object:
        session = ReferenceSession(lambda _s: None)
        try:
            return session.wait(session.submit(req))
        finally:
            session.close()

    want = answered()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    got = answered()
    assert got.greedy == want.greedy
    np.testing.assert_array_equal(got.rows, want.rows)
