"""Mounting the lazy disk, and the two crashes the conformance runner injects.

Spec pages: spec/crash.py; docs/conformance.md "Lazy disk".

Why it is shaped so: the runner (proofs/conform/runner.py) starts an external bookie on the
mount, SIGKILLs its process group, and then either calls ``kill()`` (the machine stayed up:
nothing is lost) or ``power_loss(plan)`` (the machine died: ``SimDisk.crash(plan)`` keeps
what the plan says of the unsynced operations, then the file system is unmounted and mounted
again so no kernel cache of before the crash can be read). The FUSE loop runs in a thread of
the calling process rather than in a child: the SimDisk then lives in the caller, so a crash
is a method call under the operations' lock, and tests read ``disk`` directly. The bookie
itself always runs in another process (the kernel serves it through /dev/fuse), which is
what makes this usable for a bookie in any language.

libfuse's loop runs single-threaded unless ``threads=True``: every request takes one lock
around the SimDisk anyway, and measured, the single thread serves fsync'd small writes
about twice as fast as the multi-threaded loop (docs/benchmarks.md, "Lazy disk").

A thread has costs, documented in docs/conformance.md. libfuse installs its own
handlers for SIGHUP and SIGTERM while mounted when they are at their defaults (the handler
ends the FUSE loop; SIGINT keeps Python's handler), and restores them at unmount. And the
calling process must not itself block on the mount while holding the GIL in a way the loop
needs: ordinary os calls release it.

Unmounting is made reliable because a mount left behind breaks the next run and every
process that walks the directory: ``fusermount3 -u``, then a lazy ``-uz`` if the mount is
busy (after asking the loop to end at its next request), then, if the loop still runs, an
abort of the connection (``umount -f``, /sys/fs/fuse/connections).

The process running the loop must never mmap a file of the mount: a page fault taken while
holding the GIL waits for a FUSE read that the loop, waiting for the GIL, never answers (the
process then hangs in the kernel until the connection is aborted). Ordinary os calls release
the GIL and are safe; a bookie in another process may mmap privately.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from types import TracebackType
from typing import Final

from models.fs.simdisk import SimDisk
from spec.crash import CrashPlan, KillProcess
from spec.errors import BkrefError

#: How long mount() and unmount() wait for the kernel and the loop.
MOUNT_TIMEOUT_SECONDS: Final = 15.0
INSTALL_ADVICE: Final = (
    "install FUSE 3 (Debian/Ubuntu: apt-get install fuse3; the PyPI binding: pip install "
    "mfusepy) and make /dev/fuse available (in a container: --device /dev/fuse "
    "--cap-add SYS_ADMIN)"
)


class LazyDiskError(BkrefError):
    """The lazy disk could not be mounted or unmounted; the message says why and what to do."""


def _fusermount() -> str | None:
    return shutil.which("fusermount3")


def _why_not_installed() -> str | None:
    """Why FUSE cannot work here without trying a mount, or None."""
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"the FUSE binding cannot load ({error}): {INSTALL_ADVICE}"
    if not os.path.exists("/dev/fuse"):
        return f"/dev/fuse is missing: {INSTALL_ADVICE}"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return f"/dev/fuse is not readable and writable by this user: {INSTALL_ADVICE}"
    if _fusermount() is None:
        return f"fusermount3 is not on PATH: {INSTALL_ADVICE}"
    return None


@functools.cache
def fuse_unavailable() -> str | None:
    """None when a lazy disk mounts here (tried once per process, on a scratch directory);
    else one sentence of why and what to install."""
    reason = _why_not_installed()
    if reason is not None:
        return reason
    scratch = tempfile.mkdtemp(prefix="bkref-lazydisk-probe-")
    try:
        disk = LazyDisk(scratch)
        try:
            disk.mount()
            with open(os.path.join(scratch, "probe"), "wb") as probe:
                probe.write(b"x")
                os.fsync(probe.fileno())
        finally:
            disk.unmount()
    except (LazyDiskError, OSError) as error:
        return f"a FUSE mount does not work here ({error}): {INSTALL_ADVICE}"
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(scratch)
    return None


def is_mounted(path: str) -> bool:
    """Whether something is mounted at ``path``, by the kernel's mount table: a FUSE mount
    whose server died answers ENOTCONN to stat, which ``os.path.ismount`` takes for no."""
    escaped = os.path.abspath(path)
    for char, code in (("\\", "\\134"), (" ", "\\040"), ("\t", "\\011"), ("\n", "\\012")):
        escaped = escaped.replace(char, code)
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            return any(line.split(" ")[1:2] == [escaped] for line in mounts)
    except OSError:
        return os.path.ismount(path)


class LazyDisk:
    """A FUSE mount at ``mountpoint`` backed by a SimDisk (module docstring)."""

    def __init__(self, mountpoint: str, *, threads: bool = False, debug: bool = False) -> None:
        try:
            from proofs.lazydisk.fusefs import LazyDiskOperations
        except (ImportError, OSError) as error:
            raise LazyDiskError(
                f"{mountpoint}: the FUSE binding cannot load ({error}): {INSTALL_ADVICE}"
            ) from error
        self.mountpoint = os.path.abspath(mountpoint)
        self._threads = threads
        self._debug = debug
        self._ops = LazyDiskOperations(SimDisk())
        self._thread: threading.Thread | None = None
        self._loop_error: BaseException | None = None
        self._connection: int | None = None
        #: Mounts done: the first, then one per power loss (each drops every kernel cache).
        self.mounts = 0

    # --- what tests and the runner read ------------------------------------------------------

    @property
    def disk(self) -> SimDisk:
        return self._ops.disk

    @property
    def fsyncs(self) -> int:
        """fsync, fdatasync and directory fsync requests the mount served."""
        return self._ops.fsyncs

    @property
    def requests(self) -> dict[str, int]:
        """Requests served, by operation name."""
        return dict(self._ops.requests)

    def open_files(self) -> int:
        """Files the mount holds open: the kernel sends a release after close(2) returns,
        so a test that compares pending operations waits for this to reach what it expects."""
        with self._ops.mutex:
            return self._ops.open_files()

    def unsynced_operations(self) -> int:
        """Pending operations: the indices a crash plan's KeepPrefix/KeepSubset range over."""
        with self._ops.mutex:
            return len(self.disk.pending_operations())

    def unsynced_writes(self) -> list[tuple[int, int]]:
        """(index among the pending operations, length) of each pending write, in issue
        order: where a torn-write plan can tear a record."""
        with self._ops.mutex:
            pending = self.disk.pending_operations()
        return [(i, op.length) for i, op in enumerate(pending) if op.kind == "write"]

    @property
    def mounted(self) -> bool:
        return self._thread is not None

    # --- mounting ---------------------------------------------------------------------------

    def mount(self) -> None:
        """Mount the disk (empty at first, the survivor after a power loss); return when
        the mount answers."""
        if self._thread is not None:
            raise LazyDiskError(f"{self.mountpoint}: the lazy disk is already mounted")
        reason = _why_not_installed()
        if reason is not None:
            raise LazyDiskError(f"{self.mountpoint}: cannot mount the lazy disk: {reason}")
        if not os.path.isdir(self.mountpoint):
            raise LazyDiskError(
                f"{self.mountpoint}: the mount point is not a directory: create it first"
            )
        if is_mounted(self.mountpoint):
            raise LazyDiskError(
                f"{self.mountpoint}: something is already mounted there: unmount it "
                f"(fusermount3 -u {self.mountpoint}) or choose another directory"
            )
        before = os.stat(self.mountpoint).st_dev
        self._loop_error = None
        self._ops.exit_requested = False
        thread = threading.Thread(target=self._loop, name="lazydisk-fuse", daemon=True)
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + MOUNT_TIMEOUT_SECONDS
        while True:
            if not thread.is_alive():
                self._thread = None
                raise LazyDiskError(
                    f"{self.mountpoint}: the FUSE loop ended before the mount answered "
                    f"({self._loop_error!r}): {INSTALL_ADVICE}"
                )
            with contextlib.suppress(OSError):
                st_dev = os.stat(self.mountpoint).st_dev
                if st_dev != before:
                    self._connection = os.minor(st_dev)
                    break
            if time.monotonic() > deadline:
                self.unmount()
                raise LazyDiskError(
                    f"{self.mountpoint}: the mount did not answer within "
                    f"{MOUNT_TIMEOUT_SECONDS:.0f} s: {INSTALL_ADVICE}"
                )
            time.sleep(0.005)
        self.mounts += 1

    def _loop(self) -> None:
        from proofs.lazydisk.fusefs import LazyDiskFUSE

        try:
            LazyDiskFUSE(
                self._ops,
                self.mountpoint,
                foreground=True,
                nothreads=not self._threads,
                debug=self._debug,
                fsname="bkref-lazydisk",
                subtype="bkref-lazydisk",
                default_permissions=True,
            )
        except BaseException as error:
            self._loop_error = error

    def unmount(self) -> None:
        """Unmount (idempotent; safe after errors): fusermount3 -u, then lazily, then an
        abort of the connection, each only if the one before did not end the loop."""
        thread, self._thread = self._thread, None
        if thread is None and not self._mounted_by_us():
            return
        fusermount = _fusermount() or "fusermount3"
        self._fusermount(fusermount, "-u")
        if thread is not None and is_mounted(self.mountpoint):
            # Busy (a process still has a file open there): ask the loop to end at its next
            # request and make one; libfuse then detaches the mount as it exits.
            self._ops.exit_requested = True
            with contextlib.suppress(OSError):
                os.stat(self.mountpoint)
        if thread is not None:
            thread.join(MOUNT_TIMEOUT_SECONDS / 3)
        self._fusermount(fusermount, "-uz")
        if thread is not None and thread.is_alive():
            # The loop is stuck (a request it cannot answer): a forced unmount aborts the
            # FUSE connection (root only), as does the connection's abort file.
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    ["umount", "-f", self.mountpoint],
                    capture_output=True,
                    timeout=MOUNT_TIMEOUT_SECONDS,
                )
            self._abort_connection()
            thread.join(MOUNT_TIMEOUT_SECONDS / 3)
            if thread.is_alive():
                raise LazyDiskError(
                    f"{self.mountpoint}: the FUSE loop did not end after the unmount; a "
                    f"process may still use the mount (see fuser -m {self.mountpoint})"
                )
        if is_mounted(self.mountpoint) and self._mounted_by_us():
            raise LazyDiskError(
                f"{self.mountpoint}: still mounted after fusermount3 -u and -uz: unmount it "
                "by hand (umount -l as root)"
            )

    def _fusermount(self, fusermount: str, flag: str) -> None:
        if not is_mounted(self.mountpoint):
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [fusermount, flag, self.mountpoint],
                capture_output=True,
                timeout=MOUNT_TIMEOUT_SECONDS,
            )

    def _mounted_by_us(self) -> bool:
        if not is_mounted(self.mountpoint):
            return False
        with contextlib.suppress(OSError), open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and fields[1] == self.mountpoint:
                    return "bkref-lazydisk" in fields[0] or "bkref-lazydisk" in fields[2]
        return False

    def _abort_connection(self) -> None:
        if self._connection is None:
            return
        with contextlib.suppress(OSError):
            abort = f"/sys/fs/fuse/connections/{self._connection}/abort"
            with open(abort, "w") as handle:
                handle.write("1")

    def __enter__(self) -> LazyDisk:
        self.mount()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unmount()

    # --- crashes ----------------------------------------------------------------------------

    def hold_fsyncs(self) -> None:
        """From now on every fsync (of a file or a directory) waits before it is carried out,
        until :meth:`release_fsyncs`: a power loss can then fall while the bookie is in its
        fsync, with its group written and not yet durable."""
        from proofs.lazydisk.fusefs import FsyncBarrier

        self._ops.fsync_waiting.clear()
        self._ops.fsync_barrier = FsyncBarrier()

    def wait_for_fsync(self, timeout_s: float) -> bool:
        """Whether an fsync reached the barrier within ``timeout_s``."""
        return self._ops.fsync_waiting.wait(timeout_s)

    def release_fsyncs(self, *, fail: bool) -> None:
        """Take the barrier down: the fsyncs waiting fail (``fail``: their process is dead)
        or go on."""
        barrier = self._ops.fsync_barrier
        self._ops.fsync_barrier = None
        if barrier is not None:
            barrier.release(fail=fail)

    def kill(self) -> None:
        """The bookie's processes were SIGKILLed and the machine stayed up: nothing written
        is lost (``SimDisk.kill_process``: handles die, files kept alive only by a handle go,
        pending operations stay pending for a later power loss). Call it after the processes
        are reaped; releases the kernel sends late then find nothing to close."""
        with self._ops.mutex:
            self.disk.kill_process()
            self._ops.forget_handles()

    def power_loss(self, plan: CrashPlan) -> None:
        """The machine lost power (call it after the bookie's processes are dead): unmount,
        keep of the unsynced operations what ``plan`` says (``SimDisk.crash``), and mount
        the survivor again; return when the mount answers. ``KillProcess`` is ``kill()``."""
        if isinstance(plan, KillProcess):
            self.kill()
            return
        if self._thread is None:
            raise LazyDiskError(f"{self.mountpoint}: power_loss on a lazy disk not mounted")
        self.unmount()
        with self._ops.mutex:
            self.disk.crash(plan)
            self._ops.forget_handles()
        self.mount()
