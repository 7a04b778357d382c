"""Ledger directories and how full they are (LedgerDirsManager + DiskChecker + the disk part
of LedgerDirsMonitor).

Spec page: spec/format/entry_log.md ("File names"). Each ledger directory is one of
BookKeeper's ``<ledgerDir>/current`` directories. :meth:`LedgerDirs.check` reads the free
and total space of every directory through the FileSystem seam and classifies it as
BookKeeper's DiskChecker does, with strict comparisons (``used > diskUsageThreshold``):

- usage above ``threshold`` (diskUsageThreshold, 0.95): full, no new log goes there;
- usage above ``warn_threshold`` (diskUsageWarnThreshold, 0.90): almost full, still
  writable, but listeners are told so the active log rotates off it;
- otherwise writable.

``mark_full`` is for a write that met ENOSPC between two checks (addToFilledDirs). Listeners
are called on every state change, with the directory and its new state.

Simplified on purpose (explicit steps, no thread): BookKeeper's monitor notifies
``diskAlmostFull`` on every check while a directory stays above the warn threshold; we notify
on changes only. Its low-water mark (``diskUsageLwmThreshold``) for leaving read-only mode and
its ``minUsableSizeForEntryLogCreation`` fallback (creating a log in a full directory that
still has that many bytes free) are not implemented: with no writable directory a new log is
refused with NoWritableLedgerDir. Disk failures (``diskFailed``) are not modelled: an FsError
from ``disk_space`` propagates.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Protocol

from impl.fs.api import FileSystem
from spec.errors import ConfigError, NoWritableLedgerDir


class DirState(enum.Enum):
    """How full a ledger directory is."""

    WRITABLE = "writable"
    ALMOST_FULL = "almost full"
    FULL = "full"


#: Called with (directory, new state) whenever a directory changes state.
DirListener = Callable[[str, DirState], None]


class RandomSource(Protocol):
    """The injected random source: ``random.Random`` satisfies it."""

    def randrange(self, stop: int, /) -> int:
        """A uniform integer in ``[0, stop)``."""
        ...


def classify(usage: float, warn_threshold: float, threshold: float) -> DirState:
    """DiskChecker.checkDiskFull: full above ``threshold``, almost full above
    ``warn_threshold`` (strictly above, as Java compares)."""
    assert 0.0 <= usage <= 1.0, usage
    if usage > threshold:
        return DirState.FULL
    if usage > warn_threshold:
        return DirState.ALMOST_FULL
    return DirState.WRITABLE


def validate_thresholds(warn_threshold: float, threshold: float) -> None:
    """DiskChecker.validateThreshold: both in (0, 1) and warn <= threshold."""
    if not 0.0 < threshold < 1.0:
        raise ConfigError(
            f"diskUsageThreshold={threshold} is out of range: it must be above 0 and below 1"
        )
    if not 0.0 < warn_threshold < 1.0:
        raise ConfigError(
            f"diskUsageWarnThreshold={warn_threshold} is out of range: it must be above 0 "
            "and below 1"
        )
    if warn_threshold > threshold:
        raise ConfigError(
            f"diskUsageWarnThreshold={warn_threshold} is above diskUsageThreshold={threshold}: "
            "set the warn threshold at or below the full threshold"
        )


class LedgerDirs:
    """The ledger directories, their last known usage and state, and the listeners."""

    def __init__(
        self,
        fs: FileSystem,
        dirs: Sequence[str],
        warn_threshold: float = 0.90,
        threshold: float = 0.95,
    ) -> None:
        if not dirs:
            raise ConfigError("ledgerDirectories is empty: configure at least one directory")
        if len(set(dirs)) != len(dirs):
            raise ConfigError(f"ledgerDirectories lists a directory twice: {list(dirs)}")
        validate_thresholds(warn_threshold, threshold)
        self._fs = fs
        self._dirs = tuple(dirs)
        self._warn_threshold = warn_threshold
        self._threshold = threshold
        self._states = dict.fromkeys(self._dirs, DirState.WRITABLE)
        self._usages: dict[str, float | None] = dict.fromkeys(self._dirs)
        self._listeners: list[DirListener] = []

    @property
    def dirs(self) -> tuple[str, ...]:
        """Every configured directory, in configuration order."""
        return self._dirs

    def state(self, directory: str) -> DirState:
        return self._states[directory]

    def usage(self, directory: str) -> float | None:
        """The usage measured by the last check, or None before the first one."""
        return self._usages[directory]

    def add_listener(self, listener: DirListener) -> None:
        self._listeners.append(listener)

    def is_writable(self, directory: str) -> bool:
        """Writable or almost full: a new log may go there."""
        return self._states[directory] is not DirState.FULL

    def writable_dirs(self) -> list[str]:
        """The directories a new log may go to, in configuration order."""
        return [d for d in self._dirs if self.is_writable(d)]

    def check(self) -> dict[str, DirState]:
        """Measure every directory and update its state (LedgerDirsMonitor.check). Returns
        the new states. Raises FsError if the space of a directory cannot be read."""
        for directory in self._dirs:
            usage = self._fs.disk_space(directory).usage
            usage = min(1.0, max(0.0, usage))
            self._usages[directory] = usage
            self._set_state(directory, classify(usage, self._warn_threshold, self._threshold))
        return dict(self._states)

    def mark_full(self, directory: str) -> None:
        """A write in ``directory`` met ENOSPC: no new log goes there until a check finds
        space again (addToFilledDirs)."""
        assert directory in self._states, directory
        self._set_state(directory, DirState.FULL)

    def dir_for_new_log(self, rng: RandomSource) -> str:
        """A writable directory picked at random (BookKeeper shuffles the writable list).
        Raises NoWritableLedgerDir when every directory is full."""
        candidates = self.writable_dirs()
        if not candidates:
            raise NoWritableLedgerDir(self.describe_no_writable_dir())
        index = rng.randrange(len(candidates))
        assert 0 <= index < len(candidates), index
        return candidates[index]

    def describe_no_writable_dir(self) -> str:
        """What happened and what to do, naming each directory and its usage."""
        parts = []
        for directory in self._dirs:
            usage = self._usages[directory]
            shown = "not measured" if usage is None else f"{usage:.1%} used"
            parts.append(f"{directory} ({self._states[directory].value}, {shown})")
        return (
            "no writable ledger directory for a new entry log: "
            + ", ".join(parts)
            + f". A directory is full above diskUsageThreshold={self._threshold} or after a "
            f"write in it ran out of space (diskUsageWarnThreshold={self._warn_threshold} "
            "only moves the active log away). Free disk space (the next disk check, every "
            "diskCheckInterval ms, sees it) or add a ledger directory (stop the bookie, run "
            "`bkref dirs accept` with it added to ledgerDirectories, start it); entries "
            "already written are not lost."
        )

    def _set_state(self, directory: str, new: DirState) -> None:
        old = self._states[directory]
        if old is new:
            return
        self._states[directory] = new
        for listener in list(self._listeners):
            listener(directory, new)

    def check_invariants(self) -> None:
        assert self._dirs
        assert len(set(self._dirs)) == len(self._dirs)
        assert 0.0 < self._warn_threshold <= self._threshold < 1.0
        assert set(self._states) == set(self._dirs)
        assert set(self._usages) == set(self._dirs)
        for directory in self._dirs:
            usage = self._usages[directory]
            assert usage is None or 0.0 <= usage <= 1.0, usage
        assert self.writable_dirs() == [
            d for d in self._dirs if self._states[d] is not DirState.FULL
        ]
