"""The bookie crash check: a scripted workload of spec.operations steps, crashed before every
file-system operation under every plan of proofs/crash/plans.py, each crash state a trace
judged by the model and the PropertyMonitor. The same slice fails on the known-bad variants
in tests/quality/test_bookie_crash_catches.py."""

from __future__ import annotations

import pytest

from impl.journal.last_mark import LogMark, write_last_mark
from proofs.crash import bookie_check
from proofs.crash.bookie_check import (
    FENCE_PROBE_ENTRY,
    KEY,
    WRONG_KEY,
    WRONG_KEY_PROBE_ENTRY,
    check_persisted_mark,
    crash_settings,
    probes_after_restart,
    record,
    run_bookie_check,
    workload,
)
from proofs.harness.refinement import LEDGER_DIRS, InProcessBookie, Refinement, RefinementFailure
from spec.crash import LoseUnsynced
from spec.operations import (
    Add,
    AdvanceClock,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    Crash,
    Fence,
    JournalForce,
    JournalSync,
    JournalWrite,
    Restart,
    Rotate,
    Shutdown,
)


def test_every_crash_state_of_the_ci_slice_keeps_the_properties() -> None:
    report = run_bookie_check(seed=1, adds=24)
    assert [f.message for f in report.failures] == []
    # Not vacuous: every operation is a crash point, with many states, many recovered, and
    # many steps judged after the crashes (read-backs, fence and auth probes).
    assert report.crash_points > 150
    assert report.crash_states > 5000
    assert report.recovered_states > 2000
    assert report.checked_items > 40_000
    report.check_invariants()


def test_the_workload_has_every_kind_of_step() -> None:
    ops = workload(seed=1, adds=24)
    names = {op.name for op in ops}
    phases = {"journal_write", "journal_sync", "journal_ack"}
    phases |= {"checkpoint_flush", "checkpoint_persist"}
    assert names == {
        "add",
        "fence",
        "write_close",
        "advance_clock",
        "journal_force",
        "checkpoint",
        "rotate",
        "shutdown",
        *phases,
    }
    assert Fence(3, KEY) in ops
    assert Fence(1, WRONG_KEY) in ops
    assert any(isinstance(op, Add) and op.key == WRONG_KEY for op in ops)
    assert ops[-2:] == [JournalForce(), Shutdown()]
    # The clock moves on the access expiry once, with no rotation right after it (which would
    # have sealed every log and left the expiry nothing to let go).
    (moved,) = [i for i, op in enumerate(ops) if op.name == "advance_clock"]
    assert ops[moved] == AdvanceClock(300) and ops[moved + 1].name == "add"
    assert sum(isinstance(op, Rotate) for op in ops) == 3
    assert sum(isinstance(op, Checkpoint) for op in ops) == 1
    assert sum(isinstance(op, CheckpointFlush) for op in ops) == 2
    assert sum(isinstance(op, CheckpointPersist) for op in ops) == 2
    # Requests run between the phases: an add between a group's write and its sync, and
    # between a checkpoint's flush and its persist.
    write = ops.index(JournalWrite())
    assert isinstance(ops[write + 1], Add) and ops[write + 2] == JournalSync()
    flush = ops.index(CheckpointFlush())
    assert any(isinstance(op, Add) for op in ops[flush : ops.index(CheckpointPersist())])


def test_the_workload_acknowledges_fences_and_checkpoints() -> None:
    settings = crash_settings()
    harness = Refinement(InProcessBookie(settings, seed=1), settings)
    steps = [harness.run(op) for op in workload(seed=1, adds=24)]
    by_index = {step.index: step for step in steps}
    acked = [by_index[done.step].op for step in steps for done in step.completed if not done.error]
    assert Fence(3, KEY) in acked
    assert sum(isinstance(op, Add) for op in acked) == 24
    refused = [step.result.error for step in steps if step.op in (Fence(1, WRONG_KEY),)]
    assert refused == ["unauthorized"]
    checkpoints = [step for step in steps if isinstance(step.op, Checkpoint | CheckpointPersist)]
    assert all(step.state is not None and step.state.last_mark[0] > 0 for step in checkpoints)


def test_the_recording_has_crash_sites_in_the_start_and_in_the_steps() -> None:
    ops = workload(seed=1, adds=24)
    recording = record(ops, crash_settings(), seed=1)
    assert recording.failure is None
    assert recording.steps_passed == len(ops)
    sites = recording.sites
    assert [site.op_index for site in sites] == list(range(len(sites)))
    start = [site for site in sites if site.step is None]
    assert len(start) == len(recording.start_images) > 10
    assert {"fsync", "fsync_dir", "rename", "pwrite"} <= {site.op_kind for site in sites}
    checkpoint = next(i for i, op in enumerate(ops) if isinstance(op, Checkpoint))
    assert any(site.step == checkpoint for site in sites)
    assert "step" in sites[-1].describe(ops) and "shutdown" in sites[-1].describe(ops)


def test_probes_follow_what_the_trace_acknowledged() -> None:
    settings = crash_settings()
    harness = Refinement(InProcessBookie(settings, seed=1), settings)
    assert probes_after_restart(harness.trace()) == []
    for op in (Add(2, 0, KEY, b"a"), Fence(3, KEY), Add(1, 0, KEY, b"b")):
        harness.run(op)
    # Nothing acknowledged yet: no probe.
    assert probes_after_restart(harness.trace()) == []
    harness.run(JournalForce())
    assert probes_after_restart(harness.trace()) == [
        Add(3, FENCE_PROBE_ENTRY, KEY, b"after fence"),
        Add(1, WRONG_KEY_PROBE_ENTRY, WRONG_KEY, b"x"),
        Fence(1, WRONG_KEY),
        Add(2, WRONG_KEY_PROBE_ENTRY, WRONG_KEY, b"x"),
        Fence(2, WRONG_KEY),
        Add(3, WRONG_KEY_PROBE_ENTRY, WRONG_KEY, b"x"),
        Fence(3, WRONG_KEY),
    ]


def test_the_persisted_mark_check_fails_when_the_disk_disagrees_with_the_state() -> None:
    settings = crash_settings()
    sut = InProcessBookie(settings, seed=1)
    harness = Refinement(sut, settings)
    for op in (Add(1, 0, KEY, b"a"), JournalForce(), Checkpoint(), Crash(LoseUnsynced())):
        harness.run(op)
    restart = harness.run(Restart())
    check_persisted_mark(harness, sut, restart)  # the unchanged bookie agrees with its disk
    assert restart.state is not None
    journal_id, offset = restart.state.last_mark
    later = LogMark(journal_id, offset + 512)
    write_last_mark(sut.disk, [f"{d}/current" for d in LEDGER_DIRS], later)
    with pytest.raises(RefinementFailure, match="the lastMark persisted on disk is"):
        check_persisted_mark(harness, sut, restart)


def test_max_points_bounds_the_run() -> None:
    report = run_bookie_check(seed=2, adds=6, max_points=10)
    assert report.crash_points == 10
    assert report.failures == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 6))
def test_deeper_workloads(seed: int) -> None:
    report = run_bookie_check(seed=seed, adds=60)
    assert [f.message for f in report.failures] == []


def test_without_pickling_the_prefix_runs_again_with_the_same_verdicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fallback for a harness that pickle cannot take: slower, same states, same
    verdicts."""
    pickled = run_bookie_check(seed=3, adds=6)

    refused: list[object] = []

    def refuse(*args: object) -> bytes:
        refused.append(args)
        raise TypeError("cannot pickle '_thread.lock' object")

    monkeypatch.setattr(bookie_check, "snapshot_harness", refuse)
    rebuilt = run_bookie_check(seed=3, adds=6)
    assert len(refused) == rebuilt.crash_points
    assert pickled.failures == rebuilt.failures == []
    assert (rebuilt.crash_points, rebuilt.crash_states, rebuilt.recovered_states) == (
        pickled.crash_points,
        pickled.crash_states,
        pickled.recovered_states,
    )
    assert rebuilt.checked_items == pickled.checked_items > 1000


# --- an entry log per ledger (--manager per-ledger) ----------------------------------------


def test_a_per_ledger_bookie_keeps_two_logs_active_and_evicts_inside_the_workload() -> None:
    settings = crash_settings("per-ledger")
    assert settings["entryLogPerLedgerEnabled"] == "true"
    assert settings["maximumNumberOfActiveEntryLogs"] == "2"
    assert "entryLogPerLedgerEnabled" not in crash_settings()
    harness = Refinement(InProcessBookie(settings, seed=1), settings)
    most = evicted = 0
    before: dict[int, tuple[int, ...]] = {}
    for op in workload(seed=1, adds=24):
        state = harness.run(op).state
        if state is None:
            continue
        active = {view.log_id: view.ledgers for view in state.entry_logs if view.state == "active"}
        assert all(len(ledgers) <= 1 for ledgers in active.values())  # one ledger per log
        most = max(most, len(active))
        if isinstance(op, Add):
            # Another ledger's log left the active ones at this add: evicted for room.
            evicted += sum(
                op.ledger not in ledgers and log_id not in active
                for log_id, ledgers in before.items()
            )
        before = active
    assert most == 2
    assert evicted >= 5


def test_a_small_per_ledger_crash_run_keeps_the_properties() -> None:
    # Every third of its 155 crash points, to stay within a few seconds.
    report = run_bookie_check(seed=3, adds=6, manager="per-ledger", max_points=60)
    assert [f.message for f in report.failures] == []
    assert report.crash_points > 50
    assert report.recovered_states > 300
    assert report.checked_items > 3000
    report.check_invariants()
