"""The lazy disk against the simulated disk it serves: what survives each crash plan.

proofs/lazydisk/fusefs.py promises one SimDisk operation per OS call, so that a crash plan
means the same thing for a bookie on the mount as for a program calling SimDisk directly.
Here the same program of file operations runs twice: through the mount with real os calls,
and on a fresh SimDisk by the mapping the module docstring gives (an open with O_TRUNC of an
existing file is a truncate, an O_APPEND write an append, ...). Both must fail or succeed
alike (with the same errno where the kernel leaves the choice to the file system), leave the
same pending operations, and after the same crash plan (every kind of spec/crash.py) hold the
same files, name by name and byte by byte, as read back through the remounted file system.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.fs.simdisk import SimDisk, SimHandle
from proofs.lazydisk.mount import LazyDisk, fuse_unavailable
from spec.crash import (
    SECTOR_BYTES,
    CrashPlan,
    KeepAll,
    KeepPrefix,
    KeepSubset,
    KillProcess,
    LoseUnsynced,
    TornSectors,
    TornWrite,
)
from spec.errors import FsError
from tests.unit.proofs.lazydisk.conftest import force_unmount, skip_without_fuse

try:
    from proofs.lazydisk.fusefs import MAX_WRITE, errno_of
except OSError:  # mfusepy cannot load without libfuse: skipped, saying what to install
    pytest.skip(str(fuse_unavailable()), allow_module_level=True)

Op = tuple[Any, ...]

NAMES = ("a", "b", "d/c", "d/e")
SLOTS = 3
OPEN_MODES = ("plain", "create", "create_excl", "trunc", "create_trunc", "append")
#: Refusals the kernel's VFS makes before the file system is asked, where the simulated disk
#: (asked directly) names another reason for the same refusal: O_CREAT|O_EXCL of a directory
#: (EEXIST, the disk says EISDIR) and a rename of a file over its own ancestor directory
#: (ENOTEMPTY, the disk says EISDIR). Only these (mount, disk) pairs may differ; both sides
#: refuse and change nothing, and every other failure must carry the same errno.
VFS_ORDER = frozenset({(errno.EEXIST, errno.EISDIR), (errno.ENOTEMPTY, errno.EISDIR)})


def _open_flags(mode: str) -> int:
    flags = os.O_RDWR
    if mode in ("create", "create_excl", "create_trunc"):
        flags |= os.O_CREAT
    if mode == "create_excl":
        flags |= os.O_EXCL
    if mode in ("trunc", "create_trunc"):
        flags |= os.O_TRUNC
    if mode == "append":
        flags |= os.O_APPEND
    return flags


class RealRun:
    """The program through the mount, with os calls."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.slots: dict[int, tuple[int, bool]] = {}

    def path(self, name: str) -> str:
        return os.path.join(self.root, name) if name else self.root

    def close_all(self) -> None:
        for slot in list(self.slots):
            os.close(self.slots.pop(slot)[0])

    def do(self, op: Op) -> None:
        kind = op[0]
        if kind == "open":
            _, slot, name, mode = op
            if slot in self.slots:
                os.close(self.slots.pop(slot)[0])
            fd = os.open(self.path(name), _open_flags(mode), 0o644)
            self.slots[slot] = (fd, mode == "append")
        elif kind in ("write", "truncate", "fsync", "fdatasync", "close"):
            slot = op[1]
            if slot not in self.slots:
                return
            fd, append = self.slots[slot]
            if kind == "write":
                data, offset = op[2], op[3]
                written = os.write(fd, data) if append else os.pwrite(fd, data, offset)
                assert written == len(data)
            elif kind == "truncate":
                os.ftruncate(fd, op[2])
            elif kind == "fsync":
                os.fsync(fd)
            elif kind == "fdatasync":
                os.fdatasync(fd)
            else:
                os.close(self.slots.pop(slot)[0])
        elif kind == "fsync_dir":
            fd = os.open(self.path(op[1]), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif kind == "mkdir":
            os.mkdir(self.path(op[1]))
        elif kind == "rename":
            os.rename(self.path(op[1]), self.path(op[2]))
        elif kind == "link":
            os.link(self.path(op[1]), self.path(op[2]))
        elif kind == "unlink":
            os.unlink(self.path(op[1]))
        else:
            raise AssertionError(op)


class SimRun:
    """The same program on a SimDisk, by fusefs.py's mapping of OS calls to disk calls."""

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.slots: dict[int, tuple[SimHandle, bool]] = {}

    def close_all(self) -> None:
        for slot in list(self.slots):
            self.slots.pop(slot)[0].close()

    def do(self, op: Op) -> None:
        disk, kind = self.disk, op[0]
        if kind == "open":
            _, slot, name, mode = op
            if slot in self.slots:
                self.slots.pop(slot)[0].close()
            flags = _open_flags(mode)
            existed = disk.exists(name)
            create = bool(flags & os.O_CREAT)
            handle = disk.open(name, create=create, exclusive=bool(flags & os.O_EXCL))
            if existed and flags & os.O_TRUNC:
                handle.truncate(0)
            self.slots[slot] = (handle, mode == "append")
        elif kind in ("write", "truncate", "fsync", "fdatasync", "close"):
            slot = op[1]
            if slot not in self.slots:
                return
            handle, append = self.slots[slot]
            if kind == "write":
                data, offset = op[2], op[3]
                if append:
                    handle.append(data)
                else:
                    handle.pwrite(offset, data)
            elif kind == "truncate":
                handle.truncate(op[2])
            elif kind == "fsync":
                handle.fsync()
            elif kind == "fdatasync":
                handle.fdatasync()
            else:
                self.slots.pop(slot)[0].close()
        elif kind == "fsync_dir":
            disk.fsync_dir(op[1] or "/")
        elif kind == "mkdir":
            if disk.exists(op[1]):
                raise FsErrnoError(errno.EEXIST)
            disk.mkdir(op[1])
        elif kind == "rename":
            disk.rename(op[1], op[2])
        elif kind == "link":
            disk.link(op[1], op[2])
        elif kind == "unlink":
            disk.unlink(op[1])
        else:
            raise AssertionError(op)


class FsErrnoError(Exception):
    """A refusal the kernel makes before asking the file system (the reference's side)."""

    def __init__(self, code: int) -> None:
        super().__init__(os.strerror(code))
        self.code = code


def _outcome(action: Callable[[], None]) -> int | None:
    """None on success, else the errno."""
    try:
        action()
    except OSError as error:
        assert error.errno is not None
        return error.errno
    except FsError as error:
        return errno_of(error)
    except FsErrnoError as error:
        return error.code
    return None


def read_tree(root: str) -> tuple[dict[str, bytes], set[str]]:
    """Every file (absolute name in the disk -> bytes) and directory under ``root``, read
    with os calls."""
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    for here, subdirs, names in os.walk(root):
        rel = os.path.relpath(here, root)
        prefix = "/" if rel == "." else f"/{rel}/"
        dirs.update(prefix + sub for sub in subdirs)
        for name in names:
            with open(os.path.join(here, name), "rb") as handle:
                files[prefix + name] = handle.read()
    return files, dirs


def sim_dirs(disk: SimDisk, path: str = "/") -> set[str]:
    out: set[str] = set()
    for name in disk.listdir(path):
        child = f"{path.rstrip('/')}/{name}"
        if disk.is_dir(child):
            out.add(child)
            out |= sim_dirs(disk, child)
    return out


def wait_for_releases(lazy: LazyDisk, expected: int = 0) -> None:
    """close(2) returns before the kernel's release reaches the mount; wait for it."""
    deadline = time.monotonic() + 10
    while lazy.open_files() != expected:
        assert time.monotonic() < deadline, f"{lazy.open_files()} files still open"
        time.sleep(0.001)


def run_both(lazy: LazyDisk, sim: SimDisk, program: list[Op]) -> None:
    """Run ``program`` on both, op by op; close every file; compare the pending lists."""
    real, model = RealRun(lazy.mountpoint), SimRun(sim)
    try:
        for index, op in enumerate(program):
            got = _outcome(functools.partial(real.do, op))
            want = _outcome(functools.partial(model.do, op))
            assert (got is None) == (want is None), (
                f"op {index} {op!r}: mount {_name(got)}, simulated disk {_name(want)}; "
                f"program {program!r}"
            )
            if got != want:
                assert (got, want) in VFS_ORDER, (index, op, _name(got), _name(want), program)
    finally:
        real.close_all()
        model.close_all()
    wait_for_releases(lazy)
    assert lazy.disk.pending_operations() == sim.pending_operations(), program
    assert lazy.disk.current_snapshot() == sim.current_snapshot(), program


def _name(code: int | None) -> str:
    return "ok" if code is None else errno.errorcode.get(code, str(code))


def crash_both(lazy: LazyDisk, sim: SimDisk, plan: CrashPlan) -> None:
    """The same plan on both; then the survivors read through the mount equal the model's."""
    lazy.power_loss(plan)
    sim.crash(plan)
    files, dirs = read_tree(lazy.mountpoint)
    assert files == sim.current_snapshot(), plan
    assert dirs == sim_dirs(sim), plan
    assert lazy.disk.pending_operations() == sim.pending_operations(), plan
    sim.check_invariants()
    lazy.disk.check_invariants()


@contextlib.contextmanager
def mounted() -> Iterator[LazyDisk]:
    with tempfile.TemporaryDirectory(prefix="bkref-lazydisk-test-") as scratch:
        lazy = LazyDisk(scratch)
        try:
            lazy.mount()
            yield lazy
        finally:
            try:
                lazy.unmount()
            finally:
                force_unmount(scratch)


# --- drawn programs --------------------------------------------------------------------------

slots = st.integers(0, SLOTS - 1)
any_name = st.sampled_from((*NAMES, "d"))
payloads = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.integers(1, 3 * SECTOR_BYTES + 7).map(lambda n: bytes((i * 7 + n) % 251 for i in range(n))),
)
ops = st.one_of(
    st.tuples(st.just("open"), slots, st.sampled_from(NAMES), st.sampled_from(OPEN_MODES)),
    st.tuples(st.just("write"), slots, payloads, st.integers(0, 2 * SECTOR_BYTES + 3)),
    st.tuples(st.just("write"), slots, payloads, st.integers(0, 2 * SECTOR_BYTES + 3)),
    st.tuples(st.just("truncate"), slots, st.integers(0, 2 * SECTOR_BYTES)),
    st.tuples(st.sampled_from(("fsync", "fdatasync", "close")), slots),
    st.tuples(st.just("fsync_dir"), st.sampled_from(("", "d"))),
    st.tuples(st.just("mkdir"), st.just("d")),
    st.tuples(st.sampled_from(("rename", "link")), any_name, any_name),
    st.tuples(st.just("unlink"), any_name),
)
programs = st.lists(ops, min_size=1, max_size=25)


@st.composite
def plans(draw: st.DrawFn, pending: int) -> CrashPlan:
    kind = draw(st.sampled_from(("lose", "prefix", "torn", "sectors", "subset", "all", "kill")))
    count = draw(st.integers(0, pending))
    if kind == "lose":
        return LoseUnsynced()
    if kind == "prefix":
        return KeepPrefix(count)
    if kind == "torn":
        return TornWrite(count, draw(st.integers(0, 4)))
    if kind == "sectors":
        return TornSectors(
            count, frozenset(draw(st.sets(st.integers(0, 4)))), draw(st.integers(0, 9))
        )
    if kind == "subset":
        return KeepSubset(frozenset(draw(st.sets(st.integers(0, max(0, pending - 1))))))
    if kind == "all":
        return KeepAll()
    return KillProcess()


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(first=programs, second=programs, data=st.data())
def test_drawn_programs_survive_every_plan_as_on_the_simulated_disk(
    first: list[Op], second: list[Op], data: st.DataObject
) -> None:
    """Two rounds (program, crash): the second runs on what the first crash left."""
    skip_without_fuse()
    with mounted() as lazy:
        sim = SimDisk()
        for program in (first, second):
            run_both(lazy, sim, program)
            plan = data.draw(plans(len(sim.pending_operations())), label="plan")
            crash_both(lazy, sim, plan)


# --- hand-written programs ---------------------------------------------------------------------

EVERY_PLAN: tuple[Callable[[int], CrashPlan], ...] = (
    lambda n: LoseUnsynced(),
    lambda n: KeepPrefix(1),
    lambda n: KeepPrefix(n // 2),
    lambda n: KeepPrefix(max(0, n - 1)),
    lambda n: TornWrite(n // 2, 1),
    lambda n: KeepSubset(frozenset(range(1, n, 2))),
    lambda n: KeepAll(),
    lambda n: KillProcess(),
)

RENAME_OVER_AND_LINK: list[Op] = [
    ("mkdir", "d"),
    ("fsync_dir", ""),
    ("open", 0, "d/c", "create"),
    ("write", 0, b"old contents", 0),
    ("fsync", 0),
    ("fsync_dir", "d"),
    ("open", 1, "d/e", "create_excl"),
    ("write", 1, b"new contents, longer", 0),
    ("fdatasync", 1),
    ("rename", "d/e", "d/c"),
    ("link", "d/c", "a"),
    ("fsync_dir", ""),
    ("unlink", "d/c"),
    ("write", 1, b"!", 20),
    ("open", 2, "a", "append"),
    ("write", 2, b" appended", 0),
    ("rename", "a", "b"),
    ("fsync_dir", "d"),
    ("open", 0, "d/e", "create"),
    ("write", 0, b"another name", 0),
]

UNLINK_OPEN_AND_TRUNCATE: list[Op] = [
    ("open", 0, "a", "create"),
    ("write", 0, b"x" * (2 * SECTOR_BYTES + 5), 0),
    ("fsync_dir", ""),
    ("open", 1, "a", "trunc"),
    ("write", 1, b"y" * 10, 0),
    ("unlink", "a"),
    ("write", 0, b"after unlink", 3),
    ("fsync", 0),
    ("open", 2, "b", "create_trunc"),
    ("truncate", 2, 3 * SECTOR_BYTES),
    ("write", 2, b"z" * 700, SECTOR_BYTES - 100),
    ("fdatasync", 1),
    ("write", 2, b"tail", 4000),
]


@pytest.mark.parametrize("make_plan", EVERY_PLAN)
@pytest.mark.parametrize(
    "program",
    [RENAME_OVER_AND_LINK, UNLINK_OPEN_AND_TRUNCATE],
    ids=["rename-over-and-link", "unlink-open-and-truncate"],
)
def test_hand_written_programs_survive_every_plan_as_on_the_simulated_disk(
    lazy: LazyDisk, program: list[Op], make_plan: Callable[[int], CrashPlan]
) -> None:
    sim = SimDisk()
    run_both(lazy, sim, program)
    pending = len(sim.pending_operations())
    assert pending >= 4, "the program must leave something for the plan to choose from"
    crash_both(lazy, sim, make_plan(pending))


def test_a_write_larger_than_max_write_is_several_pending_writes_in_order(
    lazy: LazyDisk,
) -> None:
    """The kernel cuts it; each piece is a pending write a plan may keep or lose, in order,
    as a real disk may tear a large write. A piece is never larger than MAX_WRITE."""
    data = bytes(i % 253 for i in range(2 * MAX_WRITE + 12345))
    fd = os.open(os.path.join(lazy.mountpoint, "big"), os.O_CREAT | os.O_RDWR)
    try:
        assert os.pwrite(fd, data, 0) == len(data)
    finally:
        os.close(fd)
    wait_for_releases(lazy)
    writes = [op for op in lazy.disk.pending_operations() if op.kind == "write"]
    assert len(writes) >= 3
    assert all(op.length <= MAX_WRITE for op in writes)
    assert [op.offset for op in writes] == [sum(w.length for w in writes[:i]) for i in range(3)]
    assert sum(op.length for op in writes) == len(data)
    lazy.power_loss(KeepPrefix(2))  # the create and the first piece
    # The name was never made durable: KeepPrefix(2) keeps it (the create is pending op 0).
    with open(os.path.join(lazy.mountpoint, "big"), "rb") as handle:
        assert handle.read() == data[: writes[0].length]
