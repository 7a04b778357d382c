"""``bkref crash-check``: the fast CI slice passes on the real implementation, and means it.

The same slice fails on every known-bad variant in tests/quality/, which is what makes a pass
here worth something. Deeper runs (more adds, more seeds) are marked slow.
"""

from __future__ import annotations

import pytest

from proofs.cli.main import main
from proofs.crash.entry_log_check import make_workload, run_check


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


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 8))
def test_deeper_runs_over_more_seeds(seed: int) -> None:
    for flush_entrylog_bytes in (0, 1536):
        report = run_check(
            seed=seed, entries=80, ledgers=4, flush_entrylog_bytes=flush_entrylog_bytes
        )
        assert report.failures == []
