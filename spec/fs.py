"""Value objects of the FileSystem seam, shared by impl/fs and models/fs/simdisk.py.

They live in spec/ because both sides return them: impl.fs.api.FileSystem promises a
``DiskSpace`` from ``disk_space``, and the simulated disk (which may not import impl/) must
return the very same class for mypy to see it satisfy that protocol.
"""

from __future__ import annotations

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
