"""Fixtures of the lazy disk's tests: a mount that is always unmounted, and the skip."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from proofs.lazydisk.mount import LazyDisk, fuse_unavailable, is_mounted


def skip_without_fuse() -> None:
    reason = fuse_unavailable()
    if reason is not None:
        pytest.skip(reason)


def force_unmount(path: str) -> None:
    """The last resort of a fixture: never leave a mount behind, even if LazyDisk broke."""
    for flag in ("-u", "-uz"):
        if is_mounted(path):
            subprocess.run(["fusermount3", flag, path], capture_output=True, timeout=15)


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyDisk]:
    """A mounted, empty lazy disk at ``tmp_path / "mnt"``; unmounted whatever the test did."""
    skip_without_fuse()
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    disk = LazyDisk(str(mountpoint))
    try:
        disk.mount()
        yield disk
    finally:
        try:
            disk.unmount()
        finally:
            force_unmount(str(mountpoint))
        assert not is_mounted(str(mountpoint)), f"{mountpoint} is still mounted"
