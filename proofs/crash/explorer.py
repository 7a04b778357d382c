"""The crash-state explorer: die before every file-system operation, crash under every plan.

A workload runs once on the simulated disk. Before each mutating operation and each fsync
(SimDisk's ``on_operation`` hook) the explorer takes an image of the disk together with a
snapshot of what the caller's oracle knows at that moment (what is durable, what is
acknowledged). Then each image is crashed under every plan of proofs.crash.plans and handed
to the caller's check, which recovers and returns the problems it found.

Two economies, neither of which changes a verdict:

- a disk image is a pickle of the SimDisk, restored once per crash state: unpickling is
  several times faster than ``copy.deepcopy`` of the same disk, which dominated the run;
- a crash state whose crashed disk is identical (same names, same kinds, same bytes:
  :func:`disk_fingerprint`) to one that already *passed* at the same crash point passes too,
  without being recovered again: same disk, same oracle, and a deterministic check (the
  FileSystem seam shows a recovery nothing else). A state like one that failed is checked
  again, so every failure is reported for its own plan.

Used by ``bkref crash-check`` (entry logs, proofs/crash/entry_log_check.py; the bookie's
states go through the refinement harness, proofs/crash/bookie_check.py, with the same
fingerprints) and by the journal's and lastMark's crash tests. The explorer knows nothing of
entry logs or journals: the workload and the check are the caller's.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Protocol, TypeVar

import attrs

from models.fs.simdisk import SimDisk
from proofs.crash.plans import plans_for
from spec.crash import CrashPlan

S = TypeVar("S")


def disk_image(disk: SimDisk) -> bytes:
    """The disk, durable state and pending operations, as bytes (without its hook)."""
    hook = disk.on_operation
    disk.on_operation = None
    try:
        return pickle.dumps(disk, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        disk.on_operation = hook


def restore_disk(image: bytes) -> SimDisk:
    """A fresh SimDisk from :func:`disk_image`."""
    disk = pickle.loads(image)
    assert isinstance(disk, SimDisk), type(disk)
    return disk


def copy_disk(disk: SimDisk) -> SimDisk:
    """A deep copy of the disk without its hook (the copy must not record more points):
    SimDisk.copy, the same as a round trip through :func:`disk_image`."""
    return disk.copy()


def disk_fingerprint(disk: SimDisk) -> Hashable:
    """Everything a recovery can see of a crashed disk: every directory's path and every
    file's path and bytes. (No pending operation is left after a crash, and bkref makes no
    hard links, so names and bytes are the whole story.)"""
    directories: list[str] = []
    stack = ["/"]
    while stack:
        directory = stack.pop()
        for name in disk.listdir(directory):
            path = directory.rstrip("/") + "/" + name
            if disk.is_dir(path):
                directories.append(path)
                stack.append(path)
    return frozenset(directories), frozenset(disk.current_snapshot().items())


@attrs.frozen
class CrashPoint(Generic[S]):
    """The disk just before operation ``op_index`` (as an image), and the oracle's snapshot
    then."""

    op_index: int
    op_kind: str
    image: bytes = attrs.field(repr=False)
    oracle: S

    @property
    def disk(self) -> SimDisk:
        """A fresh copy of the disk at this point (each access makes a new one)."""
        return restore_disk(self.image)


class SavedTrace(Protocol):
    """A failure that can be written out as a trace (proofs.harness's RefinementFailure)."""

    def save(self) -> str: ...


@attrs.frozen(eq=False)
class CrashFailure:
    """One problem a check found in one crash state: before operation ``op_index`` (of kind
    ``op_kind``, counted from the start of the workload), under ``plan`` (None: before any
    plan, e.g. the workload failed without a crash). ``where`` says it
    in the workload's own terms; ``command`` is the bkref command that re-runs the state
    (entry-log target); ``trace`` the failing trace (bookie target)."""

    op_index: int
    op_kind: str
    plan: CrashPlan | None
    message: str
    where: str = ""
    command: str = ""
    trace: SavedTrace | None = None

    def replay_lines(self) -> list[str]:
        """How to see this state again: the re-run command, or the saved trace (written
        now) with the commands that replay and explain it."""
        lines = [f"re-run: {self.command}"] if self.command else []
        if self.trace is not None:
            path = self.trace.save()
            lines += [
                f"trace: {path}",
                f"replay: bkref check-trace {path}",
                f"explain: bkref explain {path}",
            ]
        return lines


@attrs.define
class Report:
    """What an exploration covered and what it found. ``recovered_states`` of the
    ``crash_states`` were recovered and checked; the others passed as a disk identical to
    one that passed at the same point (module docstring)."""

    crash_points: int = 0
    crash_states: int = 0
    recovered_states: int = 0
    checked_items: int = 0
    failures: list[CrashFailure] = attrs.Factory(list)
    #: What the recovered states' checks did, by kind, in words ("acknowledged entries read
    #: back": 1234), for progress lines and the summary.
    checks: dict[str, int] = attrs.Factory(dict)

    def merge(self, other: Report) -> None:
        self.crash_points += other.crash_points
        self.crash_states += other.crash_states
        self.recovered_states += other.recovered_states
        self.checked_items += other.checked_items
        self.failures += other.failures
        self.count(other.checks)

    def count(self, checks: dict[str, int]) -> None:
        """Add ``checks`` to the counts of what was checked."""
        for kind, number in checks.items():
            self.checks[kind] = self.checks.get(kind, 0) + number

    def describe_states(self) -> str:
        """The crash states so far and what their checks did, in words."""
        done = ", ".join(f"{number} {kind}" for kind, number in self.checks.items())
        return (
            f"{self.crash_states} crash states, {self.recovered_states} recovered and checked"
            f"{' (' + done + ')' if done else ''}, {len(self.failures)} failures"
        )

    def check_invariants(self) -> None:
        assert 0 <= self.recovered_states <= self.crash_states, self
        assert self.crash_points >= 0 and self.checked_items >= 0, self
        assert all(failure.message for failure in self.failures), self


def record_points(
    disk: SimDisk, oracle: Callable[[], S], run: Callable[[], None]
) -> list[CrashPoint[S]]:
    """Run ``run()`` with a crash point recorded before every operation on ``disk``.

    ``oracle()`` is called at each point and must return an immutable snapshot. The hook is
    removed afterwards, whatever happens.
    """
    points: list[CrashPoint[S]] = []

    def before_operation(kind: str) -> None:
        points.append(CrashPoint(len(points), kind, disk_image(disk), oracle()))

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


#: Seconds between two progress lines.
PROGRESS_EVERY_S = 2.0


class ProgressTicker:
    """Progress lines at most every PROGRESS_EVERY_S seconds (none without ``say``)."""

    def __init__(self, say: Callable[[str], None] | None) -> None:
        self._say = say
        self._last = time.monotonic()

    def due(self) -> bool:
        """Whether a line should be said now (the caller then calls :meth:`say`)."""
        return self._say is not None and time.monotonic() - self._last > PROGRESS_EVERY_S

    def say(self, line: str) -> None:
        self._last = time.monotonic()
        if self._say is not None:
            self._say(line)


def explore(
    points: list[CrashPoint[S]],
    check: Callable[[SimDisk, S], tuple[int, list[str]]],
    progress: Callable[[str], None] | None = None,
    *,
    label: str = "",
    command: Callable[[int, int], str] | None = None,
    items: str = "items checked",
) -> Report:
    """Crash every point under every plan and run ``check(crashed_disk, oracle)``, which
    returns (items checked, problems). ``label`` starts each progress line; ``command(point
    index, plan index)`` is the command that re-runs a failing state; ``items`` says what
    the check's count counts (in the progress lines and the report's ``checks``)."""
    report = Report()
    ticker = ProgressTicker(progress)
    for number, point in enumerate(points, start=1):
        report.crash_points += 1
        passed: set[Hashable] = set()
        for plan_index, plan in enumerate(plans_at(point.disk)):
            crashed = restore_disk(point.image)
            crashed.crash(plan)
            report.crash_states += 1
            fingerprint = disk_fingerprint(crashed)
            if fingerprint in passed:
                continue
            checked, problems = check(crashed, point.oracle)
            report.recovered_states += 1
            report.checked_items += checked
            report.count({items: checked})
            if not problems:
                passed.add(fingerprint)
            rerun = command(point.op_index, plan_index) if command is not None else ""
            report.failures += [
                CrashFailure(point.op_index, point.op_kind, plan, p, command=rerun)
                for p in problems
            ]
        if ticker.due():
            ticker.say(
                f"  {label}crash point {number}/{len(points)} (before a {point.op_kind}): "
                f"{report.describe_states()}"
            )
    return report
