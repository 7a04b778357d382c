"""``bkref crash-check``: the fast CI slice passes on the real implementation, and means it.

The same slice fails on every known-bad variant in tests/quality/, which is what makes a pass
here worth something. Deeper runs (more adds, more seeds) are marked slow.
"""

from __future__ import annotations

import pytest

from proofs.cli.main import main
from proofs.crash.entry_log_check import (
    NoSuchState,
    Workload,
    make_workload,
    replay_state,
    run_check,
)


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
