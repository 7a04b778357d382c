"""Crash plans: data that says which unsynced operations survive a crash.

The simulated disk (models/fs/simdisk.py) records every operation that is not yet durable in
issue order: file writes and truncates until the file's fsync, directory-entry operations
(create, rename, link, unlink, mkdir) until the fsync of the directory. A crash plan picks
which of those pending operations reach the disk; everything already durable survives.
Plans are plain values so Hypothesis can draw and shrink them and a campaign can replay them
from a trace. The disk itself makes no random choice.

Not modelled: reordering inside one write other than the sector tears, bit rot, and
metadata-only fsync (fdatasync is treated like fsync for the file's own data and size).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

SECTOR_BYTES = 512


def _non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _index_set(indices: Iterable[int]) -> frozenset[int]:
    """A typed converter: with the generic ``frozenset`` mypy rejects every call."""
    return frozenset(indices)


@attrs.frozen
class LoseUnsynced:
    """Every pending operation is lost (LazyFS ``clear-cache``)."""

    def describe(self) -> str:
        return "lose every unsynced operation"


@attrs.frozen
class KeepPrefix:
    """The first ``count`` pending operations survive, in issue order; the rest are lost."""

    count: int = attrs.field(validator=_non_negative)

    def describe(self) -> str:
        return f"keep the first {self.count} unsynced operations"


@attrs.frozen
class TornWrite:
    """The first ``keep`` pending operations survive; the next one, if it is a write, survives
    only up to its ``sectors``-th 512-byte sector boundary (sectors aligned to file offsets).
    If the next operation is not a write, this is the same as ``KeepPrefix(keep)``."""

    keep: int = attrs.field(validator=_non_negative)
    sectors: int = attrs.field(validator=_non_negative)

    def describe(self) -> str:
        return (
            f"keep the first {self.keep} unsynced operations and {self.sectors} "
            "sector(s) of the next write"
        )


def _sector_set(indices: Iterable[int]) -> frozenset[int]:
    out = frozenset(indices)
    if any(index < 0 for index in out):
        raise ValueError(f"sector indices must be >= 0, got {sorted(out)}")
    return out


@attrs.frozen
class TornSectors:
    """The first ``keep`` pending operations survive; of the next one, if it is a write, the
    512-byte sectors (aligned to file offsets, numbered from 0 within the write: sector 0 is
    the one holding the write's first byte) whose indices are in ``sectors`` get the new
    bytes and every other sector of the write's range gets garbage: bytes drawn from
    ``random.Random(garbage)``, so the plan replays exactly. The file is extended to the end
    of the write either way (the size reached the disk, the data did not). A device may write
    a request's sectors in any order and a power cut leaves the rest with whatever the
    controller had, not zeros. If the next operation is not a write, this is the same as
    ``KeepPrefix(keep)``; indices past the write's last sector are ignored."""

    keep: int = attrs.field(validator=_non_negative)
    sectors: frozenset[int] = attrs.field(converter=_sector_set)
    garbage: int = attrs.field(default=0, validator=_non_negative)

    def describe(self) -> str:
        return (
            f"keep the first {self.keep} unsynced operations and sectors "
            f"{sorted(self.sectors)} of the next write, garbage (seed {self.garbage}) elsewhere"
        )


@attrs.frozen
class KeepSubset:
    """Exactly the pending operations whose indices are in ``indices`` survive (ALICE-style
    reordering); the survivors are applied in issue order. Indices past the end are ignored."""

    indices: frozenset[int] = attrs.field(converter=_index_set)

    def describe(self) -> str:
        return f"keep unsynced operations {sorted(self.indices)}"


@attrs.frozen
class KeepAll:
    """Every pending operation survives: the bookie's process was killed (kill -9) but the
    operating system kept running, so every write the process had handed to it reaches the
    disk. Only what the process still held in its own memory (a write buffer, a journal
    record not yet written) is lost."""

    def describe(self) -> str:
        return "the process was killed; the operating system kept every write"


@attrs.frozen
class KillProcess:
    """The bookie's process was killed and the machine kept running, with its page cache: the
    restarted bookie reads every write the process had handed to the operating system, but
    what was never fsynced is still not on the disk, and a later power cut may lose it. So a
    recovery that relies on those bytes (skips replaying a record because its entry reads
    back) must fsync them first. What the process held in its own memory is lost."""

    def describe(self) -> str:
        return (
            "the process was killed; the page cache kept every write, not yet on the disk "
            "(a later power cut may still lose what was never fsynced)"
        )


@attrs.frozen
class Unknown:
    """The recorder does not know what survived: a bookie in another process ended without a
    clean shutdown (killed, or its machine lost power). The model allows anything any plan
    allows; a simulated disk cannot apply it."""

    def describe(self) -> str:
        return "the bookie ended without a clean shutdown; what survived is not known"


CrashPlan = (
    LoseUnsynced
    | KeepPrefix
    | TornWrite
    | TornSectors
    | KeepSubset
    | KeepAll
    | KillProcess
    | Unknown
)
