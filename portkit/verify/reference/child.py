"""The reference (transformers) in a child process: its protocol, the parent's end
(`ServedReference`) and the child's (`_serve`); what it computes is `portkit.verify.reference.compute`.

`portkit verify` runs transformers in a child so that torch never lives in the process that
runs candle: the parent never holds torch's ~0.7 GiB of libraries and arenas, and it does its
own imports, lint and candle runs while the child imports torch. The child is verify's one
transformers import: it answers every request that needs transformers (the tokens section's
tokenizer, the reference, the reference-side counterfactuals), in order. Requests and answers
travel in its pipes, each array payload (`portkit.verify.arrayblob`) right after the JSON line that states its
length, so that any number of requests may wait in line, for one model or the next (`portkit
verify A B`), and nothing is left in $TMPDIR whatever ends verify. On Linux the child is killed
with its parent (PR_SET_PDEATHSIG): a `kill -9` of verify does not leave torch computing.

The protocol:

    python -m portkit.verify.reference.child --serve      (one JSON request a line on stdin)
    forward:   {"kind": "forward", "model_dir": str, "files": [str], "mode": "streamed|whole",
                "prompt": [int], "forced": [int] | null, "tokens": int, "sublayers": [str],
                "extra": {"fed": [int], "segment": [int] | null, "rows": [[int]] | null} (optional:
                a continuation's and a batch's rows, `portkit.verify.reference.extra`),
                "refeed_bytes": int (optional: that many bytes of arrays (`arrayblob`) follow the line, candle's
                input to each decoder layer)}
    truth:     {"kind": "truth", "model_dir", "files", "prompt", "fed": [int], "tokens", "sublayers",
                "refeed_bytes" (optional)} (transformers in f64 on prompt + fed: rows and layers in
                f64, `compute.truth_forward`; a forward on candle's tokens goes without it)
    as-candle: {"kind": "as-candle", "model_dir", "files", "config_text": str, "tensor_edits":
                {name: edit}, "prompt", "forced", "tokens", "scan_len": int, "sublayers"}
                (transformers as candle computes: `CandleEdit.as_candle`)
    tokenizer: {"kind": "tokenizer", "model_dir": str, "text": str | null, "chat": str | null}
    stdout:    one line per request, in order: {"ok": true, "arrays_bytes": int, "greedy": [...],
               "nonfinite_weights": [...]} followed by that many bytes of arrays (`arrayblob`: rows and layers)
               | {"ok": true, "record": {...}} (portkit.verify.reference.tokenizer)
               | {"ok": false, "kind": ..., "message": str}

  `--serve` imports torch first and only then reads its requests, so verify starts it at once
  and sends the forward once candle has generated: one forward over prompt + `forced` (candle's
  greedy tokens but the last) gives every step's logits and the prefill's layers; with `forced`
  null (candle gave no tokens) the reference generates its own, one forward per token. Each
  request's model is released before the next is read; the end of stdin ends the child
  (`os._exit`: torch's teardown is not worth waiting for).

stderr: "progress: <what>" lines while it works.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from portkit.verify import arrayblob, cachefiles
from portkit.verify.errors import one_line
from portkit.verify.reference import requests
from portkit.verify.reference.alternation import Alternation
from portkit.verify.reference.compute import ReferenceFailed, ReferenceOutputs

#: the line the child writes to stderr once it has imported torch and transformers (`Alternation.ready`)
READY = "portkit-reference-ready"


class ServedReference:
    """`python -m portkit.verify.reference.child --serve` started now: it imports torch while verify runs lint and
    candle, then
    answers requests in the order they are sent (`submit`, which never waits: a thread writes
    them, when `alternation` allows), one at a time; `result()` waits for the next answer; `kill()`
    ends it (a request still computing is abandoned)."""

    def __init__(self, progress: Callable[[str], None], alternation: Alternation | None = None) -> None:
        self.progress = progress
        self.alternation = alternation if alternation is not None else Alternation()
        self.proc = _start()
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.outbox: queue.Queue[tuple[bytes, bool] | None] = queue.Queue()
        self.tail: list[str] = []
        self.sent = 0
        self.answered = 0
        self.threads: int | None = None  # torch's threads, as the last forward's answer says
        written: queue.Queue[bool] = queue.Queue()  # each request written, in order: a model's?
        threading.Thread(
            target=_read_answers, args=(self.proc.stdout, self.events, self.alternation, written), daemon=True
        ).start()
        threading.Thread(
            target=_read_progress, args=(self.proc.stderr, self.events, self.alternation), daemon=True
        ).start()
        threading.Thread(
            target=_write_requests, args=(self.proc.stdin, self.outbox, self.alternation, written), daemon=True
        ).start()

    def submit(self, req: requests.Request) -> None:
        doc = req.line()
        refeed = req.refeed if isinstance(req, (requests.ForwardRequest, requests.TruthRequest)) else None
        payload = arrayblob.pack({str(k): v for k, v in refeed.items()}) if refeed else b""
        if payload:
            doc["refeed_bytes"] = len(payload)
        self.outbox.put((json.dumps(doc).encode() + b"\n" + payload, requests.loads_model(req)))
        self.sent += 1

    def answer(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The next answer: (its JSON line, its arrays); ReferenceFailed for a failure."""
        assert self.answered < self.sent, "no request waits for an answer"
        self.alternation.done()  # this process waits for transformers: candle computes nothing meanwhile
        got = None
        while got is None:
            kind, value = self.events.get()
            if kind == "stderr":
                line = value.rstrip("\n")
                if line.startswith("progress: "):
                    self.progress(line.removeprefix("progress: "))
                elif line.strip():
                    self.tail = (self.tail + [line])[-5:]
            elif value is not None:
                got = value
            else:  # its stdout closed, or carried no answer: it died, or is of no more use
                self.events.put((kind, value))  # every later answer() sees the same end
                if self.proc.poll() is None:
                    self.proc.kill()
                code = self.proc.wait()
                raise ReferenceFailed(
                    "run",
                    f"the transformers process ended with status {code} and no result"
                    + (f": {self.tail[-1]}" if self.tail else ""),
                )
        self.answered += 1
        doc, payload = got
        if not doc.get("ok"):
            raise ReferenceFailed(doc.get("kind", "run"), doc.get("message", "transformers failed"))
        return doc, _arrays(payload) if payload else {}

    def result(self) -> ReferenceOutputs:
        """The next answer as a reference's outputs."""
        doc, arrays = self.answer()
        self.threads = doc.get("threads")
        return ReferenceOutputs(
            greedy=[int(t) for t in doc["greedy"]],
            rows=arrays["rows"],
            layers=cachefiles.layers_of(arrays),
            nonfinite_weights=[str(n) for n in doc.get("nonfinite_weights", [])],
        )

    def kill(self) -> None:
        self.outbox.put(None)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None and not f.closed:
                try:
                    f.close()
                except (BrokenPipeError, ValueError, OSError):
                    pass


def _write_requests(
    stream: Any, outbox: queue.Queue[tuple[bytes, bool] | None], alternation: Alternation, written: queue.Queue[bool]
) -> None:
    """Each request (bytes, whether a model's) into the child's stdin, in order, when `alternation`
    allows (None: stop): `submit` never waits for a child still computing the request before to
    read the next."""
    while (item := outbox.get()) is not None:
        data, heavy = item
        alternation._writing(heavy)
        written.put(heavy)
        try:
            stream.write(data)
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):  # it died early: answer() reports its last words
            return


def _read_answers(
    stream: Any, events: queue.Queue[tuple[str, Any]], alternation: Alternation, written: queue.Queue[bool]
) -> None:
    """Each answer from the child's stdout, as ("answer", (its JSON line, its payload bytes));
    the end of stdout as ("answer", None)."""
    try:
        for line in stream:
            if not line.strip():
                continue
            doc = json.loads(line)
            n = int(doc.get("arrays_bytes") or 0)
            payload = stream.read(n) if n else b""
            if len(payload) < n:  # cut short: it died while writing
                break
            alternation._answered(written.get())
            events.put(("answer", (doc, payload)))
    except (OSError, ValueError):  # closed by kill(), or a line that is no answer
        pass
    alternation._set(gone=True)
    events.put(("answer", None))


def _read_progress(stream: Any, events: queue.Queue[tuple[str, Any]], alternation: Alternation) -> None:
    """Every line of the child's stderr (its progress, or its last words) into `events`; its
    `READY` line sets `alternation.ready`."""
    try:
        for line in stream:
            text = line.decode("utf-8", "replace")
            if text.rstrip("\n") == READY:
                alternation._set(ready=True)
            else:
                events.put(("stderr", text))
    except (OSError, ValueError):  # closed by kill()
        pass


def _arrays(payload: bytes) -> dict[str, np.ndarray]:
    got = arrayblob.unpack(payload)
    if got is None:
        raise ValueError("a malformed array payload in the reference's pipe")
    return got[1]


def _start() -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    # the child must import this very portkit, wherever it was imported from
    import portkit

    root = str(Path(portkit.__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[PARENT_ENV] = str(os.getpid())
    # torch's OpenMP threads wait at each op's barrier; spinning there (the default) steals the
    # core a descheduled teammate, candle in the parent or any other work needs: on a loaded
    # 2-core machine the streamed forward of the 135M shape took 3-6 s spinning, 0.6-1 s asleep.
    # A waiting policy only: the threads, their work and the numbers are the same.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # transformers loads each call's tensors (each streamed layer's) on a pool of 4 threads it
    # starts per call, unless told not to. The weights are views of the file mapping
    # (`models._open`): an f32 load copies nothing and an f64 one converts once, and on this one
    # thread the f64 truth's peak was 120-260 MiB lower (1089 MiB against 1227-1349 for one f64
    # forward of the real 135M checkpoint), its time the same (0.77-0.89 s against 0.79-0.88 s).
    env.setdefault(ASYNC_LOAD_ENV, "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "portkit.verify.reference.child", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    _widen_pipe(proc.stdout)
    return proc


def _widen_pipe(stream: Any) -> None:
    """Linux: the answers' pipe holds 1 MiB, not 64 KiB. An answer is 8-17 MB of arrays (the
    real 135M checkpoint's), and the child can only go on to its next request once this process
    has read all of it, 64 KiB at a time while judging another model."""
    if not sys.platform.startswith("linux"):
        return
    import fcntl

    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above /proc/sys/fs/pipe-max-size: the default stays
            pass


#: the answers' pipe size (Linux's default cap for an unprivileged process, /proc/sys/fs/pipe-max-size)
PIPE_BYTES = 1 << 20


PARENT_ENV = "PORTKIT_REFPROC_PARENT"
#: transformers' switch for its loading pool
ASYNC_LOAD_ENV = "HF_DEACTIVATE_ASYNC_LOAD"


def _die_with_parent() -> None:
    """Linux: be killed when the verify that started this child dies, even by SIGKILL."""
    parent = os.environ.get(PARENT_ENV, "")
    if not sys.platform.startswith("linux") or not parent.isdigit():
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # it died before the prctl
        os._exit(0)


def _release() -> None:
    """The model of the request just answered leaves the process's memory before the next one
    (or candle, in the parent) needs it. What survives the collection is long-lived (modules,
    their caches): frozen, so that no later collection walks it again."""
    import gc

    gc.collect()
    gc.freeze()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: freed memory is only kept for reuse
        pass


def torch_threads() -> int | None:
    """torch's intra-op threads in this process (None: torch not imported here)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _answer(doc: dict[str, Any], refeed: bytes, progress: Callable[[str], None]) -> tuple[dict[str, Any], bytes]:
    """One request: its JSON answer and the arrays' payload."""
    try:
        fed = {int(k): v.astype(np.float32, copy=False) for k, v in _arrays(refeed).items()} if refeed else None
        req = requests.from_line(doc, fed)
        got = requests.answer(req, progress)
        if isinstance(req, requests.TokenizerRequest):
            return {"ok": True, "record": got}, b""
        assert isinstance(got, ReferenceOutputs)
        payload = arrayblob.pack(cachefiles.rows_and_layers(got.rows, got.layers))
        return {
            "ok": True,
            "arrays_bytes": len(payload),
            "greedy": got.greedy,
            "nonfinite_weights": got.nonfinite_weights,
            "threads": torch_threads(),
        }, payload
    except ReferenceFailed as e:
        return {"ok": False, "kind": e.kind, "message": str(e)}, b""
    except Exception as e:  # never a traceback from the child either (an unknown request too)
        return {"ok": False, "kind": "run", "message": f"{type(e).__name__}: {one_line(e)}"}, b""


def _serve() -> None:
    def progress(s: str) -> None:
        print(f"progress: {s}", file=sys.stderr, flush=True)

    _die_with_parent()
    # stdout carries the answers only: whatever else writes to it (a library's print, C code
    # on fd 1) goes to stderr, where the parent keeps it as the child's last words
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import gc

    # torch's and transformers' imports make ~0.65 million objects that live as long as the
    # process; collecting while they were made took 0.6 s of a 3.4 s import (six full walks
    # among the young ones). So the collector waits, and they are frozen at once (`gc.freeze`
    # below), the ~10,700 objects of the import's own reference cycles too: 11 MiB kept.
    gc.disable()
    from portkit.verify.reference.gpu_libraries import drop_gpu_library_pages

    try:
        from portkit.verify.reference.runtime import _import_torch

        _import_torch()  # while the parent lints and runs candle
        drop_gpu_library_pages()  # the reference computes on the CPU (torch's CUDA libraries: ~145 MiB)
        # and what loading a model imports (1.9 s of the real 135M checkpoint's first request
        # went to these): the first request is often still on its way
        import transformers.conversion_mapping  # noqa: F401 - imported ahead, for the first request
        import transformers.core_model_loading  # noqa: F401 - the same
        import transformers.modeling_utils  # noqa: F401 - the same
    except Exception:
        pass  # reported with the request, as "unavailable"
    # frozen, a collection walks only what a request made (a full one walked the imports'
    # objects for 0.18 s, after each answer and whenever a forward's allocations triggered one)
    gc.freeze()
    gc.enable()
    drop_gpu_library_pages()  # and triton's, which transformers' imports brought (~65 MiB)
    print(READY, file=sys.stderr, flush=True)
    # one request a line, answered in order; the end of stdin (verify is done, or needed no
    # reference: a cache hit) ends the process
    inp = sys.stdin.buffer
    for raw in inp:
        if not raw.strip():
            continue
        doc = json.loads(raw)
        refeed = inp.read(int(doc.get("refeed_bytes") or 0))
        answer, payload = _answer(doc, refeed, progress)
        out.write(json.dumps(answer).encode() + b"\n" + payload)
        out.flush()
        _release()  # once answered: verify judges meanwhile
    sys.stderr.flush()
    os._exit(0)  # skip torch's teardown


if __name__ == "__main__":
    _serve()
