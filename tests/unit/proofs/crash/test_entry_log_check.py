"""``bkref crash-check``: the fast CI slice passes on the real implementation, and means it.

The same slice fails on every known-bad variant in tests/quality/, which is what makes a pass
here worth something. Deeper runs (more adds, more seeds) are marked slow.
"""

from __future__ import annotations

import pytest

from proofs.cli.main import main
from proofs.crash.entry_log_check import (
    PER_LEDGER_MAX_ACTIVE,
    ActiveLogs,
    NoSuchState,
    Workload,
    make_workload,
    replay_state,
    run_check,
)
from spec.ids import EntryLogId, LedgerId


@pytest.mark.parametrize("flush_entrylog_bytes", [0, 1536])
def test_ci_slice_has_no_failures_and_checks_real_work(flush_entrylog_bytes: int) -> None:
    report = run_check(seed=1, entries=20, ledgers=2, flush_entrylog_bytes=flush_entrylog_bytes)
    assert report.failures == []
    # Not vacuous: many crash states, and durable entries were read back in them.
    assert report.crash_points > 50
    assert report.crash_states > 1000
    assert report.checked_items > 1000


def test_every_workload_has_background_steps_and_ends_with_close() -> None:
    for seed in range(20):
        kinds = [step.kind for step in make_workload(seed, entries=14, ledgers=2)]
        assert "checkpoint" in kinds[:-2]
        assert "flush" in kinds
        assert "preallocate" in kinds
        assert kinds[-1] == "close"


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crash-check", "--entries", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    assert main(["crash-check", "--adds", "0"]) == 2


def test_cli_small_run_of_both_targets_passes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["crash-check", "--entries", "8", "--ledgers", "2", "--adds", "6", "--seed", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "crash-check entry-log" in out
    assert "crash-check bookie" in out
    assert "PASS" in out
    assert "0 failures" in out


def test_cli_runs_only_the_chosen_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crash-check", "--target", "bookie", "--adds", "6"]) == 0
    out = capsys.readouterr().out
    assert "crash-check bookie" in out
    assert "crash-check entry-log" not in out


def test_a_workload_names_the_command_that_re_runs_a_state() -> None:
    workload = Workload(seed=4, entries=9, ledgers=2, flush_entrylog_bytes=1536)
    assert workload.command(17, 3) == (
        "bkref crash-check --target entry-log --seed 4 --entries 9 --ledgers 2 "
        "--flush-entrylog-bytes 1536 --point 17 --plan 3"
    )
    assert workload.command(17).endswith("--point 17")


def test_replaying_a_point_checks_every_plan_and_says_what_it_checked() -> None:
    workload = Workload(seed=1, entries=20, ledgers=2, flush_entrylog_bytes=0)
    points = workload.record()
    index = len(points) - 3  # late: durable entries and checkpointed logs to check
    point, checks = replay_state(workload, index)
    assert point.op_index == index
    assert point.oracle.durable and point.oracle.checkpointed_logs
    assert [check.plan_index for check in checks] == list(range(len(checks)))
    assert len(checks) > 3
    for check in checks:
        assert check.problems == ()
        assert check.account[0].startswith("opened a fresh entry logger")
        assert len(check.account) == 5
        assert all(line.endswith(": ok") for line in check.account[1:])
    durable = len(point.oracle.durable)
    assert f"read back {durable} durable entries" in checks[0].account[1]
    _, one = replay_state(workload, index, 2)
    assert [check.plan_index for check in one] == [2]
    assert one[0].account == checks[2].account


def test_replaying_a_state_that_does_not_exist_is_a_typed_error() -> None:
    workload = Workload(seed=1, entries=5, ledgers=2, flush_entrylog_bytes=0)
    count = len(workload.record())
    with pytest.raises(NoSuchState, match=f"points 0 to {count - 1}"):
        replay_state(workload, count)
    with pytest.raises(NoSuchState, match="plan 999 does not exist"):
        replay_state(workload, 0, 999)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 8))
def test_deeper_runs_over_more_seeds(seed: int) -> None:
    for flush_entrylog_bytes in (0, 1536):
        report = run_check(
            seed=seed, entries=80, ledgers=4, flush_entrylog_bytes=flush_entrylog_bytes
        )
        assert report.failures == []


# --- an entry log per ledger (--manager per-ledger) ----------------------------------------


#: The per-ledger slice: three ledgers, so with at most two active logs a third ledger's add
#: evicts one; seed 1 also rotates a log by size and expires an idle ledger's.
PER_LEDGER_SLICE = Workload(
    seed=1, entries=16, ledgers=3, flush_entrylog_bytes=0, manager="per-ledger"
)


def test_per_ledger_slice_evicts_logs_inside_the_workload() -> None:
    settings = PER_LEDGER_SLICE.settings()
    assert settings.per_ledger and settings.maximum_active_entry_logs == PER_LEDGER_MAX_ACTIVE
    _, logs = PER_LEDGER_SLICE.record_with_logs()
    assert logs.surprises == []
    # Several logs active at once, and every way a log leaves the active ones happens.
    assert logs.most_active == PER_LEDGER_MAX_ACTIVE == 2
    assert logs.evicted_for_room >= 2
    assert logs.evicted_expired >= 1
    assert logs.rotations >= 1


def test_per_ledger_slice_has_no_failures_and_checks_real_work() -> None:
    lines: list[str] = []
    report = run_check(
        seed=1,
        entries=16,
        ledgers=3,
        flush_entrylog_bytes=0,
        manager="per-ledger",
        progress=lines.append,
    )
    assert [failure.message for failure in report.failures] == []
    assert report.crash_points > 80
    assert report.crash_states > 4000
    assert report.recovered_states > 1500
    assert report.checked_items > 10_000
    assert lines[0].startswith("  entry-log per-ledger (flushEntrylogBytes 0): the workload wrote ")
    assert "evicted for a new ledger's log" in lines[0] and "up to 2 logs active" in lines[0]


def test_per_ledger_replay_checks_each_new_ledger_gets_its_own_new_log() -> None:
    points = PER_LEDGER_SLICE.record()
    # The first crash point after the last checkpoint returned: with per-ledger logs a
    # checkpoint makes every entry added before it durable, and the logs the rules sealed
    # before it checkpointed.
    index = next(i for i, point in enumerate(points) if len(point.oracle.durable) == 16)
    point, checks = replay_state(PER_LEDGER_SLICE, index, 0)
    assert len(point.oracle.checkpointed_logs) >= 4
    (check,) = checks
    assert check.problems == ()
    assert "each holds one ledger's records: ok" in check.account[2]
    assert check.account[3].startswith("added one entry to each of 3 new ledgers: each went to")
    assert check.account[4] == "read back the 16 durable entries again after those adds: ok"


def test_a_per_ledger_workload_names_its_manager() -> None:
    workload = Workload(4, 9, 3, 1536, "per-ledger")
    assert workload.command(17, 3) == (
        "bkref crash-check --target entry-log --manager per-ledger --seed 4 --entries 9 "
        "--ledgers 3 --flush-entrylog-bytes 1536 --point 17 --plan 3"
    )
    assert "manager per-ledger (an active log per ledger" in workload.describe()
    assert "maximumNumberOfActiveEntryLogs 2" in workload.describe()
    assert "manager single (one active log" in Workload(4, 9, 3, 0).describe()
    with pytest.raises(ValueError, match="manager"):
        Workload(4, 9, 3, 0, "both")


def _log(log_id: int) -> EntryLogId:
    return EntryLogId(log_id)


def test_the_oracle_follows_the_per_ledger_rules_from_the_locations_alone() -> None:
    second = 1_000_000_000
    logs = ActiveLogs("per-ledger", max_active=2, expiry_ns=4 * second)
    logs.added(0, LedgerId(1), _log(0), 1 * second)
    logs.added(1, LedgerId(2), _log(1), 2 * second)
    assert logs.sealed == set() and logs.most_active == 2
    # A third ledger: the least recently added-to ledger's log (ledger 1's) is evicted.
    logs.added(2, LedgerId(3), _log(2), 3 * second)
    assert logs.sealed == {0} and logs.evicted_for_room == 1
    # Ledger 2's next add goes to another log: a rotation seals the old one.
    logs.added(3, LedgerId(2), _log(3), 4 * second)
    assert logs.sealed == {0, 1} and logs.rotations == 1
    # Ledger 3 took no add for 4 s: expired at the next add or checkpoint.
    logs.expire(7 * second)
    assert logs.sealed == {0, 1, 2} and logs.evicted_expired == 1
    assert logs.surprises == []
    # Adds that break the rules: a log taking a second ledger, an add to a sealed log.
    logs.added(4, LedgerId(1), _log(3), 7 * second)
    logs.added(5, LedgerId(5), _log(2), 7 * second)
    assert logs.surprises == [
        "add 4 (ledger 1) went to log 3, which holds ledger 2's entries",
        "add 5 (ledger 5) went to log 2, which holds ledger 3's entries",
        "add 5 (ledger 5) went to log 2, which the manager's rules had sealed",
    ]


def test_the_oracle_of_the_single_manager_seals_every_log_but_the_last() -> None:
    logs = ActiveLogs("single", max_active=500, expiry_ns=0)
    for number, (ledger, log_id) in enumerate([(1, 0), (2, 0), (1, 1), (3, 2)]):
        logs.expire(10**12)  # nothing expires with one active log
        logs.added(number, LedgerId(ledger), _log(log_id), 0)
    assert logs.sealed == {0, 1} and logs.rotations == 2 and logs.surprises == []
    assert logs.describe() == "wrote 3 logs: 2 sealed by rotation"
