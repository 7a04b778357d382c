"""Acknowledgements: what an add or a fence hands back, completed once the journal fsync that
covers its record is done, and the list of Acks not yet done that a failure or a shutdown fails.

Spec pages: spec/format/journal.md ("Group commit and acknowledgement"), spec/adapter.md (the
error an Ack carries becomes the answer's code).

Why a module of its own: an Ack is completed on the journal thread, outside every lock of the
bookie, so it must not depend on the bookie; and it is on the hot path (one per add), so it is a
plain lock and two flags, with the Event a waiter sleeps on made only when someone waits before
completion. PendingAcks is the bookie's record of the Acks it handed out; it has no lock of its
own (the bookie's state lock guards it), and completing an Ack never touches it: completed ones
are pruned in amortised batches when the list grows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from impl.limits import LIMITS, Limits
from spec.errors import BookieError

AckCallback = Callable[["Ack"], None]


class Ack:
    """A thread-safe completion: ``done`` once the operation is durable (``error`` None) or
    has failed (``error`` a BookieError). Completing twice keeps the first outcome. It is
    ``answered`` once its callbacks (which write the client's answer) have run, and ``wait``
    waits for that. ``refuse`` turns a success still to come into an error: an add whose
    ledger was deleted while it was in flight must not be answered ok.

    Cheap on the hot path (one per add): a plain lock and flags; the Event a waiter sleeps
    on is made only when someone waits before completion.
    """

    __slots__ = (
        "_answered",
        "_callbacks",
        "_done",
        "_error",
        "_event",
        "_lock",
        "_refusal",
        "_sink",
        "ledger_id",
    )

    def __init__(
        self, sink: Callable[[list[Exception]], None] | None = None, ledger_id: int | None = None
    ) -> None:
        """``sink`` receives what callbacks raised when the journal completes the Ack
        (``settle``); the bookie keeps it in ``callback_errors``. ``ledger_id``: the ledger of
        an add's Ack (None for others), so that a delete finds the adds in flight."""
        self._lock = threading.Lock()
        self._done = False
        #: Done and every callback has returned (``wait`` waits for this).
        self._answered = False
        self._error: BookieError | None = None
        #: The error a success turns into (``refuse``).
        self._refusal: BookieError | None = None
        self._callbacks: list[AckCallback] | None = None
        self._event: threading.Event | None = None
        self._sink = sink
        self.ledger_id = ledger_id

    @classmethod
    def completed(cls, error: BookieError | None = None) -> Ack:
        """An Ack that is already done."""
        ack = cls()
        ack.complete(error)
        return ack

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> BookieError | None:
        """The failure, or None (also while not done)."""
        return self._error

    @property
    def answered(self) -> bool:
        """Done, and every callback has returned."""
        return self._answered

    def wait(self, timeout: float | None = None) -> bool:
        """Block until done and its callbacks have run (they answer the client), or until
        ``timeout`` seconds pass; return whether that happened."""
        with self._lock:
            if self._answered:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def refuse(self, error: BookieError) -> bool:
        """If not done yet, make it complete with ``error`` even if what it waits for
        succeeds (an add whose ledger was deleted while it was in flight: Bookie.delete_ledger).
        Returns whether it was not done (else its outcome stands)."""
        with self._lock:
            if self._done:
                return False
            self._refusal = error
            return True

    def add_done_callback(self, fn: AckCallback) -> None:
        """Call ``fn(ack)`` when done: at once if already done, else from the completing
        thread. ``fn`` must not raise (what it raises is returned by ``complete``)."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = [fn]
                else:
                    self._callbacks.append(fn)
                return
        fn(self)

    def complete(self, error: BookieError | None) -> list[Exception]:
        """Finish the Ack (first call wins) and run the callbacks. Returns what callbacks
        raised, so the completing thread can record it instead of dying."""
        callbacks = self._finish(error)
        failures: list[Exception] = []
        if callbacks:
            for fn in callbacks:
                try:
                    fn(self)
                except Exception as exc:  # a caller's bug must not kill the journal thread
                    failures.append(exc)
            self._answer()
        return failures

    def settle(self, error: BookieError | None) -> None:
        """``complete`` as the journal's OnDurable (one call per acknowledged add, so kept
        minimal): what callbacks raise goes to the sink, not to the journal thread."""
        callbacks = self._finish(error)
        if not callbacks:
            return
        for fn in callbacks:
            try:
                fn(self)
            except Exception as exc:  # a caller's bug must not kill the journal thread
                if self._sink is not None:
                    self._sink([exc])
        self._answer()

    def _finish(self, error: BookieError | None) -> list[AckCallback] | None:
        """Record the outcome (first call wins); the callbacks to run (None when it was done
        already). ``_answer`` must follow once they ran; with none, it is answered now."""
        with self._lock:
            if self._done:
                return None
            self._error = error if error is not None else self._refusal
            self._done = True
            callbacks = self._callbacks
            self._callbacks = None
            if callbacks:
                return callbacks
            self._answered = True
            event = self._event
        if event is not None:
            event.set()
        return None

    def _answer(self) -> None:
        """Every callback has run: wake the waiters."""
        with self._lock:
            self._answered = True
            event = self._event
        if event is not None:
            event.set()


class PendingAcks:
    """Every Ack the bookie handed out and maybe not yet done, so that a failure or a shutdown
    can fail them. Not thread-safe: the bookie calls it under its state lock. The list is
    pruned of completed Acks when it reaches ``limits.pending_acks_prune_min`` (or twice what
    the last pruning kept): amortised O(1) per add, no lock per completion."""

    __slots__ = ("_acks", "_prune_at", "_prune_min")

    def __init__(self, *, limits: Limits = LIMITS) -> None:
        self._acks: list[Ack] = []
        self._prune_min = limits.pending_acks_prune_min
        self._prune_at = self._prune_min

    def track(self, ack: Ack) -> None:
        """Remember ``ack`` until it is answered (done, callbacks run: a delete waits for an
        add's answer being written, ``adds_of``); answered Acks are dropped in amortised
        batches."""
        acks = self._acks
        acks.append(ack)
        if len(acks) >= self._prune_at:
            kept = [other for other in acks if not other.answered]
            self._acks = kept
            self._prune_at = max(self._prune_min, 2 * len(kept))

    def take_all(self) -> list[Ack]:
        """Forget every Ack tracked (done or not) and return them, to be failed."""
        acks, self._acks = self._acks, []
        self._prune_at = self._prune_min
        return acks

    def adds_of(self, ledger_id: int) -> list[Ack]:
        """The tracked add Acks of ``ledger_id`` not yet answered (O(tracked): for deletes)."""
        return [ack for ack in self._acks if ack.ledger_id == ledger_id and not ack.answered]

    def not_done(self) -> int:
        """How many tracked Acks are not done yet."""
        return sum(1 for ack in self._acks if not ack.done)

    def all_done(self) -> bool:
        return all(ack.done for ack in self._acks)

    def check_invariants(self) -> None:
        assert len(self._acks) < self._prune_at
        assert self._prune_at >= self._prune_min > 0
