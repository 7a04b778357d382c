"""The advisory write close (spec/protocol/write_close.md) through a whole bookie, each step
also judged by the model (proofs/harness/refinement.py): what it answers, that a log per
ledger seals the ledger's log at the next checkpoint (and only then), that a fence does the
same, that adds are still taken after it, that a crash forgets it, that GC then takes the
log once the ledger is deleted, and that the single log changes nothing."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from impl.entrylog.manager import SEALED_WRITE_CLOSED
from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement
from spec.crash import LoseUnsynced
from spec.operations import (
    Add,
    Checkpoint,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Crash,
    Delete,
    Fence,
    Gc,
    GcBegin,
    Operation,
    Read,
    Restart,
    Rotate,
    WriteClose,
)
from spec.state import AbstractState
from spec.trace import Step

#: A log per ledger, large logs (nothing rotates by size), no eviction in these runs.
PER_LEDGER = {
    **SMALL_SETTINGS,
    "entryLogPerLedgerEnabled": "true",
    "maximumNumberOfActiveEntryLogs": "8",
    "logSizeLimit": "1048576",
}
SINGLE = {**SMALL_SETTINGS, "logSizeLimit": "1048576"}


def _run(settings: Mapping[str, str], ops: list[Operation]) -> list[Step]:
    return _run_counting(settings, ops)[0]


def _run_counting(
    settings: Mapping[str, str], ops: list[Operation]
) -> tuple[list[Step], Mapping[str, int]]:
    """The steps, and what the entry-log manager counted (Bookie.entry_log_events)."""
    sut = InProcessBookie(settings)
    harness = Refinement(sut, settings)
    steps = [harness.run(op) for op in ops]
    assert sut.bookie is not None
    return steps, sut.bookie.entry_log_events


def _logs(state: AbstractState | None) -> dict[int, tuple[str, tuple[int, ...]]]:
    """Log id -> (state, the ledgers it holds)."""
    assert state is not None
    return {
        view.log_id: (view.state, tuple(ledger for ledger, _ in view.ledger_bytes))
        for view in state.entry_logs
    }


def _state_of_ledger_logs(state: AbstractState | None, ledger: int) -> set[str]:
    return {kind for kind, ledgers in _logs(state).values() if ledger in ledgers}


def test_the_answers_no_ledger_unauthorized_and_ok() -> None:
    steps = _run(
        PER_LEDGER,
        [
            WriteClose(1, b"k1"),  # never written
            Add(1, 0, b"k1", b"a"),
            WriteClose(1, b"other"),
            WriteClose(1, b"k1"),
            Delete(1),
            WriteClose(1, b"k1"),  # deleted
        ],
    )
    answers = [step.result.error for step in steps]
    assert answers == ["no_ledger", None, "unauthorized", None, None, "no_ledger"]


def test_a_log_per_ledger_seals_the_write_closed_ledger_s_log_at_the_next_checkpoint() -> None:
    steps, events = _run_counting(
        PER_LEDGER,
        [
            Add(1, 0, b"k1", b"a"),
            Add(2, 0, b"k2", b"b"),
            WriteClose(1, b"k1"),
            Add(1, 1, b"k1", b"c"),  # a hint, not a fence: still taken, in the same log
            Checkpoint(),
            Add(1, 2, b"k1", b"d"),  # after the checkpoint: a new log
            Read(1, 1),
        ],
    )
    wrote_closed, added, checkpoint, again, read = steps[2:]
    assert wrote_closed.result.ok
    assert _state_of_ledger_logs(wrote_closed.state, 1) == {"active"}, "sealed before a checkpoint"
    assert added.result.error is None
    assert _state_of_ledger_logs(checkpoint.state, 1) == {"flushed"}
    assert _state_of_ledger_logs(checkpoint.state, 2) == {"active"}, "only the closed one"
    assert _state_of_ledger_logs(again.state, 1) == {"flushed", "active"}
    assert read.result.data == b"c"
    assert events == {SEALED_WRITE_CLOSED: 1}


def test_a_fence_write_closes_its_ledger() -> None:
    steps = _run(
        PER_LEDGER,
        [Add(1, 0, b"k1", b"a"), Add(2, 0, b"k2", b"b"), Fence(2, b"k2"), Checkpoint()],
    )
    assert _state_of_ledger_logs(steps[-1].state, 2) == {"flushed"}
    assert _state_of_ledger_logs(steps[-1].state, 1) == {"active"}


def test_a_crash_forgets_the_write_close_and_loses_nothing() -> None:
    steps = _run(
        PER_LEDGER,
        [
            Add(1, 0, b"k1", b"a"),
            Checkpoint(),
            WriteClose(1, b"k1"),
            Crash(LoseUnsynced()),
            Restart(),
            Add(1, 1, b"k1", b"b"),
            Checkpoint(),
            Read(1, 0),
        ],
    )
    # The restarted bookie's new log for ledger 1 stays active through the checkpoint: the
    # write close of the run before is gone with it.
    assert _state_of_ledger_logs(steps[-2].state, 1) >= {"active"}
    assert steps[-1].result.data == b"a"


def test_after_a_write_close_and_a_checkpoint_gc_takes_the_deleted_ledger_s_log() -> None:
    """The forward progress BP-32 is for: ledger 1's log is flushed by the checkpoint after
    its write close, so the GC after its delete removes it while ledger 2's log, older and
    still active, holds leastUnflushedLogId down."""
    steps = _run(
        PER_LEDGER,
        [
            Add(2, 0, b"k2", b"b"),  # log 0, stays active
            Add(1, 0, b"k1", b"a"),  # log 1
            WriteClose(1, b"k1"),
            Checkpoint(),
            Delete(1),
            Gc(False),
        ],
    )
    before, gc = steps[3], steps[-1]
    assert _logs(before.state)[1] == ("flushed", (1,))
    assert gc.result.gc is not None and gc.result.gc.logs_deleted == 1
    assert 1 not in _logs(gc.state)
    assert _logs(gc.state)[0] == ("active", (2,))


#: Two slots (one per ledger directory), room for every ledger in the map.
SLOTS = {
    **SMALL_SETTINGS,
    "entryLogSlotsPerLedgerDir": "1",
    "maximumNumberOfActiveEntryLogs": "8",
    "logSizeLimit": "1048576",
}


def test_slots_seal_a_shared_log_once_every_ledger_in_it_is_write_closed() -> None:
    steps, events = _run_counting(
        SLOTS,
        [
            Add(1, 0, b"k1", b"a"),  # slot 0
            Add(2, 0, b"k2", b"b"),  # slot 1
            Add(3, 0, b"k3", b"c"),  # slot 0, beside ledger 1
            WriteClose(1, b"k1"),
            Checkpoint(),
            WriteClose(3, b"k3"),
            Checkpoint(),
        ],
    )
    first, second = steps[4], steps[6]
    assert _state_of_ledger_logs(first.state, 1) == {"active"}, "ledger 3 still writes there"
    assert _state_of_ledger_logs(second.state, 1) == {"flushed"}
    assert _state_of_ledger_logs(second.state, 3) == {"flushed"}
    assert _state_of_ledger_logs(second.state, 2) == {"active"}
    assert events == {SEALED_WRITE_CLOSED: 1}, "one slot's log, sealed once"


def test_a_compaction_s_index_phase_does_not_seal_a_write_closed_log() -> None:
    """Phase 3 forces the entry logs as a checkpoint's first half does, but only a
    checkpoint seals the write-closed ledgers' logs: a GC step changes no log but its own
    (found by the slots campaign, seed 1, scenarios 29 and 152)."""
    steps = _run(
        SLOTS,
        [
            Add(1, 0, b"k1", b"a" * 100),  # slot 0
            Add(2, 0, b"k2", b"b" * 100),  # slot 1
            Add(3, 0, b"k3", b"c" * 100),  # slot 0, beside ledger 1
            Rotate(),
            Checkpoint(),  # logs 0 (ledgers 1, 3) and 1 (ledger 2) flushed
            Add(2, 1, b"k2", b"d"),  # slot 1's new log
            Delete(1),
            WriteClose(2, b"k2"),
            GcBegin(True),
            CompactCopy(),
            CompactFlush(),
            CompactIndex(),
            Checkpoint(),
        ],
    )
    index, checkpoint = steps[-2], steps[-1]
    assert index.result.phase is not None and index.result.phase.new_log is not None
    assert "active" in _state_of_ledger_logs(index.state, 2)
    assert _state_of_ledger_logs(checkpoint.state, 2) == {"flushed"}


def test_the_single_log_answers_and_seals_nothing() -> None:
    steps = _run(
        SINGLE,
        [Add(1, 0, b"k1", b"a"), Add(2, 0, b"k2", b"b"), WriteClose(1, b"k1"), Checkpoint()],
    )
    assert steps[2].result.ok
    assert [kind for kind, _ in _logs(steps[-1].state).values()].count("active") == 1


@pytest.mark.parametrize("ledger", [-1, 2**63])
def test_ids_out_of_range_are_refused(ledger: int) -> None:
    with pytest.raises(ValueError):
        WriteClose(ledger, b"k")
