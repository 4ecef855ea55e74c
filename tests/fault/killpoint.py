"""Run `portkit ARGS...` and SIGKILL it at a chosen point: the fault harness's one tool.

    python tests/fault/killpoint.py MODULE.ATTR N before|after [--no-tmpfile] -- ARGS...

The callable MODULE.ATTR (a function or method found by import, e.g. `portkit.atomicfile._rename`
or `portkit.verify.reference.child.ServedReference.result`) is wrapped so that its N-th call kills this
process with SIGKILL, before the call or right after it returns: what `kill -9` at that moment
does, deterministically. `--no-tmpfile` makes `portkit.atomicfile` use named temporary files
(as on systems without O_TMPFILE). Nothing of this is in portkit itself.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any


def _resolve(dotted: str) -> tuple[Any, str]:
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:-1]:
            obj = getattr(obj, name)
        return obj, parts[-1]
    raise SystemExit(f"killpoint: cannot import {dotted}")


def arm(dotted: str, n: int, when: str) -> None:
    owner, attr = _resolve(dotted)
    original = getattr(owner, attr)
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        hit = calls[0] == n
        if hit and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        out = original(*args, **kwargs)
        if hit and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(owner, attr, wrapper)


def main(argv: list[str]) -> int:
    sep = argv.index("--")
    opts, args = argv[:sep], argv[sep + 1 :]
    dotted, n, when = opts[0], int(opts[1]), opts[2]
    if "--no-tmpfile" in opts[3:]:
        from portkit import atomicfile

        atomicfile._unnamed = lambda *_a, **_k: None  # type: ignore[assignment]
    arm(dotted, n, when)
    from portkit.cli import main as portkit_main

    return portkit_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
