"""The model judges any bookie through the protocol: the profiles of spec/profile.py, and the
histories a bookie other than bkref's in-process one produces (striped, out-of-order and
re-sent entry ids, preallocated logs, the entry size limit, sparse states).

Each test shows the model refusing what it must refuse and allowing what it must allow, so
that a profile that allowed everything (or nothing) fails here.
"""

from __future__ import annotations

import pytest

from models.bookie.bookie import BookieModel, Divergence, ModelConfig
from spec.crash import KeepAll, LoseUnsynced, Unknown
from spec.operations import (
    OK,
    PENDING,
    Add,
    Checkpoint,
    Completion,
    Crash,
    Delete,
    FailFsync,
    Fence,
    FiredFault,
    JournalForce,
    Read,
    Restart,
    Result,
    Rotate,
    Shutdown,
    failed,
)
from spec.profile import DEFAULT_PROFILE, Profile
from spec.properties import PropertyMonitor
from spec.state import AbstractState, LedgerView, LogView
from spec.trace import Step

KEY = b"k"
#: A journal fsync that failed: the fault the tests below fire.
JOURNAL_FSYNC = FiredFault("fsync", "journal")
ASYNC = Profile(acks="async", state="full", answers="bkref")


def _model(
    profile: Profile = DEFAULT_PROFILE, *, limit: int = 4096, frame: int | None = None
) -> BookieModel:
    config = ModelConfig(log_size_limit_bytes=limit, profile=profile)
    if frame is not None:
        config = ModelConfig(log_size_limit_bytes=limit, max_data_bytes=frame, profile=profile)
    return BookieModel(config)


def _state(
    logs: tuple[LogView, ...] = (),
    ledgers: tuple[LedgerView, ...] = (),
    *,
    current: int | None = None,
    least: int = 0,
    marks: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0)),
    deleted: tuple[int, ...] = (),
) -> AbstractState:
    return AbstractState(
        entry_logs=logs,
        least_unflushed_log_id=least,
        last_mark=marks[0],
        journal_mark=marks[1],
        current_log_id=current,
        ledgers=ledgers,
        deleted_ledgers=deleted,
    )


# --- acks ----------------------------------------------------------------------------------


def test_an_add_answered_ok_at_once_is_refused_in_process_and_durable_under_async_acks() -> None:
    with pytest.raises(Divergence, match="allowed: pending"):
        _model().step(0, Add(1, 0, KEY, b"x"), OK, ())
    model = _model(ASYNC)
    model.step(0, Add(1, 0, KEY, b"x"), OK, ())
    assert model.durable_entries() == [(1, 0)], "acknowledged by its own answer"
    model.step(1, Crash(Unknown()), OK, ())
    model.step(2, Restart(), OK, ())
    with pytest.raises(Divergence, match="allowed: data"):
        model.step(3, Read(1, 0), failed("no_entry"), ())


def test_async_acks_may_come_at_any_step_in_any_groups() -> None:
    model = _model(ASYNC)
    for entry in range(3):
        model.step(entry, Add(1, entry, KEY, b"x"), PENDING, ())
    model.step(3, Read(1, 0), Result(data=b"x"), (Completion(2),))  # one ack, during a read
    model.step(4, Add(1, 3, KEY, b"y"), PENDING, (Completion(0),))
    assert sorted(model.pending) == [1, 4]
    assert (1, 2) in model.durable_entries() and (1, 0) in model.durable_entries()
    with pytest.raises(Divergence, match="not pending"):
        model.step(5, Read(1, 0), Result(data=b"x"), (Completion(2),))  # acked twice


def test_a_clean_shutdown_must_answer_every_request_in_flight() -> None:
    model = _model(ASYNC)
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, Add(1, 1, KEY, b"x"), PENDING, ())
    with pytest.raises(Divergence, match="never answered"):
        model.step(2, Shutdown(), OK, (Completion(0),))
    fine = _model(ASYNC)
    fine.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    fine.step(1, Shutdown(), OK, (Completion(0),))
    assert not fine.up


def test_the_monitor_and_the_model_count_an_ok_answer_as_the_same_ack() -> None:
    """One definition of acknowledged (spec/operations.py acknowledgements): an add answered
    ok at once, then a fence acknowledged, then an add issued after the fence's ack answered
    ok: the monitor flags the fence property, and the model refuses the add."""
    steps = [
        Step(0, Add(1, 0, KEY, b"x"), OK),
        Step(1, Fence(1, KEY), OK),
        Step(2, Add(1, 1, KEY, b"y"), OK),
    ]
    monitor = PropertyMonitor(ASYNC)
    found = [v for step in steps for v in monitor.observe(step)]
    assert [v.prop for v in found] == ["fence"]
    model = _model(ASYNC)
    model.step(0, steps[0].op, steps[0].result, ())
    model.step(1, steps[1].op, steps[1].result, ())
    with pytest.raises(Divergence, match="allowed: fenced"):
        model.step(2, steps[2].op, steps[2].result, ())


# --- reads ---------------------------------------------------------------------------------


def test_a_pending_entry_reads_back_in_process_and_once_seen_stays_readable() -> None:
    in_process = _model()
    in_process.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    with pytest.raises(Divergence, match="allowed: data"):
        in_process.step(1, Read(1, 0), failed("no_entry"), ())
    model = _model(ASYNC)
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, Read(1, 0), failed("no_entry"), ())  # still in flight: allowed
    model.step(2, Read(1, 0), Result(data=b"x"), ())
    with pytest.raises(Divergence, match="allowed: data"):
        model.step(3, Read(1, 0), failed("no_entry"), ())  # it flickered


def test_a_failed_add_seen_missing_stays_missing_until_a_crash() -> None:
    model = _model()
    model.step(0, FailFsync(), OK, ())
    model.step(1, Add(1, 0, KEY, b"x"), failed("io_error"), (), (JOURNAL_FSYNC,))
    model.step(2, Read(1, 0), failed("no_entry"), ())
    with pytest.raises(Divergence, match="allowed: io_error, no_entry"):
        model.step(3, Read(1, 0), Result(data=b"x"), ())


def test_a_failed_fence_cannot_flicker_within_a_run() -> None:
    model = _model()
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, JournalForce(), OK, (Completion(0),))
    model.step(2, FailFsync(), OK, ())
    model.step(3, Fence(1, KEY), PENDING, ())
    model.step(
        4, JournalForce(), failed("io_error"), (Completion(3, "io_error"),), (JOURNAL_FSYNC,)
    )
    model.step(5, Add(1, 1, KEY, b"y"), failed("fenced"), ())  # in effect, this run
    with pytest.raises(Divergence, match="allowed: fenced, io_error"):
        model.step(6, Add(1, 2, KEY, b"y"), PENDING, ())


# --- entry ids and sizes -------------------------------------------------------------------


def test_striped_out_of_order_and_re_sent_entry_ids_are_part_of_the_model() -> None:
    model = _model(Profile(acks="async", state="protocol"))
    model.step(0, Add(1, 4, KEY, b"four"), PENDING, ())
    model.step(1, Add(1, 1, KEY, b"one"), OK, (Completion(0),))
    model.step(2, Add(1, 4, KEY, b"four"), OK, ())  # a re-send of the same entry
    model.step(3, Add(1, 1, KEY, b"uno"), OK, ())  # an overwrite: either version may read
    model.step(4, Read(1, 1), Result(data=b"one"), ())
    model.step(5, Read(1, 1), Result(data=b"uno"), ())
    with pytest.raises(Divergence, match="other bytes"):
        model.step(6, Read(1, 1), Result(data=b"dos"), ())
    views = (LedgerView(1, 4, False),)
    model.compare(6, _state(ledgers=views), "read")  # protocol part: last entry 4


def test_an_entry_over_the_size_limit_is_refused_with_bad_request() -> None:
    model = _model(frame=8)
    with pytest.raises(Divergence, match="allowed: bad_request"):
        model.step(0, Add(1, 0, KEY, b"123456789"), PENDING, ())
    model.step(0, Add(1, 0, KEY, b"123456789"), failed("bad_request"), ())
    model.step(1, Add(1, 1, KEY, b"12345678"), PENDING, ())
    assert model.ledgers.ledgers[1].entries.keys() == {1}


# --- answers where BookKeeper and bkref differ --------------------------------------------


@pytest.mark.parametrize(
    ("answers", "allowed", "refused"),
    [
        ("bkref", "no_ledger", "pending"),
        ("bookkeeper", "pending", "no_ledger"),
        ("either", "pending", "unauthorized"),
    ],
)
def test_an_add_to_a_deleted_ledger_follows_the_answers_profile(
    answers: str, allowed: str, refused: str
) -> None:
    def answer(code: str) -> Result:
        return PENDING if code == "pending" else failed(code)

    def deleted() -> BookieModel:
        model = _model(Profile(answers=answers))
        model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
        model.step(1, JournalForce(), OK, (Completion(0),))
        model.step(2, Delete(1), OK, ())
        return model

    deleted().step(3, Add(1, 1, b"other", b"y"), answer(allowed), ())
    with pytest.raises(Divergence):
        deleted().step(3, Add(1, 1, b"other", b"y"), answer(refused), ())


# --- the state -----------------------------------------------------------------------------


def test_preallocated_logs_are_allowed_with_no_entries_and_a_new_id() -> None:
    def after_one_add() -> BookieModel:
        model = _model()
        model.compare(-1, _state(), "restart")
        model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
        return model

    active = LogView(0, "active", ((1, 21),))
    ledgers = (LedgerView(1, 0, False),)
    after_one_add().compare(
        0, _state((active, LogView(1, "preallocated", ())), ledgers, current=0), "add"
    )
    with pytest.raises(Divergence, match="preallocated but holds entries"):
        bad = LogView(1, "preallocated", ((1, 21),))
        after_one_add().compare(0, _state((active, bad), ledgers, current=0), "add")


def test_several_rotations_between_two_states_are_resolved_in_order() -> None:
    """A trace that carries a state only now and then: after a restart the model does not
    know the next log id; two logs created before the next state are matched to the two new
    ids in order (this used to stop the model with an assertion)."""
    model = _model(limit=1100)
    model.compare(-1, _state(), "restart")
    model.step(0, Crash(LoseUnsynced()), OK, ())
    model.step(1, Restart(), OK, ())
    model.compare(1, _state(least=5, marks=((1, 0), (1, 0))), "restart")
    model.step(2, Add(1, 0, KEY, b"x" * 50), PENDING, ())
    model.step(3, Rotate(), OK, ())
    model.step(4, Add(1, 1, KEY, b"y" * 50), PENDING, ())
    logs = (LogView(5, "rotated", ((1, 70),)), LogView(6, "active", ((1, 70),)))
    state = _state(logs, (LedgerView(1, 1, False),), current=6, least=5, marks=((1, 0), (1, 0)))
    model.compare(4, state, "add")
    assert model.logs.next_id == 7
    again = _model(limit=1100)
    again.compare(-1, _state(), "restart")
    again.step(0, Crash(LoseUnsynced()), OK, ())
    again.step(1, Restart(), OK, ())
    again.compare(1, _state(least=5, marks=((1, 0), (1, 0))), "restart")
    again.step(2, Add(1, 0, KEY, b"x" * 50), PENDING, ())
    again.step(3, Rotate(), OK, ())
    again.step(4, Add(1, 1, KEY, b"y" * 50), PENDING, ())
    reused = (LogView(3, "rotated", ((1, 70),)), LogView(6, "active", ((1, 70),)))
    with pytest.raises(Divergence, match="ids are never reused"):
        again.compare(4, _state(reused, (LedgerView(1, 1, False),), current=6, least=5), "add")


def test_two_active_logs_after_a_restart_are_a_divergence_not_an_assertion() -> None:
    model = _model()
    model.step(0, Crash(KeepAll()), OK, ())
    model.step(1, Restart(), OK, ())
    logs = (LogView(0, "active", ()), LogView(1, "active", ()))
    with pytest.raises(Divergence, match="all active"):
        model.compare(1, _state(logs, current=1), "restart")


def test_the_state_profile_says_how_much_is_judged() -> None:
    nonsense = _state((LogView(9, "flushed", ((7, 1),)),), current=3, least=0)
    for state_profile, judged in (("full", True), ("protocol", False), ("none", False)):
        model = _model(Profile(state=state_profile))
        if judged:
            with pytest.raises(Divergence):
                model.compare(-1, nonsense, "restart")
        else:
            model.compare(-1, nonsense, "restart")
    protocol = _model(Profile(state="protocol"))
    with pytest.raises(Divergence, match="nobody wrote them"):
        protocol.compare(-1, _state(ledgers=(LedgerView(7, None, False),)), "restart")
    _model(Profile(state="none")).compare(-1, _state(ledgers=(LedgerView(7, None, False),)), "r")


# --- stops ---------------------------------------------------------------------------------


def test_a_power_cut_right_after_a_clean_shutdown_is_a_legal_step() -> None:
    model = _model()
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, Shutdown(), OK, (Completion(0),))
    model.step(2, Crash(LoseUnsynced()), OK, ())
    model.step(3, Restart(), Result(replayed=0), ())
    model.step(4, Read(1, 0), Result(data=b"x"), ())


def test_an_unclean_shutdown_refreshes_what_a_restart_is_checked_against() -> None:
    """After a checkpoint (log 0 fsynced whole) and a fault, a shutdown is not clean; the
    restart must still find log 0. (The outcomes used to be those of the last crash, and
    before any crash there were none: a vanished fsynced log passed.)"""
    model = _model()
    model.compare(-1, _state(), "restart")
    model.step(0, Add(1, 0, KEY, b"x"), PENDING, ())
    model.step(1, JournalForce(), OK, (Completion(0),))
    model.step(2, Checkpoint(), OK, ())
    model.step(3, FailFsync(), OK, ())
    model.step(4, Shutdown(), failed("io_error"), (), (JOURNAL_FSYNC,))
    model.step(5, Restart(), OK, ())
    with pytest.raises(Divergence, match="entry log 0 vanished"):
        model.compare(5, _state(ledgers=(LedgerView(1, 0, False),)), "restart")


def test_a_power_cut_after_a_shutdown_that_failed_is_a_legal_step() -> None:
    model = _model()
    model.step(0, FailFsync(), OK, ())
    model.step(1, Shutdown(), failed("io_error"), (), (JOURNAL_FSYNC,))
    model.step(2, Crash(LoseUnsynced()), OK, ())
    model.step(3, Restart(), OK, ())
    assert model.up


def test_an_unreported_log_found_again_after_a_crash_may_be_empty_but_hold_nothing() -> None:
    """Logs 0 and 2 were seen, log 1 never (the bookie created it during a fault and moved
    on). After the crash it is found again: empty, that is allowed; holding entries, those
    are bytes from nowhere under an id already passed."""

    def crashed() -> BookieModel:
        model = _model()
        model.compare(-1, _state(), "restart")
        model.step(0, FailFsync(), OK, ())
        model.step(1, Add(1, 0, KEY, b"x"), PENDING, (), (FiredFault("fsync", "directory"),))
        logs = (LogView(0, "flushed", ()), LogView(2, "active", ((1, 21),)))
        model.compare(1, _state(logs, (LedgerView(1, 0, False),), current=2, least=1), "add")
        model.step(2, Crash(LoseUnsynced()), OK, ())
        model.step(3, Restart(), OK, ())
        return model

    after = (LogView(0, "flushed", ()), LogView(2, "flushed", ()))
    empty = (*after, LogView(1, "flushed", ()))
    crashed().compare(3, _state(empty, least=3), "restart")
    holding = (*after, LogView(1, "flushed", ((1, 21),)))
    with pytest.raises(Divergence, match="appeared holding entries"):
        crashed().compare(3, _state(holding, least=3), "restart")


def test_logs_for_adds_the_bookie_may_not_have_run_need_not_survive_a_crash() -> None:
    """Under async acks, adds answered pending with nothing answered after them may still
    be unread in the bookie's input when it dies: the logs the model rotated to for them are
    not required after the crash, and their ids are not taken as used."""
    model = _model(ASYNC, limit=1024 + 2 * 120)
    model.step(0, Add(1, 0, KEY, b"x" * 100), PENDING, ())
    model.step(1, Read(1, 0), Result(data=b"x" * 100), ())  # answered: log 0 is real
    for entry in range(1, 6):  # two records a log: logs 1 and 2 for adds never answered
        model.step(1 + entry, Add(1, entry, KEY, b"x" * 100), PENDING, ())
    assert sorted(model.logs.logs) == [0, 1, 2]
    model.step(7, Crash(Unknown()), OK, ())
    assert model.outcomes is not None
    constraints = model.outcomes.logs
    assert [log_id for log_id, _, _ in constraints.logs] == [0]
    assert constraints.max_known_id == 0
    # Answered, the same adds' logs are required.
    settled = _model(ASYNC, limit=1024 + 2 * 120)
    for entry in range(6):
        settled.step(entry, Add(1, entry, KEY, b"x" * 100), PENDING, ())
    settled.step(6, Read(1, 0), Result(data=b"x" * 100), ())
    settled.step(7, Crash(Unknown()), OK, ())
    assert settled.outcomes is not None
    assert [log_id for log_id, _, _ in settled.outcomes.logs.logs] == [0, 1, 2]
