"""proofs/lazydisk: what the mount answers (errno, getattr, statfs, locks) and how it mounts,
crashes and unmounts (mount.py), through real os calls on a mount in this process."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import proofs.lazydisk.mount as mount_module
from proofs.lazydisk.mount import LazyDisk, LazyDiskError, fuse_unavailable, is_mounted
from spec.crash import KeepAll, LoseUnsynced
from tests.unit.proofs.lazydisk.conftest import force_unmount, skip_without_fuse


def _errno_of(action: object) -> int | None:
    assert callable(action)
    try:
        action()
    except OSError as error:
        return error.errno
    return None


def test_errors_map_to_the_posix_errno(lazy: LazyDisk) -> None:
    root = Path(lazy.mountpoint)
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"x")
    (root / "e").mkdir()
    (root / "e" / "g").write_bytes(b"y")
    assert _errno_of(lambda: os.open(root / "missing", os.O_RDONLY)) == errno.ENOENT
    assert _errno_of(lambda: os.open(root / "d" / "f", os.O_CREAT | os.O_EXCL)) == errno.EEXIST
    assert _errno_of(lambda: os.open(root / "d" / "f" / "x", os.O_RDONLY)) == errno.ENOTDIR
    assert _errno_of(lambda: os.open(root / "d", os.O_RDWR)) == errno.EISDIR
    assert _errno_of(lambda: os.unlink(root / "d")) == errno.EISDIR
    assert _errno_of(lambda: os.rename(root / "d", root / "e")) == errno.ENOTEMPTY
    assert _errno_of(lambda: os.mkdir(root / "d")) == errno.EEXIST
    assert _errno_of(lambda: os.link(root / "d", root / "h")) == errno.EPERM
    assert _errno_of(lambda: os.rmdir(root / "d")) == errno.EPERM
    lazy.disk.set_capacity("/", 10)
    with open(root / "d" / "f", "r+b") as handle:
        assert _errno_of(lambda: os.pwrite(handle.fileno(), b"y" * 100, 0)) == errno.ENOSPC
    lazy.disk.set_capacity("/", None)
    assert (root / "d" / "f").read_bytes() == b"x"


def test_renameat2_flags_are_refused_not_dropped(lazy: LazyDisk) -> None:
    root = Path(lazy.mountpoint)
    (root / "a").write_bytes(b"a")
    (root / "b").write_bytes(b"b")
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_noreplace = -100, 1
    result = libc.renameat2(
        at_fdcwd, bytes(root / "a"), at_fdcwd, bytes(root / "b"), rename_noreplace
    )
    assert result == -1
    # The kernel may refuse RENAME_NOREPLACE over an existing name itself (EEXIST); either
    # way nothing is replaced.
    assert ctypes.get_errno() in (errno.EINVAL, errno.EEXIST)
    assert (root / "b").read_bytes() == b"b"


def test_getattr_reports_links_inodes_sizes_and_statfs_free_space(lazy: LazyDisk) -> None:
    root = Path(lazy.mountpoint)
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"12345")
    os.link(root / "d" / "f", root / "g")
    first, second = os.stat(root / "d" / "f"), os.stat(root / "g")
    assert first.st_ino == second.st_ino and first.st_nlink == 2 and first.st_size == 5
    assert stat.S_ISREG(first.st_mode) and stat.S_ISDIR(os.stat(root / "d").st_mode)
    assert os.stat(root).st_nlink == 3
    assert sorted(os.listdir(root)) == ["d", "g"]
    space = os.statvfs(root)
    assert space.f_bavail * space.f_frsize >= 1 << 39
    os.utime(root / "g")
    os.chmod(root / "g", 0o600)
    assert os.stat(root / "g").st_size == 5


def test_flock_is_kept_by_the_kernel_per_open_directory(lazy: LazyDisk) -> None:
    first = os.open(lazy.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    second = os.open(lazy.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(first, fcntl.LOCK_UN)
        fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(first)
        os.close(second)


def test_fsyncs_are_counted_and_unsynced_operations_are_the_pending_list(
    lazy: LazyDisk,
) -> None:
    path = os.path.join(lazy.mountpoint, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    try:
        os.pwrite(fd, b"abc", 0)
        assert lazy.unsynced_operations() == 2  # the create and the write
        os.fdatasync(fd)
        assert lazy.unsynced_operations() == 1
    finally:
        os.close(fd)
    dir_fd = os.open(lazy.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    assert lazy.unsynced_operations() == 0
    assert lazy.fsyncs == 2 and lazy.requests["fsyncdir"] == 1


def test_kill_loses_nothing_and_invalidates_open_files(lazy: LazyDisk) -> None:
    path = os.path.join(lazy.mountpoint, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    try:
        os.pwrite(fd, b"unsynced", 0)
        lazy.kill()
        assert _errno_of(lambda: os.pwrite(fd, b"x", 0)) == errno.EBADF
    finally:
        os.close(fd)
    with open(path, "rb") as handle:
        assert handle.read() == b"unsynced"
    assert lazy.unsynced_operations() == 2
    lazy.power_loss(LoseUnsynced())
    assert os.listdir(lazy.mountpoint) == []


def test_power_loss_remounts_and_keep_all_keeps_everything(lazy: LazyDisk) -> None:
    path = os.path.join(lazy.mountpoint, "f")
    with open(path, "wb") as handle:
        handle.write(b"kept")
    mounts = lazy.mounts
    lazy.power_loss(KeepAll())
    assert lazy.mounts == mounts + 1 and is_mounted(lazy.mountpoint)
    with open(path, "rb") as handle:
        assert handle.read() == b"kept"
    assert lazy.unsynced_operations() == 0


def test_unmount_is_idempotent_and_ends_a_busy_mount(tmp_path: Path) -> None:
    """A file left open (a failing test) must not leave the mount behind."""
    skip_without_fuse()
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    lazy = LazyDisk(str(mountpoint))
    fd = -1
    try:
        with lazy:
            assert is_mounted(str(mountpoint))
            with pytest.raises(LazyDiskError, match="already mounted"):
                lazy.mount()
            fd = os.open(mountpoint / "held", os.O_CREAT | os.O_RDWR)
        assert not is_mounted(str(mountpoint))
        lazy.unmount()
        assert not is_mounted(str(mountpoint))
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):  # ENOTCONN: the loop ended under it
                os.close(fd)
        force_unmount(str(mountpoint))


def test_mount_refuses_a_missing_directory_and_says_so(tmp_path: Path) -> None:
    skip_without_fuse()
    with pytest.raises(LazyDiskError, match="not a directory"):
        LazyDisk(str(tmp_path / "nowhere")).mount()


def test_fuse_unavailable_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_without_fuse()
    assert fuse_unavailable() is None
    monkeypatch.setattr(mount_module, "_fusermount", lambda: None)
    reason = mount_module._why_not_installed()
    assert reason is not None and "fusermount3" in reason and "apt-get install fuse3" in reason


def test_fallocate_is_one_truncate_and_keep_size_nothing(lazy: LazyDisk) -> None:
    """Without the fallocate op glibc's posix_fallocate writes a byte per 4 KiB block."""
    path = os.path.join(lazy.mountpoint, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    try:
        os.pwrite(fd, b"head", 0)
        before = lazy.unsynced_operations()
        os.posix_fallocate(fd, 0, 1 << 20)
        pending = lazy.disk.pending_operations()
        assert len(pending) == before + 1
        assert (pending[-1].kind, pending[-1].length) == ("truncate", 1 << 20)
        os.posix_fallocate(fd, 0, 100)  # inside the file: nothing to do
        assert lazy.unsynced_operations() == before + 1
        assert os.stat(path).st_size == 1 << 20
        assert os.pread(fd, 8, 0) == b"head" + bytes(4)
    finally:
        os.close(fd)


def test_posix_record_locks_are_kept_by_the_kernel_between_processes(lazy: LazyDisk) -> None:
    path = os.path.join(lazy.mountpoint, "lock")
    Path(path).write_bytes(b"")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(OSError) as refused:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert refused.value.errno in (errno.EAGAIN, errno.EACCES)
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait(10)
