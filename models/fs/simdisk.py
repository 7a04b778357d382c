"""The simulated disk: a deterministic, crashable, in-memory FileSystem.

Implements docs/design.md "The IO seam and the crash model" and the crash plans of spec/crash.py.
``SimDisk`` satisfies impl.fs.api.FileSystem (and ``SimHandle`` FileHandle) structurally; it
imports only spec/, so the engine is checked against a disk it did not build.

The model, as POSIX as we need it
---------------------------------
Inodes are numbered (never reused before a crash). A file inode holds bytes, a directory
inode maps names to inodes. Two trees share the inode numbers: the *current* tree (what reads
see) and the *durable* tree (what survives ``LoseUnsynced``). Every mutation is applied to the
current tree at once and appended, in issue order and in inode terms, to the pending list;
durability moves pending operations into the durable tree. A handle refers to an inode, so
it follows renames and keeps working after an unlink. Paths are ``/``-separated; ``a/b``,
``/a/b`` and ``a//b/`` name the same thing (``.`` and ``..`` are resolved lexically); the
root ``/`` always exists and is durable.

Durability, exactly:
- A write (pwrite, append) or truncate is pending until a successful fsync or fdatasync of
  its inode, through any handle; that moves every pending data operation of the inode into
  the durable tree in issue order, and keeps the rest of the list in order.
- create, mkdir, link and unlink touch one directory (the parent of the name); rename touches
  its source and destination parents (one if they are the same). ``fsync_dir(d)`` marks ``d``
  synced for every pending operation touching ``d`` issued before it. A directory operation
  becomes durable once every directory it touches is marked and no earlier pending directory
  operation shares a directory with it: each directory's entries become durable as a prefix
  of its own history. So a rename between two directories is durable once both have been
  fsynced after it, and an operation issued after a half-synced rename in one of its
  directories waits for that rename (a stricter rule than a journaling file system, which
  commits the whole rename at the first fsync).
- fsync of a file says nothing about its name; fsync_dir says nothing about file data; a new
  directory's own name needs an fsync of its parent.

What a pending operation does when a crash plan keeps it (applied to the durable tree):
write puts its bytes at its offset (zero-filling a gap); truncate cuts or zero-extends;
create, mkdir and link bind the name to the inode (replacing what the name held); unlink
removes the name only if it still names that inode; rename does the same unlink of its source
and binds its destination, except that a directory rename whose source no longer names the
directory is skipped (a directory never gets two names). A surviving write to an inode whose
name did not survive is unreachable; a surviving name whose writes were lost shows the durable
content. Then everything unreachable from ``/`` is dropped, the pending list is emptied and
every open handle raises FsClosed; recovery opens files anew.

Instrumentation: ``operation_count`` counts every call of a mutating operation or an fsync
(open with ``create=True``, mkdir, rename, link, unlink, pwrite, append, truncate, fsync,
fdatasync, fsync_dir), failed ones included. At the start of each such call the counter is
incremented and then ``on_operation(kind)`` is called with that kind; if the hook raises, the
exception propagates and the operation does not happen (the crash explorer dies at operation
k this way).

Capacity (``set_capacity``): the current sizes of the files reachable under a directory
path, each inode counted once, may not exceed its capacity. A write, an extending truncate,
a link or a rename that would grow a full subtree past it raises FsNoSpace and changes
nothing. A capacity set below the current usage, a crash or a failed fsync can leave usage
above capacity; it can then only shrink. Checks walk the subtree: O(entries) per growing
write while a capacity is set, free otherwise.

Injected failures (``fail_next``): "write" (pwrite and append), "read" (pread) and "fsync"
(fsync and fdatasync) match the handle's opening path, "fsync_dir" the directory path, as a
string prefix of the normalised absolute path. A failed write or read changes nothing; a
failed fsync_dir changes nothing, its operations stay pending (a crash may keep or lose them).
A failed fsync drops the inode's pending data operations without their reaching the durable
tree; what reads see then is chosen at construction, ``SimDisk(fsync_failure=...)``
(spec.fs.FsyncFailure):
- "revert" (the default; btrfs-like): the file reverts to its durable content.
- "keep" (ext4 and XFS after a writeback error): reads keep showing the new bytes, but they
  are lost for good: the kernel marked the pages clean, so no later fsync writes them and a
  crash (any plan, KeepAll included: clean pages may be evicted at any time) shows the
  durable content. Writes after the failure are pending as usual; a later successful fsync
  makes exactly those durable and succeeds although the lost bytes are not on disk, so an
  engine that retries a failed fsync and trusts the retry loses data. If such a later write
  lies beyond the durable end of the file, the gap reads as zeros after a crash.
  ``check_invariants`` still replays durable + pending, starting each such file from the
  content the lost writes built (kept until the next crash) rather than its durable content.

Torn writes: ``TornWrite`` keeps a prefix of a write's sectors (the rest of its range keeps
its old content, or zeros past the old end); ``TornSectors`` keeps any subset of them and puts
seeded garbage in the others, extending the file to the write's end.

Directory locks (``lock_dir``): an exclusive lock per directory inode, held in memory only
(nothing of it is on the disk, it is not an operation and it calls no hook). A second lock of
a held directory raises FsLocked; ``crash`` and ``kill_process`` drop every lock (the process
that held them is gone), and a lock handle from before then releases nothing.

Not modelled: permissions, symlinks, rmdir, timestamps, sparse holes (gaps are zeros),
fdatasync's metadata leniency, space held by unlinked open files, directory sizes, the OS's
ENOTDIR for a trailing slash on a file, reordering inside one write other than the sector
tears, and a failed read that returns part of the data (a failed read returns nothing).
Handles dropped without close keep their inode alive until the next crash.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import random
from collections.abc import Callable, Iterator
from typing import Final, assert_never

import attrs

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
    Unknown,
)
from spec.errors import (
    FsClosed,
    FsExists,
    FsIOError,
    FsLocked,
    FsNoSpace,
    FsNotADirectory,
    FsNotFound,
)
from spec.fs import DiskSpace, FsyncFailure

ROOT_INODE: Final = 0
DEFAULT_TOTAL_BYTES: Final = 1 << 40
#: The kinds passed to ``on_operation``.
HOOK_KINDS: Final = frozenset(
    {"create", "mkdir", "rename", "link", "unlink"}
    | {"pwrite", "append", "truncate", "fsync", "fdatasync", "fsync_dir"}
)
#: The kinds of ``PendingOp``.
PENDING_KINDS: Final = frozenset(
    {"write", "truncate", "create", "mkdir", "link", "unlink", "rename"}
)
FAILABLE_OPS: Final = frozenset({"write", "read", "fsync", "fsync_dir"})

Parts = tuple[str, ...]
#: A file's version in one tree (see ``SimDisk.directory_files``): the tree's serial, the
#: inode and the inode's change count there.
FileVersion = tuple[int, int, int]

_tree_serials = itertools.count()


@attrs.frozen
class PendingOp:
    """A pending operation, as tests and the crash explorer see it.

    ``path`` is the file written or truncated (normalised name it was opened by), the name
    created, made, linked (the new name) or unlinked, or the source of a rename, whose
    destination is ``new_path`` (empty for every other kind). ``offset`` and ``length`` are a
    write's; a truncate's ``length`` is the new size; both are 0 for directory operations.
    ``directories`` are the directories whose fsync the operation waits for.
    """

    kind: str
    path: str
    inode: int
    offset: int = 0
    length: int = 0
    new_path: str = ""
    directories: tuple[str, ...] = ()


@attrs.frozen(eq=False)
class _DataOp:
    """A write (``data`` set) or a truncate (``data`` None, ``length`` the new size). Frozen:
    disk copies share it (SimDisk.copy)."""

    seq: int
    ino: int
    offset: int
    data: bytes | None
    length: int
    desc: PendingOp


@attrs.frozen
class SimStat:
    """What the disk says of one inode now (``SimDisk.stat``, ``SimHandle.stat``): enough
    for a FUSE getattr (proofs/lazydisk/fusefs.py). ``links`` counts a file's names in the
    current tree (0 for an unlinked file still open), or for a directory 2 plus its
    subdirectories, as POSIX file systems count them."""

    inode: int
    is_dir: bool
    size: int
    links: int


@attrs.define(eq=False)
class _DirOp:
    """create/mkdir/link/unlink of (dir_ino, name), or rename to (new_dir_ino, new_name)."""

    seq: int
    kind: str
    ino: int
    dir_ino: int
    name: str
    new_dir_ino: int
    new_name: str
    waiting: set[int]
    desc: PendingOp

    def dirs(self) -> set[int]:
        return {self.dir_ino} if self.kind != "rename" else {self.dir_ino, self.new_dir_ino}

    def target(self) -> tuple[int, str] | None:
        """The entry this operation binds, if any."""
        if self.kind == "unlink":
            return None
        if self.kind == "rename":
            return self.new_dir_ino, self.new_name
        return self.dir_ino, self.name


_Op = _DataOp | _DirOp


@attrs.define
class _FailRule:
    op: str
    prefix: str
    remaining: int
    match: Callable[[str], bool] | None = None

    def aims_at(self, op: str, norm_path: str) -> bool:
        return (
            self.op == op
            and norm_path.startswith(self.prefix)
            and (self.match is None or self.match(norm_path))
        )


class _Tree:
    """One view of the inodes: file contents, directory entries, and the reverse index."""

    def __init__(self) -> None:
        self.files: dict[int, bytearray] = {}
        self.dirs: dict[int, dict[str, int]] = {ROOT_INODE: {}}
        self.links: dict[int, set[tuple[int, str]]] = {ROOT_INODE: set()}
        #: Which tree this is: a new one after every crash, so versions never repeat.
        self.serial = next(_tree_serials)
        #: Per file inode, how many times its bytes changed in this tree (a cheap change
        #: detector for readers that cache what they parsed, proofs/harness/disk_view.py).
        self.changes: dict[int, int] = {}
        #: Per directory inode, how many times its entries or the bytes of a file named in
        #: it changed in this tree.
        self.dir_changes: dict[int, int] = {ROOT_INODE: 0}

    def add_file(self, ino: int) -> None:
        assert ino not in self.links, ino
        self.files[ino] = bytearray()
        self.links[ino] = set()
        self.changes[ino] = 0

    def changed(self, ino: int) -> None:
        """The bytes of file ``ino`` changed."""
        self.changes[ino] += 1
        for dir_ino, _ in self.links[ino]:
            self.dir_changes[dir_ino] += 1

    def add_dir(self, ino: int) -> None:
        assert ino not in self.links, ino
        self.dirs[ino] = {}
        self.links[ino] = set()
        self.dir_changes[ino] = 0

    def drop_file(self, ino: int) -> None:
        assert not self.links[ino], ino
        del self.files[ino]
        del self.links[ino]
        del self.changes[ino]

    def set_entry(self, dir_ino: int, name: str, ino: int) -> None:
        entries = self.dirs[dir_ino]
        old = entries.get(name)
        if old is not None:
            self.links[old].discard((dir_ino, name))
        entries[name] = ino
        self.links[ino].add((dir_ino, name))
        self.dir_changes[dir_ino] += 1

    def del_entry(self, dir_ino: int, name: str) -> None:
        ino = self.dirs[dir_ino].pop(name)
        self.links[ino].discard((dir_ino, name))
        self.dir_changes[dir_ino] += 1

    def copy(self) -> _Tree:
        """A copy with its own serial (a new tree: versions of this one do not carry over)."""
        other = _Tree()
        self._copy_into(other)
        return other

    def clone(self) -> _Tree:
        """An exact copy, serial included (the same tree, on another disk: SimDisk.copy)."""
        other = _Tree.__new__(_Tree)
        other.serial = self.serial
        self._copy_into(other)
        return other

    def _copy_into(self, other: _Tree) -> None:
        other.files = {ino: bytearray(data) for ino, data in self.files.items()}
        other.dirs = {ino: dict(entries) for ino, entries in self.dirs.items()}
        other.links = {ino: set(links) for ino, links in self.links.items()}
        other.changes = dict(self.changes)
        other.dir_changes = dict(self.dir_changes)

    def walk(self) -> Iterator[tuple[Parts, int]]:
        """Every name reachable from the root, depth first in name order."""
        seen = {ROOT_INODE}
        stack: list[tuple[Parts, int]] = [((), ROOT_INODE)]
        while stack:
            parts, dir_ino = stack.pop()
            for name, child in sorted(self.dirs[dir_ino].items(), reverse=True):
                yield (*parts, name), child
                if child in self.dirs and child not in seen:
                    seen.add(child)
                    stack.append(((*parts, name), child))

    def file_contents(self) -> dict[str, bytes]:
        return {
            _abs(parts): bytes(self.files[ino]) for parts, ino in self.walk() if ino in self.files
        }


def _write_bytes(content: bytearray, offset: int, data: bytes) -> None:
    if offset > len(content):
        content.extend(bytes(offset - len(content)))
    content[offset : offset + len(data)] = data
    assert len(content) >= offset + len(data)


def _truncate_bytes(content: bytearray, length: int) -> None:
    if length < len(content):
        del content[length:]
    else:
        content.extend(bytes(length - len(content)))
    assert len(content) == length


def _apply_data(content: bytearray, op: _DataOp) -> None:
    """A write or truncate applied to one file's bytes (the tree's ``_apply`` for data)."""
    if op.data is None:
        _truncate_bytes(content, op.length)
    else:
        _write_bytes(content, op.offset, op.data)


def _apply(tree: _Tree, op: _Op) -> None:
    """What ``op`` does to ``tree``: the replay semantics of the module docstring."""
    if isinstance(op, _DataOp):
        tree.changed(op.ino)
        _apply_data(tree.files[op.ino], op)
        return
    src_held = tree.dirs[op.dir_ino].get(op.name) == op.ino
    if op.kind == "unlink":
        if src_held:
            tree.del_entry(op.dir_ino, op.name)
        return
    if op.kind == "rename":
        if op.ino in tree.dirs and not src_held:
            return
        if src_held:
            tree.del_entry(op.dir_ino, op.name)
        tree.set_entry(op.new_dir_ino, op.new_name, op.ino)
        return
    tree.set_entry(op.dir_ino, op.name, op.ino)


def _survivors(ops: list[_Op], plan: CrashPlan) -> list[_Op]:
    """The pending operations ``plan`` keeps, in issue order (a torn write cut short)."""
    if isinstance(plan, LoseUnsynced):
        return []
    if isinstance(plan, KeepPrefix):
        return ops[: plan.count]
    if isinstance(plan, TornWrite):
        kept = ops[: plan.keep]
        if plan.keep < len(ops):
            torn = _tear(ops[plan.keep], plan.sectors)
            if torn is not None:
                kept.append(torn)
        return kept
    if isinstance(plan, TornSectors):
        kept = ops[: plan.keep]
        if plan.keep < len(ops):
            garbled = _garble(ops[plan.keep], plan.sectors, plan.garbage)
            if garbled is not None:
                kept.append(garbled)
        return kept
    if isinstance(plan, KeepSubset):
        return [op for index, op in enumerate(ops) if index in plan.indices]
    if isinstance(plan, KeepAll):
        return ops
    if isinstance(plan, KillProcess):
        raise ValueError("a process kill keeps the page cache: SimDisk.crash handles it")
    if isinstance(plan, Unknown):
        raise ValueError(
            "the Unknown crash plan (what survived is not known) is a recorder's; a simulated "
            "disk needs a plan that says which operations survive"
        )
    assert_never(plan)


def _tear(op: _Op, sectors: int) -> _DataOp | None:
    """A write kept up to its ``sectors``-th sector boundary (file offsets), or None."""
    if not isinstance(op, _DataOp) or op.data is None:
        return None
    boundary = (op.offset // SECTOR_BYTES + sectors) * SECTOR_BYTES
    kept_bytes = max(0, min(len(op.data), boundary - op.offset))
    if kept_bytes == 0:
        return None
    return attrs.evolve(op, data=op.data[:kept_bytes], length=kept_bytes)


def _garble(op: _Op, sectors: frozenset[int], seed: int) -> _DataOp | None:
    """A write whose sectors (numbered within the write, aligned to file offsets) not in
    ``sectors`` hold bytes of ``random.Random(seed)`` instead of the new data, or None if
    ``op`` is not a write. The garbage is drawn for the whole write and then masked, so a
    sector's garbage does not depend on which other sectors were kept."""
    if not isinstance(op, _DataOp) or op.data is None:
        return None
    noise = random.Random(seed).randbytes(len(op.data))
    out = bytearray(op.data)
    first = op.offset // SECTOR_BYTES
    position = 0
    while position < len(out):
        sector = (op.offset + position) // SECTOR_BYTES
        end = min(len(out), (sector + 1) * SECTOR_BYTES - op.offset)
        if sector - first not in sectors:
            out[position:end] = noise[position:end]
        position = end
    return attrs.evolve(op, data=bytes(out))


def _reachable_copy(tree: _Tree) -> _Tree:
    """The part of ``tree`` reachable from the root, with a fresh reverse index."""
    out = _Tree()
    stack = [ROOT_INODE]
    while stack:
        dir_ino = stack.pop()
        for name, child in sorted(tree.dirs[dir_ino].items()):
            if child in tree.dirs:
                assert child not in out.dirs, f"directory inode {child} has two names"
                out.add_dir(child)
                stack.append(child)
            elif child not in out.files:
                out.add_file(child)
                out.files[child][:] = tree.files[child]
            out.set_entry(dir_ino, name, child)
    return out


@functools.lru_cache(maxsize=4096)
def _parts(path: str) -> Parts:
    """The normalised components of ``path`` (a pure function of the string: memoised, as
    the bookie and the harness name the same few paths over and over)."""
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return tuple(out)


def _abs(parts: Parts) -> str:
    return "/" + "/".join(parts)


def _walk(tree: _Tree, path: str) -> int | None:
    """The inode ``path`` names in ``tree``, or None when a component is missing (or is
    not a directory)."""
    ino = ROOT_INODE
    for name in _parts(path):
        entries = tree.dirs.get(ino)
        child = None if entries is None else entries.get(name)
        if child is None:
            return None
        ino = child
    return ino


class SimHandle:
    """An open file on a SimDisk: an inode, the name it was opened by, and a generation."""

    def __init__(
        self, disk: SimDisk, ino: int, path: str, generation: int, *, read_only: bool = False
    ) -> None:
        self._disk = disk
        self._read_only = read_only
        self.ino = ino
        self._path = path
        self.norm_path = _abs(_parts(path))
        self.generation = generation
        self.closed = False

    @property
    def path(self) -> str:
        return self._path

    def _refuse_if_read_only(self, op: str) -> None:
        if self._read_only:
            raise FsIOError(self._path, f"{op} (the file was opened read-only)")

    def pwrite(self, offset: int, data: bytes) -> None:
        self._refuse_if_read_only("write")
        self._disk._write(self, "pwrite", offset, data)

    def append(self, data: bytes) -> int:
        self._refuse_if_read_only("write")
        return self._disk._write(self, "append", None, data)

    def pread(self, offset: int, length: int) -> bytes:
        return self._disk._pread(self, offset, length)

    def size(self) -> int:
        return len(self._disk._content(self))

    def stat(self) -> SimStat:
        """The open file's inode as it is now (it follows renames and unlinks)."""
        return self._disk._stat_inode(self._disk._live(self))

    def truncate(self, length: int) -> None:
        self._refuse_if_read_only("truncate")
        self._disk._truncate(self, length)

    def fsync(self) -> None:
        self._disk._fsync(self, "fsync")

    def fdatasync(self) -> None:
        self._disk._fsync(self, "fdatasync")

    def close(self) -> None:
        self._disk._close(self)


class SimDirLock:
    """A held directory lock of a SimDisk (``SimDisk.lock_dir``)."""

    def __init__(self, disk: SimDisk, ino: int, token: int) -> None:
        self._disk = disk
        self._ino = ino
        self._token = token

    def release(self) -> None:
        self._disk._unlock(self._ino, self._token)


class SimDisk:
    """A deterministic in-memory disk that keeps durable state apart from written state."""

    def __init__(self, *, fsync_failure: FsyncFailure | str = FsyncFailure.REVERT) -> None:
        #: What a failed fsync does (module docstring, "Injected failures").
        self.fsync_failure = FsyncFailure(fsync_failure)
        self._cur = _Tree()
        self._dur = _Tree()
        self._next_ino = ROOT_INODE + 1
        self._next_seq = 0
        self._pending: dict[int, _Op] = {}
        self._dir_ops: dict[int, _DirOp] = {}
        self._data_ops: dict[int, list[_DataOp]] = {}
        self._dir_refs: dict[int, int] = {}
        self._open: dict[int, int] = {}
        self._generation = 0
        self._operation_count = 0
        self._capacity: dict[Parts, int] = {}
        self._allowance: dict[Parts, int] = {}
        self._failures: list[_FailRule] = []
        #: The injected faults that took effect, as (op, normalised path), oldest first: an
        #: op of FAILABLE_OPS that failed, or "no_space" for a write a capacity refused.
        #: take_fired() empties it.
        self.fired: list[tuple[str, str]] = []
        #: Per file whose writes a failed fsync dropped in KEEP mode: the content those writes
        #: built, which the durable tree lacks; current = this + the inode's pending writes.
        self._cache_base: dict[int, bytearray] = {}
        #: Called with the kind at the start of every mutating operation and fsync.
        self.on_operation: Callable[[str], None] | None = None
        #: Held directory locks: directory inode -> the token of the lock that holds it.
        self._locks: dict[int, int] = {}
        self._next_lock = 1

    # --- instrumentation -----------------------------------------------------------------

    @property
    def operation_count(self) -> int:
        """Mutating operations and fsyncs issued so far (monotonic, failed ones included)."""
        return self._operation_count

    def _begin(self, kind: str) -> None:
        assert kind in HOOK_KINDS, kind
        self._operation_count += 1
        if self.on_operation is not None:
            self.on_operation(kind)

    def pending_operations(self) -> tuple[PendingOp, ...]:
        """The operations not yet durable, in issue order (the indices crash plans use)."""
        return tuple(op.desc for op in self._pending.values())

    # --- paths -----------------------------------------------------------------------------

    def _lookup(self, parts: Parts, path: str) -> int:
        ino = ROOT_INODE
        for name in parts:
            entries = self._cur.dirs.get(ino)
            if entries is None:
                raise FsNotADirectory(path)
            child = entries.get(name)
            if child is None:
                raise FsNotFound(path)
            ino = child
        return ino

    def _parent(self, parts: Parts, path: str) -> int:
        assert parts, path
        dir_ino = self._lookup(parts[:-1], path)
        if dir_ino not in self._cur.dirs:
            raise FsNotADirectory(path)
        return dir_ino

    def _lookup_dir(self, path: str) -> int:
        ino = self._lookup(_parts(path), path)
        if ino not in self._cur.dirs:
            raise FsNotADirectory(path)
        return ino

    def _parent_dir(self, dir_ino: int) -> int | None:
        """The directory holding ``dir_ino`` now (None for the root or a replaced one)."""
        links = self._cur.links[dir_ino]
        assert len(links) <= 1, dir_ino
        return next(iter(links))[0] if links else None

    def _dir_parts(self, dir_ino: int) -> Parts | None:
        """The current path of a directory, or None if it was replaced away."""
        names: list[str] = []
        while dir_ino != ROOT_INODE:
            links = self._cur.links[dir_ino]
            if not links:
                return None
            assert len(links) == 1, dir_ino
            ((dir_ino, name),) = links
            names.append(name)
        return tuple(reversed(names))

    # --- the FileSystem protocol -----------------------------------------------------------

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> SimHandle:
        """Open (and with ``create`` make) a file. See impl.fs.api.FileSystem.open. A
        read-only handle refuses pwrite, append and truncate with FsIOError."""
        assert not (read_only and create), "a read-only open cannot create"
        if create:
            self._begin("create")
        parts = _parts(path)
        if not parts:
            raise FsIOError(path, "open (is a directory)")
        dir_ino = self._parent(parts, path)
        ino = self._cur.dirs[dir_ino].get(parts[-1])
        if ino is not None and ino in self._cur.dirs:
            raise FsIOError(path, "open (is a directory)")
        if ino is None:
            if not create:
                raise FsNotFound(path)
            ino = self._new_inode(directory=False)
            self._issue(self._dir_op("create", ino, dir_ino, parts))
        elif create and exclusive:
            raise FsExists(path)
        self._open[ino] = self._open.get(ino, 0) + 1
        return SimHandle(self, ino, path, self._generation, read_only=read_only)

    def exists(self, path: str) -> bool:
        try:
            self._lookup(_parts(path), path)
        except (FsNotFound, FsNotADirectory):
            return False
        return True

    def is_dir(self, path: str) -> bool:
        try:
            return self._lookup(_parts(path), path) in self._cur.dirs
        except (FsNotFound, FsNotADirectory):
            return False

    def stat(self, path: str) -> SimStat:
        """The inode ``path`` names (FsNotFound, FsNotADirectory as a lookup raises them)."""
        return self._stat_inode(self._lookup(_parts(path), path))

    def _stat_inode(self, ino: int) -> SimStat:
        entries = self._cur.dirs.get(ino)
        if entries is not None:
            subdirs = sum(1 for child in entries.values() if child in self._cur.dirs)
            return SimStat(inode=ino, is_dir=True, size=0, links=2 + subdirs)
        links = len(self._cur.links[ino])
        return SimStat(inode=ino, is_dir=False, size=len(self._cur.files[ino]), links=links)

    def listdir(self, path: str) -> list[str]:
        return sorted(self._cur.dirs[self._lookup_dir(path)])

    def mkdir(self, path: str) -> None:
        """Create a directory and its missing parents, one pending mkdir per new name."""
        self._begin("mkdir")
        parts = _parts(path)
        dir_ino = ROOT_INODE
        for depth in range(1, len(parts) + 1):
            child = self._cur.dirs[dir_ino].get(parts[depth - 1])
            if child is None:
                child = self._new_inode(directory=True)
                self._issue(self._dir_op("mkdir", child, dir_ino, parts[:depth]))
            elif child not in self._cur.dirs:
                raise FsNotADirectory(path)
            dir_ino = child

    def unlink(self, path: str) -> None:
        self._begin("unlink")
        parts = _parts(path)
        if not parts:
            raise FsIOError(path, "unlink (is a directory)")
        dir_ino = self._parent(parts, path)
        ino = self._cur.dirs[dir_ino].get(parts[-1])
        if ino is None:
            raise FsNotFound(path)
        if ino in self._cur.dirs:
            raise FsIOError(path, "unlink (is a directory)")
        self._issue(self._dir_op("unlink", ino, dir_ino, parts))
        self._collect(ino)

    def link(self, src: str, dst: str) -> None:
        """Hard-link ``dst`` to the file ``src`` (errors in Linux's order)."""
        self._begin("link")
        ino = self._lookup(_parts(src), src)
        dst_parts = _parts(dst)
        if not dst_parts:
            raise FsExists(dst)
        dir_ino = self._parent(dst_parts, dst)
        if dst_parts[-1] in self._cur.dirs[dir_ino]:
            raise FsExists(dst)
        if ino in self._cur.dirs:
            raise FsIOError(src, "link (operation not permitted on a directory)")
        self._issue_checked(self._dir_op("link", ino, dir_ino, dst_parts), dst)

    def rename(self, src: str, dst: str) -> None:
        """Atomically rename, replacing a file or an empty directory at ``dst``. Errors come
        in Linux's order: both parents are walked before the source name is looked up."""
        self._begin("rename")
        src_parts, dst_parts = _parts(src), _parts(dst)
        if not src_parts or not dst_parts:
            raise FsIOError(src, "rename (the root is busy)")
        src_dir = self._parent(src_parts, src)
        dst_dir = self._parent(dst_parts, dst)
        ino = self._cur.dirs[src_dir].get(src_parts[-1])
        if ino is None:
            raise FsNotFound(src)
        existing = self._cur.dirs[dst_dir].get(dst_parts[-1])
        if existing == ino:
            return
        self._check_rename_kinds(ino, dst_dir, existing, src, dst)
        op = self._dir_op("rename", ino, src_dir, src_parts, dst_dir, dst_parts)
        self._issue_checked(op, dst)
        if existing is not None and existing in self._cur.files:
            self._collect(existing)

    def _check_rename_kinds(
        self, ino: int, dst_dir: int, existing: int | None, src: str, dst: str
    ) -> None:
        if ino in self._cur.dirs:
            probe: int | None = dst_dir
            while probe is not None:
                if probe == ino:
                    raise FsIOError(src, "rename (a directory into itself)")
                probe = self._parent_dir(probe)
            if existing is not None and existing in self._cur.files:
                raise FsNotADirectory(dst)
            if existing is not None and self._cur.dirs[existing]:
                raise FsIOError(dst, "rename (directory not empty)")
        elif existing is not None and existing in self._cur.dirs:
            raise FsIOError(dst, "rename (is a directory)")

    def fsync_dir(self, path: str) -> None:
        """Mark ``path`` synced for its pending entries and settle what became durable."""
        self._begin("fsync_dir")
        dir_ino = self._lookup_dir(path)
        if self._injected("fsync_dir", _abs(_parts(path))):
            raise FsIOError(path, "fsync_dir")
        for op in self._dir_ops.values():
            op.waiting.discard(dir_ino)
        self._settle_dir_ops()

    def lock_dir(self, path: str) -> SimDirLock:
        """The exclusive lock of a directory (module docstring, "Directory locks")."""
        ino = self._lookup_dir(path)
        if ino in self._locks:
            raise FsLocked(path)
        token = self._next_lock
        self._next_lock += 1
        self._locks[ino] = token
        return SimDirLock(self, ino, token)

    def _unlock(self, ino: int, token: int) -> None:
        if self._locks.get(ino) == token:
            del self._locks[ino]

    def disk_space(self, path: str) -> DiskSpace:
        """Free and total bytes of the nearest enclosing directory with a capacity."""
        parts = _parts(path)
        self._lookup(parts, path)
        for depth in range(len(parts), -1, -1):
            capacity_bytes = self._capacity.get(parts[:depth])
            usage_bytes = None if capacity_bytes is None else self._usage(parts[:depth])
            if capacity_bytes is not None and usage_bytes is not None:
                free_bytes = max(0, capacity_bytes - usage_bytes)
                return DiskSpace(free_bytes=free_bytes, total_bytes=capacity_bytes)
        used_bytes = self._usage(())
        assert used_bytes is not None
        return DiskSpace(
            free_bytes=max(0, DEFAULT_TOTAL_BYTES - used_bytes), total_bytes=DEFAULT_TOTAL_BYTES
        )

    # --- handle operations -----------------------------------------------------------------

    def _live(self, handle: SimHandle) -> int:
        assert handle._disk is self, "handle of another disk"
        if handle.closed or handle.generation != self._generation:
            raise FsClosed(handle.path)
        assert handle.ino in self._cur.files, handle.ino
        return handle.ino

    def _content(self, handle: SimHandle) -> bytearray:
        return self._cur.files[self._live(handle)]

    def _pread(self, handle: SimHandle, offset: int, length: int) -> bytes:
        content = self._content(handle)
        if offset < 0 or length < 0:
            raise FsIOError(handle.path, "read (invalid argument)")
        if self._failures and self._injected("read", handle.norm_path):
            raise FsIOError(handle.path, "read")
        return bytes(content[offset : offset + length])

    def _write(self, handle: SimHandle, kind: str, offset: int | None, data: bytes) -> int:
        self._begin(kind)
        ino = self._live(handle)
        size_bytes = len(self._cur.files[ino])
        at = size_bytes if offset is None else offset
        if at < 0:
            raise FsIOError(handle.path, f"{kind} (invalid argument)")
        if self._failures and self._injected("write", handle.norm_path):
            raise FsIOError(handle.path, kind)
        data = bytes(data)
        if data:
            self._check_growth(ino, at + len(data) - size_bytes, handle.path)
            desc = PendingOp("write", handle.norm_path, ino, at, len(data))
            self._issue(_DataOp(self._seq(), ino, at, data, len(data), desc))
            assert len(self._cur.files[ino]) >= at + len(data)
        return at

    def _truncate(self, handle: SimHandle, length: int) -> None:
        self._begin("truncate")
        ino = self._live(handle)
        if length < 0:
            raise FsIOError(handle.path, "truncate (invalid argument)")
        self._check_growth(ino, length - len(self._cur.files[ino]), handle.path)
        desc = PendingOp("truncate", handle.norm_path, ino, 0, length)
        self._issue(_DataOp(self._seq(), ino, 0, None, length, desc))
        assert len(self._cur.files[ino]) == length

    def _fsync(self, handle: SimHandle, kind: str) -> None:
        self._begin(kind)
        ino = self._live(handle)
        if self._failures and self._injected("fsync", handle.norm_path):
            self._discard_unsynced(ino)
            raise FsIOError(handle.path, kind)
        base = self._cache_base.get(ino)
        for op in self._data_ops.pop(ino, []):
            _apply(self._dur, op)
            if base is not None:
                _apply_data(base, op)
            del self._pending[op.seq]
        assert (self._dur.files[ino] if base is None else base) == self._cur.files[ino], ino

    def _close(self, handle: SimHandle) -> None:
        if handle.closed or handle.generation != self._generation:
            handle.closed = True
            return
        handle.closed = True
        count = self._open[handle.ino] - 1
        assert count >= 0, handle.ino
        if count:
            self._open[handle.ino] = count
        else:
            del self._open[handle.ino]
            self._collect(handle.ino)

    # --- pending operations and durability -------------------------------------------------

    def _seq(self) -> int:
        self._next_seq += 1
        return self._next_seq

    def _new_inode(self, *, directory: bool) -> int:
        ino = self._next_ino
        self._next_ino += 1
        for tree in (self._cur, self._dur):
            if directory:
                tree.add_dir(ino)
            else:
                tree.add_file(ino)
        return ino

    def _dir_op(
        self,
        kind: str,
        ino: int,
        dir_ino: int,
        parts: Parts,
        new_dir_ino: int = -1,
        new_parts: Parts = (),
    ) -> _DirOp:
        dirs = [_abs(parts[:-1])]
        if kind == "rename" and new_dir_ino != dir_ino:
            dirs.append(_abs(new_parts[:-1]))
        new_path = _abs(new_parts) if new_parts else ""
        desc = PendingOp(kind, _abs(parts), ino, new_path=new_path, directories=tuple(dirs))
        name, new_name = parts[-1], (new_parts[-1] if new_parts else "")
        op = _DirOp(self._seq(), kind, ino, dir_ino, name, new_dir_ino, new_name, set(), desc)
        op.waiting = op.dirs()
        return op

    def _issue(self, op: _Op) -> None:
        """Apply ``op`` to the current tree and append it to the pending list."""
        _apply(self._cur, op)
        self._record(op)

    def _record(self, op: _Op) -> None:
        self._pending[op.seq] = op
        if isinstance(op, _DataOp):
            self._data_ops.setdefault(op.ino, []).append(op)
        else:
            self._dir_ops[op.seq] = op
            self._dir_refs[op.ino] = self._dir_refs.get(op.ino, 0) + 1

    def _issue_checked(self, op: _DirOp, path: str) -> None:
        """Issue a link or rename unless it grows a full capacity subtree (then undo)."""
        before = self._usages()
        touched = [(op.dir_ino, op.name)] if op.kind == "rename" else []
        bound = op.target()
        assert bound is not None
        touched.append(bound)
        saved = [(d, n, self._cur.dirs[d].get(n)) for d, n in touched]
        _apply(self._cur, op)
        after = self._usages()
        if any(after[p] > self._capacity[p] and after[p] > before[p] for p in after):
            for dir_ino, name, old in reversed(saved):
                if old is not None:
                    self._cur.set_entry(dir_ino, name, old)
                elif name in self._cur.dirs[dir_ino]:
                    self._cur.del_entry(dir_ino, name)
            self.fired.append(("no_space", _abs(_parts(path))))
            raise FsNoSpace(path)
        self._record(op)

    def _settle_dir_ops(self) -> None:
        """Move into the durable tree every directory operation that is now durable."""
        blocked: set[int] = set()
        done: list[_DirOp] = []
        for op in self._dir_ops.values():
            dirs = op.dirs()
            if op.waiting or dirs & blocked:
                blocked |= dirs
            else:
                done.append(op)
        candidates: set[int] = set()
        for op in done:
            bound = op.target()
            if bound is not None:
                replaced = self._dur.dirs[bound[0]].get(bound[1])
                if replaced is not None:
                    candidates.add(replaced)
            _apply(self._dur, op)
            del self._dir_ops[op.seq]
            del self._pending[op.seq]
            self._dir_refs[op.ino] -= 1
            if not self._dir_refs[op.ino]:
                del self._dir_refs[op.ino]
            candidates.add(op.ino)
        for ino in sorted(candidates):
            self._collect(ino)

    def _discard_unsynced(self, ino: int) -> None:
        """After a failed fsync: the inode's unsynced data will never reach the disk. REVERT:
        reads show the durable content again. KEEP: reads keep the new bytes, which the
        durable tree lacks for good (``_cache_base`` remembers them for check_invariants)."""
        for op in self._data_ops.pop(ino, []):
            del self._pending[op.seq]
        if self.fsync_failure is FsyncFailure.KEEP:
            self._cache_base[ino] = bytearray(self._cur.files[ino])
            return
        self._cur.files[ino][:] = self._dur.files[ino]
        self._cur.changed(ino)
        self._refresh_allowances()

    def _collect(self, ino: int) -> None:
        """Forget a file nothing can reach again (no name, pending name, or open handle)."""
        if ino not in self._cur.files or self._alive(ino):
            return
        for op in self._data_ops.pop(ino, []):
            del self._pending[op.seq]
        self._cache_base.pop(ino, None)
        self._cur.drop_file(ino)
        self._dur.drop_file(ino)

    def _alive(self, ino: int) -> bool:
        return bool(
            self._cur.links[ino]
            or self._dur.links[ino]
            or self._dir_refs.get(ino)
            or self._open.get(ino)
        )

    # --- capacity ------------------------------------------------------------------------

    def set_capacity(self, path: str, capacity_bytes: int | None) -> None:
        """Limit the bytes of the files under directory ``path`` (None lifts the limit)."""
        parts = _parts(path)
        self._lookup_dir(path)
        if capacity_bytes is None:
            self._capacity.pop(parts, None)
            self._allowance.pop(parts, None)
            return
        if capacity_bytes < 0:
            raise ValueError(f"capacity of {path} must be >= 0 bytes, got {capacity_bytes}")
        self._capacity[parts] = capacity_bytes
        self._allowance[parts] = capacity_bytes
        self._refresh_allowances()

    def _usage(self, parts: Parts) -> int | None:
        """Bytes of the distinct files under the directory ``parts``, None if not a dir."""
        try:
            top = self._lookup(parts, _abs(parts))
        except (FsNotFound, FsNotADirectory):
            return None
        if top not in self._cur.dirs:
            return None
        seen_dirs, seen_files, stack, total = {top}, set(), [top], 0
        while stack:
            for child in self._cur.dirs[stack.pop()].values():
                if child in self._cur.files:
                    if child not in seen_files:
                        seen_files.add(child)
                        total += len(self._cur.files[child])
                elif child not in seen_dirs:
                    seen_dirs.add(child)
                    stack.append(child)
        return total

    def _usages(self) -> dict[Parts, int]:
        out: dict[Parts, int] = {}
        for parts in self._capacity:
            usage = self._usage(parts)
            out[parts] = 0 if usage is None else usage
        return out

    def _check_growth(self, ino: int, growth_bytes: int, path: str) -> None:
        """Raise FsNoSpace if growing file ``ino`` overfills a subtree holding it."""
        if growth_bytes <= 0 or not self._capacity:
            return
        file_paths = []
        for dir_ino, name in self._cur.links[ino]:
            dir_parts = self._dir_parts(dir_ino)
            if dir_parts is not None:
                file_paths.append((*dir_parts, name))
        for parts, capacity_bytes in self._capacity.items():
            if any(file_path[: len(parts)] == parts for file_path in file_paths):
                usage = self._usage(parts)
                if usage is not None and usage + growth_bytes > capacity_bytes:
                    self.fired.append(("no_space", _abs(_parts(path))))
                    raise FsNoSpace(path)

    def _refresh_allowances(self) -> None:
        """Usage the disk did not choose (a crash, a failed fsync) may exceed a capacity."""
        for parts, usage in self._usages().items():
            self._allowance[parts] = max(self._allowance[parts], usage)

    # --- injected failures -----------------------------------------------------------------

    def fail_next(
        self,
        op: str,
        path_prefix: str = "",
        count: int = 1,
        *,
        match: Callable[[str], bool] | None = None,
    ) -> None:
        """Fail the next ``count`` operations ``op`` ("write", "read", "fsync", "fsync_dir")
        whose normalised path starts with ``path_prefix`` (and, given ``match``, for which
        ``match(path)`` holds) with FsIOError. Each failure is recorded in ``fired``."""
        if op not in FAILABLE_OPS:
            raise ValueError(f"fail_next: op must be one of {sorted(FAILABLE_OPS)}, got {op!r}")
        if count < 1:
            raise ValueError(f"fail_next: count must be >= 1, got {count}")
        prefix = _abs(_parts(path_prefix)) if path_prefix else ""
        self._failures.append(_FailRule(op, prefix, count, match))

    def clear_failures(self) -> None:
        """Forget every failure armed by ``fail_next`` and not yet used."""
        self._failures.clear()

    def take_fired(self) -> list[tuple[str, str]]:
        """The faults that took effect since the last call (see ``fired``), oldest first."""
        fired, self.fired = self.fired, []
        return fired

    @contextlib.contextmanager
    def faults_paused(self) -> Iterator[None]:
        """No armed failure fires inside the block (an observer's reads must not use up the
        faults aimed at the system under test); capacities still hold."""
        saved, self._failures = self._failures, []
        try:
            yield
        finally:
            self._failures = saved + self._failures

    def _injected(self, op: str, norm_path: str) -> bool:
        for rule in self._failures:
            if rule.aims_at(op, norm_path):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._failures.remove(rule)
                self.fired.append((op, norm_path))
                return True
        return False

    # --- crash -----------------------------------------------------------------------------

    def crash(self, plan: CrashPlan) -> None:
        """Die: keep the durable state plus what ``plan`` keeps of the pending list, then
        come back up with no pending operation and every old handle invalid. Under
        KillProcess only the handles die: the page cache (every pending operation) is kept,
        for a later crash to keep or lose."""
        if isinstance(plan, KillProcess):
            self.kill_process()
            return
        for op in _survivors(list(self._pending.values()), plan):
            _apply(self._dur, op)
        self._dur = _reachable_copy(self._dur)
        self._cur = self._dur.copy()
        self._pending.clear()
        self._cache_base.clear()
        self._locks.clear()
        self._dir_ops.clear()
        self._data_ops.clear()
        self._dir_refs.clear()
        self._open.clear()
        self._generation += 1
        for parts, capacity_bytes in self._capacity.items():
            self._allowance[parts] = capacity_bytes
        self._refresh_allowances()

    def kill_process(self) -> None:
        """The process using the disk died and the machine did not: every handle is invalid,
        files kept alive only by a handle are gone, and the rest stays as it is (what reads
        see, what is durable, what is pending)."""
        held = list(self._open)
        self._open.clear()
        self._locks.clear()
        self._generation += 1
        for ino in held:
            self._collect(ino)

    # --- copying -----------------------------------------------------------------------------

    def copy(self) -> SimDisk:
        """An independent copy of the disk, without its hook: the same as a pickle round trip
        (every field, the trees' serials included), several times faster. Pending
        operations are shared but for the one mutable part of each (a directory operation's
        ``waiting``): nothing else of them changes after they are issued."""
        other = SimDisk.__new__(SimDisk)
        other.fsync_failure = self.fsync_failure
        other._cur = self._cur.clone()
        other._dur = self._dur.clone()
        other._next_ino = self._next_ino
        other._next_seq = self._next_seq
        other._pending = {}
        other._dir_ops = {}
        for seq, op in self._pending.items():
            if isinstance(op, _DirOp):
                op = attrs.evolve(op, waiting=set(op.waiting))
                other._dir_ops[seq] = op
            other._pending[seq] = op
        other._data_ops = {ino: list(ops) for ino, ops in self._data_ops.items()}
        other._dir_refs = dict(self._dir_refs)
        other._open = dict(self._open)
        other._generation = self._generation
        other._operation_count = self._operation_count
        other._capacity = dict(self._capacity)
        other._allowance = dict(self._allowance)
        other._failures = [attrs.evolve(rule) for rule in self._failures]
        other.fired = list(self.fired)
        other._cache_base = {ino: bytearray(data) for ino, data in self._cache_base.items()}
        other.on_operation = None
        other._locks = dict(self._locks)
        other._next_lock = self._next_lock
        return other

    # --- helpers for tests -----------------------------------------------------------------

    def durable_snapshot(self) -> dict[str, bytes]:
        """Every reachable file as it would look after ``crash(LoseUnsynced())``."""
        return self._dur.file_contents()

    def current_snapshot(self) -> dict[str, bytes]:
        """Every reachable file as reads see it now."""
        return self._cur.file_contents()

    def directory_version(self, path: str, *, durable: bool = False) -> FileVersion | None:
        """A version of directory ``path`` in the current (or durable) tree that changes
        whenever its entries change or the bytes of a file in it do; None when ``path`` is
        not a directory there. Cheaper than ``directory_files``: a walk of the path."""
        tree = self._dur if durable else self._cur
        ino = _walk(tree, path)
        count = None if ino is None else tree.dir_changes.get(ino)
        return None if ino is None or count is None else (tree.serial, ino, count)

    def directory_files(self, path: str, *, durable: bool = False) -> dict[str, FileVersion]:
        """The files directly in directory ``path`` of the current tree (or of the durable
        one: what ``crash(LoseUnsynced())`` would leave), each name with its version, which
        changes whenever the file's bytes change in that tree and never comes back after a
        crash; {} when ``path`` is not a directory there. Cheap: one directory's entries."""
        tree = self._dur if durable else self._cur
        ino = _walk(tree, path)
        entries = None if ino is None else tree.dirs.get(ino)
        if entries is None:
            return {}
        return {
            name: (tree.serial, child, tree.changes[child])
            for name, child in entries.items()
            if child in tree.files
        }

    def version_bytes(self, version: FileVersion, *, durable: bool = False) -> bytes:
        """The bytes of the file ``version`` (from ``directory_files`` with the same
        ``durable``) names, as that tree holds them now."""
        tree = self._dur if durable else self._cur
        serial, ino, _ = version
        assert serial == tree.serial, "a version of an earlier tree (before a crash)"
        return bytes(tree.files[ino])

    def read_file(self, path: str) -> bytes:
        """The current content of a file."""
        ino = self._lookup(_parts(path), path)
        if ino in self._cur.dirs:
            raise FsIOError(path, "read (is a directory)")
        return bytes(self._cur.files[ino])

    # --- invariants ------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert every internal relation. O(total bytes): meant for tests."""
        for tree in (self._cur, self._dur):
            _check_tree(tree)
        assert self._cur.files.keys() == self._dur.files.keys()
        assert self._cur.dirs.keys() == self._dur.dirs.keys()
        assert all(ino < self._next_ino for ino in self._cur.links)
        reachable = {ino for _, ino in self._cur.walk()}
        for dir_ino, links in self._cur.links.items():
            if dir_ino in self._cur.dirs and links:
                assert dir_ino in reachable, f"directory {dir_ino} linked but unreachable"
        self._check_pending()
        assert not self._cache_base or self.fsync_failure is FsyncFailure.KEEP
        assert self._cache_base.keys() <= self._cur.files.keys()
        replay = self._dur.copy()
        for ino, base in self._cache_base.items():
            replay.files[ino][:] = base
        for op in self._pending.values():
            _apply(replay, op)
        assert replay.files == self._cur.files, (
            "durable (with writes a failed fsync kept unwritten) + pending != current (data)"
        )
        assert replay.dirs == self._cur.dirs, "durable + pending != current (entries)"
        for ino in self._cur.files:
            assert self._alive(ino), f"file inode {ino} should have been collected"
        for ino, count in self._open.items():
            assert count > 0 and ino in self._cur.files, (ino, count)
        assert self._capacity.keys() == self._allowance.keys()
        for parts, usage in self._usages().items():
            assert self._allowance[parts] >= self._capacity[parts], parts
            assert usage <= self._allowance[parts], (parts, usage, self._allowance[parts])

    def _check_pending(self) -> None:
        seqs = list(self._pending)
        assert seqs == sorted(seqs) and all(0 < seq <= self._next_seq for seq in seqs)
        data_count = 0
        for ino, ops in self._data_ops.items():
            assert ops and ino in self._cur.files, ino
            assert [op.seq for op in ops] == sorted(op.seq for op in ops)
            for op in ops:
                assert op.ino == ino and self._pending[op.seq] is op
                assert op.desc.kind == ("write" if op.data is not None else "truncate")
            data_count += len(ops)
        refs: dict[int, int] = {}
        for seq, dir_op in self._dir_ops.items():
            assert self._pending[seq] is dir_op and dir_op.desc.kind == dir_op.kind
            assert dir_op.ino in self._cur.links and dir_op.dir_ino in self._cur.dirs
            assert dir_op.kind != "rename" or dir_op.new_dir_ino in self._cur.dirs
            assert dir_op.waiting <= dir_op.dirs()
            refs[dir_op.ino] = refs.get(dir_op.ino, 0) + 1
        assert refs == self._dir_refs, (refs, self._dir_refs)
        assert data_count + len(self._dir_ops) == len(self._pending)
        assert all(op.desc.kind in PENDING_KINDS for op in self._pending.values())


def _check_tree(tree: _Tree) -> None:
    """The reverse index matches the entries; a directory has at most one name."""
    assert ROOT_INODE in tree.dirs and not tree.links[ROOT_INODE]
    assert tree.changes.keys() == tree.files.keys()
    assert tree.dir_changes.keys() == tree.dirs.keys()
    assert not tree.files.keys() & tree.dirs.keys()
    assert tree.links.keys() == tree.files.keys() | tree.dirs.keys()
    for dir_ino, entries in tree.dirs.items():
        for name, child in entries.items():
            assert name and "/" not in name and name not in (".", ".."), name
            assert (dir_ino, name) in tree.links[child], (dir_ino, name, child)
    for ino, links in tree.links.items():
        for dir_ino, name in links:
            assert tree.dirs[dir_ino][name] == ino, (ino, dir_ino, name)
        assert ino not in tree.dirs or len(links) <= 1, f"directory {ino} has {len(links)} names"
