"""The shared vocabulary: operations on a bookie, what they return, and how acks arrive.

The model (models/bookie/bookie.py), the implementation's harness (proofs/harness/refinement.py),
the trace format (spec/trace.md, spec/trace.py) and the adapter protocol (spec/adapter.md) all
speak in these terms. Operation names and error codes are the adapter protocol's, so a trace
recorded through an adapter reads the same as one recorded in process.

Three kinds of step:

- requests, as a client sends them: ``add``, ``read``, ``fence``, ``delete``, ``checkpoint``,
  ``gc`` (one garbage-collection cycle, compactions included);
- background steps, which a production bookie runs on its own threads and timers and a test
  interleaves by hand: ``journal_force`` (the group commit), ``rotate`` (start a new entry log),
  and the phases of the group commit (``journal_write``, ``journal_sync``, ``journal_ack``)
  and of the checkpoint (``checkpoint_flush``, ``checkpoint_persist``) as steps of their own,
  so that requests run between them as they do between a bookie's threads; and what a
  bookie's maintenance thread does besides: ``preallocate`` (the next entry log, ahead of
  need) and ``check_dirs`` (the disk check);
- the environment: ``crash`` (with a crash plan, spec/crash.py), ``restart`` (recovery),
  ``shutdown`` (clean), ``disk_full`` / ``disk_writable`` (a place runs out of space and gets
  it back), and the faults aimed at a kind of file: ``fail_fsync``, ``fail_write`` and
  ``fail_read`` (the next such operation on such a file fails with EIO). A fault is armed by
  its step and *fires* in a later one, or never; the step it fires in carries it as a
  :class:`FiredFault`, and only from there may the bookie answer as a fault allows.

An add or a fence is acknowledged later than it is accepted: its request returns ``pending``
and a later step (a journal force, a clean shutdown) carries its :class:`Completion`. A step
interrupted by a crash has the result ``crashed``; the next step is then the crash itself.

The registry
------------

Every operation is declared once, here: an ``@attrs.frozen`` class whose ``name`` is its
name in traces, whose attrs fields are its fields (in the order traces write them) and whose
docstring is its one-line description, under the :func:`operation` decorator, which gives
its :class:`Kind`, whether it is answered later through a :class:`Completion`
(``answered_later``), and its op name in the adapter protocol (``adapter_op``, None when
spec/adapter.md has no such op). The decorator records an :class:`OperationSpec` in
:data:`REGISTRY`, in declaration order; the class also joins the :data:`Operation` union (the
static type), and the import of this module checks that union and registry agree.

Whoever does something per operation (the model's step handlers, the in-process system under
test, the trace codec, the property monitor, the describers of check-trace and explain, the
Hypothesis machine) keeps a table keyed by operation class and passes it to
:func:`require_complete` when the table is built (at import): the check raises
:class:`IncompleteTable` naming the consumer and every operation its table misses or has in
excess. So a new operation is one declaration here plus one entry in each table, and the
imports name every place still missing it: the first one on each import chain, and
tests/unit/proofs/harness/test_registry_tables.py (which gathers the tables recorded by
:func:`checked_tables`) all of them at once. Tables keyed by field name (the trace codec's)
are checked by :func:`require_fields`. A new operation is also added to the union of its
kind (:data:`Request`, :data:`Background`, :data:`Environment`); the import refuses a union
that misses one.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from spec.crash import CrashPlan
from spec.errors import BkrefError

#: The adapter protocol's error codes (spec/adapter.md, "Error codes").
ERROR_CODES = (
    "fenced",
    "unauthorized",
    "no_ledger",
    "no_entry",
    "no_space",
    "io_error",
    "bad_request",
    "unsupported",
)


def _error_code(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and value not in ERROR_CODES:
        raise ValueError(f"unknown error code {value!r}: one of {', '.join(ERROR_CODES)}")


def _id(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= 2**63 - 1:
        raise ValueError(f"{attribute.name} must be 0 .. 2^63-1, got {value}")


# --- the registry --------------------------------------------------------------------------


class Kind(enum.Enum):
    """Who causes the step (see the module docstring)."""

    REQUEST = "request"
    BACKGROUND = "background"
    ENVIRONMENT = "environment"


@attrs.frozen
class OperationSpec:
    """One operation's declaration: its class, its name in traces, its fields in order, its
    kind, whether its ack comes later in a Completion, its adapter op name (None: not in
    spec/adapter.md), and its one-line description."""

    cls: type[Any]
    name: str
    fields: tuple[str, ...]
    kind: Kind
    answered_later: bool
    adapter_op: str | None
    description: str


class IncompleteTable(BkrefError):
    """A per-operation table does not cover the registry: a new operation was declared and a
    consumer does not handle it yet (or handles one that is not declared). The message names
    the consumer and the operations."""


_C = TypeVar("_C", bound=type[Any])
_V = TypeVar("_V")

_DECLARED: list[OperationSpec] = []


def operation(
    kind: Kind, *, answered_later: bool = False, adapter_op: str | None = None
) -> Callable[[_C], _C]:
    """Declare the decorated attrs class as an operation (see "The registry" above)."""

    def declare(cls: _C) -> _C:
        name = cls.__dict__.get("name")
        assert isinstance(name, str) and name, f"{cls.__name__} needs a class attribute name"
        doc = (cls.__doc__ or "").strip().split("\n\n")[0]
        assert doc, f"{cls.__name__} needs a docstring: its one-line description"
        assert all(spec.name != name for spec in _DECLARED), f"operation {name!r} twice"
        fields = tuple(field.name for field in attrs.fields(cls))
        description = " ".join(doc.split())
        _DECLARED.append(
            OperationSpec(cls, name, fields, kind, answered_later, adapter_op, description)
        )
        return cls

    return declare


# --- requests ------------------------------------------------------------------------------


@operation(Kind.REQUEST, answered_later=True, adapter_op="add")
@attrs.frozen
class Add:
    """Add entry ``entry`` of ledger ``ledger`` with the ledger's master ``key``."""

    ledger: int = attrs.field(validator=_id)
    entry: int = attrs.field(validator=_id)
    key: bytes
    data: bytes
    name = "add"


@operation(Kind.REQUEST, adapter_op="read")
@attrs.frozen
class Read:
    """Read one entry back."""

    ledger: int = attrs.field(validator=_id)
    entry: int = attrs.field(validator=_id)
    name = "read"


@operation(Kind.REQUEST, answered_later=True, adapter_op="fence")
@attrs.frozen
class Fence:
    """Fence a ledger: no add to it is acknowledged after the fence's ack."""

    ledger: int = attrs.field(validator=_id)
    key: bytes
    name = "fence"


@operation(Kind.REQUEST, adapter_op="write_close")
@attrs.frozen
class WriteClose:
    """Say that no more adds to ``ledger`` will come (advisory; spec/protocol/write_close.md):
    a log per ledger seals the ledger's log at the next checkpoint."""

    ledger: int = attrs.field(validator=_id)
    key: bytes
    name = "write_close"


@operation(Kind.REQUEST, adapter_op="delete")
@attrs.frozen
class Delete:
    """Delete a ledger; durable when it returns."""

    ledger: int = attrs.field(validator=_id)
    name = "delete"


@operation(Kind.REQUEST, adapter_op="checkpoint")
@attrs.frozen
class Checkpoint:
    """Make everything the journal holds durable elsewhere and persist lastMark."""

    name = "checkpoint"


@operation(Kind.REQUEST, adapter_op="gc")
@attrs.frozen
class Gc:
    """Run one garbage-collection cycle (forced when ``force``): recover compaction leftovers,
    delete the logs with no live ledger, compact the candidates of the kind chosen; answers
    the cycle's statistics (GcReport)."""

    force: bool = False
    name = "gc"


# --- background steps ----------------------------------------------------------------------


@operation(Kind.BACKGROUND)
@attrs.frozen
class JournalForce:
    """The group commit: write and fsync the queued journal records, completing their acks."""

    name = "journal_force"


# The phases of the group commit and of the checkpoint are steps of their own, so that a test
# interleaves requests with them, as a bookie's request threads run while its journal thread
# writes and syncs. Records appended after a journal_write belong to the next group; one group
# is written at a time (a second journal_write while one waits for its fsync does nothing).


@operation(Kind.BACKGROUND)
@attrs.frozen
class JournalWrite:
    """The group commit's first phase: take the queued journal records as a group and
    write them, without fsync."""

    name = "journal_write"


@operation(Kind.BACKGROUND)
@attrs.frozen
class JournalSync:
    """The group commit's second phase: fsync the written group; its acks wait for
    journal_ack."""

    name = "journal_sync"


@operation(Kind.BACKGROUND)
@attrs.frozen
class JournalAck:
    """The group commit's last phase: complete the acks of the groups synced, and only
    those."""

    name = "journal_ack"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CheckpointFlush:
    """The checkpoint's first phase: capture the journal's durable mark, fsync the entry
    logs, flush the index."""

    name = "checkpoint_flush"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CheckpointPersist:
    """The checkpoint's second phase: persist the mark checkpoint_flush captured as lastMark."""

    name = "checkpoint_persist"


@operation(Kind.BACKGROUND)
@attrs.frozen
class Rotate:
    """Seal the active entry log and start a new one."""

    name = "rotate"


@operation(Kind.BACKGROUND)
@attrs.frozen
class Preallocate:
    """Create the next entry log ahead of need (when entryLogFilePreallocationEnabled): the
    next rotation takes it; a bookie's maintenance thread does this after its wake-ups."""

    name = "preallocate"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CheckDirs:
    """The disk check: measure every ledger directory; one found full (or almost) makes the
    next add move the active log off it, and one found with room again takes new logs."""

    name = "check_dirs"


# The garbage collector's cycle as steps (spec/protocol/compaction.md): gc_begin runs the
# cycle up to its compactions and names the candidates; each phase step advances the
# compaction in flight, compact_copy starting the next candidate when none is in flight.


@operation(Kind.BACKGROUND)
@attrs.frozen
class GcBegin:
    """A garbage-collection cycle up to its compactions (forced when ``force``): recover
    compaction leftovers, drop deleted ledgers, delete the logs with no live ledger, choose
    the compaction kind and the candidates (GcReport, with ``candidates``)."""

    force: bool = False
    name = "gc_begin"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CompactCopy:
    """Compaction phase 1: start the next candidate (when none is in flight) and copy the
    records of its live ledgers into a new ``.compacting`` log; nothing live: delete the
    source."""

    name = "compact_copy"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CompactFlush:
    """Compaction phase 2: append the ledgers map, fsync, link ``.compacted``, remove
    ``.compacting``; from here recovery finishes the compaction."""

    name = "compact_flush"


@operation(Kind.BACKGROUND)
@attrs.frozen
class CompactIndex:
    """Compaction phase 3: link the new log, point the index at the moved entries, flush the
    index, remove the source and then ``.compacted``."""

    name = "compact_index"


# --- the environment -----------------------------------------------------------------------


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class Crash:
    """The machine dies; ``plan`` decides which unsynced operations reach the disk."""

    plan: CrashPlan
    name = "crash"


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class Restart:
    """Start the bookie again on the same disk (recovery, journal replay)."""

    name = "restart"


@operation(Kind.ENVIRONMENT, adapter_op="shutdown")
@attrs.frozen
class Shutdown:
    """Clean shutdown: force the journal, checkpoint, close."""

    name = "shutdown"


#: Where a disk_full step takes the space (see DiskFull).
DISK_FULL_PLACES = ("ledger_dirs", "active_log_dir", "journal_dir")

#: The kinds of file a bookie keeps, as faults aim at them and as a fired fault names what it
#: touched: the journal files, the entry logs, the index (every file of the ledger index),
#: the lastMark file, the lastId file, a compaction's own files (``<new>.log.compacting`` and
#: ``<new>.log.<src>.compacted``) and a directory (its fsync). ``other`` is any other file (a
#: fired fault only), ``any`` every kind (an aim only).
FILE_KINDS = (
    "journal",
    "entry_log",
    "index",
    "last_mark",
    "last_id",
    "compaction",
    "directory",
    "other",
)
FAULT_AIMS = ("any", *FILE_KINDS[:-1])
#: What a failed write or read may aim at: a directory is fsynced, never written or read.
DATA_AIMS = tuple(aim for aim in FAULT_AIMS if aim != "directory")


def _one_of(choices: tuple[str, ...]) -> Callable[[object, attrs.Attribute[str], str], None]:
    def check(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class DiskFull:
    """From now on a place is out of space: ``where`` is ``ledger_dirs`` (every ledger
    directory), ``active_log_dir`` (the ledger directory that holds the active entry log,
    above the disk usage threshold with a little room left, while the others have room) or
    ``journal_dir`` (the journal directory, with no byte left); under ``active_log_dir``
    the bookie must go on taking adds in the other directory (BookKeeper #3329)."""

    name = "disk_full"
    where: str = attrs.field(default="ledger_dirs", validator=_one_of(DISK_FULL_PLACES))


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class DiskWritable:
    """Every directory has room again (and a disk check has seen it)."""

    name = "disk_writable"


#: The most an advance_clock step moves the clock (a day): a bound, so that a trace holds
#: no clock reading past what a bookie's 64-bit nanosecond clock keeps.
ADVANCE_CLOCK_MAX_S = 86_400


def _advance(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int, got {value!r}")
    if not 1 <= value <= ADVANCE_CLOCK_MAX_S:
        raise ValueError(f"{attribute.name} must be 1 to {ADVANCE_CLOCK_MAX_S}, got {value}")


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class AdvanceClock:
    """The bookie's clock (wall and monotonic) moves on by ``seconds``: what it times may
    fall due, an entry-log manager's access expiry first (entrylogMapAccessExpiryTimeInSeconds:
    a ledger's log, or its slot, idle that long is let go at the manager's next add or
    checkpoint). Nothing a client sees changes (spec/format/entry_log.md)."""

    name = "advance_clock"
    seconds: int = attrs.field(validator=_advance)


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class FailFsync:
    """The next fsync of a file of kind ``file`` (a FILE_KINDS name, or ``any``) fails with
    EIO; ``directory`` aims at the fsync of a directory. What the disk does with the data the
    fsync should have made durable is its fsync-failure mode (spec/fs.py)."""

    name = "fail_fsync"
    file: str = attrs.field(default="any", validator=_one_of(FAULT_AIMS))


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class FailWrite:
    """The next write to a file of kind ``file`` (a FILE_KINDS name other than
    ``directory``, or ``any``) fails with EIO and writes nothing."""

    name = "fail_write"
    file: str = attrs.field(default="any", validator=_one_of(DATA_AIMS))


@operation(Kind.ENVIRONMENT)
@attrs.frozen
class FailRead:
    """The next read of a file of kind ``file`` (a FILE_KINDS name other than
    ``directory``, or ``any``) fails with EIO; the file is unchanged."""

    name = "fail_read"
    file: str = attrs.field(default="any", validator=_one_of(DATA_AIMS))


#: The static types, one union per kind; the import checks them against the registry.
Request = Add | Read | Fence | WriteClose | Delete | Checkpoint | Gc
Background = (
    JournalForce
    | JournalWrite
    | JournalSync
    | JournalAck
    | CheckpointFlush
    | CheckpointPersist
    | Rotate
    | Preallocate
    | CheckDirs
    | GcBegin
    | CompactCopy
    | CompactFlush
    | CompactIndex
)
Environment = (
    Crash
    | Restart
    | Shutdown
    | DiskFull
    | DiskWritable
    | AdvanceClock
    | FailFsync
    | FailWrite
    | FailRead
)
Operation = Request | Background | Environment

#: Every declared operation, by class, in declaration order.
REGISTRY: Mapping[type[Operation], OperationSpec] = {spec.cls: spec for spec in _DECLARED}

#: Every operation class, by its name (the trace's and the adapter's ``op``).
OPERATIONS: Mapping[str, type[Operation]] = {spec.name: spec.cls for spec in _DECLARED}


def union_problem(
    union_name: str, union: object, kind: Kind, registry: Iterable[OperationSpec]
) -> str | None:
    """Why the static union ``union`` (named ``union_name``) does not name exactly the
    operations of ``kind`` in ``registry``, or None."""
    in_union = set(typing.get_args(union))
    declared = {spec.cls for spec in registry if spec.kind is kind}
    missing = sorted(cls.__name__ for cls in declared - in_union)
    extra = sorted(cls.__name__ for cls in in_union - declared)
    if not missing and not extra:
        return None
    return (
        f"the {union_name} union of spec/operations.py must name every {kind.value} "
        f"operation declared, and no other: missing {missing}, extra {extra}"
    )


def _check_unions() -> None:
    """The unions (the static types) name exactly the declared classes of their kind."""
    unions = {"Request": Request, "Background": Background, "Environment": Environment}
    for (union_name, union), kind in zip(unions.items(), Kind, strict=True):
        problem = union_problem(union_name, union, kind, _DECLARED)
        if problem is not None:
            raise IncompleteTable(problem)
    assert set(typing.get_args(Operation)) == {spec.cls for spec in _DECLARED}


_check_unions()


def spec_of(op: Operation) -> OperationSpec:
    """The declaration of ``op``'s class."""
    return REGISTRY[type(op)]


# --- tables over the registry ----------------------------------------------------------------


def everything(_spec: OperationSpec) -> bool:
    """The default ``among`` of a table: it covers every declared operation."""
    return True


def answered_later(spec: OperationSpec) -> bool:
    """An ``among`` for tables about acknowledgements: the operations answered later."""
    return spec.answered_later


@attrs.frozen
class CheckedTable:
    """A table that passed :func:`require_complete`: its consumer, the table itself and
    which operations it must cover (an ``among`` predicate over the declarations)."""

    consumer: str
    table: Mapping[type[Any], object]
    among: Callable[[OperationSpec], bool]


_CHECKED: dict[str, CheckedTable] = {}


def table_problem(
    table: Mapping[type[Any], object],
    consumer: str,
    *,
    among: Callable[[OperationSpec], bool] = everything,
    registry: Iterable[OperationSpec] | None = None,
) -> str | None:
    """Why ``table`` does not cover exactly the operations of ``registry`` (by default the
    declared ones) that ``among`` selects, or None."""
    specs = list(_DECLARED if registry is None else registry)
    wanted = [spec for spec in specs if among(spec)]
    missing = [spec.name for spec in wanted if spec.cls not in table]
    selected = {spec.cls for spec in wanted}
    extra = [getattr(cls, "name", cls.__name__) for cls in table if cls not in selected]
    problems = []
    if missing:
        problems.append(
            f"has no entry for the operation(s) {', '.join(missing)} declared in "
            "spec/operations.py: add their behaviour to its table"
        )
    if extra:
        problems.append(
            f"has entries for {', '.join(map(str, extra))}, which it should not cover "
            "(not declared in spec/operations.py, or outside the operations it is about)"
        )
    return f"{consumer} {'; and '.join(problems)}" if problems else None


def require_complete(
    table: Mapping[type[Any], _V],
    consumer: str,
    *,
    among: Callable[[OperationSpec], bool] = everything,
) -> Mapping[type[Any], _V]:
    """Check that ``table`` covers exactly the declared operations ``among`` selects and
    return it; raises IncompleteTable naming ``consumer`` and the culprits. A table that
    passes is recorded (:func:`checked_tables`) for the registry's own tests."""
    problem = table_problem(table, consumer, among=among)
    if problem is not None:
        raise IncompleteTable(problem)
    _CHECKED[consumer] = CheckedTable(consumer, table, among)
    return table


def require_fields(table: Mapping[str, _V], consumer: str) -> Mapping[str, _V]:
    """Check that ``table`` (keyed by field name) covers exactly the fields of the declared
    operations and return it; raises IncompleteTable naming ``consumer``, the fields and the
    operations that have them."""
    used: dict[str, list[str]] = {}
    for spec in _DECLARED:
        for field in spec.fields:
            used.setdefault(field, []).append(spec.name)
    missing = [f"{field} (of {', '.join(used[field])})" for field in used if field not in table]
    extra = [field for field in table if field not in used]
    problems = []
    if missing:
        problems.append(f"has no entry for the field(s) {'; '.join(missing)}: add one")
    if extra:
        problems.append(f"has entries for {', '.join(extra)}, which no operation has")
    if problems:
        raise IncompleteTable(f"{consumer} {'; and '.join(problems)}")
    return table


def checked_tables() -> list[CheckedTable]:
    """Every table that passed :func:`require_complete` so far (in this process)."""
    return list(_CHECKED.values())


# --- results -------------------------------------------------------------------------------

#: The compaction kinds of a GC cycle (BookKeeper's runWithFlags: at most one per cycle).
COMPACTION_KINDS = ("major", "minor", "none")
#: What a compaction phase step did: one of the three phases, or ``idle`` (nothing to step:
#: no candidate left, or no cycle begun).
PHASES = ("copy", "flush", "index", "idle")


def _count(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


def _log_id(_instance: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and not 0 <= value <= 2**63 - 1:
        raise ValueError(f"{attribute.name} must be an entry log id, got {value}")


@attrs.frozen
class GcReport:
    """What a ``gc`` or ``gc_begin`` answered (spec/trace.md, "Results"): the compaction kind
    the cycle chose, the logs it deleted because nothing live was left in them (step 3, and
    phase 1's "nothing live"), the compactions it finished, the entries they moved, the bytes
    of files removed minus the bytes of compaction logs kept; and, for ``gc_begin`` only, the
    source logs it will compact, in order."""

    compaction: str = attrs.field(validator=_one_of(COMPACTION_KINDS))
    logs_deleted: int = attrs.field(default=0, validator=_count)
    logs_compacted: int = attrs.field(default=0, validator=_count)
    entries_moved: int = attrs.field(default=0, validator=_count)
    bytes_reclaimed: int = 0
    candidates: tuple[int, ...] = ()

    def describe(self) -> str:
        text = (
            f"{self.compaction} compaction, {self.logs_deleted} log(s) deleted, "
            f"{self.logs_compacted} compacted, {self.entries_moved} entries moved, "
            f"{self.bytes_reclaimed} bytes reclaimed"
        )
        if self.candidates:
            text += f", candidates {list(self.candidates)}"
        return text


@attrs.frozen
class PhaseReport:
    """What a compaction phase step answered: the phase it ran (``idle``: none), the source
    log and the new log of the compaction it advanced (``new_log`` None after a copy that
    found nothing live and deleted the source), and the entries moved so far."""

    phase: str = attrs.field(validator=_one_of(PHASES))
    source_log: int | None = attrs.field(default=None, validator=_log_id)
    new_log: int | None = attrs.field(default=None, validator=_log_id)
    entries_moved: int = attrs.field(default=0, validator=_count)

    def describe(self) -> str:
        if self.phase == "idle":
            return "idle: no compaction to step"
        new = "nothing live, source deleted" if self.new_log is None else f"-> {self.new_log}"
        return (
            f"{self.phase} of entry log {self.source_log} {new}, {self.entries_moved} entries moved"
        )


@attrs.frozen
class Result:
    """What a step returned at once.

    - ``error``: an error code, or None for success;
    - ``data``: the bytes a successful read returned;
    - ``pending``: an add or fence accepted and not yet acknowledged (a Completion follows,
      or never, if the bookie dies first);
    - ``crashed``: the machine died while the step ran (its effects are partly done);
    - ``replayed``: after a restart, how many journal records recovery replayed (None when
      the implementation does not say);
    - ``gc``: what an ok ``gc`` or ``gc_begin`` answered (GcReport);
    - ``phase``: what an ok compaction phase step answered (PhaseReport).
    """

    error: str | None = attrs.field(default=None, validator=_error_code)
    data: bytes | None = None
    pending: bool = False
    crashed: bool = False
    replayed: int | None = None
    gc: GcReport | None = None
    phase: PhaseReport | None = None

    def __attrs_post_init__(self) -> None:
        assert not (self.pending and self.error is not None), "pending and failed at once"
        reported = self.gc is not None or self.phase is not None
        assert not (reported and (self.pending or self.crashed or self.error is not None))
        assert not (self.crashed and (self.pending or self.error or self.data is not None))
        assert self.data is None or self.error is None, "data and an error at once"

    @property
    def ok(self) -> bool:
        return self.error is None and not self.pending and not self.crashed

    def describe(self) -> str:
        if self.crashed:
            return "interrupted by the crash"
        if self.pending:
            return "accepted, waiting for the journal"
        if self.error is not None:
            return f"failed: {self.error}"
        if self.data is not None:
            return f"ok, {len(self.data)} bytes"
        if self.replayed is not None:
            plural = "" if self.replayed == 1 else "s"
            return f"ok, {self.replayed} journal record{plural} replayed"
        if self.gc is not None:
            return f"ok, {self.gc.describe()}"
        if self.phase is not None:
            return f"ok, {self.phase.describe()}"
        return "ok"


OK = Result()
PENDING = Result(pending=True)
CRASHED = Result(crashed=True)


def failed(code: str) -> Result:
    return Result(error=code)


@attrs.frozen
class Completion:
    """The ack of the pending add or fence of step ``step``: success (``error`` None) or the
    error it failed with after all."""

    step: int = attrs.field(validator=attrs.validators.ge(0))
    error: str | None = attrs.field(default=None, validator=_error_code)


#: What a fired fault did: a write or a read failed with EIO, an fsync failed, or a write
#: found no space. ``unknown``: a fault whose firing the recorder did not report (the
#: arming step of a version 1 or 2 trace); the model takes it as every fault at once.
FAULT_OPS = ("write", "read", "fsync", "no_space", "unknown")


@attrs.frozen
class FiredFault:
    """An injected fault that took effect during a step: ``op`` (FAULT_OPS) on a file of kind
    ``file`` (FILE_KINDS, or ``unknown`` with the op ``unknown``). A fault is armed by one
    step (fail_fsync, disk_full, ...) and fires in a later one, or never; the model relaxes
    what it predicts from the step it fires in, and only for what it touched."""

    op: str = attrs.field(validator=_one_of(FAULT_OPS))
    file: str = attrs.field(validator=_one_of((*FILE_KINDS, "unknown")))

    def __attrs_post_init__(self) -> None:
        assert (self.op == "unknown") == (self.file == "unknown"), self

    def describe(self) -> str:
        if self.op == "unknown":
            return "a fault (what it touched is not recorded)"
        what = self.file.replace("_", " ")
        if self.op == "no_space":
            return f"no space for a write to the {what}"
        if self.file == "directory":
            return "a directory's fsync failed"
        article = "an" if self.op == "fsync" else "a"
        return f"{article} {self.op} of the {what} failed"


UNKNOWN_FAULT = FiredFault("unknown", "unknown")


def acknowledgements(
    index: int, op: Operation, result: Result, completed: Iterable[Completion]
) -> tuple[Completion, ...]:
    """The one definition of "acknowledged" (spec/properties.md), shared by the model and the
    property monitor: the acks step ``index`` carries, in the order they count. First the
    completions, in the order they arrived (acks of earlier steps); then the step's own ack,
    when an operation answered later (an add, a fence) was answered ``ok`` in its own response
    (an asynchronous bookie may acknowledge at once). An add or fence is acknowledged at the
    step whose acks hold a success for it; from then on it must survive every crash."""
    acks = list(completed)
    if result.ok and spec_of(op).answered_later:
        acks.append(Completion(index))
    return tuple(acks)
