"""The crash-state explorer: die before every file-system operation, crash under every plan.

A workload runs once on the simulated disk. Before each mutating operation and each fsync
(SimDisk's ``on_operation`` hook) the explorer copies the disk together with a snapshot of
what the caller's oracle knows at that moment (what is durable, what is acknowledged). Then
each copy is crashed under every plan of proofs.crash.plans and handed to the caller's check,
which recovers and returns the problems it found.

Used by ``bkref crash-check`` (entry logs) and the bookie's crash tests. The explorer knows
nothing of entry logs or journals: the workload and the check are the caller's.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import attrs

from models.fs.simdisk import SimDisk
from proofs.crash.plans import plans_for
from spec.crash import CrashPlan

S = TypeVar("S")


@attrs.frozen
class CrashPoint(Generic[S]):
    """The disk just before operation ``op_index``, and the oracle's snapshot then."""

    op_index: int
    op_kind: str
    disk: SimDisk
    oracle: S


@attrs.frozen
class Failure:
    """One problem a check found in one crash state."""

    op_index: int
    op_kind: str
    plan: CrashPlan
    message: str


@attrs.define
class Report:
    """What an exploration covered and what it found."""

    crash_points: int = 0
    crash_states: int = 0
    checked_items: int = 0
    failures: list[Failure] = attrs.Factory(list)

    def merge(self, other: Report) -> None:
        self.crash_points += other.crash_points
        self.crash_states += other.crash_states
        self.checked_items += other.checked_items
        self.failures += other.failures


def copy_disk(disk: SimDisk) -> SimDisk:
    """A deep copy of the disk without its hook (the copy must not record more points)."""
    hook = disk.on_operation
    disk.on_operation = None
    try:
        return copy.deepcopy(disk)
    finally:
        disk.on_operation = hook


def record_points(
    disk: SimDisk, oracle: Callable[[], S], run: Callable[[], None]
) -> list[CrashPoint[S]]:
    """Run ``run()`` with a crash point recorded before every operation on ``disk``.

    ``oracle()`` is called at each point and must return an immutable snapshot. The hook is
    removed afterwards, whatever happens.
    """
    points: list[CrashPoint[S]] = []

    def before_operation(kind: str) -> None:
        points.append(CrashPoint(len(points), kind, copy_disk(disk), oracle()))

    assert disk.on_operation is None, "the disk already has a hook"
    disk.on_operation = before_operation
    try:
        run()
    finally:
        disk.on_operation = None
    return points


def thin(points: list[CrashPoint[S]], max_points: int | None) -> list[CrashPoint[S]]:
    """Every k-th point so that at most ``max_points`` remain (None: all of them)."""
    if max_points is None or len(points) <= max_points:
        return points
    stride = -(-len(points) // max_points)
    return points[::stride]


def plans_at(disk: SimDisk) -> Iterator[CrashPlan]:
    """The crash plans for the operations pending on ``disk``."""
    pending = disk.pending_operations()
    return plans_for([op.kind for op in pending], [op.length for op in pending])


def explore(
    points: list[CrashPoint[S]],
    check: Callable[[SimDisk, S], tuple[int, list[str]]],
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Crash every point under every plan and run ``check(crashed_disk, oracle)``, which
    returns (items checked, problems)."""
    report = Report()
    last_progress = time.monotonic()
    for number, point in enumerate(points, start=1):
        report.crash_points += 1
        for plan in plans_at(point.disk):
            crashed = copy_disk(point.disk)
            crashed.crash(plan)
            checked, problems = check(crashed, point.oracle)
            report.crash_states += 1
            report.checked_items += checked
            report.failures += [Failure(point.op_index, point.op_kind, plan, p) for p in problems]
        if progress is not None and time.monotonic() - last_progress > 2.0:
            last_progress = time.monotonic()
            progress(
                f"  crash point {number}/{len(points)}, {report.crash_states} crash states, "
                f"{len(report.failures)} failures"
            )
    return report
