"""``bkref conform`` against the JavaScript bookie (tests/conformance/js/bookie.js): without a
bug flag it passes the quick profile; stale-cache and forget-fences are caught by SIGKILL
crashes alone; ack-before-fsync is not caught without the lazy disk -- by design: a kill
keeps the page cache, so an add acknowledged before its fsync still survives -- and is
caught with ``--lazy-disk``, whose power losses drop what was not fsynced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proofs.conform.results import EXIT_DIVERGENCE, EXIT_PASS
from proofs.conform.runner import Conformance, lazy_disk_unavailable
from tests.conformance.jsbookie import js_bookie_command, node_unavailable

pytestmark = pytest.mark.skipif(node_unavailable() is not None, reason=str(node_unavailable()))

TIMEOUT_S = 300


def conform(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "conform", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_without_bugs_it_passes_the_quick_profile(tmp_path: Path) -> None:
    done = conform("--adapter", js_bookie_command(), "--seed", "1", "--work-dir", str(tmp_path))
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "12 scenarios" in done.stderr


@pytest.mark.parametrize("bug", ["stale-cache", "forget-fences"])
def test_a_bug_is_caught_without_the_lazy_disk(tmp_path: Path, bug: str) -> None:
    runner = Conformance(js_bookie_command(bug), seed=1, work_dir=str(tmp_path), shrink_runs=20)
    run = runner.run()
    assert run.exit_code == EXIT_DIVERGENCE, [s.verdict for s in run.scenarios]
    failed = [s for s in run.scenarios if s.verdict == "fail"]
    failure = failed[0].failure
    assert failure is not None and failure.trace_path is not None
    check = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "check-trace", failure.trace_path],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert check.returncode == 1, check.stdout


def test_ack_before_fsync_passes_without_the_lazy_disk(tmp_path: Path) -> None:
    """The claim the lazy disk exists for: SIGKILL keeps the page cache, so this bug is
    invisible to kill -9 testing."""
    run = Conformance(js_bookie_command("ack-before-fsync"), seed=1, work_dir=str(tmp_path)).run()
    assert run.exit_code == EXIT_PASS, [s.failure for s in run.scenarios if s.failure]


@pytest.mark.skipif(lazy_disk_unavailable() is not None, reason=str(lazy_disk_unavailable()))
def test_ack_before_fsync_is_caught_with_the_lazy_disk(tmp_path: Path) -> None:
    runner = Conformance(
        js_bookie_command("ack-before-fsync"),
        seed=1,
        work_dir=str(tmp_path),
        lazy_disk=True,
        shrink_runs=10,
    )
    run = runner.run()
    assert run.exit_code == EXIT_DIVERGENCE, [s.verdict for s in run.scenarios]
    assert sum(s.power_losses for s in run.scenarios) > 0
