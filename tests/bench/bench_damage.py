"""What the damage check costs per damaged start, beside a raw start on the same disks.

Run: ``.venv/bin/python -m tests.bench.bench_damage [--seed N] [--states S] [--damages D]``.

Three measures on the same crash states (proofs/damage/check.py), in one run:

- raw: a bookie started on each undamaged crashed disk and shut down (the disk restored
  from its image each time), no oracle: the floor a damaged start cannot go below;
- the check without inspect: damage drawn and applied, a start, the oracle's reads and
  probes;
- the check with inspect held to recovery's verdict (the default): the damaged disk also
  written to real directories and inspected.

Reports starts per second and each check's cost per start as a multiple of the raw start,
and the verdict counts (the same on every machine for the same code and seed).
"""

from __future__ import annotations

import argparse
import time

from proofs.crash.explorer import restore_disk
from proofs.damage.check import crash_states, opener, run_damage_check


def raw_starts(seed: int, states: int, repeat: int) -> tuple[int, float]:
    """Starts on undamaged crash states, ``repeat`` per state: (count, seconds)."""
    open_bookie = opener(seed)
    images = [state.image for state in crash_states(seed, 40, states)]
    started = time.perf_counter()
    count = 0
    for image in images:
        for _ in range(repeat):
            open_bookie(restore_disk(image)).shutdown()
            count += 1
    return count, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--damages", type=int, default=100)
    args = parser.parse_args()
    raw_count, raw_seconds = raw_starts(args.seed, args.states, args.damages)
    raw_rate = raw_count / raw_seconds
    print(f"raw starts:        {raw_count:6d} in {raw_seconds:6.1f} s = {raw_rate:7.1f}/s")
    for inspect in (False, True):
        # The recording of the crash states is part of the check's run: time it apart.
        started = time.perf_counter()
        crash_states(args.seed, 40, args.states)
        setup = time.perf_counter() - started
        report = run_damage_check(
            seed=args.seed, states=args.states, damages=args.damages, inspect=inspect
        )
        seconds = report.seconds - setup
        rate = report.damages / seconds
        label = "check + inspect:  " if inspect else "check, no inspect:"
        print(
            f"{label} {report.damages:6d} in {seconds:6.1f} s = {rate:7.1f}/s "
            f"({raw_rate / rate:.2f}x the raw start's cost; states recorded in {setup:.1f} s)"
        )
        print("  " + report.summary_lines()[-1])


if __name__ == "__main__":
    main()
