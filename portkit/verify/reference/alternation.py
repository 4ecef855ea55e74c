"""`portkit verify A B ...`: candle's runs (verify's process) and transformers' models (the
reference's child) alternate, so that one model's candle weights and another's transformers
model are never in memory at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Alternation:
    """One verify's candle runs beside the child's imports, and its first counterfactual beside
    its own f32 reference; with several models that would put one model's candle weights beside
    another's transformers model. With `on`:

    A model request (anything but the tokenizer's) is written to the child once it has imported
    (`child.READY`), one at a time (the child computes them one after the other anyway), and only
    while no candle run holds or waits for the turn; a candle load (`hold`, through
    `native.holding_back`) waits for the model request written to be answered, and holds the
    turn until `done` (its weights released). Tokenizer requests go through meanwhile. (A
    batch's beginning keeps its model requests in verify's process until all of its candle runs
    are done: `ReferenceSession.candle_first`.) The heap candle's runs freed is handed back to
    the system (`trim`) when the turn passes to transformers, not after each run: the next run's
    weights reuse its pages (the kernel zeroed each load's 0.4 GB afresh otherwise). Without
    `on`, nothing waits: one verify overlaps candle with transformers' computing too, as its
    plan says."""

    def __init__(self, trim: Callable[[], object] = lambda: None) -> None:
        self.changed = threading.Condition()
        self.trim = trim
        self.untrimmed = False  # candle's freed heap is still in this process
        self.on = False
        self.ready = False  # the child has imported torch and transformers
        self.candle = False  # a candle run holds the turn
        self.candle_waiting = 0  # candle loads waiting for the turn: they go first
        self.computing = 0  # model requests written and not answered yet
        self.written = 0  # model requests written in all
        self.gone = False  # the child's stdout ended: nothing will be answered

    def hold(self) -> None:
        """Before a candle load: once the model request written is answered, the turn is candle's."""
        with self.changed:
            self.candle_waiting += 1
            self.changed.wait_for(lambda: not self.on or self.gone or self.computing == 0)
            self.candle_waiting -= 1
            self.candle = self.on

    def done(self) -> bool:
        """candle's run is over: the turn is free. True: its freed heap is kept for the next
        run, and trimmed when transformers takes the turn."""
        with self.changed:
            self.candle = False
            self.untrimmed = self.untrimmed or self.on
            self.changed.notify_all()
            return self.on

    def _writing(self, heavy: bool) -> None:
        """Before the child's pipe gets a request (`heavy`: a model's): wait for transformers' turn."""
        if not heavy:
            return
        with self.changed:
            self.changed.wait_for(
                lambda: (
                    not self.on
                    or self.gone
                    or (self.ready and not (self.candle or self.candle_waiting or self.computing))
                )
            )
            if self.untrimmed:
                self.trim()
                self.untrimmed = False
            self.computing += 1
            self.written += 1

    def _answered(self, heavy: bool) -> None:
        """The child answered a request (`heavy`: a model's)."""
        with self.changed:
            self.computing -= heavy
            self.changed.notify_all()

    def _set(self, **state: bool) -> None:
        """`ready` or `gone`, as the child's pipes tell."""
        with self.changed:
            for name, value in state.items():
                setattr(self, name, value)
            self.changed.notify_all()
