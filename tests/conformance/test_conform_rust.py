"""``bkref conform`` against the Rust bookie (tests/conformance/rust/bookie.rs).

Why: rsbookie is an outsider the kit did not grow up with (another language, another storage
design: a write-ahead log plus snapshots of an in-memory table), so it tests the kit both
ways. Without a bug flag it must pass the quick profile, with and without the lazy disk; a
failure there is the kit's (each one seen is filed in /work/briefs/kit-cases/rsbookie.md).
With a bug flag the kit must catch the bug, and catch it for the right reason: a catch counts
only when the failure names the bug's symptom, ``bkref check-trace`` fails the shrunk trace
too, and the same scenario passes without the bug (so it is not one of the kit's own false
failures, which can fail a scenario with a bug flag on as well).

Every bug is caught, within a few quick seeds (issue 25 closed the kit's gaps: a delete
acknowledged before it is durable, a read cache a delete did not invalidate, a torn last
record served, acknowledgements a power loss must land between).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.conform.results import EXIT_DIVERGENCE, EXIT_PASS
from proofs.conform.runner import Conformance, lazy_disk_unavailable
from tests.conformance.bookies import CONFORM_TIMEOUT_S, conform
from tests.conformance.rsbookie import BUGS, BuildError, rs_bookie_command, rs_unavailable

pytestmark = pytest.mark.skipif(rs_unavailable() is not None, reason=str(rs_unavailable()))


LAZY_MISSING = lazy_disk_unavailable()
needs_lazy = pytest.mark.skipif(LAZY_MISSING is not None, reason=str(LAZY_MISSING))


def command(*bugs: str) -> str:
    try:
        return rs_bookie_command(*bugs)
    except BuildError as exc:
        pytest.fail(str(exc))


def test_without_bugs_it_passes_the_quick_profile(tmp_path: Path) -> None:
    done = conform("--adapter", command(), "--seed", "1", "--work-dir", str(tmp_path))
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "12 scenarios" in done.stderr and "levels: protocol" in done.stderr


@needs_lazy
def test_without_bugs_it_passes_the_quick_profile_with_the_lazy_disk(tmp_path: Path) -> None:
    done = conform(
        "--adapter", command(), "--seed", "1", "--lazy-disk", "--work-dir", str(tmp_path)
    )
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "power losses: 0" not in done.stderr


#: Quick seeds a bug must be caught within (a catch can depend on the bookie's timing).
SEEDS = range(1, 5)
#: Bugs run with the standard profile: a torn last record needs a power loss that tears the
#: WAL's last batch write and a read of that entry (about one scenario in 60, measured), and
#: an answer before the fdatasync a power loss that falls between the two.
STANDARD = frozenset({"serve-torn-tail", "ack-before-fsync", "delete-before-fsync"})
#: The end of a divergence message: the allowed answers, then the rule that decides.
RULE_TAG = r"( \[R-[A-Z-]+\])?$"


def caught(tmp_path: Path, bug: str, lazy: bool, symptom: str) -> None:
    """A run of one of SEEDS catches ``bug``, for the right reason (module doc): the quick
    profile, or the standard one for a bug that needs a rarer crash (a torn WAL write)."""
    profile = "standard" if bug in STANDARD else "quick"
    for seed in SEEDS:
        run = Conformance(
            command(bug),
            seed=seed,
            profile=profile,
            work_dir=str(tmp_path / f"bug-{seed}"),
            lazy_disk=lazy,
            shrink_runs=20,
        ).run()
        failed = [s for s in run.scenarios if s.verdict == "fail" and s.failure is not None]
        if failed:
            break
    else:
        pytest.fail(f"{bug} was not caught by {profile} seeds {list(SEEDS)}")
    assert run.exit_code == EXIT_DIVERGENCE, [(s.verdict, s.failure) for s in run.scenarios]
    scenario = failed[0]
    failure = scenario.failure
    assert failure is not None and failure.trace_path is not None
    assert re.search(symptom, failure.message), failure
    check = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "check-trace", failure.trace_path],
        capture_output=True,
        text=True,
        timeout=CONFORM_TIMEOUT_S,
        check=False,
    )
    assert check.returncode == 1, check.stdout
    clean = Conformance(
        command(),
        seed=seed,
        profile=profile,
        work_dir=str(tmp_path / "clean"),
        lazy_disk=lazy,
        shrink=False,
    ).run([scenario.index])
    assert clean.exit_code == EXIT_PASS, f"scenario {scenario.index} fails without the bug too"


#: (bug, lazy disk, what the failure must say). A bug a SIGKILL cannot show (the page cache
#: survives it) runs with the lazy disk; the others with SIGKILL crashes alone.
CAUGHT = [
    ("forget-fences", False, r"answered ok( later)?; allowed: fenced(, pending)?" + RULE_TAG),
    # A wrong key's add is taken (answered ok), or, when a crash hid its answer, read back
    # (answered data, or other bytes where the model holds no entry: R-READ-DATA).
    ("ignore-key", False, r"answered (ok|data|other bytes)|allowed: unauthorized" + RULE_TAG),
    # An add sent while the fence is in flight may also wait for it ("pending").
    (
        "admit-while-fencing",
        False,
        r"answered ok( later)?; allowed: fenced(, pending)?" + RULE_TAG,
    ),
    # The last record lost may be an add (it reads back no more), a delete (the ledger
    # comes back and takes adds again), or a new ledger's first acknowledged add (the ledger
    # is gone, where its entries were only in flight: R-ACK-DURABLE, seen under load).
    (
        "lose-last-acked",
        False,
        r"answered failed: no_(entry|ledger); allowed: "
        r"(data(, no_entry)?|no_entry \[R-ACK-DURABLE\])|R-DELETE",
    ),
    ("stale-cache", False, r"allowed: no_ledger|R-DELETE"),
    # An acknowledged entry reads back no more, or a ledger whose acknowledged adds a power
    # loss took whole is gone (R-ACK-DURABLE, as for lose-last-acked).
    (
        "ack-before-fsync",
        True,
        r"allowed: data" + RULE_TAG + r"|no_ledger; allowed: no_entry \[R-ACK-DURABLE\]",
    ),
    ("delete-before-fsync", True, r"no_ledger|R-DELETE"),
    ("serve-torn-tail", True, r"read \d+:\d+ answered"),
]


@pytest.mark.parametrize(("bug", "lazy", "symptom"), CAUGHT, ids=[c[0] for c in CAUGHT])
def test_a_bug_is_caught(tmp_path: Path, bug: str, lazy: bool, symptom: str) -> None:
    if lazy and LAZY_MISSING is not None:
        pytest.skip(LAZY_MISSING)
    caught(tmp_path, bug, lazy, symptom)


@needs_lazy
def test_lose_last_acked_is_caught_with_the_lazy_disk_too(tmp_path: Path) -> None:
    caught(tmp_path, "lose-last-acked", True, r"answered failed: no_(entry|ledger); allowed: data")


@pytest.mark.parametrize("bug", ["ack-before-fsync", "delete-before-fsync"])
def test_a_bug_of_unsynced_acks_passes_without_the_lazy_disk(tmp_path: Path, bug: str) -> None:
    """The claim the lazy disk exists for: SIGKILL keeps the page cache, so an answer given
    before its fdatasync is invisible to kill -9 testing."""
    run = Conformance(command(bug), seed=1, work_dir=str(tmp_path), shrink=False).run()
    assert run.exit_code == EXIT_PASS, [s.failure for s in run.scenarios if s.failure]


def test_every_bug_has_a_conform_test() -> None:
    assert {c[0] for c in CAUGHT} == set(BUGS)
