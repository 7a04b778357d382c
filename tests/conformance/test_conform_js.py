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
from tests.conformance.bookies import CONFORM_TIMEOUT_S, conform
from tests.conformance.jsbookie import js_bookie_command, node_unavailable

pytestmark = pytest.mark.skipif(node_unavailable() is not None, reason=str(node_unavailable()))


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
        timeout=CONFORM_TIMEOUT_S,
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


@pytest.mark.skipif(lazy_disk_unavailable() is not None, reason=str(lazy_disk_unavailable()))
def test_a_recovery_that_does_not_sync_what_it_shows_is_caught_with_the_lazy_disk(
    tmp_path: Path,
) -> None:
    """This bookie's own bug, found by the kit's independent-bookie suite (issue 25): records
    a kill left in the page cache were served after the restart and lost at the next power
    loss (R-RECOVERY-SHOWN). Kept as a known-bad variant, caught within a few standard
    seeds (it needs a crash with adds in flight, reads of them, then a power loss before
    anything else is written: about one scenario in 50), scenario by scenario, not shrunk,
    until the first that fails. Run ``--bare`` (state none): claiming a state, the bookie
    answers the runner's inspect after each restart by syncing its log, which hides the
    bug."""
    caught = None
    for seed in range(1, 7):
        runner = Conformance(
            js_bookie_command("unsynced-recovery") + " --bare",
            seed=seed,
            work_dir=str(tmp_path / str(seed)),
            profile="standard",
            lazy_disk=True,
            shrink=False,
        )
        for index in range(runner.scenario_count()):
            result = runner.run_one(index)
            if result.verdict == "fail":
                caught = result
                break
        if caught is not None:
            break
    assert caught is not None, "unsynced-recovery was not caught by standard seeds 1-6"
    failed = [caught]
    failure = caught.failure
    assert failure is not None and failure.kind == "divergence", failure
    assert failed[0].power_losses > 0
