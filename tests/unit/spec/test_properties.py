"""The properties of spec/properties.md as predicates (spec/properties.py).

For each property a small history that keeps it and one that breaks it (exactly the expected
violations: property and step), plus the edge cases of the definitions: a read may fail with
io_error while a fault is active; requests while the bookie is down are not judged; an add
issued before a fence's ack may be acknowledged after it; a delete that crashed stops the
durability check; the first acknowledged key is the ledger's key. Then, over generated
histories: check_history equals feeding a monitor step by step, and the violations of a
prefix are the violations of the whole history up to it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.crash import LoseUnsynced
from spec.operations import (
    CRASHED,
    OK,
    PENDING,
    Add,
    Checkpoint,
    Completion,
    Crash,
    Delete,
    DiskWritable,
    FailFsync,
    FailRead,
    Fence,
    FiredFault,
    JournalForce,
    Operation,
    Read,
    Restart,
    Result,
    Shutdown,
    failed,
)
from spec.properties import PROPERTIES, PropertyMonitor, Violation, check_history
from spec.state import AbstractState, Mark
from spec.trace import Step
from tests.unit.spec.test_trace import histories, operations

K = b"\x01key"
OTHER = b"\x02other"
CRASH = Crash(LoseUnsynced())

Spec = tuple[Operation, Result] | tuple[Operation, Result, Sequence[int | Completion]]


def history(*specs: Spec, states: dict[int, AbstractState] | None = None) -> list[Step]:
    """Steps numbered in order; completions given as step numbers (success) or Completions."""
    steps = []
    for index, spec in enumerate(specs):
        done = spec[2] if len(spec) == 3 else ()
        completed = tuple(c if isinstance(c, Completion) else Completion(c) for c in done)
        state = (states or {}).get(index)
        steps.append(Step(index, spec[0], spec[1], completed, state))
    return steps


def found(steps: list[Step]) -> list[tuple[str, int]]:
    violations = check_history(steps)
    assert all(v.message for v in violations)
    return [(v.prop, v.step) for v in violations]


def read_ok(data: bytes) -> Result:
    return Result(data=data)


RESTART = (Restart(), OK)

# --- 1. durability ---------------------------------------------------------------------------


def test_durability_kept_by_an_acknowledged_add_read_back() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), PENDING),
        (JournalForce(), OK, [0]),
        (Read(1, 0), read_ok(b"a")),
        (CRASH, OK),
        RESTART,
        (Read(1, 0), read_ok(b"a")),
    )
    assert found(steps) == []


def test_durability_broken_by_other_bytes_or_a_lost_entry() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Read(1, 0), read_ok(b"b")),
        (CRASH, OK),
        RESTART,
        (Read(1, 0), failed("no_entry")),
    )
    assert found(steps) == [("durability", 1), ("durability", 4)]


def test_durability_judges_a_read_only_after_the_ack() -> None:
    # The read in step 1 ran while the ack arrived: it may or may not see the add.
    steps = history(
        (Add(1, 0, K, b"a"), PENDING),
        (Read(1, 0), failed("no_entry"), [0]),
        (Read(1, 0), failed("no_entry")),
    )
    assert found(steps) == [("durability", 2)]


def test_durability_allows_io_error_reads_from_the_step_a_fault_fires_in() -> None:
    for fault in (FiredFault("fsync", "journal"), FiredFault("no_space", "entry_log")):
        steps = history(
            (Add(1, 0, K, b"a"), OK),
            (FailFsync(), OK),
            (Read(1, 0), failed("io_error")),  # armed, not fired: no excuse yet
            (Checkpoint(), failed("io_error")),
            (Read(1, 0), failed("io_error")),
            (DiskWritable(), OK),
            (Read(1, 0), failed("io_error")),
            (CRASH, OK),
            RESTART,
            (Read(1, 0), failed("io_error")),
        )
        steps[3] = attrs.evolve(steps[3], faults=(fault,))
        # Before it fired, and after the restart that ended it.
        assert found(steps) == [("durability", 2), ("durability", 9)], fault
    no_fault = history((Add(1, 0, K, b"a"), OK), (Read(1, 0), failed("io_error")))
    assert found(no_fault) == [("durability", 1)]
    other_error = history(
        (Add(1, 0, K, b"a"), OK),
        (Checkpoint(), failed("io_error")),
        (Read(1, 0), failed("no_entry")),
    )
    other_error[1] = attrs.evolve(other_error[1], faults=(FiredFault("fsync", "index"),))
    assert found(other_error) == [("durability", 2)]


def test_a_read_fault_excuses_the_read_it_fires_in_only() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (FailRead("entry_log"), OK),
        (Read(1, 0), failed("io_error")),
        (Read(1, 0), failed("io_error")),
    )
    steps[2] = attrs.evolve(steps[2], faults=(FiredFault("read", "entry_log"),))
    assert found(steps) == [("durability", 3)]


def test_durability_does_not_judge_reads_while_the_bookie_is_down() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (CRASH, OK),
        (Read(1, 0), failed("io_error")),
        (Restart(), failed("io_error")),  # a failed restart leaves it down
        (Read(1, 0), failed("no_entry")),
        RESTART,
        (Read(1, 0), failed("no_entry")),
    )
    assert found(steps) == [("durability", 6)]
    after_shutdown = history(
        (Add(1, 0, K, b"a"), OK), (Shutdown(), OK), (Read(1, 0), failed("io_error"))
    )
    assert found(after_shutdown) == []


def test_durability_stops_at_a_delete_whatever_its_result() -> None:
    for delete_result in (CRASHED, OK, failed("io_error")):
        steps = history(
            (Add(1, 0, K, b"a"), OK),
            (Delete(1), delete_result),
            (CRASH, OK),
            RESTART,
            (Read(1, 0), failed("no_ledger")),
            (Read(1, 0), read_ok(b"a")),
        )
        violations = found(steps)
        assert ("durability", 4) not in violations, delete_result
        # An ok delete makes the later ok read a resurrection, not a durability break.
        assert violations == ([("resurrection", 5)] if delete_result == OK else []), delete_result


def test_durability_does_not_hold_unacknowledged_adds() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), PENDING),
        (Add(1, 1, K, b"b"), failed("io_error")),
        (CRASH, OK),
        RESTART,
        (Read(1, 0), failed("no_entry")),
        (Read(1, 1), failed("no_entry")),
        (Read(1, 2), read_ok(b"never added")),  # not this property's business
    )
    assert found(steps) == []


def test_durability_accepts_any_acknowledged_data_and_later_overwrites() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Add(1, 0, K, b"b"), PENDING),
        (Read(1, 0), read_ok(b"b")),  # a later overwrite, not yet acknowledged
        (JournalForce(), OK, [1]),
        (Read(1, 0), read_ok(b"a")),
        (Read(1, 0), read_ok(b"b")),
        (Add(1, 0, K, b"c"), failed("fenced")),  # wrote nothing
        (Read(1, 0), read_ok(b"c")),
    )
    assert found(steps) == [("durability", 7)]


def test_durability_refuses_an_older_unacknowledged_add() -> None:
    steps = history(
        (Add(1, 0, K, b"old"), PENDING),
        (Add(1, 0, K, b"new"), OK),
        (Read(1, 0), read_ok(b"old")),
    )
    assert found(steps) == [("durability", 2)]


def test_durability_ignores_a_read_interrupted_by_a_crash() -> None:
    steps = history((Add(1, 0, K, b"a"), OK), (Read(1, 0), CRASHED), (CRASH, OK))
    assert found(steps) == []


# --- 2. fence durability ---------------------------------------------------------------------


def test_fence_kept_when_later_adds_are_refused() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Fence(1, K), PENDING),
        (JournalForce(), OK, [1]),
        (Add(1, 1, K, b"b"), failed("fenced")),
        (CRASH, OK),
        RESTART,
        (Add(1, 1, K, b"b"), failed("fenced")),
    )
    assert found(steps) == []


def test_fence_allows_an_add_issued_before_the_fences_ack() -> None:
    steps = history(
        (Fence(1, K), PENDING),
        (Add(1, 0, K, b"a"), PENDING),  # issued after the fence, before its ack (step 2)
        (JournalForce(), OK, [0, 1]),
        (Add(2, 0, K, b"b"), PENDING),
        (Fence(2, K), OK),
        (JournalForce(), OK, [3]),  # issued at 3, before the fence's ack at 4
    )
    assert found(steps) == []


def test_fence_broken_by_an_add_acknowledged_after_the_fence() -> None:
    direct = history((Fence(1, K), OK), (Add(1, 0, K, b"a"), OK))
    assert found(direct) == [("fence", 1)]
    via_force = history(
        (Fence(1, K), PENDING),
        (JournalForce(), OK, [0]),
        (CRASH, OK),
        RESTART,
        (Add(1, 0, K, b"a"), PENDING),
        (Add(2, 0, K, b"a"), PENDING),
        (JournalForce(), OK, [5, 4]),
    )
    assert found(via_force) == [("fence", 6)]


def test_fence_is_not_broken_by_a_fence_that_failed() -> None:
    steps = history(
        (Fence(1, K), PENDING),
        (JournalForce(), OK, [Completion(0, "io_error")]),
        (Add(1, 0, K, b"a"), OK),
    )
    assert found(steps) == []


# --- 3. auth ---------------------------------------------------------------------------------


def test_auth_kept_when_wrong_keys_are_refused() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Add(1, 1, OTHER, b"b"), failed("unauthorized")),
        (Fence(1, OTHER), failed("unauthorized")),
        (Fence(1, K), OK),
        (Add(2, 0, OTHER, b"c"), OK),  # another ledger, another key
    )
    assert found(steps) == []


def test_auth_broken_by_an_acknowledged_add_or_fence_with_another_key() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Add(1, 1, OTHER, b"b"), OK),
        (Fence(1, OTHER), PENDING),
        (JournalForce(), OK, [2]),
    )
    assert found(steps) == [("auth", 1), ("auth", 3)]


def test_auth_key_is_that_of_the_first_acknowledged_not_the_first_issued() -> None:
    steps = history(
        (Add(1, 0, OTHER, b"a"), PENDING),  # issued first, acknowledged second
        (Add(1, 1, K, b"b"), OK),
        (JournalForce(), OK, [0]),
    )
    violations = check_history(steps)
    assert [(v.prop, v.step) for v in violations] == [("auth", 2)]
    assert K.hex() in violations[0].message
    assert "step 1" in violations[0].message


def test_auth_holds_until_a_delete_then_starts_again() -> None:
    """Property 3 ends at a delete of the ledger: under BookKeeper's answers an add after it
    creates the ledger again, a new ledger whose key is its first acknowledged add's (under
    bkref's answers no add after the delete is acknowledged: the model refuses it)."""
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Add(1, 1, OTHER, b"x"), OK),  # before the delete: a violation
        (Delete(1), OK),
        (Add(1, 2, OTHER, b"b"), OK),  # a new ledger under the old id
        (Add(1, 3, K, b"c"), OK),  # the new ledger's key is OTHER: a violation
    )
    assert found(steps) == [("auth", 1), ("auth", 4)]


def test_a_fence_holds_until_a_delete() -> None:
    steps = history(
        (Fence(1, K), OK),
        (Add(1, 0, K, b"a"), OK),  # after the fence's ack: a violation
        (Delete(1), OK),
        (Add(1, 1, K, b"b"), OK),  # a new ledger (BookKeeper's answers): no fence
    )
    assert found(steps) == [("fence", 1)]


# --- 4. no resurrection ----------------------------------------------------------------------


def test_resurrection_kept_when_a_deleted_ledger_stays_unreadable() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Delete(1), OK),
        (Read(1, 0), failed("no_ledger")),
        (CRASH, OK),
        RESTART,
        (Read(1, 0), failed("no_ledger")),
    )
    assert found(steps) == []


def test_resurrection_broken_by_an_ok_read_after_an_ok_delete() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Add(1, 1, K, b"b"), PENDING),  # never acknowledged: deleted all the same
        (Delete(1), OK),
        (CRASH, OK),
        RESTART,
        (Read(1, 0), read_ok(b"a")),
        (Read(1, 1), read_ok(b"b")),
    )
    assert found(steps) == [("resurrection", 5), ("resurrection", 6)]


def test_resurrection_needs_a_delete_that_returned_ok() -> None:
    for delete_result in (CRASHED, failed("io_error")):
        steps = history(
            (Add(1, 0, K, b"a"), OK), (Delete(1), delete_result), (Read(1, 0), read_ok(b"a"))
        )
        assert found(steps) == [], delete_result


def test_resurrection_allows_an_entry_added_after_the_delete() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), OK),
        (Delete(1), OK),
        (Add(1, 5, K, b"new"), OK),
        (Read(1, 5), read_ok(b"new")),
        (Add(1, 6, K, b"refused"), failed("no_space")),
        (Read(1, 6), read_ok(b"refused")),
    )
    assert found(steps) == [("resurrection", 5)]


# --- 6. forward progress ---------------------------------------------------------------------


def state(last: Mark, journal: Mark, least: int = 0) -> AbstractState:
    return AbstractState((), least, last, journal, None, (), ())


def test_progress_kept_by_marks_that_only_grow() -> None:
    steps = history(
        (Add(1, 0, K, b"a"), PENDING),
        (JournalForce(), OK, [0]),
        (Checkpoint(), OK),
        (CRASH, OK),
        (Restart(), Result(replayed=4)),  # after a crash, replay is expected
        (Shutdown(), OK),
        (Restart(), Result(replayed=0)),
        states={
            0: state((0, 0), (1, 512)),
            1: state((0, 0), (1, 1024), 1),
            2: state((1, 1024), (1, 1024), 2),
            3: state((1, 1024), (1, 1024), 0),  # a new run may start lower
            4: state((1, 1024), (2, 512), 0),
            6: state((2, 512), (3, 512), 1),
        },
    )
    assert found(steps) == []


def test_progress_broken_by_last_mark_moving_back_across_a_restart() -> None:
    steps = history(
        (Checkpoint(), OK),
        (CRASH, OK),
        RESTART,
        states={0: state((1, 1024), (1, 1024)), 2: state((1, 512), (2, 512))},
    )
    violations = check_history(steps)
    assert [(v.prop, v.step) for v in violations] == [("progress", 2)]
    assert "last_mark moved backwards" in violations[0].message


def test_progress_broken_by_journal_mark_or_least_unflushed_moving_back_in_a_run() -> None:
    steps = history(
        (JournalForce(), OK),
        (JournalForce(), OK),
        (JournalForce(), OK),
        states={
            0: state((0, 0), (1, 1024), 3),
            1: state((0, 0), (1, 512), 3),
            2: state((0, 0), (1, 512), 2),
        },
    )
    violations = check_history(steps)
    assert [(v.prop, v.step) for v in violations] == [("progress", 1), ("progress", 2)]
    assert "journal_mark moved backwards" in violations[0].message
    assert "least_unflushed_log_id moved backwards" in violations[1].message


def test_progress_broken_by_journal_mark_behind_last_mark() -> None:
    steps = history((Restart(), OK), states={0: state((2, 0), (1, 4096))})
    assert found(steps) == [("progress", 0)]


def test_progress_broken_by_a_checkpoint_that_leaves_the_marks_apart() -> None:
    steps = history(
        (Checkpoint(), OK),
        (Checkpoint(), failed("io_error")),
        (Checkpoint(), OK),
        states={
            0: state((1, 512), (1, 512)),
            1: state((1, 512), (1, 1024)),  # failed: not judged
            2: state((1, 512), (1, 1024)),
        },
    )
    assert found(steps) == [("progress", 2)]


def test_progress_broken_by_replay_after_a_clean_shutdown() -> None:
    steps = history(
        (Shutdown(), OK),
        (Read(1, 0), failed("io_error")),  # while down: still a clean stop
        (Restart(), Result(replayed=2)),
        (Shutdown(), failed("io_error")),  # not clean
        (Restart(), Result(replayed=2)),
        (Shutdown(), OK),
        (CRASH, OK),  # a crash after the shutdown: no promise
        (Restart(), Result(replayed=2)),
        (Shutdown(), OK),
        (Restart(), Result()),  # replayed not reported
    )
    assert found(steps) == [("progress", 2)]


def test_progress_skips_the_state_of_a_step_interrupted_by_a_crash() -> None:
    steps = history(
        (Checkpoint(), OK),
        (Checkpoint(), CRASHED),
        (CRASH, OK),
        states={0: state((1, 512), (1, 512)), 1: state((0, 0), (0, 0))},
    )
    assert found(steps) == []


# --- the monitor -----------------------------------------------------------------------------


def test_violation_names_a_known_property() -> None:
    assert PROPERTIES == ("durability", "fence", "auth", "resurrection", "progress")
    assert Violation("auth", 3, "x").prop == "auth"
    with pytest.raises(ValueError):
        Violation("speed", 0, "x")


small_ops = operations(
    ledgers=st.integers(0, 2),
    entries=st.integers(0, 2),
    keys=st.sampled_from([K, OTHER]),
    datas=st.sampled_from([b"a", b"b"]),
)
small_states = st.none() | st.builds(
    state,
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.integers(0, 2), st.integers(0, 2)),
    st.integers(0, 2),
)
small_histories = histories(
    ops=small_ops, read_datas=st.sampled_from([b"a", b"b"]), state_values=small_states, max_steps=25
)


@settings(max_examples=60, deadline=None)
@given(small_histories)
def test_check_history_equals_feeding_a_monitor_step_by_step(steps: tuple[Step, ...]) -> None:
    _check_feeding(steps)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(small_histories)
def test_check_history_equals_feeding_a_monitor_step_by_step_deep(steps: tuple[Step, ...]) -> None:
    _check_feeding(steps)


def _check_feeding(steps: tuple[Step, ...]) -> None:
    monitor = PropertyMonitor()
    fed: list[Violation] = []
    for step in steps:
        new = monitor.observe(step)
        monitor.check_invariants()
        assert all(v.step == step.index for v in new), new
        fed += new
    assert check_history(steps) == fed
    assert all(v.prop in PROPERTIES for v in fed)


@settings(max_examples=30, deadline=None)
@given(small_histories, st.integers(0, 25))
def test_violations_of_a_prefix_are_those_of_the_whole_up_to_it(
    steps: tuple[Step, ...], cut: int
) -> None:
    whole = check_history(steps)
    assert check_history(steps[:cut]) == [v for v in whole if v.step < cut]


# --- the monitor's own invariants -----------------------------------------------------------


def test_the_monitor_checks_the_add_records_changed_since_its_last_check() -> None:
    """check_invariants looks at the records a step touched (the others cannot break: what
    they are compared with only grows), including one changed long after it was made."""
    monitor = PropertyMonitor()
    add = Add(1, 0, K, b"a")
    for step in history((add, PENDING), (JournalForce(), OK, [0]), (Read(1, 0), Result(data=b"a"))):
        monitor.observe(step)
        monitor.check_invariants()
    record = monitor._add_record(add, 0)
    record.failed = True  # failed and acknowledged at once
    with pytest.raises(AssertionError):
        monitor.check_invariants()
    record.failed = False
    monitor._add_record(add, 0).acked_at = 3  # a step not taken yet
    with pytest.raises(AssertionError):
        monitor.check_invariants()
