"""The reference (transformers) in a child process.

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

    python -m portkit.verify.refproc --serve      (one JSON request a line on stdin)
    forward:   {"kind": "forward", "model_dir": str, "files": [str], "mode": "streamed|whole",
                "prompt": [int], "forced": [int] | null, "tokens": int, "sublayers": [str], "out_fd": int,
                "extra": {"fed": [int], "segment": [int] | null, "rows": [[int]] | null} (optional:
                a continuation's and a batch's rows, `portkit.verify.refextra`)}
    as-candle: {"kind": "as-candle", "model_dir", "files", "config_text": str, "tensor_edits":
                {name: edit}, "prompt", "forced", "tokens", "scan_len": int, "sublayers", "out_fd"}
                (transformers as candle computes: `Probe.as_candle`)
    tokenizer: {"kind": "tokenizer", "model_dir": str, "text": str | null, "chat": str | null}
    stdout:    one line per request, in order: {"ok": true, "arrays": true, "greedy": [...],
               "nonfinite_weights": [...]} | {"ok": true, "record": {...}} (portkit.verify.tokrecord)
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
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from portkit.verify import cachefiles


#: The name an as-candle reference's effect-by-position travels under with its layers.
EFFECT = "as_candle_effect"


class ReferenceFailed(RuntimeError):
    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def forward_reference(
    model_dir: Path,
    files: Sequence[Path],
    prompt: Sequence[int],
    forced: Sequence[int] | None,
    tokens: int,
    mode: str,
    progress: Callable[[str], None],
    sublayers: Sequence[str] = (),
    extra: dict[str, Any] | None = None,
) -> tuple[list[int], np.ndarray, dict[str, np.ndarray], list[str]]:
    """In this process: (reference tokens, [max(tokens, 1), vocab] step rows, prefill layers
    with `sublayers`' outputs in each decoder layer, checkpoint tensors holding NaN/inf).
    `extra`: a continuation's and a batch's rows too, as `extra.*` layers (`refextra`).

    With `forced` (candle's greedy tokens): one forward over prompt + forced[: tokens - 1]; row k
    is the reference's logits where token k is decided, on exactly candle's inputs, and the
    reference's tokens are its argmax up to and including the first step where it picks another
    token than candle (its greedy generation is the same up to there; past it, it is unknown).
    Without: the reference generates, one forward per token.
    """
    from portkit.verify.reference import ReferenceLoadError, ReferenceUnavailable
    from portkit.verify.streamed import StreamedModel, WholeModel

    prompt = list(prompt)
    progress(f"reference: loading transformers ({mode}, eager, f32, cpu)")
    try:
        if mode == "streamed":
            model: Any = StreamedModel(Path(model_dir), [Path(f) for f in files], progress)
        else:
            model = WholeModel(Path(model_dir))
    except ReferenceLoadError as e:
        raise ReferenceFailed("load", str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    except ReferenceUnavailable as e:
        raise ReferenceFailed("unavailable", str(e)) from None
    except ReferenceFailed:
        raise
    except Exception as e:  # transformers refused the checkpoint: its text, one line
        raise ReferenceFailed("load", f"transformers could not load {model_dir}: {' '.join(str(e).split())[:300]}") from None
    n_rows = max(tokens, 1)
    try:
        if forced is not None:
            rows, layers = _forced_rows(model, prompt, forced, tokens, sublayers, progress, "reference")
            greedy = reference_greedy(rows, list(forced[:tokens])) if tokens else []
        else:
            # candle gave no tokens: generate()'s arithmetic, the reference's own tokens
            progress(f"reference: prefill and {n_rows - 1} cached steps")
            res, greedy = model.decode(prompt, None, tokens, sublayers=sublayers)
            rows = res.logits
            layers = {k: v.copy() for k, v in res.layers.items()}
            layers["logits"] = rows[0].copy()
        bad = model.nonfinite
        if extra:
            from portkit.verify import refextra

            layers.update(refextra.compute(model, prompt, extra, _cache_window(model), progress))
    except Exception as e:  # transformers' own failure on this checkpoint
        raise ReferenceFailed("run", f"transformers could not run {model_dir}: {' '.join(str(e).split())[:300]}") from None
    return greedy, rows.astype(np.float32, copy=False), layers, list(bad)


def as_candle_reference(
    model_dir: Path,
    files: Sequence[Path],
    config_text: str,
    tensor_edits: Mapping[str, str],
    prompt: Sequence[int],
    forced: Sequence[int],
    tokens: int,
    scan_len: int,
    progress: Callable[[str], None],
    sublayers: Sequence[str] = (),
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """A reference-side counterfactual: transformers, streamed, on `config_text` (the
    checkpoint's config with a finding's edit) with `tensor_edits` applied to the checkpoint's
    tensors as they load (`Probe.as_candle`), on the reference's inputs: what candle computes,
    when the finding is right.

    Returns (its rows, [max(tokens, 1), vocab] on prompt + forced, as the reference's; its
    prefill layers with `sublayers`, as `forward_reference`'s; with `scan_len`, the effect by
    position: max over the vocab of |as written - with the edit| at every position of one
    forward over `scan_len` tokens, the prompt repeated, so verify can say from which prompt
    length the effect exceeds the noise of the dtype or quantization; else empty).
    """
    from portkit.verify.streamed import StreamedModel

    prompt, n_rows = list(prompt), max(tokens, 1)
    try:
        edited = StreamedModel(Path(model_dir), [Path(f) for f in files], progress, config_text=config_text, tensor_edits=tensor_edits)
        as_written = StreamedModel(Path(model_dir), [Path(f) for f in files], progress) if scan_len > 0 else None
    except Exception as e:
        raise ReferenceFailed("load", f"transformers could not load {model_dir} as candle computes it: {' '.join(str(e).split())[:300]}") from None
    try:
        rows, layers = _forced_rows(edited, prompt, forced, tokens, sublayers, progress, "reference as candle computes")
        effect = np.zeros(0, dtype=np.float32)
        if as_written is not None:
            scan = [prompt[i % len(prompt)] for i in range(max(scan_len, len(prompt)))]
            progress(f"reference as written and as candle computes over {len(scan)} tokens")
            a = as_written.forward(scan, capture=False).logits
            b = edited.forward(scan, capture=False).logits
            effect = np.abs(a.astype(np.float64) - b).max(axis=1).astype(np.float32)
    except Exception as e:
        raise ReferenceFailed("run", f"transformers could not run {model_dir} as candle computes it: {' '.join(str(e).split())[:300]}") from None
    return rows[:n_rows].astype(np.float32), layers, effect


def _forced_rows(
    model: Any, prompt: list[int], forced: Sequence[int], tokens: int, sublayers: Sequence[str], progress: Callable[[str], None], what: str
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(rows, prefill layers) on prompt + forced: one forward, or generate()'s arithmetic (a
    prefill, then cached steps) where its sliding-window KV cache would make them differ."""
    n_rows = max(tokens, 1)
    window = _cache_window(model)
    if not (window is not None and window < len(prompt) + n_rows - 1):
        ids = prompt + list(forced[: max(tokens - 1, 0)])
        progress(f"{what}: one forward over {len(ids)} tokens")
        res = model.forward(ids, sublayers=sublayers)
        rows = res.logits[len(prompt) - 1 : len(prompt) - 1 + n_rows].copy()
        layers = {k: v[: len(prompt)].copy() for k, v in res.layers.items()}
    else:
        progress(f"{what}: prefill and {n_rows - 1} cached steps")
        res, _fed = model.decode(prompt, forced, tokens, sublayers=sublayers)
        rows = res.logits
        layers = {k: v.copy() for k, v in res.layers.items()}
    layers["logits"] = rows[0].copy()
    return rows, layers


def _cache_window(model: Any) -> int | None:
    """The `sliding_window` transformers' cache applies in generate() (None: none)."""
    cfg = model.model.config.get_text_config()
    w = getattr(cfg, "sliding_window", None)
    return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def reference_greedy(rows: np.ndarray, forced: Sequence[int]) -> list[int]:
    """The reference's greedy tokens as far as one forward over `forced` decides them: its
    argmax at each step while it agrees with `forced`, then its own pick at the first step where
    it does not (NaN rows decide nothing: the tokens stop there)."""
    out: list[int] = []
    for k, tok in enumerate(forced):
        row = rows[k]
        if not np.isfinite(row).all():
            break
        pick = int(row.argmax())
        out.append(pick)
        if pick != int(tok):
            break
    return out


class ServedReference:
    """`refproc --serve` started now: it imports torch while verify runs lint and candle, then
    answers requests in the order they are sent (`submit`), one at a time; `result()` waits for
    the next answer; `kill()` ends it (a request still computing is abandoned)."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.out = result_file()
        self.proc = _start(self.out)
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.tail: list[str] = []
        self.sent = 0
        self.answered = 0
        self.threads: int | None = None  # torch's threads, as the last forward's answer says
        for stream, kind in ((self.proc.stdout, "answer"), (self.proc.stderr, "stderr")):
            threading.Thread(target=_pump, args=(stream, kind, self.events), daemon=True).start()

    def submit(self, req: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({**req, "out_fd": self.out.fileno()}) + "\n")
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

    def result(self) -> tuple[list[int], np.ndarray, dict[str, np.ndarray], list[str]]:
        """The next answer as a reference's (tokens, rows, layers, tensors holding NaN/inf)."""
        doc, arrays = self.answer()
        self.threads = doc.get("threads")
        rows, layers = arrays["rows"], cachefiles.layers_of(arrays)
        return [int(t) for t in doc["greedy"]], rows, layers, [str(n) for n in doc.get("nonfinite_weights", [])]

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
        if not self.out.closed:
            self.out.close()


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


def _start(out: Any) -> subprocess.Popen[str]:
    env = dict(os.environ)
    # the child must import this very portkit, wherever it was imported from
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[PARENT_ENV] = str(os.getpid())
    # torch's OpenMP threads wait at each op's barrier; spinning there (the default) steals the
    # core a descheduled teammate, candle in the parent or any other work needs: on a loaded
    # 2-core machine the streamed forward of the 135M shape took 3-6 s spinning, 0.6-1 s asleep.
    # A waiting policy only: the threads, their work and the numbers are the same.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return subprocess.Popen(
        [sys.executable, "-m", "portkit.verify.refproc", "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        pass_fds=(out.fileno(),),
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


def _answer(req: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """One request: its JSON answer (the arrays written to `out_fd`)."""
    kind = req.get("kind", "forward")
    try:
        if kind == "tokenizer":
            from portkit.verify.tokrecord import record

            progress("tokenizer: transformers")
            return {"ok": True, "record": record(Path(req["model_dir"]), text=req.get("text"), chat=req.get("chat"))}
        if kind == "forward":
            greedy, rows, layers, bad = forward_reference(
                Path(req["model_dir"]), [Path(f) for f in req["files"]], req["prompt"], req.get("forced"), int(req["tokens"]), req["mode"],
                progress, req.get("sublayers", []), req.get("extra"),
            )
        elif kind == "as-candle":
            rows, layers, effect = as_candle_reference(
                Path(req["model_dir"]), [Path(f) for f in req["files"]], req["config_text"], req.get("tensor_edits") or {},
                req["prompt"], req["forced"], int(req["tokens"]), int(req["scan_len"]), progress, req.get("sublayers", []),
            )
            greedy, layers, bad = [], {**layers, EFFECT: effect}, []
        else:
            return {"ok": False, "kind": "run", "message": f"unknown request {kind!r}"}
        _write_result(req, cachefiles.rows_and_layers(rows, layers))
        return {"ok": True, "arrays": True, "greedy": greedy, "nonfinite_weights": bad, "threads": torch_threads()}
    except ReferenceFailed as e:
        return {"ok": False, "kind": e.kind, "message": str(e)}
    except Exception as e:  # never a traceback from the child either
        return {"ok": False, "kind": "run", "message": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    finally:
        _release()


def _serve() -> None:
    def progress(s: str) -> None:
        print(f"progress: {s}", file=sys.stderr, flush=True)

    _die_with_parent()
    try:
        from portkit.verify.reference import _import_torch

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
