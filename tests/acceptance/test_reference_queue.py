"""Requests wait in line for transformers' process: `portkit verify A B` sends the next model's
reference while the child still computes this one's. Each answer, and each request's own arrays
(candle's layer inputs), travel in the child's pipes with the line that names them, so a request
queued behind another is answered exactly as when it is sent alone."""

from __future__ import annotations

import json
import time

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
    for got, want in zip((got_a, got_b), alone, strict=False):
        assert got.greedy == want.greedy
        np.testing.assert_array_equal(got.rows, want.rows)
        assert sorted(got.layers) == sorted(want.layers)
        for name, value in want.layers.items():
            np.testing.assert_array_equal(got.layers[name], value, err_msg=name)
    # the two requests' own inputs reached the child apart: layer 0 re-run on each differs
    assert not np.array_equal(got_a.layers["refeed.layer.0"], got_b.layers["refeed.layer.0"])


def _until(condition, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_candle_runs_and_transformers_models_alternate(fixture_dir, monkeypatch) -> None:
    """`portkit verify A B` (`alternation.Alternation`): a candle load waits until the model request written
    before it is answered, and a model request sent while candle holds the turn reaches the
    child only once candle's memory is released."""
    from portkit.families import by_name
    from portkit.verify.candle.native import holding_back, load_runner
    from portkit.verify.candle.run import release_memory
    from portkit.verify.reference.requests import TruthRequest

    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "child")
    d = fixture_dir("healthy-tied")
    files = sorted(d.glob("*.safetensors"))
    config = (d / "config.json").read_text()
    session = ReferenceSession(lambda _s: None)
    alternation = session.alternation

    def truth() -> TruthRequest:
        return TruthRequest(str(d), [str(f) for f in files], PROMPT, [5, 6, 7], 3)

    try:
        assert _until(lambda: alternation.ready)  # the child has imported
        alternation.on = True
        with holding_back(alternation.hold, alternation.done):
            first = session.submit(truth())
            assert _until(lambda: alternation.written == 1)  # the child computes it
            runner = load_runner(by_name("llama"), files, config)
            assert alternation.computing == 0 and alternation.candle  # the load waited for its answer
            second = session.submit(truth())
            assert not _until(lambda: alternation.written > 1, 1.0)  # held back while candle's weights are in memory
            del runner
            release_memory()
            assert not alternation.candle
            assert _until(lambda: alternation.written == 2)  # the turn is transformers': `second` is written now
        assert session.wait(first).rows.dtype.name == "float64"
        assert session.wait(second).rows.dtype.name == "float64"
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
