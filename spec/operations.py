"""The shared vocabulary: operations on a bookie, what they return, and how acks arrive.

The model (models/bookie/bookie.py), the implementation's harness (proofs/harness/refinement.py),
the trace
format (spec/trace.md, spec/trace.py) and the adapter protocol (spec/adapter.md) all speak in
these terms. Operation names and error codes are the adapter protocol's, so a trace recorded
through an adapter reads the same as one recorded in process.

Three kinds of step:

- requests, as a client sends them: ``add``, ``read``, ``fence``, ``delete``, ``checkpoint``;
- background steps, which a production bookie runs on its own threads and timers and a test
  interleaves by hand: ``journal_force`` (the group commit), ``rotate`` (start a new entry log);
- the environment: ``crash`` (with a crash plan, spec/crash.py), ``restart`` (recovery),
  ``shutdown`` (clean), ``disk_full`` / ``disk_writable`` (the ledger directories run out of
  space and get it back), ``fail_fsync`` (the next fsync of the bookie fails with EIO).

An add or a fence is acknowledged later than it is accepted: its request returns ``pending``
and a later step (a journal force, a clean shutdown) carries its :class:`Completion`. A step
interrupted by a crash has the result ``crashed``; the next step is then the crash itself.
"""

from __future__ import annotations

import attrs

from spec.crash import CrashPlan

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


# --- requests ------------------------------------------------------------------------------


@attrs.frozen
class Add:
    """Add entry ``entry`` of ledger ``ledger`` with the ledger's master ``key``."""

    ledger: int = attrs.field(validator=_id)
    entry: int = attrs.field(validator=_id)
    key: bytes
    data: bytes
    name = "add"


@attrs.frozen
class Read:
    """Read one entry back."""

    ledger: int = attrs.field(validator=_id)
    entry: int = attrs.field(validator=_id)
    name = "read"


@attrs.frozen
class Fence:
    """Fence a ledger: no add to it is acknowledged after the fence's ack."""

    ledger: int = attrs.field(validator=_id)
    key: bytes
    name = "fence"


@attrs.frozen
class Delete:
    """Delete a ledger; durable when it returns."""

    ledger: int = attrs.field(validator=_id)
    name = "delete"


@attrs.frozen
class Checkpoint:
    """Make everything the journal holds durable elsewhere and persist lastMark."""

    name = "checkpoint"


# --- background steps ----------------------------------------------------------------------


@attrs.frozen
class JournalForce:
    """The group commit: write and fsync the queued journal records, completing their acks."""

    name = "journal_force"


@attrs.frozen
class Rotate:
    """Seal the active entry log and start a new one."""

    name = "rotate"


# --- the environment -----------------------------------------------------------------------


@attrs.frozen
class Crash:
    """The machine dies; ``plan`` decides which unsynced operations reach the disk."""

    plan: CrashPlan
    name = "crash"


@attrs.frozen
class Restart:
    """Start the bookie again on the same disk (recovery, journal replay)."""

    name = "restart"


@attrs.frozen
class Shutdown:
    """Clean shutdown: force the journal, checkpoint, close."""

    name = "shutdown"


@attrs.frozen
class DiskFull:
    """Every ledger directory is out of space from now on."""

    name = "disk_full"


@attrs.frozen
class DiskWritable:
    """The ledger directories have room again (and a disk check has seen it)."""

    name = "disk_writable"


@attrs.frozen
class FailFsync:
    """The next fsync of any file of the bookie fails with EIO (its unsynced data is lost)."""

    name = "fail_fsync"


Request = Add | Read | Fence | Delete | Checkpoint
Background = JournalForce | Rotate
Environment = Crash | Restart | Shutdown | DiskFull | DiskWritable | FailFsync
Operation = Request | Background | Environment

#: Every operation class, by its name (the trace's and the adapter's ``op``).
OPERATIONS: dict[str, type[Operation]] = {
    cls.name: cls
    for cls in (
        Add,
        Read,
        Fence,
        Delete,
        Checkpoint,
        JournalForce,
        Rotate,
        Crash,
        Restart,
        Shutdown,
        DiskFull,
        DiskWritable,
        FailFsync,
    )
}


# --- results -------------------------------------------------------------------------------


@attrs.frozen
class Result:
    """What a step returned at once.

    - ``error``: an error code, or None for success;
    - ``data``: the bytes a successful read returned;
    - ``pending``: an add or fence accepted and not yet acknowledged (a Completion follows,
      or never, if the bookie dies first);
    - ``crashed``: the machine died while the step ran (its effects are partly done);
    - ``replayed``: after a restart, how many journal records recovery replayed (None when
      the implementation does not say).
    """

    error: str | None = attrs.field(default=None, validator=_error_code)
    data: bytes | None = None
    pending: bool = False
    crashed: bool = False
    replayed: int | None = None

    def __attrs_post_init__(self) -> None:
        assert not (self.pending and self.error is not None), "pending and failed at once"
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
