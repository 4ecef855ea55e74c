"""The reference (transformers) in a child process.

`portkit verify` runs transformers in a child so that torch never lives in the process that
then loads candle: the two never hold their copies of the weights (plus torch's ~0.7 GiB of
libraries and arenas) at the same time, and the parent does its own imports and lint while the
child imports torch. The child writes its arrays to an .npz and one JSON line on stdout, then
leaves with `os._exit` (torch's teardown is not worth waiting for).

    python -m portkit.verify.refproc < request.json
    request: {"model_dir": str, "prompt": [int], "tokens": int, "out": "path.npz"}
    stdout:  {"ok": true, "greedy": [...]} | {"ok": false, "kind": "unavailable|load|run", "message": str}
    stderr:  "progress: <what>" lines while it works
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

LAYER_PREFIX = "layer:"


class ReferenceFailed(RuntimeError):
    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def compute(model_dir: Path, prompt: Sequence[int], tokens: int, progress: Callable[[str], None]) -> tuple[list[int], np.ndarray, dict[str, np.ndarray]]:
    """In this process: (greedy tokens, [max(tokens, 1), vocab] step logits, prefill layers)."""
    from portkit.verify.reference import ReferenceLoadError, ReferenceModel, ReferenceUnavailable

    progress("loading transformers (eager, f32, cpu)")
    try:
        ref = ReferenceModel.load(Path(model_dir))
    except ReferenceUnavailable as e:
        raise ReferenceFailed("unavailable", str(e)) from None
    except ReferenceLoadError as e:
        raise ReferenceFailed("load", str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    progress(f"transformers: generate() {tokens} greedy tokens, per-layer hooks on the prefill")
    try:
        if tokens:
            greedy, rows, layers = ref.generate_with_layers(list(prompt), tokens)
        else:
            greedy = []
            logits, layers = ref.forward_with_layers(list(prompt))
            rows = logits[-1:].copy()
            layers["logits"] = rows[0].copy()
    except Exception as e:  # transformers' own failure on this checkpoint
        raise ReferenceFailed("run", f"transformers could not run {model_dir}: {' '.join(str(e).split())[:300]}") from None
    return greedy, rows, layers


def run_in_child(model_dir: Path, prompt: Sequence[int], tokens: int, progress: Callable[[str], None]) -> "ChildReference":
    """Start the child now; `.result()` waits for it."""
    return ChildReference(model_dir, prompt, tokens, progress)


class ChildReference:
    def __init__(self, model_dir: Path, prompt: Sequence[int], tokens: int, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.tmp = Path(tempfile.mkdtemp(prefix="portkit-verify-ref-"))
        self.out = self.tmp / "reference.npz"
        req = {"model_dir": str(model_dir), "prompt": list(prompt), "tokens": tokens, "out": str(self.out)}
        env = dict(os.environ)
        # the child must import this very portkit, wherever it was imported from
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "portkit.verify.refproc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req))
        self.proc.stdin.close()

    def result(self) -> tuple[list[int], np.ndarray, dict[str, np.ndarray]]:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        tail: list[str] = []
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            if line.startswith("progress: "):
                self.progress(line.removeprefix("progress: "))
            elif line.strip():
                tail = (tail + [line])[-5:]
        out = self.proc.stdout.read()
        code = self.proc.wait()
        self._close()
        try:
            doc = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
            if doc is None:
                raise ReferenceFailed("run", f"the transformers process ended with status {code} and no result" + (f": {tail[-1]}" if tail else ""))
            if not doc.get("ok"):
                raise ReferenceFailed(doc.get("kind", "run"), doc.get("message", "transformers failed"))
            with np.load(self.out) as z:
                rows = np.array(z["rows"])
                layers = {k.removeprefix(LAYER_PREFIX): np.array(z[k]) for k in z.files if k.startswith(LAYER_PREFIX)}
            return [int(t) for t in doc["greedy"]], rows, layers
        finally:
            self.out.unlink(missing_ok=True)
            try:
                self.tmp.rmdir()
            except OSError:
                pass

    def _close(self) -> None:
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None and not f.closed:
                f.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()
        self.out.unlink(missing_ok=True)
        try:
            self.tmp.rmdir()
        except OSError:
            pass


def _child() -> None:
    req: dict[str, Any] = json.loads(sys.stdin.read())

    def progress(s: str) -> None:
        print(f"progress: {s}", file=sys.stderr, flush=True)

    try:
        greedy, rows, layers = compute(Path(req["model_dir"]), req["prompt"], int(req["tokens"]), progress)
        np.savez(req["out"], rows=rows, **{LAYER_PREFIX + k: v for k, v in layers.items()})
        doc = {"ok": True, "greedy": greedy}
    except ReferenceFailed as e:
        doc = {"ok": False, "kind": e.kind, "message": str(e)}
    except Exception as e:  # never a traceback from the child either
        doc = {"ok": False, "kind": "run", "message": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip torch's teardown


if __name__ == "__main__":
    _child()
