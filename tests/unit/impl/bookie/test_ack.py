"""impl/bookie/ack.py: an Ack completes once, keeps its first outcome, runs every callback
(what they raise is returned or sent to the sink, never raised on the journal thread), wakes
waiters; PendingAcks keeps every Ack not yet done and stays bounded."""

from __future__ import annotations

import threading

import pytest

from impl.bookie.ack import Ack, PendingAcks
from impl.limits import LIMITS, Limits
from spec.errors import BookieIOError, Fenced, NoLedger


def test_ack_runs_callbacks_once_and_keeps_the_first_outcome() -> None:
    ack = Ack()
    calls: list[object] = []
    ack.add_done_callback(lambda a: calls.append(a.error))
    assert not ack.wait(0)
    assert ack.complete(None) == []
    assert ack.complete(BookieIOError("late")) == []
    assert ack.done and ack.error is None
    ack.add_done_callback(lambda a: calls.append("after"))
    assert calls == [None, "after"]


def test_ack_returns_what_callbacks_raise_and_still_runs_the_others() -> None:
    ack = Ack()
    calls: list[int] = []

    def bad(_: Ack) -> None:
        raise ValueError("callback bug")

    ack.add_done_callback(bad)
    ack.add_done_callback(lambda _: calls.append(1))
    raised = ack.complete(Fenced("x"))
    assert [type(e) for e in raised] == [ValueError]
    assert calls == [1]
    assert isinstance(ack.error, Fenced)


def test_ack_wakes_a_waiting_thread() -> None:
    ack = Ack()
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: woke.append(ack.wait(5)))
    thread.start()
    ack.complete(None)
    thread.join(5)
    assert woke == [True]


def test_settle_sends_what_callbacks_raise_to_the_sink() -> None:
    sunk: list[Exception] = []
    ack = Ack(sunk.extend)

    def bad(_: Ack) -> None:
        raise ValueError("callback bug")

    ack.add_done_callback(bad)
    ack.settle(None)
    assert [type(e) for e in sunk] == [ValueError]
    assert ack.done and ack.error is None


PRUNE_MIN = LIMITS.pending_acks_prune_min


def test_pending_acks_keep_every_ack_not_done_and_stay_bounded() -> None:
    pending = PendingAcks()
    waiting = [Ack() for _ in range(10)]
    for ack in waiting:
        pending.track(ack)
    for _ in range(5 * PRUNE_MIN):
        pending.track(Ack.completed())
        pending.check_invariants()
    assert pending.not_done() == len(waiting)
    taken = pending.take_all()
    assert all(ack in taken for ack in waiting)  # pruning never drops one not done
    assert len(taken) < 2 * PRUNE_MIN  # completed ones were pruned
    assert pending.not_done() == 0 and pending.all_done()


@pytest.mark.parametrize(
    ("prune_min", "kept"), [(2, [1, 0, 1, 1, 1]), (PRUNE_MIN, [1, 2, 3, 4, 5])]
)
def test_pending_acks_prune_at_the_limit_they_were_given(prune_min: int, kept: list[int]) -> None:
    pending = PendingAcks(limits=Limits(pending_acks_prune_min=prune_min))
    waiting = Ack()
    tracked = []
    for ack in (Ack.completed(), Ack.completed(), waiting, Ack.completed(), Ack.completed()):
        pending.track(ack)
        pending.check_invariants()
        tracked.append(len(pending._acks))
    # With 2: pruned whenever the list reaches 2 (twice the one waiting Ack kept).
    assert tracked == kept
    assert pending.not_done() == 1


def test_pending_acks_report_what_is_not_done() -> None:
    pending = PendingAcks()
    first, second = Ack(), Ack()
    pending.track(first)
    pending.track(second)
    assert pending.not_done() == 2 and not pending.all_done()
    first.complete(None)
    assert pending.not_done() == 1
    second.complete(BookieIOError("failed"))
    assert pending.all_done()


def test_pending_acks_invariant_fails_on_an_unpruned_list() -> None:
    pending = PendingAcks()
    pending._acks = [Ack.completed() for _ in range(PRUNE_MIN)]  # bypasses track()
    with pytest.raises(AssertionError):
        pending.check_invariants()


def test_refuse_turns_a_success_to_come_into_the_error_and_answered_follows_the_callbacks() -> None:
    """Bookie.delete_ledger's tools (issue 10): ``refuse`` before completion makes a success
    complete with the error; after completion it changes nothing. ``answered`` and ``wait``
    follow the callbacks, so a delete can wait for an add's answer being written."""
    ack = Ack(ledger_id=3)
    seen: list[bool] = []
    ack.add_done_callback(lambda done: seen.append(done.answered))
    assert ack.refuse(NoLedger("deleted"))
    ack.settle(None)
    assert isinstance(ack.error, NoLedger) and seen == [False] and ack.answered
    assert ack.wait(0)
    done = Ack()
    done.settle(None)
    assert done.answered and not done.refuse(NoLedger("late")) and done.error is None
