"""Unit tests of the model's pieces (models/entrylog/manager.py, models/index/ledger_index.py,
models/journal/last_mark.py, models/bookie/bookie.py): each rule on its own, where the refinement
test only sees them together."""

from __future__ import annotations

import pytest

from models.bookie.bookie import BookieModel, Divergence, ModelConfig, ModelUsageError
from models.entrylog.manager import HEADER_BYTES, NO_MAP, EntryLogManagerModel, record_bytes
from models.index.ledger_index import LedgerIndexModel, Sure
from models.journal.last_mark import LastMarkModel
from spec.crash import LoseUnsynced
from spec.operations import (
    OK,
    PENDING,
    Add,
    Completion,
    Crash,
    Delete,
    Fence,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Read,
    Restart,
    Result,
    failed,
)

# --- entry logs ----------------------------------------------------------------------------


def test_a_log_rotates_exactly_when_the_next_record_would_pass_the_limit() -> None:
    limit = HEADER_BYTES + 3 * record_bytes(10)
    logs = EntryLogManagerModel(limit)
    assert [logs.add_entry(1, 10) for _ in range(3)] == [0, 0, 0]  # exactly at the limit
    assert logs.add_entry(1, 0) == 1  # one byte more than fits: a new log
    assert logs.logs[0].state == "rotated" and logs.logs[1].state == "active"
    logs.check_invariants()


def test_least_unflushed_moves_only_past_the_smallest_flushed_logs() -> None:
    logs = EntryLogManagerModel(HEADER_BYTES + record_bytes(0))
    for _ in range(3):
        logs.add_entry(1, 0)  # logs 0, 1, 2: each holds one record
    assert logs.least_unflushed == 0
    logs.checkpoint()  # 0 and 1 are rotated and get flushed; 2 stays active
    assert logs.least_unflushed == 2
    assert [logs.logs[i].state for i in range(3)] == ["flushed", "flushed", "active"]
    logs.check_invariants()


def test_crash_constraints_bound_each_log_between_fsynced_and_written_bytes() -> None:
    logs = EntryLogManagerModel(10_000)
    logs.add_entry(1, 10)
    logs.checkpoint()
    logs.add_entry(1, 5)
    constraints = logs.crash_constraints()
    assert constraints.logs == ((0, ((1, 30),), ((1, 55),)),)
    assert constraints.max_known_id == 0


def test_sealing_gives_a_log_the_map_of_its_records_and_a_checkpoint_makes_it_durable() -> None:
    logs = EntryLogManagerModel(HEADER_BYTES + 2 * record_bytes(10))
    logs.add_entry(1, 10)
    logs.add_entry(2, 10)
    assert logs.logs[0].ledgers_map == NO_MAP  # active: no map
    logs.add_entry(1, 10)  # rotates: log 0 is sealed
    assert logs.logs[0].ledgers_map == (True, ((1, 30), (2, 30)))
    assert logs.logs[1].ledgers_map == NO_MAP
    assert logs.crash_constraints().durable_maps == ()
    logs.checkpoint()
    assert logs.crash_constraints().durable_maps == ((0, (True, ((1, 30), (2, 30)))),)


def test_after_a_crash_a_map_is_exact_if_durable_and_bounded_if_not() -> None:
    logs = EntryLogManagerModel(HEADER_BYTES + 2 * record_bytes(10))
    for ledger in (1, 2, 1):
        logs.add_entry(ledger, 10)  # log 0 sealed with {1: 30, 2: 30}; log 1 active
    logs.checkpoint()  # log 0's map is durable; log 1's 30 bytes of ledger 1 too
    logs.add_entry(2, 10)
    logs.add_entry(2, 10)  # rotates: log 1 sealed with {1: 30, 2: 30}, not fsynced
    constraints = logs.crash_constraints()
    durable = (True, ((1, 30), (2, 30)))
    assert constraints.map_problem(0, durable) is None
    for lost in (NO_MAP, (True, None), (True, ((1, 30),))):
        problem = constraints.map_problem(0, lost)
        assert problem is not None and "was durable" in problem
    # Log 1: missing, unreadable, or at least its fsynced bytes (an add the crash cut short
    # may have written more than the model counted).
    for fine in (NO_MAP, (True, None), durable, (True, ((1, 30),)), (True, ((1, 30), (2, 50)))):
        assert constraints.map_problem(1, fine) is None, fine
    for bad in ((True, ((2, 30),)), (True, ((1, 20), (2, 30)))):
        assert constraints.map_problem(1, bad) is not None, bad
    # A log fsynced whole (nothing written since) but sealed after: exactly its bytes.
    logs.checkpoint()
    logs.logs[1].map_durable = False
    whole = logs.crash_constraints()
    assert whole.map_problem(1, durable) is None
    assert whole.map_problem(1, (True, ((1, 30), (2, 31)))) is not None
    assert constraints.map_problem(7, (True, ((9, 99),))) is None  # a new log: recovery's


# --- ledgers -------------------------------------------------------------------------------


def test_refusals_come_in_the_bookies_order_deleted_then_key_then_fence() -> None:
    ledgers = LedgerIndexModel()
    assert ledgers.send(0, 1, b"k") == {None}
    assert ledgers.admissions(1, b"other", add=True) == {"unauthorized"}
    assert ledgers.admissions(1, b"k", add=True) == {"fenced"}  # the fence is still in flight
    assert ledgers.admissions(1, b"k", add=False) == {None}  # fencing again is fine
    ledgers.delete(1, "ok")
    assert ledgers.admissions(1, b"other", add=True) == {"no_ledger"}
    assert LedgerIndexModel("bookkeeper").admissions(1, b"k", add=True) == {None}


def test_a_crash_leaves_pending_facts_open_and_durable_ones_sure() -> None:
    ledgers = LedgerIndexModel()
    ledgers.send(0, 1, b"k", entry=0, data=b"a")
    assert ledgers.settle(0, 1, None, entry=0)
    ledgers.send(1, 1, b"k", entry=1, data=b"b")
    ledgers.crash()
    entries = ledgers.ledgers[1].entries
    assert {e: (x.data, x.sure) for e, x in entries.items()} == {
        0: (b"a", Sure.DURABLE),
        1: (b"b", Sure.MAYBE),
    }
    assert ledgers.marked_entries(Sure.MAYBE) == [(1, 1)]
    ledgers.observe_read(1, 1, "no_entry")
    assert ledgers.marked_entries(Sure.MAYBE) == []
    ledgers.check_invariants()


def test_a_lost_first_add_takes_the_ledger_and_its_key_with_it() -> None:
    """R-CRASH-KEY: after a crash with a new ledger's only add in flight, the ledger may be
    gone (then another key creates it afresh) or there with its key (then another key is
    unauthorized); what the next answer shows holds."""
    for answer, then in (("unauthorized", {"unauthorized"}), (None, {None})):
        ledgers = LedgerIndexModel(async_acks=True)
        ledgers.send(0, 1, b"k", entry=0, data=b"a")
        ledgers.crash()
        assert ledgers.admissions(1, b"other", add=True) == {"unauthorized", None}
        assert ledgers.read_answers(1, 0) == {"data", "no_entry", "no_ledger"}
        ledgers.send(1, 1, b"other", entry=1, data=b"b")
        assert ledgers.settle(1, 1, answer, entry=1 if answer is None else None)
        assert ledgers.admissions(1, b"other", add=True) == then
        ledgers.check_invariants()


def test_an_entry_seen_after_a_crash_brings_its_key_and_stays() -> None:
    """R-RECOVERY-SHOWN with R-CRASH-KEY: a read that shows a crashed entry makes it durable,
    and the ledger's key with it (the model once kept the key pending: an invariant broke)."""
    ledgers = LedgerIndexModel(async_acks=True)
    ledgers.send(0, 1, b"k", entry=0, data=b"a")
    ledgers.crash()
    ledgers.send(1, 1, b"k", entry=1, data=b"b")
    assert ledgers.read_answers(1, 0) == {"data", "no_entry", "no_ledger"}
    ledgers.observe_read(1, 0, "data")
    assert ledgers.key_durable(1)
    ledgers.check_invariants()
    ledgers.crash()
    assert ledgers.read_answers(1, 0) == {"data"}


def test_an_add_behind_an_unsure_fence_exists_only_where_the_fence_was_lost() -> None:
    """R-ADMIT-ORDER across a crash: a fence in flight at a crash may have survived; an add
    after the restart is refused where it did and admitted where it did not. If that add is
    itself in flight at a second crash, its entry may survive only with the fence lost:
    reading it back resolves the fence as lost, and a later add is admitted."""
    ledgers = LedgerIndexModel(async_acks=True)
    ledgers.send(0, 1, b"k", entry=0, data=b"a")
    assert ledgers.settle(0, 1, None, entry=0)
    ledgers.send(1, 1, b"k")  # the fence, in flight
    ledgers.crash()
    assert ledgers.admissions(1, b"k", add=True) == {"fenced", None}
    ledgers.send(2, 1, b"k", entry=1, data=b"b")
    ledgers.crash()
    assert ledgers.read_answers(1, 1) == {"data", "no_entry"}
    ledgers.observe_read(1, 1, "data")
    assert ledgers.admissions(1, b"k", add=True) == {None}
    ledgers.check_invariants()


# --- lastMark ------------------------------------------------------------------------------


def test_the_mark_rules_flag_each_way_of_moving_wrongly() -> None:
    marks = LastMarkModel()
    assert (
        marks.check(
            "restart",
            last_mark=(1, 0),
            journal_mark=(2, 512),
            strict=False,
            forced=False,
            persisted=True,
        )
        == []
    )
    marks.appended(1)
    stuck = marks.check(
        "journal_force",
        last_mark=(1, 0),
        journal_mark=(2, 512),
        strict=True,
        forced=True,
        persisted=False,
    )
    assert any("stayed" in problem for problem in stuck)
    back = marks.check(
        "checkpoint",
        last_mark=(0, 0),
        journal_mark=(2, 512),
        strict=True,
        forced=False,
        persisted=True,
    )
    assert any("backwards" in problem for problem in back)
    unpersisted = marks.check(
        "read", last_mark=(2, 0), journal_mark=(2, 512), strict=True, forced=False, persisted=False
    )
    assert any("no step since the last look persisted" in problem for problem in unpersisted)
    sparse = marks.check(
        "read", last_mark=(2, 512), journal_mark=(2, 512), strict=True, forced=False, persisted=True
    )
    assert sparse == [], "a checkpoint between two looks may move lastMark"
    marks.stopped(clean=False)
    not_advanced = marks.check(
        "restart",
        last_mark=(1, 0),
        journal_mark=(3, 512),
        strict=False,
        forced=False,
        persisted=True,
    )
    assert any("#2087" in problem for problem in not_advanced)


def test_a_phased_checkpoint_persists_the_mark_its_first_phase_captured() -> None:
    marks = LastMarkModel()
    look = {"strict": True, "forced": False, "persisted": False}
    assert marks.check("restart", last_mark=(1, 0), journal_mark=(1, 512), **look) == []
    marks.capture_mark()
    assert marks.check("checkpoint_flush", last_mark=(1, 0), journal_mark=(1, 512), **look) == []
    marks.appended(1)
    marks.taken()
    assert marks.synced()
    marks.persist_captured()
    moved = {"strict": True, "forced": True, "persisted": True}
    late = marks.check("checkpoint_persist", last_mark=(1, 1024), journal_mark=(1, 1024), **moved)
    assert any("its first phase captured" in problem for problem in late)
    # A force between the capture and the look hides the captured mark: no judgement then.
    marks.capture_mark()
    marks.appended(1)
    marks.forced(1)
    marks.persist_captured()
    assert marks.persisting is None
    marks.check_invariants()


# --- the bookie model ----------------------------------------------------------------------


def _model() -> BookieModel:
    return BookieModel(ModelConfig(log_size_limit_bytes=4096))


def test_an_ack_without_a_journal_force_is_a_divergence() -> None:
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    with pytest.raises(Divergence, match="expected exactly"):
        model.step(1, Read(1, 0), Result(data=b"x"), (Completion(0),))


def test_a_read_of_other_bytes_is_a_divergence() -> None:
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, JournalForce(), OK, (Completion(0),))
    with pytest.raises(Divergence, match="other bytes"):
        model.step(2, Read(1, 0), Result(data=b"y"), ())
    with pytest.raises(Divergence, match="allowed: data"):
        model.step(2, Read(1, 0), failed("no_entry"), ())


def test_crash_outcomes_hold_acknowledged_adds_and_leave_pending_ones_open() -> None:
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, JournalForce(), OK, (Completion(0),))
    model.step(2, Add(1, 1, b"k", b"y"), PENDING, ())
    outcomes = model.crash_outcomes()
    assert outcomes.must_entries == ((1, 0, b"x"),)
    assert outcomes.may_entries == ((1, 1, b"y"),)
    model.step(3, Crash(LoseUnsynced()), OK, ())
    model.step(4, Restart(), OK, ())
    model.step(5, Read(1, 1), failed("no_entry"), ())  # resolved: lost
    with pytest.raises(Divergence):
        model.step(6, Read(1, 1), Result(data=b"y"), ())  # it cannot come back
    model.check_invariants()


def test_a_request_while_the_bookie_is_down_is_a_usage_error() -> None:
    model = _model()
    model.step(0, Crash(LoseUnsynced()), OK, ())
    with pytest.raises(ModelUsageError, match="restart it first"):
        model.step(1, Read(1, 0), failed("no_ledger"), ())


def test_the_ack_phase_acknowledges_exactly_the_synced_group() -> None:
    """In process, adds appended after a group commit's write belong to the next group: an
    ack for one of them at the ack phase is an ack before its fsync."""
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, JournalWrite(), OK, ())
    model.step(2, Add(1, 1, b"k", b"y"), PENDING, ())
    model.step(3, Fence(1, b"k"), PENDING, ())
    with pytest.raises(Divergence, match="expected exactly"):
        model.step(4, JournalSync(), OK, (Completion(0),))  # acks wait for their phase
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, JournalWrite(), OK, ())
    model.step(2, Add(1, 1, b"k", b"y"), PENDING, ())
    model.step(3, JournalSync(), OK, ())
    assert model.synced == {0} and model.written == set()
    with pytest.raises(Divergence, match=r"completed acks \[0, 2\].*expected exactly \[0\]"):
        model.step(4, JournalAck(), OK, (Completion(0), Completion(2)))
    model.step(4, JournalAck(), OK, (Completion(0),))
    assert model.crash_outcomes().must_entries == ((1, 0, b"x"),)
    model.check_invariants()


def test_a_fence_while_the_same_fence_is_in_flight_joins_its_group() -> None:
    model = _model()
    model.step(0, Fence(1, b"k"), PENDING, ())
    model.step(1, JournalWrite(), OK, ())
    model.step(2, Fence(1, b"k"), PENDING, ())  # the same record and ack as step 0's
    assert model.written == {0, 2}
    model.step(3, JournalSync(), OK, ())
    model.step(4, JournalAck(), OK, (Completion(0), Completion(2)))
    assert model.marks.unforced() == 0
    model.check_invariants()


def test_an_add_in_flight_at_its_ledgers_delete_is_refused_never_acknowledged() -> None:
    """Issue 10: an add in flight was answered ok after its ledger's delete was answered ok,
    and its entry was unreadable. The model refuses that ok, and takes no_ledger as the
    answer the delete gives it (no fault needed), in process and under asynchronous acks."""
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, Delete(1), OK, ())
    with pytest.raises(Divergence, match="answered ok after its ledger's delete"):
        model.step(2, JournalForce(), OK, (Completion(0),))
    model = _model()
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, Delete(1), OK, ())
    model.step(2, JournalForce(), OK, (Completion(0, "no_ledger"),))
    model.step(3, Read(1, 0), failed("no_ledger"), ())
    model.check_invariants()
    model = _model()  # another error is still a divergence without a fault
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    model.step(1, Delete(1), OK, ())
    with pytest.raises(Divergence):
        model.step(2, JournalForce(), OK, (Completion(0, "io_error"),))
    model = _model()  # an add of a live ledger answered no_ledger is a divergence
    model.step(0, Add(1, 0, b"k", b"x"), PENDING, ())
    with pytest.raises(Divergence):
        model.step(1, JournalForce(), OK, (Completion(0, "no_ledger"),))
