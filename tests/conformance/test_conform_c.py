"""``bkref conform`` against the C bookie (tests/conformance/c/bookie.c).

Why: the C bookie is an outsider to the kit (its own storage design, written from
spec/adapter.md alone), so it tests the kit both ways: without a bug flag it must pass (a
failure is a false alarm of the kit, or a real bug of the bookie that test_c_bookie.py tells
apart), and each deliberate bug must be caught. A bug only a power loss can show
(ack-before-fsync, delete-before-fsync) is run with ``--lazy-disk``, and shown to pass with
SIGKILL crashes alone. Every bug is caught (issue 25 closed the kit's gaps: the stale cache
and the torn tail passed every run before).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proofs.conform.results import EXIT_DIVERGENCE, EXIT_PASS
from proofs.conform.runner import Conformance, lazy_disk_unavailable
from tests.conformance.bookies import CONFORM_TIMEOUT_S, conform
from tests.conformance.cbookie import BUGS, c_bookie_command, c_unavailable

pytestmark = pytest.mark.skipif(c_unavailable() is not None, reason=str(c_unavailable()))


LAZY_MISSING = lazy_disk_unavailable()
needs_lazy_disk = pytest.mark.skipif(LAZY_MISSING is not None, reason=str(LAZY_MISSING))


def test_without_bugs_it_passes_the_quick_profile(tmp_path: Path) -> None:
    done = conform("--adapter", c_bookie_command(), "--seed", "1", "--work-dir", str(tmp_path))
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "12 scenarios" in done.stderr
    assert "levels: protocol, structural" in done.stderr


@needs_lazy_disk
def test_without_bugs_it_passes_the_quick_profile_on_the_lazy_disk(tmp_path: Path) -> None:
    done = conform(
        "--adapter", c_bookie_command(), "--seed", "1", "--lazy-disk", "--work-dir", str(tmp_path)
    )
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "power losses: 0" not in done.stderr


#: (bug, lazy disk): each caught within quick seeds 1-4 (a catch may depend on the bookie's
#: timing); a bug a SIGKILL cannot show runs with the lazy disk.
CAUGHT = [
    pytest.param("ack-before-fsync", True, marks=needs_lazy_disk),
    pytest.param("delete-before-fsync", True, marks=needs_lazy_disk),
    pytest.param("stale-cache", False),
    pytest.param("serve-torn-tail", True, marks=needs_lazy_disk),
    pytest.param("forget-fences", False),
    pytest.param("ignore-key", False),
    pytest.param("admit-while-fencing", False),
    pytest.param("lose-last-acked", False),
]
SEEDS = range(1, 5)


def test_every_bug_has_a_conformance_case() -> None:
    assert {p.values[0] for p in CAUGHT} == set(BUGS)


@pytest.mark.parametrize(("bug", "lazy"), CAUGHT)
def test_a_bug_is_caught(tmp_path: Path, bug: str, lazy: bool) -> None:
    for seed in SEEDS:
        runner = Conformance(
            c_bookie_command(bug),
            seed=seed,
            work_dir=str(tmp_path / str(seed)),
            lazy_disk=lazy,
            shrink_runs=10,
        )
        run = runner.run()
        if run.exit_code == EXIT_DIVERGENCE:
            break
    else:
        pytest.fail(f"{bug} was not caught by quick seeds {list(SEEDS)}")
    failed = [s for s in run.scenarios if s.verdict == "fail"]
    failure = failed[0].failure
    assert failure is not None and failure.trace_path is not None
    if lazy:
        assert sum(s.power_losses for s in run.scenarios) > 0
    # The shrunk trace replays as a failure on its own (the model, not the runner's timing).
    check = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "check-trace", failure.trace_path],
        capture_output=True,
        text=True,
        timeout=CONFORM_TIMEOUT_S,
        check=False,
    )
    assert check.returncode == 1, check.stdout


@pytest.mark.parametrize("bug", ["ack-before-fsync", "delete-before-fsync"])
def test_a_power_loss_bug_passes_without_the_lazy_disk(tmp_path: Path, bug: str) -> None:
    """The claim the lazy disk exists for: SIGKILL keeps the page cache, so a bookie that
    answers before it syncs survives kill -9 testing."""
    run = Conformance(c_bookie_command(bug), seed=1, work_dir=str(tmp_path)).run()
    assert run.exit_code == EXIT_PASS, [s.failure for s in run.scenarios if s.failure]
