"""How deep the refinement machine's histories are, and how much of its checking is blind.

Run: ``.venv/bin/python -m tests.bench.bench_histories [--examples N] [--steps S]
[--stretch-max M]`` (the deep profile: ``--steps 150 --stretch-max 180``).

Runs the refinement machine (tests/refinement/machine.py) on bkref's bookie with a fixed,
derandomized Hypothesis profile and reports, per example: steps, acknowledged adds (an add
acknowledged by a completion or its own answer, spec/operations.py acknowledgements),
crashes and restarts, and over all state comparisons the share the model made while it
adopts what the bookie reports (right after a restart, or while a fault relaxes the entry
logs), the share it judged by the layout rules (models/entrylog/layout.py), and the share
after a GC step, whose layout it computed exactly from the layout before it. Not a timed
benchmark: the counts are what matter, and they are the same on every machine for the same
code.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from models.bookie.bookie import BookieModel
from spec.operations import Add, Crash, Restart, acknowledgements
from spec.trace import Step
from tests.refinement.machine import STRETCH_MAX, fixed_profile, machine_for


class Counts:
    def __init__(self) -> None:
        self.examples = 0
        self.steps = 0
        self.acked_adds = 0
        self.crashes = 0
        self.restarts = 0
        self.compares = 0
        self.adopted = 0
        #: Comparisons whose layout the rules judged (models/entrylog/layout.py), and those
        #: after a GC step, computed exactly from the layout before it.
        self.by_rules = 0
        self.gc_computed = 0


def _acked_adds(steps: list[Step]) -> int:
    adds = {step.index for step in steps if isinstance(step.op, Add)}
    acked = {
        ack.step
        for step in steps
        for ack in acknowledgements(step.index, step.op, step.result, step.completed)
        if ack.error is None and ack.step in adds
    }
    return len(acked)


@contextmanager
def counting_compares(counts: Counts) -> Iterator[None]:
    original = BookieModel.compare

    def compare(self: BookieModel, *args: Any, **kwargs: Any) -> list[str]:
        counts.compares += 1
        if self.fresh_run or self.logs.relaxed:
            counts.adopted += 1
        elif self._gc_unseen() or not (self.gc_since or self.maybe_dead or self.unplaced):
            counts.by_rules += 1
        else:
            counts.gc_computed += 1
        return original(self, *args, **kwargs)

    BookieModel.compare = compare  # type: ignore[method-assign]
    try:
        yield
    finally:
        BookieModel.compare = original  # type: ignore[method-assign]


def run(examples: int, steps: int, stretch_max: int = STRETCH_MAX) -> Counts:
    counts = Counts()
    base = machine_for(stretch_max=stretch_max)

    class Counted(base):  # type: ignore[misc,valid-type]
        def teardown(self) -> None:
            trace = list(self.harness.steps)
            counts.examples += 1
            counts.steps += len(trace)
            counts.acked_adds += _acked_adds(trace)
            counts.crashes += sum(isinstance(step.op, Crash) for step in trace)
            counts.restarts += sum(isinstance(step.op, Restart) for step in trace)
            super().teardown()

    profile = fixed_profile(examples, steps)
    machine: type[RuleBasedStateMachine] = Counted
    with counting_compares(counts):
        run_state_machine_as_test(machine, settings=profile)  # type: ignore[no-untyped-call, unused-ignore]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=150)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument(
        "--stretch-max",
        type=int,
        default=STRETCH_MAX,
        help="the longest healthy stretch (the deep profile's: 180)",
    )
    args = parser.parse_args()
    counts = run(args.examples, args.steps, args.stretch_max)
    n = max(counts.examples, 1)
    print(f"{counts.examples} examples x up to {args.steps} rules")
    print(f"harness steps per example: {counts.steps / n:.1f}")
    print(f"acknowledged adds per example: {counts.acked_adds / n:.1f}")
    print(
        f"per 100 steps: {100 * counts.crashes / max(counts.steps, 1):.1f} crashes, "
        f"{100 * counts.restarts / max(counts.steps, 1):.1f} restarts"
    )
    total = max(counts.compares, 1)

    def share(n: int) -> str:
        return f"{n / total:.0%} ({n})"

    print(
        f"state comparisons: {counts.compares}: adopting the bookie's layout after a restart "
        f"or a fault {share(counts.adopted)}, judged by the layout rules "
        f"{share(counts.by_rules)}, computed exactly after a GC step {share(counts.gc_computed)}"
    )


if __name__ == "__main__":
    main()
