"""The crash checker finds these bugs: each known-bad variant must fail ``crash-check``.

The checker's strength is measured, not assumed. Each test swaps one method of the entry
logger for its variant from tests/quality/variants.py, runs the same small workload the CI
slice runs, and requires failures of the expected kind. The unchanged implementation passes
the same run (tests/unit/proofs/crash/test_entry_log_check.py). A failure must also be
replayable: the command it names re-runs exactly its crash state.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from impl.entrylog.manager import SingleEntryLogManager
from impl.entrylog.per_ledger import PerLedgerEntryLogManager
from proofs.cli.main import main
from proofs.crash.entry_log_check import run_check
from proofs.crash.explorer import Report
from tests.quality import variants


def _run(flush_entrylog_bytes: int = 0) -> Report:
    """The CI slice: small enough for seconds, big enough to rotate, checkpoint and flush."""
    return run_check(seed=1, entries=20, ledgers=2, flush_entrylog_bytes=flush_entrylog_bytes)


def _messages(report: Report) -> str:
    return "\n".join(failure.message for failure in report.failures)


def test_catches_a_log_whose_directory_is_never_fsynced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "_allocate", variants.allocate_without_dir_fsync)
    report = _run()
    assert report.failures, "a log name that is never made durable went unnoticed"
    assert "lost" in _messages(report)


def test_catches_a_checkpoint_that_does_not_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", variants.checkpoint_without_fsync)
    report = _run()
    assert report.failures, "a checkpoint without fsync went unnoticed"
    assert "lost" in _messages(report)


def test_catches_a_flush_that_forgets_rotated_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "flush", variants.flush_forgetting_rotated_logs)
    report = _run()
    assert report.failures, "a flush that leaves rotated logs unsynced went unnoticed"
    assert "lost" in _messages(report)


def test_catches_log_ids_trusting_last_id_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    variants.allocator_trusting_last_id(monkeypatch)
    report = _run()
    assert report.failures, "a log id allocator that can reuse an existing id went unnoticed"
    messages = _messages(report)
    assert "after recovery" in messages or "reused" in messages


def test_a_failure_re_runs_from_its_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every failure names its seed, crash point and plan; the command it prints re-runs
    exactly that state and fails again, saying which check failed."""
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", variants.checkpoint_without_fsync)
    failure = _run().failures[0]
    assert failure.plan is not None
    assert failure.command.startswith(
        "bkref crash-check --target entry-log --seed 1 --entries 20 --ledgers 2 "
        f"--flush-entrylog-bytes 0 --point {failure.op_index} --plan "
    )
    assert main(failure.command.split()[1:]) == 1
    out = capsys.readouterr().out
    assert f"crash point {failure.op_index} (before a {failure.op_kind})" in out
    assert f"({failure.plan.describe()}): FAIL" in out
    assert failure.message in out
    assert out.splitlines()[-1] == "FAIL: 1 crash state(s) re-run, 1 failed"


def test_quiet_prints_the_failures_and_the_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(SingleEntryLogManager, "checkpoint", variants.checkpoint_without_fsync)
    argv = ["crash-check", "--target", "entry-log", "--entries", "20", "--ledgers", "2"]
    assert main([*argv, "--quiet", "--flush-entrylog-bytes", "0", "--max-failures", "2"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in lines[:4]] == ["FAIL", "", "FAIL", ""]
    assert lines[1].startswith("  re-run: bkref crash-check --target entry-log --seed 1 ")
    assert lines[4].startswith("... and ") and lines[4].endswith(" more failures")
    assert lines[5] == "summary (seed 1):"
    assert lines[6].startswith("  entry-log: crashed the entry logger (20 adds over 2 ledgers")
    assert "; checked: durability of forced entries (property 1)" in lines[6]
    assert lines[6].endswith(" failures (above)")
    assert lines[-1].startswith("FAIL: ") and len(lines) == 8


def _expiry_never_evicting(self: PerLedgerEntryLogManager, now: int) -> None:
    """A per-ledger manager whose cache never expires an idle ledger's log (no
    expireAfterAccess): the log stays active, unsealed, however long its ledger is idle."""
    del self, now


@pytest.mark.parametrize(
    ("method", "variant", "caught_by"),
    [
        # The rotated (evicted) logs marked flushed without an fsync: the shared
        # flushRotatedLogs of EntryLogManagerBase, which the per-ledger checkpoint runs.
        ("_flush_rotated", variants.checkpoint_without_fsync, ("lost",)),
        ("_allocate", variants.allocate_without_dir_fsync, ("lost",)),
        ("_evict_expired", _expiry_never_evicting, ("had sealed", "lost its ledgers map")),
    ],
    ids=["checkpoint_without_fsync", "allocate_without_dir_fsync", "expiry_never_evicting"],
)
def test_catches_known_bad_variants_with_an_entry_log_per_ledger(
    method: str,
    variant: Callable[..., object],
    caught_by: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The per-ledger manager (entryLogPerLedgerEnabled=true, at most two active logs, idle
    ledgers expiring) on the per-ledger slice of tests/unit/proofs/crash/
    test_entry_log_check.py, which the unchanged manager passes: each variant fails it, and
    a failure re-runs from its command, which names the manager."""
    monkeypatch.setattr(PerLedgerEntryLogManager, method, variant)
    report = run_check(seed=1, entries=16, ledgers=3, flush_entrylog_bytes=0, manager="per-ledger")
    assert report.failures, f"{method} as {variant.__name__} went unnoticed with per-ledger logs"
    messages = _messages(report)
    assert any(text in messages for text in caught_by), messages[:2000]
    failure = next(failure for failure in report.failures if failure.plan is not None)
    assert failure.command.startswith(
        "bkref crash-check --target entry-log --manager per-ledger --seed 1 --entries 16 "
        f"--ledgers 3 --flush-entrylog-bytes 0 --point {failure.op_index} --plan "
    )
    assert main(failure.command.split()[1:]) == 1
    out = capsys.readouterr().out
    assert out.startswith("crash-check entry-log per-ledger: ") and failure.message in out
