"""The damage oracle: refuse, or lose nothing.

A start on a damaged disk must end one of two ways:

- **refused**: recovery raises one of bkref's typed errors (spec/errors.py) whose message
  names a file of the disk (or its directory: an identity stamp's refusal names the
  directory), and leaves every file as it found it (nothing written, nothing moved aside:
  the operator's repair starts from what the damage left), the reserves excepted (zeros a
  start lays whenever one is missing or short, spec/format/identity.md "A full disk");
- **started** with everything a client was told intact: every acknowledged add reads back
  with its bytes, every acknowledged fence still refuses an add, every ledger's master key
  still refuses another key, every acknowledged delete stays deleted (no entry of the ledger
  reads back: no resurrection).

A read of an acknowledged entry that answers ``io_error`` after bytes of an entry log were
changed in place (``zero``, ``flip``, or the log's bytes swapped with another's or put back
older: ``swap``, ``older``) is damage met at the read (spec/format/entry_log.md, rows e3
and e8: the log format has no checksum over a record and its header no id, so recovery
does not read every record; the read that needs one finds it wrong and says so):
*detected*, not lost. After any other damage (a log cut, removed, or copied into a second
directory: rows e1, e2, e9) it is a violation: a start can see those, and must refuse.
Anything else is a *violation*: an entry lost or read with other bytes, a fence, key or
delete forgotten, an exception that is not one of bkref's typed errors (a traceback), a
refusal that names no file or that changed the files.

Two classes of damage cannot be seen by any reader of these formats, and the tables say so;
a violation they explain is counted as *undetectable*, by row, not as a failure:

- a byte changed in place inside a record's body (rows e4 and j7: neither format has a
  checksum over the data; BookKeeper's clients check each entry's digest): an acknowledged
  entry read back with other bytes, after a damage that changed bytes in place (``zero``,
  ``flip``, ``older``, ``swap``); and, in a journal, a changed ledger id, entry id or key
  (j7 too): an entry, a key or a fence lost, after a ``zero`` or ``flip`` that changed only
  bytes inside records' payloads (:func:`journal_payloads`; a changed length is never
  excused this way); and a record's length in a journal's last group changed into one that
  runs to or past the end of the file (j6: a crash's cut record looks the same);
- a journal's end taken away, or its bytes moved (rows j12, j14, j20 and j21): a journal cut
  inside an earlier group with nothing after, an older copy of it (a journal only grows, so
  an older copy is a cut), zeros that leave the header's magic and version (zeros over them
  are refused, j19) with at most one group's end (a padding
  record) after them (the shape of a crash's last group whose first sectors never reached
  the disk, row j16; a second group's end after them is refused, j4), a journal deleted, or two
  journals' bytes swapped: it looks like a crash's torn last group, journal ids are not
  consecutive, and a journal does not carry its id. Adds, fences, keys and deletes only the
  lost bytes held are lost without a word.

``bkref inspect`` must say the same of the damaged disk (given ``inspect``): problems where
recovery refuses, none where it starts (proofs/damage/inspect_verdict.py), except for the
identity check's refusals (DirectoryError: the configured directories against their
stamps), which inspect, run on any copy of the directories, cannot make. A traceback from
inspect is a violation too.

Everything here reads the bookie through its client calls only (read, add, fence), and knows
what was acknowledged from the trace the model judged before the crash, never from the
bookie's files.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from impl.bookie.bookie import Bookie
from impl.format.names import RESERVE_FILE_NAME
from models.fs.simdisk import SimDisk
from proofs.damage.generate import Damage, Flip, Several, Zero, file_kind
from spec.errors import BkrefError, BookieError, DirectoryError
from spec.ids import EntryId, LedgerId
from spec.operations import Add, Delete, Fence
from spec.trace import Trace

#: Entry ids of the probing adds after a start (never a workload's).
FENCE_PROBE_ENTRY = 40_000
WRONG_KEY_PROBE_ENTRY = 50_000
WRONG_KEY = b"not-the-key-of-any-ledger"

#: The verdicts, in the order the summary lists them.
REFUSED = "refused"
INTACT = "intact"
DETECTED = "detected at a read"
UNDETECTABLE = "undetectable"
VIOLATION = "violation"
VERDICTS = (REFUSED, INTACT, DETECTED, UNDETECTABLE, VIOLATION)

#: The first bytes of a padding record, which ends every group bkref writes in a V5+
#: journal (spec/format/journal.md): int32 PADDING_MASK.
PADDING_HEAD = struct.pack(">i", -0x100)
#: Damage kinds that change bytes in place (rows e4, j7 apply).
IN_PLACE = frozenset({"zero", "flip", "older", "swap"})


@attrs.frozen
class Acknowledged:
    """What the trace told a client: adds (ledger, entry) to their bytes, fenced ledgers,
    each ledger's key, deleted ledgers."""

    adds: Mapping[tuple[int, int], bytes]
    fences: frozenset[int]
    keys: Mapping[int, bytes]
    deletes: frozenset[int]

    @staticmethod
    def of(trace: Trace) -> Acknowledged:
        done = [step.op for step in trace.steps if step.result.ok and not step.result.pending]
        done += [
            trace.steps[completion.step].op
            for step in trace.steps
            for completion in step.completed
            if completion.error is None
        ]
        deletes = frozenset(op.ledger for op in done if isinstance(op, Delete))
        adds = {
            (op.ledger, op.entry): op.data
            for op in done
            if isinstance(op, Add) and op.ledger not in deletes
        }
        keys = {
            op.ledger: op.key
            for op in done
            if isinstance(op, Add | Fence) and op.ledger not in deletes
        }
        fences = frozenset(
            op.ledger for op in done if isinstance(op, Fence) and op.ledger not in deletes
        )
        return Acknowledged(adds, fences, keys, deletes)


@attrs.frozen
class Verdict:
    """How one start on a damaged disk ended: ``verdict`` (VERDICTS), the problems seen
    (violations or, for undetectable, what the rows excuse), and ``row`` for undetectable."""

    verdict: str
    problems: tuple[str, ...] = ()
    row: str = ""
    refusal: str = ""
    #: The refusal is the identity check's (DirectoryError: the configured directories
    #: against their stamps), which inspect, run on any copy of the directories, cannot
    #: make: not compared with inspect.
    identity: bool = False


def _names_a_file(message: str, paths: Sequence[str]) -> bool:
    """Whether ``message`` names one of ``paths``, by path or by name, or the directory of
    one (an identity stamp's refusal names the directory it stamps)."""
    names = set(paths)
    for path in paths:
        names.add(path.rsplit("/", 1)[-1])
        parts = path.strip("/").split("/")
        names.add("/" + parts[0])
    return any(name and name in message for name in names)


def _files(disk: SimDisk) -> dict[str, bytes]:
    """The disk's files but the reserves (zeros a start lays whenever one is missing or
    short: spec/format/identity.md, "A full disk"; they hold no data)."""
    return {
        path: data
        for path, data in disk.current_snapshot().items()
        if path.rsplit("/", 1)[-1] != RESERVE_FILE_NAME
    }


def _parts(damage: Damage) -> tuple[Damage, ...]:
    return damage.parts if isinstance(damage, Several) else (damage,)


def _changes_bytes(damage: Damage) -> bool:
    return any(part.kind in IN_PLACE for part in _parts(damage))


def _changes_a_log_in_place(damage: Damage) -> bool:
    """Whether some part of ``damage`` changed an entry log's bytes in place: a record's
    size or ids (row e3), or the whole log's bytes replaced by another's or by an older copy
    of its own (e8: a log's header does not carry its id). Met at the read."""
    return any(
        part.kind in ("zero", "flip", "swap", "older") and file_kind(part.paths()[0]) == "entry log"
        for part in _parts(damage)
    )


def _takes_a_journal_end(damage: Damage, before: Mapping[str, bytes]) -> bool:
    """Whether some part of ``damage`` took a journal's end away or moved its bytes (rows
    j12, j14, j20, j21: module docstring)."""
    for part in _parts(damage):
        path = part.paths()[0]
        if file_kind(path) != "journal":
            continue
        if part.kind in ("truncate", "older", "remove", "swap"):
            return True
        if isinstance(part, Zero):
            data = _in_place(part, before.get(path, b"")) or b""
            offset = part.offset
            if data[:8] != before.get(path, b"")[:8]:
                continue  # "BKLG" and the version zeroed: refused after a bkref lastMark (j19)
            if bytes(data[offset:]).count(PADDING_HEAD) <= 1:
                return True  # at most one group's end after the zeros (rows j14, j21)
    return False


def _walk(data: bytes) -> tuple[list[tuple[int, int]], list[int]]:
    """A V5+ journal walked as spec/format/journal.md describes it: a 512-byte header
    ("BKLG", int32 version), then records, each an int32 length and that many bytes, a
    padding record being PADDING_MASK, int32 n and n zeros; the walk ends at a zero length,
    a length that does not fit, or the end. Returns the records' payload ranges and where
    each group after the first starts (the end of a padding record with data after it);
    nothing for anything else."""
    if len(data) < 8 or data[:4] != b"BKLG" or struct.unpack_from(">i", data, 4)[0] < 5:
        return [], []
    payloads: list[tuple[int, int]] = []
    starts: list[int] = []
    offset = 512
    while offset + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, offset)
        if length == -0x100 and offset + 8 <= len(data):
            (zeros,) = struct.unpack_from(">i", data, offset + 4)
            offset += 8 + max(0, zeros)
            if offset < len(data):
                starts.append(offset)
            continue
        if length <= 0 or offset + 4 + length > len(data):
            break
        payloads.append((offset + 4, offset + 4 + length))
        offset += 4 + length
    return payloads, starts


def journal_payloads(data: bytes) -> list[tuple[int, int]]:
    """The byte ranges of a V5+ journal's record payloads (ids, body, key: what row j7 says
    no reader can check); [] for anything else (no exemption then)."""
    return _walk(data)[0]


def group_starts(data: bytes) -> list[int]:
    """Where each group of a V5+ journal after the first starts (:func:`_walk`)."""
    return _walk(data)[1]


def _in_place(part: Damage, old: bytes) -> bytes | None:
    """The bytes a ``zero`` or ``flip`` leaves of ``old``; None for other damage."""
    new = bytearray(old)
    if isinstance(part, Zero):
        end = min(len(new), part.offset + part.length)
        new[part.offset : end] = bytes(max(0, end - part.offset))
    elif isinstance(part, Flip):
        new[part.offset] ^= part.mask
    else:
        return None
    return bytes(new)


def _changed(before: bytes, after: bytes) -> list[int] | None:
    """The offsets whose byte changed, or None when the size changed too."""
    if len(before) != len(after):
        return None
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


def _journal_edits(
    damage: Damage, before: Mapping[str, bytes]
) -> Iterator[tuple[bytes, bytes, list[int]]]:
    """Each part of ``damage`` that changed a journal's bytes in place (``zero``, ``flip``):
    the journal's bytes before and after, and the offsets that changed."""
    for part in _parts(damage):
        path = part.paths()[0]
        old = before.get(path, b"")
        new = _in_place(part, old) if file_kind(path) == "journal" else None
        changed = None if new is None else _changed(old, new)
        if new is not None and changed:
            yield old, new, changed


def _changes_journal_payloads_only(damage: Damage, before: Mapping[str, bytes]) -> bool:
    """Whether some part of ``damage`` changed bytes in place inside a journal, and only
    inside its records' payloads (row j7: ids, body or key changed, lengths intact)."""
    for old, _new, changed in _journal_edits(damage, before):
        payloads = journal_payloads(old)
        if all(any(a <= i < b for a, b in payloads) for i in changed):
            return True
    return False


def _cuts_the_last_group(damage: Damage, before: Mapping[str, bytes]) -> bool:
    """Whether some part of ``damage`` changed only the length field of a record in a
    journal's last group (at most one padding record from it on), into a length whose record
    runs to or past the end of the file (row j6: a misparse that a crash's cut record looks
    the same as)."""
    for old, new, changed in _journal_edits(damage, before):
        for start, _end in journal_payloads(old):
            field = start - 4
            if not all(field <= i < start for i in changed):
                continue
            (length,) = struct.unpack_from(">i", new, field)
            last_group = old[field:].count(PADDING_HEAD) <= 1
            if length >= 16 and start + length >= len(old) and last_group:
                return True
    return False


def judge(
    open_bookie: Callable[[SimDisk], Bookie],
    disk: SimDisk,
    damage: Damage,
    acknowledged: Acknowledged,
    before: Mapping[str, bytes],
    inspect: Callable[[SimDisk], list[str]] | None = None,
) -> Verdict:
    """Start a bookie on ``disk`` (already damaged) and judge the start (module docstring).
    ``before``: the disk's files before the damage (path to bytes). ``inspect``: what
    ``bkref inspect`` reports of the damaged disk (its problems); given, it must agree with
    recovery: problems where recovery refuses, none where it starts."""
    damaged = _files(disk)
    try:
        inspected = None if inspect is None else inspect(disk)
    except Exception as exc:  # a traceback from inspect: never an answer either
        return Verdict(VIOLATION, (f"bkref inspect raised {type(exc).__name__}: {exc}",))
    verdict = _judge_start(open_bookie, disk, damage, acknowledged, before, damaged)
    if inspected is None or verdict.verdict == VIOLATION or verdict.identity:
        return verdict
    said = "refuses" if inspected else "accepts"
    started = "refuses" if verdict.verdict == REFUSED else "accepts"
    if said != started:
        what = f"inspect reports {inspected}" if inspected else "inspect reports no problem"
        return Verdict(
            VIOLATION,
            (
                f"recovery {started}, but {what}"
                + (f" ({verdict.refusal})" if verdict.refusal else ""),
            ),
            refusal=verdict.refusal,
        )
    return verdict


def _judge_start(
    open_bookie: Callable[[SimDisk], Bookie],
    disk: SimDisk,
    damage: Damage,
    acknowledged: Acknowledged,
    before: Mapping[str, bytes],
    damaged: Mapping[str, bytes],
) -> Verdict:
    try:
        bookie = open_bookie(disk)
    except BkrefError as exc:
        message = f"{type(exc).__name__}: {exc}"
        problems: list[str] = []
        if not _names_a_file(str(exc), [*before, *damaged]):
            problems.append(f"the refusal names no file: {message}")
        if _files(disk) != damaged:
            problems.append(f"the refused start changed the files: {message}")
        if problems:
            return Verdict(VIOLATION, tuple(problems), refusal=message)
        return Verdict(REFUSED, refusal=message, identity=isinstance(exc, DirectoryError))
    except Exception as exc:  # a traceback: never an answer
        return Verdict(VIOLATION, (f"the start raised {type(exc).__name__}: {exc}",))
    try:
        return _judge_started(bookie, damage, acknowledged, before)
    finally:
        with contextlib.suppress(BkrefError):
            bookie.shutdown()


def _judge_started(
    bookie: Bookie, damage: Damage, acknowledged: Acknowledged, before: Mapping[str, bytes]
) -> Verdict:
    lost: list[str] = []
    other_bytes: list[str] = []
    broken: list[str] = []
    detected = 0
    for (ledger, entry), data in sorted(acknowledged.adds.items()):
        try:
            got = bookie.read_entry(LedgerId(ledger), EntryId(entry))
        except BookieError as exc:
            if exc.code == "io_error":
                detected += 1
            else:
                lost.append(f"acknowledged add ({ledger}, {entry}) answered {exc.code}")
            continue
        except Exception as exc:
            broken.append(f"read ({ledger}, {entry}) raised {type(exc).__name__}: {exc}")
            continue
        if got != data:
            other_bytes.append(f"acknowledged add ({ledger}, {entry}) read other bytes")
    for ledger in sorted(acknowledged.deletes):
        for entry in range(3):
            try:
                bookie.read_entry(LedgerId(ledger), EntryId(entry))
            except BookieError:
                continue
            except Exception as exc:
                broken.append(f"read ({ledger}, {entry}) raised {type(exc).__name__}: {exc}")
                continue
            lost.append(f"deleted ledger {ledger} is back: entry {entry} reads")
    for ledger in sorted(acknowledged.fences):
        code = _add_answer(bookie, ledger, FENCE_PROBE_ENTRY, acknowledged.keys[ledger])
        if code.startswith("raised"):
            broken.append(f"an add to fenced ledger {ledger} {code}")
        elif code != "fenced":
            lost.append(f"the fence of ledger {ledger} is lost: an add answered {code}")
    for ledger in sorted(acknowledged.keys):
        code = _add_answer(bookie, ledger, WRONG_KEY_PROBE_ENTRY, WRONG_KEY)
        if code.startswith("raised"):
            broken.append(f"a wrong key's add to ledger {ledger} {code}")
        elif code not in ("unauthorized", "fenced"):
            lost.append(f"the key of ledger {ledger} is lost: a wrong key's add answered {code}")
    if detected and not _changes_a_log_in_place(damage):
        # Met at the read only where the format has no check a start could make: bytes
        # changed inside an entry log (e3). A log cut, removed or renamed is refused (e1, e2).
        broken += [
            f"{detected} acknowledged adds answered io_error after damage a start must refuse "
            "(an entry log cut, removed or copied: rows e1, e2, e9)"
        ]
    if broken:
        return Verdict(VIOLATION, tuple(broken + lost + other_bytes))
    excused: list[str] = []
    rows: list[str] = []
    if other_bytes and _changes_bytes(damage):
        excused += other_bytes
        rows.append("e4/j7")
        other_bytes = []
    if lost and _takes_a_journal_end(damage, before):
        excused += lost
        rows.append("j12/j14/j20/j21")
        lost = []
    if lost and _cuts_the_last_group(damage, before):
        excused += lost
        rows.append("j6")
        lost = []
    if lost and _changes_journal_payloads_only(damage, before):
        excused += lost
        rows.append("j7")
        lost = []
    if lost or other_bytes:
        return Verdict(VIOLATION, tuple(lost + other_bytes))
    if excused:
        return Verdict(UNDETECTABLE, tuple(excused), row=", ".join(rows))
    return Verdict(DETECTED if detected else INTACT)


def _add_answer(bookie: Bookie, ledger: int, entry: int, key: bytes) -> str:
    """What an add answers at once: an error code, ``accepted`` (pending or done), or
    ``raised ...`` for an exception that is not a client's answer."""
    try:
        ack = bookie.add_entry(LedgerId(ledger), EntryId(entry), key, b"probe")
    except BookieError as exc:
        return exc.code
    except Exception as exc:
        return f"raised {type(exc).__name__}: {exc}"
    if ack.done and ack.error is not None:
        return ack.error.code
    return "accepted"
