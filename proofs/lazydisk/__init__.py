"""The lazy disk: a FUSE file system backed by the simulated disk, so an external bookie
meets power loss as the crash explorer's plans define it (docs/conformance.md, "Lazy disk").

``fusefs`` serves the FUSE requests; ``mount`` mounts it in a thread and injects crashes.
"""
