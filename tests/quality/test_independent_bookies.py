"""The conformance kit passes every correct bookie written apart from bkref, on many seeds,
with and without the lazy disk's power losses (issue 25: a correct bookie of another design
was falsely failed in about half of its runs).

Each correct bookie of tests/conformance/bookies.py runs the standard profile (50
scenarios, 3 crashes each) on seeds 1-10 in the default test run and 1-100 under
``-m slow``, each a ``bkref conform`` process (two at a time: they spend most of their time
waiting on the bookie and the disk). Every run must pass: a failure of a correct bookie is a
false verdict of the kit, and the assertion prints its trace and the commands that replay it.
That each seeded bug of these bookies is caught is held by their own files
(tests/conformance/test_conform_*.py).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from proofs.conform.results import EXIT_PASS
from proofs.conform.runner import lazy_disk_unavailable
from tests.conformance.bookies import BOOKIES, Outsider

LAZY_MISSING = lazy_disk_unavailable()
RUN_TIMEOUT_S = 900
WORKERS = 2


def _run(bookie: Outsider, seed: int, lazy: bool, work: Path) -> tuple[int, int, str]:
    args = [
        sys.executable,
        "-m",
        "proofs.cli.main",
        "conform",
        "--adapter",
        bookie.command(),
        "--seed",
        str(seed),
        "--profile",
        "standard",
        "--work-dir",
        str(work / f"seed-{seed}"),
    ]
    if lazy:
        args.append("--lazy-disk")
    done = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    return seed, done.returncode, done.stderr


def _passes_seeds(bookie: Outsider, seeds: range, lazy: bool, work: Path) -> None:
    why = bookie.unavailable()
    if why is not None:
        pytest.skip(why)
    if lazy and LAZY_MISSING is not None:
        pytest.skip(LAZY_MISSING)
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(lambda seed: _run(bookie, seed, lazy, work), seeds))
    failed = [(seed, code, err) for seed, code, err in results if code != EXIT_PASS]
    report = "\n\n".join(f"seed {seed}: exit {code}\n{err[-2500:]}" for seed, code, err in failed)
    assert not failed, f"{bookie.name} (correct) failed {len(failed)} of {len(seeds)}:\n{report}"
    for _seed, _code, err in results:
        assert "scenarios run: 50 (pass 50" in err, err[-1500:]


@pytest.mark.parametrize("lazy", [False, True], ids=["kill", "lazy"])
@pytest.mark.parametrize("bookie", BOOKIES, ids=[b.name for b in BOOKIES])
def test_a_correct_bookie_passes_ten_standard_seeds(
    bookie: Outsider, lazy: bool, tmp_path: Path
) -> None:
    _passes_seeds(bookie, range(1, 11), lazy, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("lazy", [False, True], ids=["kill", "lazy"])
@pytest.mark.parametrize("bookie", BOOKIES, ids=[b.name for b in BOOKIES])
def test_a_correct_bookie_passes_a_hundred_standard_seeds(
    bookie: Outsider, lazy: bool, tmp_path: Path
) -> None:
    _passes_seeds(bookie, range(1, 101), lazy, tmp_path)
