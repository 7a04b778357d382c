"""Value objects of the FileSystem seam, shared by impl/fs and models/fs/simdisk.py.

They live in spec/ because both sides return them: impl.fs.api.FileSystem promises a
``DiskSpace`` from ``disk_space``, and the simulated disk (which may not import impl/) must
return the very same class for mypy to see it satisfy that protocol. ``FsyncFailure`` names
the two behaviours of a failed fsync the simulated disk offers, so harnesses can choose one.
"""

from __future__ import annotations

import enum

import attrs


@attrs.frozen
class DiskSpace:
    """Free and total bytes of the device (or simulated quota) holding a directory."""

    free_bytes: int
    total_bytes: int

    @property
    def usage(self) -> float:
        """Fraction of the space in use, 0.0 .. 1.0 (as BookKeeper's DiskChecker computes)."""
        if self.total_bytes <= 0:
            return 1.0
        return 1.0 - self.free_bytes / self.total_bytes


class FsyncFailure(enum.Enum):
    """What a failed fsync leaves behind: file systems disagree, and an engine must be right
    under both (models/fs/simdisk.py, "Injected failures").

    ``REVERT``: the unsynced data is gone; reads show the durable content again.
    ``KEEP``: the new bytes stay readable in the page cache, but the pages are marked clean and
    never written back, so a later fsync succeeds without making them durable and a crash
    shows the old content (ext4 and XFS after a writeback error).
    """

    REVERT = "revert"
    KEEP = "keep"
