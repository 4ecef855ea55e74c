"""Seconds per phase of one verify, each phase's own: a phase timed inside another (the GGUF's
run while transformers computes) is taken out of the one around it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timings:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._inner: list[float] = []  # per open phase: the seconds its nested phases took

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        self._inner.append(0.0)
        try:
            yield
        finally:
            spent = time.perf_counter() - t0
            nested = self._inner.pop()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + spent - nested
            if self._inner:
                self._inner[-1] += spent

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.seconds.items()}
