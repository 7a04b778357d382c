"""A compaction of an entry log whose ledgers map claims records a crash lost
(spec/protocol/compaction.md, "A map that claims records a crash lost"; spec/adapter.md
R-COMPACTION and R-LOG-CRASH).

A log sealed (its map appended, its header pointed at it) but never fsynced may come back
from a crash with its map and header and without some of its records: the bookie reports the
map's bytes per ledger, and a compaction scans the records the file really holds. The model
gives such a log a *surely held* lower bound per ledger (what was fsynced before the crash)
and accepts any copy between the sure live bytes and the claimed ones, no new log when it is
empty. These tests build the class of histories on bkref's own bookie (every subset of the
log's unsynced writes, and the prefix and torn-write plans), and check that the model still
refuses a copy of more than the claimed live bytes or one that loses surely held bytes.
"""

from __future__ import annotations

import itertools

import attrs
import pytest

from proofs.harness.refinement import InProcessBookie, Refinement, RefinementFailure
from proofs.harness.replay import replay_trace
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, TornWrite
from spec.operations import (
    Add,
    Checkpoint,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Crash,
    Delete,
    GcBegin,
    JournalForce,
    Operation,
    PhaseReport,
    Restart,
    Result,
    Rotate,
)
from spec.state import LogView
from spec.trace import Step, Trace

#: The refinement test's settings of the trace this class was found by (a 1400-byte log
#: limit, two ledger directories, preallocation on).
SETTINGS = {
    "diskUsageLwmThreshold": "0.5",
    "diskUsageThreshold": "0.5",
    "diskUsageWarnThreshold": "0.5",
    "entryLogFilePreallocationEnabled": "true",
    "flushEntrylogBytes": "0",
    "journalDirectories": "/journal",
    "journalMaxBackups": "0",
    "journalMaxGroupWaitMSec": "0",
    "ledgerDirectories": "/ledgers0,/ledgers1",
    "logSizeLimit": "1400",
    "majorCompactionInterval": "86400",
    "majorCompactionThreshold": "0.8",
    "minorCompactionThreshold": "0.2",
    "writeBufferSizeBytes": "64",
}
K1, K2 = b"key-1", b"key-2"
DATA = b"A" * 40

#: Before the crash: with ``sure``, a record of ledger 2 fsynced by a checkpoint first (the
#: log's sure part), then records of ledgers 1 and 2 written and the log sealed, unsynced.
BEFORE: dict[bool, list[Operation]] = {
    True: [Add(2, 0, K2, DATA), Checkpoint(), Add(1, 0, K1, DATA), Add(2, 1, K2, DATA), Rotate()],
    False: [Add(1, 0, K1, DATA), Add(2, 0, K2, DATA), Rotate()],
}
#: After the restart: both ledgers written again (ledger 2 lives on, enough to make the
#: new log a candidate after log 0), ledger 1 deleted, a forced cycle compacting log 0 and
#: then the new log through their three phases, then the next cycle once ledger 2 is deleted.
AFTER: list[Operation] = [
    Add(1, 5, K1, b""),
    Add(2, 5, K2, DATA),
    JournalForce(),
    Rotate(),
    Checkpoint(),
    Delete(1),
    GcBegin(force=True),
    *(CompactCopy(), CompactFlush(), CompactIndex()) * 2,
    CompactCopy(),
    Delete(2),
    GcBegin(force=True),
    CompactCopy(),
]


def _start(sure: bool) -> tuple[Refinement, InProcessBookie]:
    sut = InProcessBookie(SETTINGS)
    run = Refinement(sut, SETTINGS)
    for op in BEFORE[sure]:
        run.run(op)
    return run, sut


def _log0_writes(sut: InProcessBookie) -> list[int]:
    """The indices of the unsynced writes to entry log 0 (records, map, header)."""
    return [
        i
        for i, op in enumerate(sut.disk.pending_operations())
        if op.kind == "write" and op.path.endswith("/0.log")
    ]


def _history(sure: bool, plan: CrashPlan) -> tuple[Trace, list[PhaseReport]]:
    """The history on bkref's bookie, judged step by step (a RefinementFailure if not)."""
    run, _ = _start(sure)
    run.run(Crash(plan))
    run.run(Restart())
    copies = []
    for op in AFTER:
        step = run.run(op)
        if isinstance(op, CompactCopy) and step.result.phase is not None:
            copies.append(step.result.phase)
    return run.trace(), copies


def _plans(sure: bool) -> list[CrashPlan]:
    """Every subset of log 0's unsynced writes (the other unsynced operations kept), and
    every prefix and torn write of them all."""
    _, sut = _start(sure)
    pending = len(sut.disk.pending_operations())
    writes = _log0_writes(sut)
    others = set(range(pending)) - set(writes)
    plans: list[CrashPlan] = []
    for size in range(len(writes) + 1):
        for kept in itertools.combinations(writes, size):
            plans.append(KeepSubset(others | set(kept)))
    plans += [KeepPrefix(n) for n in range(pending + 1)]
    plans += [TornWrite(n, 1) for n in range(pending)]
    return plans


@pytest.mark.parametrize("sure", [True, False], ids=["part-sure", "none-sure"])
def test_every_crash_of_a_sealed_unsynced_log_is_judged(sure: bool) -> None:
    empty = fewer = 0
    for plan in _plans(sure):
        try:
            _, copies = _history(sure, plan)
        except RefinementFailure as exc:  # pragma: no cover - the failure is the message
            pytest.fail(f"{plan.describe()}: {exc}")
        for copy in copies:
            if copy.source_log == 0:  # (a crash that lost the map: the scan's bytes)
                empty += copy.new_log is None
                fewer += copy.new_log is not None and copy.entries_moved < (2 if sure else 1)
    # The class is reached: copies of nothing (none-sure) and of fewer records than the map
    # claims (part-sure).
    assert (fewer if sure else empty) > 0, (empty, fewer)


def _unsure_trace() -> Trace:
    """Log 0 claims 120 bytes of ledger 2 (and 60 of ledger 1); only ledger 2's first record
    (60 bytes, fsynced by a checkpoint) surely survives, and the crash kept the map and the
    header but neither unsynced record."""
    _, sut = _start(True)
    pending = len(sut.disk.pending_operations())
    writes = _log0_writes(sut)
    map_and_header = set(writes[-2:])
    plan = KeepSubset((set(range(pending)) - set(writes)) | map_and_header)
    trace, copies = _history(True, plan)
    assert copies[0] == PhaseReport("copy", 0, copies[0].new_log, 1), copies
    return trace


def _index_of(trace: Trace, name: str) -> int:
    return next(step.index for step in trace.steps if step.op.name == name)


def _replaced(trace: Trace, step: Step) -> Trace:
    """The trace up to the step after ``step``, with ``step`` in place of its own."""
    steps = list(trace.steps)
    steps[step.index] = step
    return Trace(trace.header, tuple(steps[: step.index + 2]))


def test_the_class_trace_is_judged() -> None:
    verdict = replay_trace(_unsure_trace())
    assert verdict.ok, verdict.failure


def test_a_copy_that_loses_surely_held_bytes_is_refused() -> None:
    trace = _unsure_trace()
    copy = _index_of(trace, "compact_copy")
    nothing = Result(phase=PhaseReport("copy", 0, None, 0))
    verdict = replay_trace(_replaced(trace, attrs.evolve(trace.steps[copy], result=nothing)))
    assert not verdict.ok and verdict.failure is not None
    assert verdict.failure.step == copy


def test_a_copy_of_more_entries_than_the_claimed_bytes_is_refused() -> None:
    trace = _unsure_trace()
    copy = _index_of(trace, "compact_copy")
    report = trace.steps[copy].result.phase
    assert report is not None
    # 13 records of at least 20 bytes: more than the 120 live bytes claimed and the 120
    # bytes that may hold garbage records
    many = Result(phase=attrs.evolve(report, entries_moved=13))
    verdict = replay_trace(_replaced(trace, attrs.evolve(trace.steps[copy], result=many)))
    assert not verdict.ok and verdict.failure is not None
    assert verdict.failure.step == copy


@pytest.mark.parametrize(
    "ledger_bytes", [((2, 180),), ((2, 40),), ((1, 60), (2, 60)), ((0, 140), (2, 60))]
)
def test_a_new_log_outside_the_bounds_is_refused(ledger_bytes: tuple[tuple[int, int], ...]) -> None:
    """More than the claimed live bytes, fewer than the surely held ones, a ledger that is
    not live, or more garbage records (of a ledger never written) than the lost part could
    hold: the state after phase 3 is refused."""
    trace = _unsure_trace()
    index = _index_of(trace, "compact_index")
    step = trace.steps[index]
    report = trace.steps[_index_of(trace, "compact_copy")].result.phase
    assert step.state is not None and report is not None and report.new_log is not None
    logs = tuple(
        LogView(v.log_id, v.state, ledger_bytes) if v.log_id == report.new_log else v
        for v in step.state.entry_logs
    )
    verdict = replay_trace(
        _replaced(trace, attrs.evolve(step, state=attrs.evolve(step.state, entry_logs=logs)))
    )
    assert not verdict.ok and verdict.failure is not None
    assert verdict.failure.step == index and "R-COMPACTION" in verdict.failure.message
