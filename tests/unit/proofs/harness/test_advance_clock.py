"""The advance_clock step (spec/operations.py AdvanceClock): the in-process bookie's clock
moves, what it times falls due, and the model takes it as changing nothing a client sees.

Why: with the clock that never moved, an entry-log manager's access expiry was reached only
at an expiry of 0 s; the step lets the refinement machines and the campaign reach it at
BookKeeper's default (300 s), below, at and past the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from impl.entrylog.manager import EVICTED_ON_EXPIRY, FORGOTTEN_ON_EXPIRY, IDLE_SLOT_SEALED
from models.bookie.bookie import BookieModel, ModelConfig, ModelUsageError, _GcCycle
from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement
from spec.operations import OK, AdvanceClock, Checkpoint, Operation, Read
from spec.operations import Add as A
from spec.trace import Step

PER_LEDGER = {**SMALL_SETTINGS, "entryLogPerLedgerEnabled": "true", "logSizeLimit": "1048576"}
SLOTS = {**SMALL_SETTINGS, "entryLogSlotsPerLedgerDir": "2", "logSizeLimit": "1048576"}


def _run(settings: Mapping[str, str], ops: list[Operation]) -> tuple[list[Step], dict[str, int]]:
    sut = InProcessBookie(settings)
    harness = Refinement(sut, settings)
    steps = [harness.run(op) for op in ops]
    assert sut.bookie is not None
    return steps, dict(sut.bookie.entry_log_events)


def _log_states(step: Step, ledger: int) -> set[str]:
    assert step.state is not None
    return {view.state for view in step.state.entry_logs if ledger in view.ledgers}


@pytest.mark.parametrize(("seconds", "evicted"), [(299, False), (300, True), (301, True)])
def test_a_ledger_idle_for_the_expiry_loses_its_log_at_the_next_add(
    seconds: int, evicted: bool
) -> None:
    # entrylogMapAccessExpiryTimeInSeconds is 300 by default; Guava expires at now - access
    # >= expiry, so 300 s exactly is expired.
    steps, events = _run(
        PER_LEDGER,
        [A(1, 0, b"k1", b"a"), AdvanceClock(seconds), A(2, 0, b"k2", b"b"), Read(1, 0)],
    )
    assert steps[1].result == OK
    assert _log_states(steps[1], 1) == {"active"}, "the clock alone changes nothing"
    assert _log_states(steps[2], 1) == ({"rotated"} if evicted else {"active"})
    assert events == ({EVICTED_ON_EXPIRY: 1} if evicted else {})
    assert steps[3].result.data == b"a"


def test_with_slots_the_clock_forgets_a_mapping_and_seals_the_idle_slot_s_log() -> None:
    steps, events = _run(
        SLOTS,
        [
            A(1, 0, b"k1", b"a"),  # slot 0
            A(3, 0, b"k3", b"c"),  # slot 1
            A(4, 0, b"k4", b"d"),  # slot 2 (slots alternate directories)
            A(5, 0, b"k5", b"e"),  # slot 3
            A(2, 0, b"k2", b"b"),  # slot 0, beside ledger 1
            AdvanceClock(3600),
            A(2, 1, b"k2", b"b"),
            Checkpoint(),
        ],
    )
    # Every mapping expired, ledger 2's too (its add comes after the clock): every slot is
    # idle and its log sealed at that add, which starts a new log; the checkpoint flushes
    # the sealed ones, GC candidates.
    assert events == {FORGOTTEN_ON_EXPIRY: 5, IDLE_SLOT_SEALED: 4}
    assert all(_log_states(steps[7], led) == {"flushed"} for led in (1, 3, 4, 5))
    assert _log_states(steps[7], 2) == {"flushed", "active"}


def test_the_model_refuses_the_clock_inside_a_gc_cycle_it_cannot_time() -> None:
    timed = BookieModel(ModelConfig.from_settings({"majorCompactionMaxTimeMillis": "1000"}))
    assert timed.step(0, AdvanceClock(5), OK, ()), "outside a cycle: an ordinary step"
    timed.gc = _GcCycle("major", [])  # a cycle gc_begin opened, its compactions to come
    with pytest.raises(ModelUsageError, match="does not time a GC cycle"):
        timed.step(1, AdvanceClock(5), OK, ())
    untimed = BookieModel(ModelConfig())
    untimed.gc = _GcCycle("major", [])
    assert untimed.step(0, AdvanceClock(5), OK, ())
