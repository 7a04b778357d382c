"""Refinement harness speed: steps/s and crash states checked/s, beside the raw bookie.

Run: ``.venv/bin/python -m tests.bench.bench_refinement [--runs R] [--steps N] [--seed S]
[--profile]``. ``--runs 1 --steps 4000`` measures one long run (hundreds of entry logs:
inspecting and comparing them every step is what costs there).

Scenarios, each on a new bookie as the stateful test runs them, generated from seeds: adds
in bundles to a few ledgers (tiny entry logs, so they rotate), reads, fences, journal
forces, checkpoints, rotations, and a crash with a drawn plan followed by a restart every
40 steps or so. It runs twice in the same process:

- raw baseline: the same operations on the Bookie over the simulated disk, with nothing
  checked (the cost of the implementation and the simulated disk alone);
- harness: proofs/harness/refinement.py, which also runs the model, compares the abstract state
  after every step, checks the properties and the invariants of model, bookie and disk, and
  reads back what each crash left open.

Reported: steps/s of each, their ratio, and crash states checked/s (crash + recovery +
check of every crash outcome, per second of harness time). Target (issue 4): at least
1,000 harness steps/s.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time

from proofs.harness.refinement import (
    SHADOW_CRASH_EVERY,
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
)
from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite
from spec.operations import (
    Add,
    Checkpoint,
    Crash,
    Fence,
    JournalForce,
    Operation,
    Read,
    Restart,
    Rotate,
)

LEDGERS = 6


def scenario(steps: int, seed: int) -> list[Operation]:
    """A plausible workload of about ``steps`` operations (reads probe recent entries)."""
    rng = random.Random(seed)
    ops: list[Operation] = []
    next_entry = [0] * (LEDGERS + 1)
    fenced: set[int] = set()
    while len(ops) < steps:
        roll = rng.random()
        ledger = rng.randrange(1, LEDGERS + 1)
        if roll < 0.45 and ledger not in fenced:
            for _ in range(rng.randrange(1, 4)):
                ops.append(Add(ledger, next_entry[ledger], b"k%d" % ledger, rng.randbytes(100)))
                next_entry[ledger] += 1
        elif roll < 0.65 and next_entry[ledger]:
            ops.append(Read(ledger, rng.randrange(next_entry[ledger])))
        elif roll < 0.80:
            ops.append(JournalForce())
        elif roll < 0.87:
            ops.append(Checkpoint())
        elif roll < 0.91:
            ops.append(Rotate())
        elif roll < 0.92:
            ops.append(Fence(ledger, b"k%d" % ledger))
            fenced.add(ledger)
        elif roll < 0.945:
            ops += [Crash(_plan(rng)), Restart()]
    return ops


def _plan(rng: random.Random) -> CrashPlan:
    kind = rng.randrange(4)
    if kind == 0:
        return LoseUnsynced()
    if kind == 1:
        return KeepPrefix(rng.randrange(20))
    if kind == 2:
        return TornWrite(rng.randrange(20), rng.randrange(1, 3))
    return KeepSubset(frozenset(rng.sample(range(20), 6)))


def run_raw(runs: list[list[Operation]]) -> float:
    """Seconds to run every scenario on the bookie alone (answers recorded, nothing
    checked), a fresh bookie and disk for each, as the stateful test does."""
    elapsed = 0.0
    for ops in runs:
        sut = InProcessBookie(SMALL_SETTINGS)
        start = time.perf_counter()
        for index, op in enumerate(ops):
            sut.run(index, op, None)
        elapsed += time.perf_counter() - start
    return elapsed


def run_harness(
    runs: list[list[Operation]], *, disk_check: bool = True, shadow_every: int = SHADOW_CRASH_EVERY
) -> tuple[float, int, int]:
    """Seconds, steps (post-restart reads included; not the shadow crashes' steps) and crash
    states through the harness."""
    elapsed, steps, crashes = 0.0, 0, 0
    for ops in runs:
        harness = Refinement(
            InProcessBookie(SMALL_SETTINGS),
            SMALL_SETTINGS,
            disk_check=disk_check,
            shadow_crash_every=shadow_every,
        )
        start = time.perf_counter()
        harness.run_all(ops)
        elapsed += time.perf_counter() - start
        steps += len(harness.steps)
        crashes += sum(1 for op in ops if isinstance(op, Crash))
    return elapsed, steps, crashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=80, help="steps per scenario")
    parser.add_argument("--runs", type=int, default=50, help="scenarios, each on a new bookie")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="profile the harness run")
    parser.add_argument(
        "--no-disk-check", action="store_true", help="without the disk check (disk_check.py)"
    )
    parser.add_argument(
        "--shadow-every",
        type=int,
        default=SHADOW_CRASH_EVERY,
        help="steps between shadow crashes (0: none)",
    )
    args = parser.parse_args()
    runs = [scenario(args.steps, args.seed + number) for number in range(args.runs)]
    operations = sum(len(ops) for ops in runs)
    raw_s = run_raw(runs)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
    harness_s, steps, crashes = run_harness(
        runs, disk_check=not args.no_disk_check, shadow_every=args.shadow_every
    )
    if args.profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    raw_rate = operations / raw_s
    rate = steps / harness_s
    print(
        f"{args.runs} scenarios of ~{args.steps} steps: {operations} operations, "
        f"{crashes} crashes (seeds {args.seed}..{args.seed + args.runs - 1})"
    )
    print(f"raw bookie on the simulated disk: {raw_rate:,.0f} steps/s")
    print(
        f"harness (model + bookie + checks): {rate:,.0f} steps/s "
        f"({steps} steps with the post-restart reads)"
    )
    print(f"ratio harness/raw: {rate / raw_rate:.2f}x")
    print(f"crash states checked: {crashes / harness_s:,.1f}/s")


if __name__ == "__main__":
    main()
