"""The lazy disk: a FUSE file system backed by the simulated disk, so an external bookie
meets power loss as the crash explorer's plans define it (docs/conformance.md, "Lazy disk").

``fusefs`` serves the FUSE requests; ``mount`` mounts it in a thread and injects crashes.

mfusepy looks for libfuse 2 before libfuse 3 unless told otherwise; the operations here are
written for libfuse 3 (its ``fuse_config``: direct_io, hard_remove, use_ino), so libfuse 3 is
asked for before mfusepy is first imported (a caller's own choice is kept).
"""

import os

os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
