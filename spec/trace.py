"""Traces: a recorded history of one run of a bookie, as JSON lines (spec/trace.md).

A trace is what ``bkref check-trace`` and ``bkref explain`` read, what the refinement harness
writes when a check fails, and what a run of another implementation's adapter is recorded as.
So the reader is strict and total: any text either reads as a well-formed :class:`Trace` or
raises :class:`spec.errors.TraceError` naming the line and what is wrong with it. Nothing is
guessed or ignored (except blank lines), because a trace that silently lost a field would
check a different history than the one that was run.

One rule keeps writer and reader from drifting: the writer checks every line it encodes by
decoding it again (:func:`encode_step`, :func:`state_to_json`), so a value the reader would
refuse (a read result on a fence, a duplicate log id in a state) fails at the writer, where
the bug is, with the reader's own message.

Not verified here: that the history makes sense for a bookie (that a read returns what was
added, that a restart follows a crash). That is the model's job (models/) and the
properties' (spec/properties.py). The reader checks form only: fields, types, ranges, step
numbering, and that every completion names an earlier pending add or fence, once.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from spec.crash import (
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
from spec.errors import TraceError
from spec.operations import (
    COMPACTION_KINDS,
    CRASHED,
    DISK_FULL_PLACES,
    ERROR_CODES,
    FAULT_AIMS,
    FAULT_OPS,
    FILE_KINDS,
    OPERATIONS,
    PENDING,
    PHASES,
    REGISTRY,
    UNKNOWN_FAULT,
    Add,
    AdvanceClock,
    CheckDirs,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Completion,
    Crash,
    Delete,
    DiskFull,
    DiskWritable,
    FailFsync,
    FailRead,
    FailWrite,
    Fence,
    FiredFault,
    Gc,
    GcBegin,
    GcReport,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Operation,
    PhaseReport,
    Preallocate,
    Read,
    Restart,
    Result,
    Rotate,
    Shutdown,
    WriteClose,
    require_complete,
    require_fields,
    spec_of,
)
from spec.profile import CHOICES, DEFAULT_PROFILE, Profile
from spec.state import LOG_STATES, AbstractState, LedgerView, LogView, MapView, Mark
from spec.strict_json import STRICT_DECODER, StrictJsonError, describe

#: The version this module writes, and the ones it reads (spec/trace.md, "Versioning").
#: Version 2 added the header's ``profile``; a version 1 trace reads with DEFAULT_PROFILE.
TRACE_VERSION = 4
SUPPORTED_VERSIONS = (1, 2, 3, 4)
#: Version 3 added the faults a step fired (``faults``) and the fields ``where`` of
#: disk_full and ``file`` of fail_fsync. An older trace did not report when a fault fired:
#: its disk_full and fail_fsync steps read as firing a fault of unknown kind at once (what
#: the model of that time assumed), and the new fields take their defaults.
_FIELDS_SINCE = {"where": 3, "file": 3}
#: The optional fields of a state object, and the version that added each: version 4 added
#: ``ledgers_maps`` (each entry log's ledgers map).
_STATE_FIELDS_SINCE = {"durable_last_mark": 3, "ledgers_maps": 4}

#: Ledger ids, entry ids, journal ids, offsets, sizes and counts: Java longs, never negative.
ID_MAX = 2**63 - 1
#: Entry log ids are Java ints (spec/format/entry_log.md).
LOG_ID_MAX = 2**31 - 1

#: Only these ops may answer ``pending``: their ack comes with a later step's completion
#: (the operations declared ``answered_later``, spec/operations.py).
PENDING_OPS = tuple(spec.name for spec in REGISTRY.values() if spec.answered_later)

#: The ``kind`` of each crash plan on the wire, and its class (spec/crash.py).
PLAN_KINDS: dict[str, type[CrashPlan]] = {
    "lose_unsynced": LoseUnsynced,
    "keep_prefix": KeepPrefix,
    "torn_write": TornWrite,
    "torn_sectors": TornSectors,
    "keep_subset": KeepSubset,
    "keep_all": KeepAll,
    "kill_process": KillProcess,
    "unknown": Unknown,
}

_HEX = re.compile(r"[0-9a-fA-F]*")
_JSON_SPACE = " \t\r\n"

# --- the values ---------------------------------------------------------------------------


@attrs.frozen
class TraceHeader:
    """Line 1: the format version, who recorded the trace, the configuration overrides
    (BookKeeper key names, values as strings) the run used, in the order they were given, and
    the profile the trace is judged with (spec/profile.py)."""

    config: tuple[tuple[str, str], ...]
    source: str
    version: int = TRACE_VERSION
    profile: Profile = DEFAULT_PROFILE

    def __attrs_post_init__(self) -> None:
        assert self.version >= 2 or self.profile == DEFAULT_PROFILE, "a v1 trace has no profile"


@attrs.frozen
class Step:
    """One line after the header: step ``index`` ran ``op`` and returned ``result``; the acks
    in ``completed`` arrived while it ran; ``state`` is the abstract state after it, if the
    recorder captured one; ``faults`` are the injected faults that fired while it ran."""

    index: int
    op: Operation
    result: Result
    completed: tuple[Completion, ...] = ()
    state: AbstractState | None = None
    #: The injected faults that fired while the step ran (spec.operations.FiredFault).
    faults: tuple[FiredFault, ...] = ()


@attrs.frozen
class Trace:
    """A header and its steps, numbered 0, 1, 2, ..."""

    header: TraceHeader
    steps: tuple[Step, ...]


class _Bad(Exception):
    """A line is malformed; the message says where in the line and what is wrong. The reader
    adds the trace name and line number (TraceError)."""


# --- JSON values, strictly ------------------------------------------------------------------


def _parse_line(text: str) -> dict[str, object]:
    """The JSON object of one line."""
    try:
        value = STRICT_DECODER.decode(text)
    except RecursionError:
        raise _Bad("the line is nested too deeply to be a trace line") from None
    except StrictJsonError as exc:
        raise _Bad(str(exc)) from None
    except ValueError as exc:  # JSONDecodeError, and ints longer than Python reads
        raise _Bad(f"the line is not JSON ({exc}); every line of a trace is one object") from None
    if not isinstance(value, dict):
        raise _Bad(f"a trace line must be a JSON object, got {describe(value)}")
    return value


def _object(value: object, path: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _Bad(f"{path} must be an object, got {describe(value)}")
    return value


def _array(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise _Bad(f"{path} must be an array, got {describe(value)}")
    return value


def _fields(
    obj: Mapping[str, object], required: Iterable[str], optional: Iterable[str], what: str
) -> None:
    """Every required field is there and no other field than the optional ones."""
    required, optional = tuple(required), tuple(optional)
    for name in required:
        if name not in obj:
            raise _Bad(f"{what} needs the field {name!r}; add it")
    for name in obj:
        if name not in required and name not in optional:
            known = ", ".join(repr(f) for f in (*required, *optional))
            raise _Bad(
                f"{what} has no field {name!r} in trace version {TRACE_VERSION} (its fields: "
                f"{known}); remove it, or read the trace with the bkref that wrote it"
            )


def _int(value: object, path: str, high: int = ID_MAX) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(f"{path} must be an integer, got {describe(value)}")
    if not 0 <= value <= high:
        raise _Bad(f"{path} must be from 0 to {high}, got {value}")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"{path} must be true or false, got {describe(value)}")
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{path} must be a string, got {describe(value)}")
    return value


def _hex(value: object, path: str) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) % 2:
        raise _Bad(
            f"{path} must be a string of hex digits, an even number of them, got {describe(value)}"
        )
    return bytes.fromhex(value)


def _base64(value: object, path: str) -> bytes:
    """Strict standard base64 with padding: the one text that encodes the bytes."""
    if not isinstance(value, str):
        raise _Bad(f"{path} must be a base64 string, got {describe(value)}")
    try:
        decoded = base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise _Bad(f"{path} is not standard base64 with padding ({exc})") from None
    if base64.b64encode(decoded).decode("ascii") != value:
        raise _Bad(f"{path} is not canonical base64: its unused trailing bits must be zero")
    return decoded


def _error_code(value: object, path: str) -> str:
    if not isinstance(value, str) or value not in ERROR_CODES:
        raise _Bad(
            f"{path} must be an error code ({', '.join(ERROR_CODES)}), got {describe(value)}"
        )
    return value


# --- crash plans ------------------------------------------------------------------------------


def plan_to_json(plan: CrashPlan) -> dict[str, object]:
    """A crash plan as ``{"kind": ..., ...its fields}`` (spec/trace.md, "Crash plans")."""
    if isinstance(plan, LoseUnsynced):
        return {"kind": "lose_unsynced"}
    if isinstance(plan, KeepPrefix):
        return {"kind": "keep_prefix", "count": plan.count}
    if isinstance(plan, TornWrite):
        return {"kind": "torn_write", "keep": plan.keep, "sectors": plan.sectors}
    if isinstance(plan, TornSectors):
        return {
            "kind": "torn_sectors",
            "keep": plan.keep,
            "sectors": sorted(plan.sectors),
            "garbage": plan.garbage,
        }
    if isinstance(plan, KeepAll):
        return {"kind": "keep_all"}
    if isinstance(plan, KillProcess):
        return {"kind": "kill_process"}
    if isinstance(plan, Unknown):
        return {"kind": "unknown"}
    return {"kind": "keep_subset", "indices": sorted(plan.indices)}


def _plan_from_json(value: object, path: str) -> CrashPlan:
    obj = _object(value, path)
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in PLAN_KINDS:
        raise _Bad(f"{path}.kind must be one of {', '.join(PLAN_KINDS)}, got {describe(kind)}")
    if kind == "lose_unsynced":
        _fields(obj, ("kind",), (), f"{path} ({kind})")
        return LoseUnsynced()
    if kind == "keep_prefix":
        _fields(obj, ("kind", "count"), (), f"{path} ({kind})")
        return KeepPrefix(count=_int(obj["count"], f"{path}.count"))
    if kind in ("keep_all", "kill_process", "unknown"):
        _fields(obj, ("kind",), (), f"{path} ({kind})")
        simple: dict[str, CrashPlan] = {
            "keep_all": KeepAll(),
            "kill_process": KillProcess(),
            "unknown": Unknown(),
        }
        return simple[kind]
    if kind == "torn_write":
        _fields(obj, ("kind", "keep", "sectors"), (), f"{path} ({kind})")
        return TornWrite(_int(obj["keep"], f"{path}.keep"), _int(obj["sectors"], f"{path}.sectors"))
    if kind == "torn_sectors":
        _fields(obj, ("kind", "keep", "sectors", "garbage"), (), f"{path} ({kind})")
        return TornSectors(
            _int(obj["keep"], f"{path}.keep"),
            _sorted_ints(obj["sectors"], f"{path}.sectors"),
            _int(obj["garbage"], f"{path}.garbage"),
        )
    _fields(obj, ("kind", "indices"), (), f"{path} ({kind})")
    return KeepSubset(_sorted_ints(obj["indices"], f"{path}.indices"))


def _sorted_ints(value: object, path: str) -> list[int]:
    """An array of integers, strictly increasing (a set written in one canonical way)."""
    raw = _array(value, path)
    items = [_int(item, f"{path}[{i}]") for i, item in enumerate(raw)]
    if any(a >= b for a, b in itertools.pairwise(items)):
        raise _Bad(
            f"{path} must be strictly increasing (sorted, no repeats), got "
            f"{items[:8]}{'...' if len(items) > 8 else ''}"
        )
    return items


# --- operations ------------------------------------------------------------------------------

_Decode = Callable[[object, str], object]
_Encode = Callable[[object], object]


def _id_to_json(value: object) -> object:
    assert isinstance(value, int) and not isinstance(value, bool), value
    return value


def _hex_to_json(value: object) -> object:
    assert isinstance(value, bytes), value
    return value.hex()


def _base64_to_json(value: object) -> object:
    assert isinstance(value, bytes), value
    return base64.b64encode(value).decode("ascii")


def _plan_to_json(value: object) -> object:
    assert isinstance(value, CrashPlan), value
    return plan_to_json(value)


#: How each field of an operation is read (spec/trace.md, "Field types"): every field of
#: every declared operation has an entry (checked at import).
def _choice(choices: tuple[str, ...]) -> _Decode:
    def decode(value: object, path: str) -> object:
        if not isinstance(value, str) or value not in choices:
            raise _Bad(f"{path} must be one of {', '.join(choices)}, got {describe(value)}")
        return value

    return decode


def _str_to_json(value: object) -> object:
    assert isinstance(value, str), value
    return value


def _bool_to_json(value: object) -> object:
    assert isinstance(value, bool), value
    return value


FIELD_DECODERS: Mapping[str, _Decode] = require_fields(
    {
        "ledger": _int,
        "entry": _int,
        "key": _hex,
        "data": _base64,
        "plan": _plan_from_json,
        "where": _choice(DISK_FULL_PLACES),
        "file": _choice(FAULT_AIMS),
        "force": _bool,
        "seconds": _int,
    },
    "the trace codec's field decoders (spec/trace.py FIELD_DECODERS)",
)
#: How each field is written: the inverse of FIELD_DECODERS.
FIELD_ENCODERS: Mapping[str, _Encode] = require_fields(
    {
        "ledger": _id_to_json,
        "entry": _id_to_json,
        "key": _hex_to_json,
        "data": _base64_to_json,
        "plan": _plan_to_json,
        "where": _str_to_json,
        "file": _str_to_json,
        "force": _bool_to_json,
        "seconds": _id_to_json,
    },
    "the trace codec's field encoders (spec/trace.py FIELD_ENCODERS)",
)


@attrs.frozen
class ResultShape:
    """What an ok result of an operation carries besides ``ok`` (spec/trace.md, "Results"):
    ``data``, the bytes read (always, when ok), ``replayed``, the journal records recovery
    replayed (when the recorder knows), ``gc``, a GC cycle's statistics (always, when ok:
    GC_FIELDS, and ``candidates`` for gc_begin) and ``phase``, what a compaction phase step
    did (always, when ok: PHASE_FIELDS). Pending and crashed results are the same for every
    operation; only the operations declared ``answered_later`` may be pending."""

    data: bool = False
    replayed: bool = False
    gc: bool = False
    phase: bool = False


#: The result shape of every operation, checked against the registry at import.
RESULT_SHAPES: Mapping[type[Operation], ResultShape] = require_complete(
    {
        Add: ResultShape(),
        Read: ResultShape(data=True),
        Fence: ResultShape(),
        WriteClose: ResultShape(),
        Delete: ResultShape(),
        Checkpoint: ResultShape(),
        JournalForce: ResultShape(),
        JournalWrite: ResultShape(),
        JournalSync: ResultShape(),
        JournalAck: ResultShape(),
        CheckpointFlush: ResultShape(),
        CheckpointPersist: ResultShape(),
        Rotate: ResultShape(),
        Preallocate: ResultShape(),
        CheckDirs: ResultShape(),
        Gc: ResultShape(gc=True),
        GcBegin: ResultShape(gc=True),
        CompactCopy: ResultShape(phase=True),
        CompactFlush: ResultShape(phase=True),
        CompactIndex: ResultShape(phase=True),
        Crash: ResultShape(),
        Restart: ResultShape(replayed=True),
        Shutdown: ResultShape(),
        DiskFull: ResultShape(),
        DiskWritable: ResultShape(),
        AdvanceClock: ResultShape(),
        FailFsync: ResultShape(),
        FailWrite: ResultShape(),
        FailRead: ResultShape(),
    },
    "the trace codec's result shapes (spec/trace.py RESULT_SHAPES)",
)
_DATA_OPS = tuple(cls.name for cls, shape in RESULT_SHAPES.items() if shape.data)
_REPLAYED_OPS = tuple(cls.name for cls, shape in RESULT_SHAPES.items() if shape.replayed)
_GC_OPS = tuple(cls.name for cls, shape in RESULT_SHAPES.items() if shape.gc)
_PHASE_OPS = tuple(cls.name for cls, shape in RESULT_SHAPES.items() if shape.phase)
#: The fields of an ok gc or gc_begin result (GcReport), and of a compaction phase step's
#: (PhaseReport), in the order they are written; ``candidates`` only in gc_begin's.
GC_FIELDS = ("compaction", "logs_deleted", "logs_compacted", "entries_moved", "bytes_reclaimed")
PHASE_FIELDS = ("phase", "source_log", "new_log", "entries_moved")


def _op_field_names(name: str, version: int = TRACE_VERSION) -> tuple[str, ...]:
    """The fields an operation has in a trace of ``version``."""
    fields = REGISTRY[OPERATIONS[name]].fields
    return tuple(field for field in fields if _FIELDS_SINCE.get(field, 1) <= version)


def op_to_json(op: Operation) -> dict[str, object]:
    """``{"op": name, ...its fields}``, fields in the class's order."""
    obj: dict[str, object] = {"op": op.name}
    for field in spec_of(op).fields:
        obj[field] = FIELD_ENCODERS[field](getattr(op, field))
    return obj


def _op_from_json(obj: Mapping[str, object], version: int = TRACE_VERSION) -> Operation:
    name = obj.get("op")
    if not isinstance(name, str) or name not in OPERATIONS:
        raise _Bad(f"'op' must be one of {', '.join(OPERATIONS)}, got {describe(name)}")
    values: dict[str, Any] = {}
    for field in _op_field_names(name, version):
        if field not in obj:
            raise _Bad(f"{name!r} needs the field {field!r}; add it")
        values[field] = FIELD_DECODERS[field](obj[field], field)
    try:
        op: Operation = OPERATIONS[name](**values)
    except ValueError as exc:  # a field value the operation refuses (its attrs validator)
        raise _Bad(f"{name!r}: {exc}") from None
    return op


# --- results and completions -----------------------------------------------------------------

_RESULT_SHAPES = (
    '{"ok": true}, {"ok": false, "error": code}, {"pending": true} or {"crashed": true}'
)


def result_to_json(result: Result) -> dict[str, object]:
    """One of the four result shapes of spec/trace.md, "Results"."""
    if result.crashed:
        return {"crashed": True}
    if result.pending:
        return {"pending": True}
    if result.error is not None:
        return {"ok": False, "error": result.error}
    obj: dict[str, object] = {"ok": True}
    if result.data is not None:
        obj["data"] = base64.b64encode(result.data).decode("ascii")
    if result.replayed is not None:
        obj["replayed"] = result.replayed
    if result.gc is not None:
        for field in GC_FIELDS:
            obj[field] = getattr(result.gc, field)
        if result.gc.candidates:
            obj["candidates"] = list(result.gc.candidates)
    if result.phase is not None:
        for field in PHASE_FIELDS:
            obj[field] = getattr(result.phase, field)
    return obj


def _gc_from_json(obj: Mapping[str, object]) -> GcReport | None:
    if "compaction" not in obj:
        return None
    _fields(obj, ("ok", *GC_FIELDS), ("candidates",), "an ok gc result")
    kind = _choice(COMPACTION_KINDS)(obj["compaction"], "result.compaction")
    assert isinstance(kind, str)
    deleted, compacted, moved = (_int(obj[f], f"result.{f}") for f in GC_FIELDS[1:4])
    reclaimed = obj["bytes_reclaimed"]
    if not isinstance(reclaimed, int) or isinstance(reclaimed, bool):
        raise _Bad(f"result.bytes_reclaimed must be an integer, got {describe(reclaimed)}")
    raw = obj.get("candidates", [])
    if not isinstance(raw, list):
        raise _Bad(f"result.candidates must be a list of entry log ids, got {describe(raw)}")
    candidates = tuple(_int(c, "result.candidates[]", LOG_ID_MAX) for c in raw)
    return GcReport(kind, deleted, compacted, moved, reclaimed, candidates)


def _phase_from_json(obj: Mapping[str, object]) -> PhaseReport | None:
    if "phase" not in obj:
        return None
    _fields(obj, ("ok", *PHASE_FIELDS), (), "an ok compaction phase result")
    phase = _choice(PHASES)(obj["phase"], "result.phase")
    assert isinstance(phase, str)
    logs = [
        None if obj[f] is None else _int(obj[f], f"result.{f}", LOG_ID_MAX)
        for f in ("source_log", "new_log")
    ]
    return PhaseReport(phase, logs[0], logs[1], _int(obj["entries_moved"], "result.entries_moved"))


def _result_from_json(value: object) -> Result:
    obj = _object(value, "result")
    for flag, result in (("crashed", CRASHED), ("pending", PENDING)):
        if flag in obj:
            _fields(obj, (flag,), (), f"a {flag} result")
            if obj[flag] is not True:
                raise _Bad(f"result.{flag} must be true, got {describe(obj[flag])}")
            return result
    if "ok" not in obj:
        raise _Bad(f"result must be one of {_RESULT_SHAPES}; it has no 'ok'")
    if _bool(obj["ok"], "result.ok"):
        gc = _gc_from_json(obj)
        if gc is not None:
            return Result(gc=gc)
        phase = _phase_from_json(obj)
        if phase is not None:
            return Result(phase=phase)
        _fields(obj, ("ok",), ("data", "replayed"), "an ok result")
        data = _base64(obj["data"], "result.data") if "data" in obj else None
        replayed = _int(obj["replayed"], "result.replayed") if "replayed" in obj else None
        return Result(data=data, replayed=replayed)
    _fields(obj, ("ok", "error"), (), "a failed result")
    return Result(error=_error_code(obj["error"], "result.error"))


def _result_problem(op: Operation, result: Result) -> str | None:
    """Why ``result`` cannot be the result of ``op``, or None."""
    shape = RESULT_SHAPES[type(op)]
    if result.pending and not spec_of(op).answered_later:
        return f"a {op.name!r} cannot be pending: only {' and '.join(PENDING_OPS)} are"
    if result.data is not None and not shape.data:
        return f"a {op.name!r} returns no data: only {_only(_DATA_OPS)}"
    if shape.data and result.ok and result.data is None:
        return f"an ok {op.name} must carry the data it returned ('data')"
    if result.replayed is not None and not shape.replayed:
        return f"a {op.name!r} reports no 'replayed': only {_only(_REPLAYED_OPS)}"
    if result.replayed is not None and not result.ok:
        return f"only an ok {' or '.join(_REPLAYED_OPS)} reports 'replayed'"
    if result.gc is not None and not shape.gc:
        return f"a {op.name!r} reports no GC statistics: only {_only(_GC_OPS)}"
    if shape.gc and result.ok and result.gc is None:
        return f"an ok {op.name} must carry its statistics ({', '.join(GC_FIELDS)})"
    if result.gc is not None and result.gc.candidates and not isinstance(op, GcBegin):
        return f"a {op.name!r} reports no candidates: only a gc_begin does"
    if result.phase is not None and not shape.phase:
        return f"a {op.name!r} reports no compaction phase: only {_only(_PHASE_OPS)}"
    if shape.phase and result.ok and result.phase is None:
        return f"an ok {op.name} must say what it did ({', '.join(PHASE_FIELDS)})"
    return None


def _only(names: tuple[str, ...]) -> str:
    """``a read does``; ``read and gc do``."""
    return f"a {names[0]} does" if len(names) == 1 else f"{' and '.join(names)} do"


def _fault_from_json(value: object, path: str) -> FiredFault:
    obj = _object(value, path)
    _fields(obj, ("op", "file"), (), path)
    op = _choice(FAULT_OPS[:-1])(obj["op"], f"{path}.op")
    file = _choice(FILE_KINDS)(obj["file"], f"{path}.file")
    assert isinstance(op, str) and isinstance(file, str)
    return FiredFault(op, file)


def _completion_to_json(completion: Completion) -> dict[str, object]:
    if completion.error is None:
        return {"step": completion.step, "ok": True}
    return {"step": completion.step, "ok": False, "error": completion.error}


def _completion_from_json(value: object, path: str) -> Completion:
    obj = _object(value, path)
    if "ok" in obj and obj["ok"] is False:
        _fields(obj, ("step", "ok", "error"), (), f"{path} (failed)")
        error: str | None = _error_code(obj["error"], f"{path}.error")
    else:
        _fields(obj, ("step", "ok"), (), path)
        if obj["ok"] is not True:
            raise _Bad(f"{path}.ok must be true or false, got {describe(obj['ok'])}")
        error = None
    return Completion(step=_int(obj["step"], f"{path}.step"), error=error)


# --- the abstract state ----------------------------------------------------------------------


def _mark_to_json(mark: Mark) -> dict[str, object]:
    return {"journal_id": mark[0], "offset": mark[1]}


def _mark_from_json(value: object, path: str) -> Mark:
    obj = _object(value, path)
    _fields(obj, ("journal_id", "offset"), (), path)
    return (_int(obj["journal_id"], f"{path}.journal_id"), _int(obj["offset"], f"{path}.offset"))


def _state_json(state: AbstractState) -> dict[str, object]:
    logs = [
        {"log_id": v.log_id, "state": v.state, "ledger_bytes": [list(p) for p in v.ledger_bytes]}
        for v in state.entry_logs
    ]
    ledgers = [
        {"ledger_id": v.ledger_id, "last_entry": v.last_entry, "fenced": v.fenced}
        for v in state.ledgers
    ]
    return {
        "entry_logs": logs,
        "least_unflushed_log_id": state.least_unflushed_log_id,
        "last_mark": _mark_to_json(state.last_mark),
        "journal_mark": _mark_to_json(state.journal_mark),
        "current_log_id": state.current_log_id,
        "ledgers": ledgers,
        "deleted_ledgers": list(state.deleted_ledgers),
        **(
            {}
            if state.durable_last_mark is None
            else {"durable_last_mark": _mark_to_json(state.durable_last_mark)}
        ),
        **({} if state.ledgers_maps is None else {"ledgers_maps": _maps_json(state.ledgers_maps)}),
    }


def _maps_json(maps: tuple[MapView, ...]) -> list[dict[str, object]]:
    return [
        {
            "log_id": view.log_id,
            "sealed": view.sealed,
            "ledger_bytes": None
            if view.ledger_bytes is None
            else [list(pair) for pair in view.ledger_bytes],
        }
        for view in maps
    ]


def state_to_json(state: AbstractState) -> dict[str, object]:
    """The state object of spec/trace.md, "State" (also the adapter's ``inspect`` state).
    Asserts that :func:`state_from_json` reads it back to ``state``."""
    obj = _state_json(state)
    try:
        back = _state_from_json(obj, "state")
    except _Bad as exc:
        raise AssertionError(f"this state cannot be written: {exc}") from None
    assert back == state, (back, state)
    return obj


def state_from_json(obj: object, where: str) -> AbstractState:
    """The state of a state object of the current version; ``where`` names its origin in the
    TraceError message (e.g. ``"adapter response 12"``)."""
    try:
        return _state_from_json(obj, "state")
    except _Bad as exc:
        raise TraceError(where, None, str(exc)) from None


#: The fields of a state object, in the order they are written (spec/trace.md, "State").
STATE_FIELDS = (
    "entry_logs",
    "least_unflushed_log_id",
    "last_mark",
    "journal_mark",
    "current_log_id",
    "ledgers",
    "deleted_ledgers",
)
#: The optional fields of a state object, written after the others when known.
OPTIONAL_STATE_FIELDS = tuple(_STATE_FIELDS_SINCE)


def _state_from_json(value: object, path: str, version: int = TRACE_VERSION) -> AbstractState:
    obj = _object(value, path)
    optional = tuple(f for f, since in _STATE_FIELDS_SINCE.items() if since <= version)
    _fields(obj, STATE_FIELDS, optional, path)
    current = obj["current_log_id"]
    durable_mark = obj.get("durable_last_mark")
    maps = obj.get("ledgers_maps")
    deleted_path = f"{path}.deleted_ledgers"
    deleted = [
        _int(v, f"{deleted_path}[{i}]")
        for i, v in enumerate(_array(obj["deleted_ledgers"], deleted_path))
    ]
    _unique(deleted, deleted_path)
    return AbstractState(
        entry_logs=_logs_from_json(obj["entry_logs"], f"{path}.entry_logs"),
        least_unflushed_log_id=_int(
            obj["least_unflushed_log_id"], f"{path}.least_unflushed_log_id", LOG_ID_MAX
        ),
        last_mark=_mark_from_json(obj["last_mark"], f"{path}.last_mark"),
        journal_mark=_mark_from_json(obj["journal_mark"], f"{path}.journal_mark"),
        current_log_id=None
        if current is None
        else _int(current, f"{path}.current_log_id", LOG_ID_MAX),
        ledgers=_ledgers_from_json(obj["ledgers"], f"{path}.ledgers"),
        deleted_ledgers=tuple(deleted),
        durable_last_mark=None
        if durable_mark is None
        else _mark_from_json(durable_mark, f"{path}.durable_last_mark"),
        ledgers_maps=None if maps is None else _maps_from_json(maps, f"{path}.ledgers_maps"),
    )


def _maps_from_json(value: object, path: str) -> tuple[MapView, ...]:
    views = []
    for i, item in enumerate(_array(value, path)):
        where = f"{path}[{i}]"
        obj = _object(item, where)
        _fields(obj, ("log_id", "sealed", "ledger_bytes"), (), where)
        sealed = _bool(obj["sealed"], f"{where}.sealed")
        raw = obj["ledger_bytes"]
        pairs: tuple[tuple[int, int], ...] | None = None
        if raw is not None:
            if not sealed:
                raise _Bad(f"{where}.ledger_bytes must be null when sealed is false (no map)")
            pairs_path = f"{where}.ledger_bytes"
            found = [
                _ledger_bytes_from_json(v, f"{pairs_path}[{k}]")
                for k, v in enumerate(_array(raw, pairs_path))
            ]
            _unique([ledger for ledger, _ in found], f"{pairs_path} (ledger id)")
            pairs = tuple(sorted(found))
        views.append(MapView(_int(obj["log_id"], f"{where}.log_id", LOG_ID_MAX), sealed, pairs))
    _unique([view.log_id for view in views], f"{path} (log_id)")
    return tuple(views)


def _unique(ids: list[int], path: str) -> None:
    seen: set[int] = set()
    for value in ids:
        if value in seen:
            raise _Bad(f"{path} names {value} twice; each id appears once")
        seen.add(value)


def _logs_from_json(value: object, path: str) -> tuple[LogView, ...]:
    logs = tuple(_log_from_json(v, f"{path}[{i}]") for i, v in enumerate(_array(value, path)))
    _unique([log.log_id for log in logs], f"{path} (log_id)")
    return logs


def _log_from_json(value: object, path: str) -> LogView:
    obj = _object(value, path)
    _fields(obj, ("log_id", "state", "ledger_bytes"), (), path)
    state = obj["state"]
    if not isinstance(state, str) or state not in LOG_STATES:
        raise _Bad(f"{path}.state must be one of {', '.join(LOG_STATES)}, got {describe(state)}")
    pairs_path = f"{path}.ledger_bytes"
    pairs = tuple(
        _ledger_bytes_from_json(v, f"{pairs_path}[{i}]")
        for i, v in enumerate(_array(obj["ledger_bytes"], pairs_path))
    )
    _unique([ledger for ledger, _ in pairs], f"{pairs_path} (ledger id)")
    return LogView(_int(obj["log_id"], f"{path}.log_id", LOG_ID_MAX), state, pairs)


def _ledger_bytes_from_json(value: object, path: str) -> tuple[int, int]:
    pair = _array(value, path)
    if len(pair) != 2:
        raise _Bad(f"{path} must be a pair [ledger id, bytes], got {len(pair)} items")
    return (_int(pair[0], f"{path}[0]"), _int(pair[1], f"{path}[1]"))


def _ledgers_from_json(value: object, path: str) -> tuple[LedgerView, ...]:
    views = []
    for i, item in enumerate(_array(value, path)):
        obj = _object(item, f"{path}[{i}]")
        _fields(obj, ("ledger_id", "last_entry", "fenced"), (), f"{path}[{i}]")
        last = obj["last_entry"]
        views.append(
            LedgerView(
                ledger_id=_int(obj["ledger_id"], f"{path}[{i}].ledger_id"),
                last_entry=None if last is None else _int(last, f"{path}[{i}].last_entry"),
                fenced=_bool(obj["fenced"], f"{path}[{i}].fenced"),
            )
        )
    _unique([view.ledger_id for view in views], f"{path} (ledger_id)")
    return tuple(views)


# --- lines -----------------------------------------------------------------------------------


def _header_json(header: TraceHeader) -> dict[str, object]:
    obj: dict[str, object] = {
        "bkref_trace": header.version,
        "source": header.source,
        "config": dict(header.config),
    }
    if header.version >= 2:
        profile = header.profile
        obj["profile"] = {"acks": profile.acks, "state": profile.state, "answers": profile.answers}
    return obj


def _profile_from_json(value: object) -> Profile:
    obj = _object(value, "profile")
    _fields(obj, tuple(CHOICES), (), "the profile")
    chosen: dict[str, str] = {}
    for name, choices in CHOICES.items():
        text = _str(obj[name], f"profile.{name}")
        if text not in choices:
            raise _Bad(f"profile.{name} must be one of {', '.join(choices)}, got {text!r}")
        chosen[name] = text
    return Profile(**chosen)


def _header_from_json(obj: Mapping[str, object]) -> TraceHeader:
    if "bkref_trace" not in obj:
        raise _Bad(
            'the first line must be the trace header {"bkref_trace": 3, "source": ..., '
            '"config": {...}}; this line has no "bkref_trace": is this a bkref trace?'
        )
    version = obj["bkref_trace"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Bad(f"bkref_trace (the version) must be an integer, got {describe(version)}")
    if version not in SUPPORTED_VERSIONS:
        raise _Bad(
            f"trace version {version} is not supported: this bkref reads version "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))} only; read it with the bkref that "
            "wrote it, or a newer one"
        )
    names = ("bkref_trace", "source", "config", *(("profile",) if version >= 2 else ()))
    _fields(obj, names, (), f"the header of a version {version} trace")
    config = _object(obj["config"], "config")
    pairs = tuple((key, _str(value, f"config.{key}")) for key, value in config.items())
    profile = _profile_from_json(obj["profile"]) if version >= 2 else DEFAULT_PROFILE
    return TraceHeader(
        config=pairs, source=_str(obj["source"], "source"), version=version, profile=profile
    )


def _step_json(step: Step) -> dict[str, object]:
    obj: dict[str, object] = {"step": step.index}
    obj.update(op_to_json(step.op))
    obj["result"] = result_to_json(step.result)
    if step.completed:
        obj["completed"] = [_completion_to_json(c) for c in step.completed]
    if step.state is not None:
        obj["state"] = _state_json(step.state)
    if step.faults:
        assert UNKNOWN_FAULT not in step.faults, "a fault of unknown kind is never written"
        obj["faults"] = [{"op": fault.op, "file": fault.file} for fault in step.faults]
    return obj


def _step_from_json(obj: Mapping[str, object], version: int = TRACE_VERSION) -> Step:
    if "step" not in obj:
        raise _Bad("a step line needs the field 'step' (its number: 0, 1, 2, ...); add it")
    index = _int(obj["step"], "'step'")
    try:
        op = _op_from_json(obj, version)
        fields = ("step", "op", *_op_field_names(op.name, version), "result")
        optional = ("completed", "state", *(("faults",) if version >= 3 else ()))
        _fields(obj, fields, optional, f"a {op.name!r} step")
        result = _result_from_json(obj["result"])
        problem = _result_problem(op, result)
        if problem is not None:
            raise _Bad(problem)
        raw = _array(obj.get("completed", []), "completed")
        completed = tuple(_completion_from_json(v, f"completed[{i}]") for i, v in enumerate(raw))
        state = _state_from_json(obj["state"], "state", version) if "state" in obj else None
        faults = tuple(
            _fault_from_json(v, f"faults[{i}]")
            for i, v in enumerate(_array(obj.get("faults", []), "faults"))
        )
        if version < 3 and isinstance(op, FailFsync | DiskFull):
            faults = (UNKNOWN_FAULT,)
    except _Bad as exc:
        raise _Bad(f"step {index}: {exc}") from None
    return Step(index=index, op=op, result=result, completed=completed, state=state, faults=faults)


def _encode(obj: Mapping[str, object]) -> str:
    return json.dumps(obj, ensure_ascii=True, allow_nan=False)


def encode_header(header: TraceHeader) -> str:
    """The header line, without a newline."""
    assert header.version in SUPPORTED_VERSIONS, f"version {header.version} cannot be written"
    keys = [key for key, _ in header.config]
    assert len(set(keys)) == len(keys), f"a config key appears twice: {keys}"
    line = _encode(_header_json(header))
    assert _header_from_json(_parse_line(line)) == header
    return line


def encode_step(step: Step) -> str:
    """One step line, without a newline. Asserts that the reader reads it back to ``step``
    (so a step the reader would refuse fails here, with the reader's message)."""
    line = _encode(_step_json(step))
    try:
        back = _step_from_json(_parse_line(line))
    except _Bad as exc:
        raise AssertionError(f"step {step.index} cannot be written: {exc}") from None
    assert back == step, (back, step)
    return line


# --- whole traces ----------------------------------------------------------------------------


class _History:
    """The checks that need earlier lines: step numbers run 0, 1, 2, ...; every completion
    names an earlier step whose result was pending, and no step is completed twice."""

    def __init__(self) -> None:
        self.next_index = 0
        self.pending: set[int] = set()
        self.completed_at: dict[int, int] = {}

    def problem(self, step: Step) -> str | None:
        if step.index != self.next_index:
            return (
                f"steps are numbered 0, 1, 2, ... in order: expected step "
                f"{self.next_index}, got step {step.index}"
            )
        seen: set[int] = set()
        for completion in step.completed:
            target = completion.step
            if target in self.completed_at or target in seen:
                at = self.completed_at.get(target, step.index)
                return (
                    f"step {step.index}: completed names step {target} again; it was "
                    f"completed at step {at}, and an ack completes once"
                )
            if target not in self.pending:
                return (
                    f"step {step.index}: completed names step {target}, which is not an "
                    "earlier pending add or fence"
                )
            seen.add(target)
        return None

    def accept(self, step: Step) -> None:
        assert self.problem(step) is None, self.problem(step)
        for completion in step.completed:
            self.pending.remove(completion.step)
            self.completed_at[completion.step] = step.index
        if step.result.pending:
            self.pending.add(step.index)
        self.next_index += 1
        self.check_invariants()

    def check_invariants(self) -> None:
        assert all(0 <= i < self.next_index for i in self.pending), self.pending
        assert not self.pending & self.completed_at.keys()
        assert all(i < at < self.next_index for i, at in self.completed_at.items())


def write_trace(trace: Trace) -> str:
    """The whole trace as text: the header line, one line per step, each ended by ``\\n``."""
    history = _History()
    lines = [encode_header(trace.header)]
    for step in trace.steps:
        problem = history.problem(step)
        assert problem is None, problem
        history.accept(step)
        lines.append(encode_step(step))
    return "\n".join(lines) + "\n"


def read_trace(lines: Iterable[str], name: str = "<trace>") -> Trace:
    """Read and validate a trace: lines of text (with or without their line ends), or the
    whole text as one string. Raises TraceError, and nothing else, for any input."""
    if isinstance(lines, str):
        lines = lines.split("\n")
    header: TraceHeader | None = None
    history = _History()
    steps: list[Step] = []
    for number, raw in enumerate(lines, start=1):
        text = raw[:-1] if raw.endswith("\n") else raw
        if not text.strip(_JSON_SPACE):
            continue
        try:
            obj = _parse_line(text)
            if header is None:
                header = _header_from_json(obj)
                continue
            step = _step_from_json(obj, header.version)
            problem = history.problem(step)
            if problem is not None:
                raise _Bad(problem)
        except _Bad as exc:
            raise TraceError(name, number, str(exc)) from None
        history.accept(step)
        steps.append(step)
    if header is None:
        raise TraceError(
            name,
            None,
            "the trace is empty: its first line must be the header "
            '{"bkref_trace": 3, ...} (spec/trace.md)',
        )
    return Trace(header=header, steps=tuple(steps))


def read_trace_bytes(data: bytes, name: str = "<trace>") -> Trace:
    """Read a trace from its bytes (UTF-8), as a file holds it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TraceError(
            name,
            line,
            f"the line is not UTF-8 ({exc.reason} at byte "
            f"{exc.start} of the file); a trace is UTF-8 text",
        ) from None
    return read_trace(text, name)
