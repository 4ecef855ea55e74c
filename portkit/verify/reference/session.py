"""verify's one transformers process: every request that needs transformers, answered in order.

The child (`python -m portkit.verify.reference.child --serve`) starts when verify starts (`start_early`) and imports
torch and
transformers while verify reads the model, lints and runs candle; verify then sends it, in this
order, what it needs:
transformers' tokenizer record (the tokens section's, and a text prompt's ids), sent first so
that the child records it once imported, while candle runs; the reference forward once candle's
greedy tokens are known; each reference-side counterfactual. It answers one request at a time,
in the order sent; `wait` returns a request's answer, keeping the answers of requests sent
before it for their own `wait`. Each model of a `portkit verify A B ...` has a session of its
own on the one process (`next_target`): the next model's requests wait in line behind this
one's, so the process goes from one to the next (a batch's model requests are kept back until
its candle runs are done, its tokenizer records are not: `candle_first`).

With PORTKIT_VERIFY_REFERENCE=inprocess (for a program that verifies many checkpoints in one process, as the
demo and the test suite do: torch is imported once) the same
requests run in this process when they are waited for; the numbers are the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from portkit.verify.reference import child, compute, requests
from portkit.verify.reference.alternation import Alternation

Progress = Callable[[str], None]


#: Without a tokenizer (nothing else needs transformers before the reference), the child of a
#: checkpoint above this many bytes starts only once candle's run is done, so torch's ~0.7 GiB
#: never adds to candle's peak, which holds the weights at the run's dtype: the 1.1B shape at
#: f32 peaks at candle's 4.16 GiB. With a tokenizer it starts at once whatever the size: the
#: tokens section needs transformers anyway, and verify's own process no longer imports it.
EARLY_START_MAX_BYTES = 512 * 2**20


def start_early(weight_bytes: int, has_tokenizer: bool) -> bool:
    """Whether the child starts at verify's start (else when the first request is sent)."""
    return has_tokenizer or weight_bytes <= EARLY_START_MAX_BYTES


def reference_in_child() -> bool:
    """A child process unless PORTKIT_VERIFY_REFERENCE=inprocess."""
    return os.environ.get("PORTKIT_VERIFY_REFERENCE", "child") != "inprocess"


class Ticket:
    """One request sent; its answer once waited for; `owner`: the session (the model) that sent it."""

    def __init__(self, req: requests.Request, owner: ReferenceSession) -> None:
        self.req = req
        self.owner = owner
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


class _Served:
    """The one child process and the requests it has not answered yet, in order: shared by the
    sessions of every model of a `portkit verify A B ...` (`ReferenceSession.next_target`)."""

    def __init__(self) -> None:
        self.child: child.ServedReference | None = None
        self.pending: list[Ticket] = []
        #: when model requests reach the child (`portkit verify A B ...` turns it on)
        self.alternation = Alternation()
        #: within `ReferenceSession.candle_first`: the model requests kept back, in order
        self.kept_back: list[Ticket] | None = None
        #: where the child's progress lines go: the model whose answer is awaited
        self.progress: Progress = lambda _s: None


class ReferenceSession:
    def __init__(self, progress: Progress, *, start: bool = True, served: _Served | None = None) -> None:
        """`start`: start the child now (else on the first request). `served`: another model's
        process (`next_target`)."""
        self.progress = progress
        self.served = served if served is not None else _Served()
        self.in_child = reference_in_child()
        #: torch's intra-op threads where transformers computed (None: it computed nothing)
        self.threads: int | None = None
        self.ran = False  # a request was sent
        if start:
            self.start()

    @property
    def child(self) -> child.ServedReference | None:
        return self.served.child

    @property
    def pending(self) -> list[Ticket]:
        return self.served.pending

    def start(self) -> None:
        if self.in_child and self.served.child is None:
            self.served.progress = self.progress
            self.served.child = child.ServedReference(lambda s: self.served.progress(s), self.served.alternation)

    @property
    def started(self) -> bool:
        return self.child is not None

    def submit(self, req: requests.Request) -> Ticket:
        self.ran = True
        ticket = Ticket(req, self)
        if self.in_child:
            self.start()
            if self.served.kept_back is not None and requests.loads_model(req):
                self.served.kept_back.append(ticket)
            else:
                self._send(ticket)
        return ticket

    def _send(self, ticket: Ticket) -> None:
        assert self.child is not None
        self.child.submit(ticket.req)
        self.pending.append(ticket)

    @contextmanager
    def candle_first(self) -> Iterator[None]:
        """Within (a batch's beginning, `portkit.verify.targets`): model requests stay in this
        process until all of its candle runs are done, or until verify waits for one of them. Sent,
        the child would take the turn between two of those runs and keep the next one waiting,
        on a trimmed heap; and the tokenizer requests sent after them would wait behind them,
        though they could be answered while candle runs (the child answers in the order sent)."""
        self.served.kept_back = []
        try:
            yield
        finally:
            self._send_kept_back()

    def _send_kept_back(self) -> None:
        kept, self.served.kept_back = self.served.kept_back, None
        for ticket in kept or []:
            self._send(ticket)

    def wait(self, ticket: Ticket) -> requests.Answer:
        """The ticket's answer: a forward's or an as-candle run's `compute.ReferenceOutputs` (the
        as-candle run's effect by position among its layers, `compute.EFFECT`), a tokenizer's
        record; `compute.ReferenceFailed` for a failure."""
        if not ticket.done:
            if self.in_child:
                if self.served.kept_back and ticket in self.served.kept_back:
                    self._send_kept_back()  # verify waits for it: the child's turn, whatever goes first
                while not ticket.done:
                    self._next()
            else:
                self._in_process(ticket)
        if ticket.error is not None:
            raise ticket.error
        return ticket.value

    def wait_outputs(self, ticket: Ticket) -> compute.ReferenceOutputs:
        """`wait` for a forward's or an as-candle run's ticket, whose answer is always the outputs."""
        out = self.wait(ticket)
        assert isinstance(out, compute.ReferenceOutputs), type(out)
        return out

    @property
    def alternation(self) -> Alternation:
        """candle's runs and transformers' models alternating (`portkit verify A B ...`); in this
        process (PORTKIT_VERIFY_REFERENCE=inprocess) they alternate anyway."""
        return self.served.alternation

    def _next(self) -> None:
        assert self.child is not None and self.pending
        t = self.pending.pop(0)
        self.served.progress = t.owner.progress  # the child's lines until this answer are this request's
        try:
            if isinstance(t.req, requests.TokenizerRequest):
                doc, _ = self.child.answer()
                t.value = doc["record"]
            else:
                t.value = self.child.result()
                t.owner.threads = self.child.threads
        except compute.ReferenceFailed as e:
            t.error = e
            if "no result" in str(e):  # the process is gone: every request after this one fails alike
                for later in self.pending:
                    later.done, later.error = True, e
                self.pending.clear()
        t.done = True

    def _in_process(self, t: Ticket) -> None:
        try:
            t.value = requests.answer(t.req, self.progress)
            if not isinstance(t.req, requests.TokenizerRequest):
                t.owner.threads = child.torch_threads()
        except compute.ReferenceFailed as e:
            t.error = e
        t.done = True

    def next_target(self, progress: Progress) -> ReferenceSession:
        """Another model of the same `portkit verify A B ...`: a session of its own (its plan,
        its progress) on the same process, whose requests wait in line behind the ones sent."""
        return ReferenceSession(progress, start=False, served=self.served)

    def plan(self, candle_threads: int, quantized_threads: int | None = None) -> dict[str, Any]:
        """The run plan, for the report's header: where transformers ran, each side's threads
        (`quantized_threads`: candle's quantized matmuls', with a GGUF)."""
        where = (
            ("a child process, started first" if self.in_child else "this process")
            if self.ran
            else "not run (every answer from the caches)"
        )
        return {
            "transformers": where,
            "threads": {
                "candle": candle_threads,
                **({"candle_quantized": quantized_threads} if quantized_threads else {}),
                "transformers": self.threads,
            },
            "overlap": (
                "none"
                if not (self.in_child and self.ran)
                else "every model's candle runs (as written, then its first counterfactual on the same tensors) while "
                "transformers imports and records their tokenizers; then candle's runs and transformers' models "
                "alternate, one model's weights in memory at a time"
                if self.alternation.on
                else "candle as written, lint, then the first counterfactual (or the GGUF) run while transformers "
                "imports, records the tokenizer and computes"
            ),
        }

    def close(self) -> None:
        """No more requests (the child ends; a request still computing is abandoned)."""
        if self.served.child is not None:
            self.served.child.kill()
            self.served.child = None
        self.pending.clear()
        self.served.kept_back = None
