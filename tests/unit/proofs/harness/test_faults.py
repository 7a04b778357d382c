"""Faults relax the model from the step they fire in, for what they touched (docs/model.md,
"Faults"): the harness learns from the simulated disk when a fault fires and in which kind
of file; the model excuses nothing before that, a read error only for its read, a journal
fault not for the entry-log layout; a full directory beside one with room stops no add; a
failed delete is resolved by what the run shows and reopened by a crash.
"""

from __future__ import annotations

import pytest

from models.bookie.bookie import BookieModel, Divergence, ModelConfig
from proofs.cli.check_trace import describe_step
from proofs.harness.refinement import (
    HALF_FULL_THRESHOLDS,
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
    file_kind,
)
from spec.crash import LoseUnsynced
from spec.operations import (
    OK,
    PENDING,
    Add,
    Checkpoint,
    Completion,
    Crash,
    Delete,
    DiskFull,
    FailFsync,
    FailRead,
    FailWrite,
    FiredFault,
    JournalForce,
    Read,
    Restart,
    failed,
)
from spec.state import AbstractState, LedgerView

KEY = b"k"


SETTINGS = {**SMALL_SETTINGS, **HALF_FULL_THRESHOLDS}


def _harness() -> Refinement:
    return Refinement(InProcessBookie(SETTINGS), SETTINGS)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/journal/current/18bcfe56800.txn", "journal"),
        ("/ledgers0/current/0.log", "entry_log"),
        ("/ledgers1/current/1a.log", "entry_log"),
        ("/ledgers0/current/bkref-index/3.seg", "index"),
        ("/ledgers0/current/bkref-index/3.seg.tmp", "index"),
        ("/ledgers0/current/deleted-ledgers", "index"),
        ("/ledgers1/current/lastMark", "last_mark"),
        ("/ledgers1/current/lastMark.tmp", "last_mark"),
        ("/ledgers0/current/lastId", "last_id"),
        ("/ledgers0/current/VERSION", "other"),
    ],
)
def test_each_bookie_file_has_its_kind(path: str, kind: str) -> None:
    assert file_kind(path) == kind


def test_a_fault_aimed_at_the_journal_fires_in_the_step_that_fsyncs_it() -> None:
    harness = _harness()
    armed = harness.run(FailFsync("journal"))
    assert armed.faults == ()
    harness.run(Add(1, 0, KEY, b"x"))
    harness.run(Checkpoint())  # fsyncs logs, the index and lastMark: not the journal
    assert [step.faults for step in harness.steps[1:]] == [(), ()]
    force = harness.run(JournalForce())
    assert force.faults == (FiredFault("fsync", "journal"),)
    assert force.completed == (Completion(1, "io_error"),)
    told = describe_step(force, harness.steps)
    assert told.endswith("; fault fired: an fsync of the journal failed"), told
    # The journal fault excuses failures, not an unpredicted entry-log layout.
    assert harness.model.faulted and not harness.model.logs.relaxed


def test_a_read_error_fails_its_read_and_relaxes_nothing_else() -> None:
    harness = _harness()
    harness.run(Add(1, 0, KEY, b"x"))
    harness.run(JournalForce())
    harness.run(Checkpoint())  # the entry is in a file now, not in the write buffer
    harness.run(FailRead("entry_log"))
    read = harness.run(Read(1, 0))
    assert read.faults == (FiredFault("read", "entry_log"),)
    assert read.result == failed("io_error")
    assert not harness.model.faulted and not harness.model.logs.relaxed
    assert harness.run(Read(1, 0)).result.data == b"x"


def test_a_write_error_in_an_entry_log_relaxes_the_layout_from_that_step() -> None:
    harness = _harness()
    harness.run(FailWrite("entry_log"))
    assert not harness.model.logs.relaxed
    for entry in range(40):
        step = harness.run(Add(1, entry, KEY, b"y" * 100))
        if step.faults:
            break
    assert step.faults == (FiredFault("write", "entry_log"),)
    assert harness.model.logs.relaxed


def test_adds_go_on_in_another_directory_when_the_active_log_s_is_full() -> None:
    harness = _harness()
    harness.run(Add(1, 0, KEY, b"x"))
    before = harness.model.logs.current
    harness.run(DiskFull("active_log_dir"))
    step = harness.run(Add(1, 1, KEY, b"y"))
    assert step.result == PENDING
    assert step.state is not None and step.state.current_log_id != before
    assert harness.model.logs.current == step.state.current_log_id  # predicted, not adopted
    assert not harness.model.logs.relaxed


def test_a_full_journal_directory_fails_the_group_commit_that_meets_it() -> None:
    harness = _harness()
    harness.run(Add(1, 0, KEY, b"x"))
    harness.run(DiskFull("journal_dir"))
    force = harness.run(JournalForce())
    assert FiredFault("no_space", "journal") in force.faults
    assert force.completed == (Completion(0, "io_error"),)
    harness.run(Crash(LoseUnsynced()))
    harness.run(Restart())  # room again, and nothing acknowledged was lost
    assert harness.model.up and not harness.model.faulted


# --- the model on its own ----------------------------------------------------------------------


def _model() -> BookieModel:
    return BookieModel(ModelConfig(log_size_limit_bytes=4096))


def test_an_armed_fault_that_has_not_fired_excuses_nothing() -> None:
    model = _model()
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, FailFsync(), OK, ())
    with pytest.raises(Divergence, match="allowed: ok"):
        model.step(2, JournalForce(), failed("io_error"), (Completion(0, "io_error"),))


def test_the_same_failure_is_allowed_in_the_step_its_fault_fires_in() -> None:
    model = _model()
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, FailFsync(), OK, ())
    model.step(
        2,
        JournalForce(),
        failed("io_error"),
        (Completion(0, "io_error"),),
        (FiredFault("fsync", "journal"),),
    )
    assert model.faulted


def _state(*, deleted: tuple[int, ...], ledgers: tuple[LedgerView, ...]) -> AbstractState:
    return AbstractState(
        entry_logs=(),
        least_unflushed_log_id=0,
        last_mark=(0, 0),
        journal_mark=(0, 0),
        current_log_id=None,
        ledgers=ledgers,
        deleted_ledgers=deleted,
    )


def _with_a_failed_delete() -> BookieModel:
    model = _model()
    model.step(0, FailWrite("index"), OK, ())
    model.step(1, Delete(5), failed("io_error"), (), (FiredFault("write", "index"),))
    return model


def test_a_failed_delete_holds_what_the_run_showed_until_a_crash() -> None:
    model = _with_a_failed_delete()
    model.compare(1, _state(deleted=(), ledgers=()), "delete")  # not in effect
    with pytest.raises(Divergence, match="failed delete was not in effect earlier"):
        model.compare(1, _state(deleted=(5,), ledgers=()), "delete")


def test_a_crash_reopens_a_failed_delete() -> None:
    model = _with_a_failed_delete()
    model.compare(1, _state(deleted=(), ledgers=()), "delete")
    model.step(2, Crash(LoseUnsynced()), OK, ())
    model.step(3, Restart(), OK, ())
    model.compare(3, _state(deleted=(5,), ledgers=()), "restart")  # it took effect after all
    assert model.ledgers.deletion_state(5) == "deleted"


# --- the crash outcomes, checked on their own ----------------------------------------------


def test_the_crash_outcomes_are_a_check_of_their_own() -> None:
    """The first state after a restart is held to the outcomes the crash explains before the
    model resolves its open facts: an acknowledged entry past the recovered last entry, a
    ledger from nowhere, a durable delete undone, each is named "after the crash"."""
    from spec.state import LogView

    def crashed() -> BookieModel:
        model = _model()
        model.compare(-1, _state(deleted=(), ledgers=()), "restart")
        model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
        model.step(1, Add(1, 1, KEY, b"y"), PENDING, ())
        model.step(2, JournalForce(), OK, (Completion(0), Completion(1)))
        model.step(3, Delete(2), OK, ())
        model.step(4, Crash(LoseUnsynced()), OK, ())
        model.step(5, Restart(), OK, ())
        return model

    def after(ledgers: tuple[LedgerView, ...], deleted: tuple[int, ...]) -> AbstractState:
        state = _state(deleted=deleted, ledgers=ledgers)
        return AbstractState(
            entry_logs=(LogView(0, "flushed", ((1, 42),)),),
            least_unflushed_log_id=1,
            last_mark=state.last_mark,
            journal_mark=state.journal_mark,
            current_log_id=None,
            ledgers=ledgers,
            deleted_ledgers=deleted,
        )

    crashed().compare(5, after((LedgerView(1, 1, False),), (2,)), "restart")
    for ledgers, deleted, expected in [
        ((LedgerView(1, 0, False),), (2,), "entry 1 was acknowledged"),
        ((LedgerView(1, 1, False), LedgerView(9, 0, False)), (2,), "no add or fence"),
        ((LedgerView(1, 1, False),), (), "durably deleted, is not deleted"),
        ((), (2,), "whose key was durable, is missing"),
    ]:
        with pytest.raises(Divergence, match=f"after the crash: .*{expected}"):
            crashed().compare(5, after(ledgers, deleted), "restart")
