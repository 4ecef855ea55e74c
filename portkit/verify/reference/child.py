"""The reference (transformers) in a child process: its protocol, the parent's end
(`ServedReference`) and the child's (`_serve`); what it computes is `portkit.verify.reference.compute`.

`portkit verify` runs transformers in a child so that torch never lives in the process that
runs candle: the parent never holds torch's ~0.7 GiB of libraries and arenas, and it does its
own imports, lint and candle runs while the child imports torch. The child is verify's one
transformers import: it answers every request that needs transformers (the tokens section's
tokenizer, the reference, the reference-side counterfactuals), in order. Each answer's arrays
go as an .npz into a file the parent opened with no name (`out_fd`, passed down; so a killed
verify leaves nothing in $TMPDIR), replacing the previous answer's, and one JSON line on
stdout. On Linux the child is killed with its parent (PR_SET_PDEATHSIG): a `kill -9` of verify
does not leave torch computing.

The protocol:

    python -m portkit.verify.reference.child --serve      (one JSON request a line on stdin)
    forward:   {"kind": "forward", "model_dir": str, "files": [str], "mode": "streamed|whole",
                "prompt": [int], "forced": [int] | null, "tokens": int, "sublayers": [str], "out_fd": int,
                "extra": {"fed": [int], "segment": [int] | null, "rows": [[int]] | null} (optional:
                a continuation's and a batch's rows, `portkit.verify.reference.extra`)}
    as-candle: {"kind": "as-candle", "model_dir", "files", "config_text": str, "tensor_edits":
                {name: edit}, "prompt", "forced", "tokens", "scan_len": int, "sublayers", "out_fd"}
                (transformers as candle computes: `Probe.as_candle`)
    tokenizer: {"kind": "tokenizer", "model_dir": str, "text": str | null, "chat": str | null}
    stdout:    one line per request, in order: {"ok": true, "arrays": true, "greedy": [...],
               "nonfinite_weights": [...]} | {"ok": true, "record": {...}} (portkit.verify.reference.tokenizer)
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
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from portkit.verify import cachefiles
from portkit.verify.errors import one_line
from portkit.verify.reference import requests
from portkit.verify.reference.compute import ReferenceFailed, ReferenceOutputs


class ServedReference:
    """`python -m portkit.verify.reference.child --serve` started now: it imports torch while verify runs lint and candle, then
    answers requests in the order they are sent (`submit`), one at a time; `result()` waits for
    the next answer; `kill()` ends it (a request still computing is abandoned)."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.out = result_file()
        self.inp = result_file()  # candle's layer inputs for a forward's `refeed`, also with no name
        self.proc = _start(self.out, self.inp)
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.tail: list[str] = []
        self.sent = 0
        self.answered = 0
        self.threads: int | None = None  # torch's threads, as the last forward's answer says
        for stream, kind in ((self.proc.stdout, "answer"), (self.proc.stderr, "stderr")):
            threading.Thread(target=_pump, args=(stream, kind, self.events), daemon=True).start()

    def submit(self, req: requests.Request) -> None:
        assert self.proc.stdin is not None
        doc = req.line()
        refeed = req.refeed if isinstance(req, requests.ForwardRequest) else None
        if refeed:  # arrays travel in the file, the line names it
            self.inp.seek(0)
            self.inp.truncate()
            np.savez(self.inp, **{str(k): v for k, v in refeed.items()})
            self.inp.flush()
            doc["refeed_fd"] = self.inp.fileno()
        try:
            self.proc.stdin.write(json.dumps({**doc, "out_fd": self.out.fileno()}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # it died early: result() reports its last words
            pass
        self.sent += 1

    def answer(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The next answer: (its JSON line, the arrays it wrote); ReferenceFailed for a failure."""
        assert self.answered < self.sent, "no request waits for an answer"
        doc = None
        while doc is None:
            kind, value = self.events.get()
            if kind == "stderr":
                line = value.rstrip("\n")
                if line.startswith("progress: "):
                    self.progress(line.removeprefix("progress: "))
                elif line.strip():
                    self.tail = (self.tail + [line])[-5:]
            elif kind == "answer" and value is not None:
                if value.strip():
                    doc = json.loads(value)
            elif kind == "answer":  # its stdout closed: it died (or exited) before answering
                self.events.put((kind, value))  # every later answer() sees the same end
                code = self.proc.wait()
                raise ReferenceFailed("run", f"the transformers process ended with status {code} and no result" + (f": {self.tail[-1]}" if self.tail else ""))
        self.answered += 1
        if not doc.get("ok"):
            raise ReferenceFailed(doc.get("kind", "run"), doc.get("message", "transformers failed"))
        return doc, read_result(self.out) if doc.get("arrays") else {}

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
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None and not f.closed:
                try:
                    f.close()
                except (BrokenPipeError, ValueError):
                    pass
        for f in (self.out, self.inp):
            if not f.closed:
                f.close()


def _pump(stream: Any, kind: str, events: "queue.Queue[tuple[str, Any]]") -> None:
    """Every line of the child's stdout (answers) or stderr (progress) into `events`; stdout's
    end as (answer, None)."""
    try:
        for line in stream:
            events.put((kind, line))
    except (OSError, ValueError):  # closed by kill()
        pass
    if kind == "answer":
        events.put((kind, None))


def result_file() -> Any:
    """A file with no name for the child's arrays (O_TMPFILE, or unlinked at once): nothing to
    remove, whatever ends verify."""
    return tempfile.TemporaryFile(prefix="portkit-verify-ref-")


def read_result(f: Any) -> dict[str, np.ndarray]:
    f.seek(0)
    with np.load(f, allow_pickle=False) as z:
        return {k: np.array(z[k]) for k in z.files}


def _start(out: Any, inp: Any) -> subprocess.Popen[str]:
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
    return subprocess.Popen(
        [sys.executable, "-m", "portkit.verify.reference.child", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        pass_fds=(out.fileno(), inp.fileno()),
    )


PARENT_ENV = "PORTKIT_REFPROC_PARENT"


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


def _read_refeed(fd: int | None) -> dict[int, np.ndarray] | None:
    """A forward's `refeed` (decoder layer index -> candle's input to it), from the file the parent passed."""
    if fd is None:
        return None
    with os.fdopen(os.dup(int(fd)), "rb") as f:
        f.seek(0)
        with np.load(f, allow_pickle=False) as z:
            return {int(k): np.array(z[k], dtype=np.float32) for k in z.files}


def _write_result(req: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """The arrays of one answer, in the file the parent passed (each answer replaces the last)."""
    with os.fdopen(os.dup(int(req["out_fd"])), "wb") as f:
        f.seek(0)
        f.truncate()
        np.savez(f, **arrays)


def _release() -> None:
    """The model of the request just answered leaves the process's memory before the next one
    (or candle, in the parent) needs it."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: freed memory is only kept for reuse
        pass


def torch_threads() -> int | None:
    """torch's intra-op threads in this process (None: torch not imported here)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _answer(doc: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """One request line: its JSON answer (the arrays written to `out_fd`)."""
    try:
        req = requests.from_line(doc, _read_refeed(doc.get("refeed_fd")))
        got = requests.answer(req, progress)
        if isinstance(req, requests.TokenizerRequest):
            return {"ok": True, "record": got}
        assert isinstance(got, ReferenceOutputs)
        _write_result(doc, cachefiles.rows_and_layers(got.rows, got.layers))
        return {"ok": True, "arrays": True, "greedy": got.greedy, "nonfinite_weights": got.nonfinite_weights, "threads": torch_threads()}
    except ReferenceFailed as e:
        return {"ok": False, "kind": e.kind, "message": str(e)}
    except Exception as e:  # never a traceback from the child either (an unknown request too)
        return {"ok": False, "kind": "run", "message": f"{type(e).__name__}: {one_line(e)}"}
    finally:
        _release()


def _serve() -> None:
    def progress(s: str) -> None:
        print(f"progress: {s}", file=sys.stderr, flush=True)

    _die_with_parent()
    try:
        from portkit.verify.reference.runtime import _import_torch

        _import_torch()  # while the parent lints and runs candle
    except Exception:
        pass  # reported with the request, as "unavailable"
    # one request a line, answered in order; the end of stdin (verify is done, or needed no
    # reference: a cache hit) ends the process
    for raw in sys.stdin:
        if not raw.strip():
            continue
        doc = _answer(json.loads(raw), progress)
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip torch's teardown


if __name__ == "__main__":
    _serve()
