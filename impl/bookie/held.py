"""Entries served from the journal: what a start could not replay into any entry log for lack
of room, until a checkpoint finds room for them.

Spec page: spec/format/journal.md ("Replay": a start with full ledger directories);
docs/design.md, "Data flow", restart. Issue 26, item 3: a ledger disk filled with the
bookie's own data, then kill -9 (the process's write buffer is lost, the journal holds every
acknowledged add), could not restart at all: replay had nowhere to write.

Why the journal: the records are there already, durable, and the journals from lastMark on
are never trimmed while lastMark does not move, and it does not move past a held entry (a
checkpoint first writes the held entries to an entry log: :meth:`HeldEntries.drain`). So a
held entry costs the bookie a few dozen bytes of memory, never its data, and a full disk is
served from whatever the backlog is. BookKeeper turns such a bookie read-only; so does bkref
(adds find no room and answer no_space), and it serves every acknowledged entry meanwhile.

Not verified here: entries held across several starts (each start replays them again from
the journal, so nothing is lost, and holds them again while the disk is full). The abstract
state (``Bookie.inspect``) counts a held entry only once a checkpoint has written it.
"""

from __future__ import annotations

import threading

import attrs

from impl.bookie.identity import accept_command
from impl.entrylog.logger import EntryLogger
from impl.format.entry_log import decode_ids
from impl.format.journal import MIN_PAYLOAD_SIZE, JournalRecord
from impl.format.names import journal_file_name
from impl.fs.api import FileSystem, join
from impl.index.ledger_index import LedgerIndex
from spec.errors import BookieIOError, FsError
from spec.ids import EntryId, LedgerId


@attrs.frozen
class HeldEntry:
    """Where a held entry's payload is: its journal and the payload's offset and length."""

    journal_id: int
    offset: int
    length: int


class HeldEntries:
    """The entries served from the journal (module docstring), by (ledger, entry). The
    bookie's state lock guards every call but ``count``."""

    def __init__(self, fs: FileSystem, journal_dir: str, names: dict[int, str]) -> None:
        """``names``: journal id -> file name in ``journal_dir`` (the replay's listing)."""
        self._fs = fs
        self._dir = journal_dir
        self._names = dict(names)
        self._held: dict[tuple[LedgerId, EntryId], HeldEntry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, record: JournalRecord) -> None:
        """Serve the data record ``record`` from its journal from now on."""
        assert record.kind == "data", record.kind
        start = record.offset + 4
        key = (LedgerId(record.ledger_id), EntryId(record.entry_id))
        with self._lock:
            self._held[key] = HeldEntry(record.journal_id, start, record.end_offset - start)

    def holds(self, ledger_id: LedgerId, entry_id: EntryId) -> bool:
        return (ledger_id, entry_id) in self._held

    def ledgers(self) -> set[LedgerId]:
        return {ledger for ledger, _entry in self._held}

    def entries(self, ledger_id: LedgerId) -> list[EntryId]:
        return sorted(entry for ledger, entry in self._held if ledger == ledger_id)

    def drop_ledger(self, ledger_id: LedgerId) -> None:
        """A deleted ledger's entries go with it."""
        with self._lock:
            for key in [key for key in self._held if key[0] == ledger_id]:
                del self._held[key]

    def read(self, ledger_id: LedgerId, entry_id: EntryId) -> bytes:
        """The stored payload (ids first) of a held entry, read from its journal. Raises
        BookieIOError when the journal cannot be read or no longer holds it."""
        where = self._held[(ledger_id, entry_id)]
        name = self._names.get(where.journal_id, journal_file_name(where.journal_id))
        path = join(self._dir, name)
        try:
            handle = self._fs.open(path, read_only=True)
            try:
                payload = handle.pread(where.offset, where.length)
            finally:
                handle.close()
        except FsError as exc:
            raise BookieIOError(
                f"entry {entry_id} of ledger {ledger_id} is served from journal {path} (no "
                f"ledger directory had room for it at the start), which cannot be read: {exc}"
            ) from exc
        if (
            len(payload) != where.length
            or len(payload) < MIN_PAYLOAD_SIZE
            or (decode_ids(payload[:MIN_PAYLOAD_SIZE]) != (ledger_id, entry_id))
        ):
            raise BookieIOError(
                f"entry {entry_id} of ledger {ledger_id} is served from journal {path} offset "
                f"{where.offset}, which no longer holds it: the journal was changed"
            )
        return payload

    def drain(self, entry_logger: EntryLogger, index: LedgerIndex) -> int:
        """Write every held entry to the entry logs and index it, in journal order (a
        checkpoint's first step: lastMark may then move past their records). Returns how
        many were written. Raises NoWritableLedgerDir when there is still no room (those
        written so far are written and indexed, the rest still held), BookieIOError when a
        journal cannot be read."""
        written = 0
        order = sorted(self._held.items(), key=lambda item: (item[1].journal_id, item[1].offset))
        for (ledger_id, entry_id), _where in order:
            if index.is_deleted(ledger_id):
                self._forget(ledger_id, entry_id)
                continue
            payload = self.read(ledger_id, entry_id)
            location = entry_logger.add_entry(ledger_id, payload)
            index.put_entry(ledger_id, entry_id, location)
            self._forget(ledger_id, entry_id)
            written += 1
        return written

    def _forget(self, ledger_id: LedgerId, entry_id: EntryId) -> None:
        with self._lock:
            del self._held[(ledger_id, entry_id)]

    def check_invariants(self) -> None:
        for where in self._held.values():
            assert where.length >= MIN_PAYLOAD_SIZE and where.offset >= 0, where


def read_only_message(
    exc: Exception, *, held: int, last_mark: str, journal_dirs: list[str], ledger_dirs: list[str]
) -> str:
    """What a start that found no room for its checkpoint says (spec/format/identity.md, "A
    full disk"): that it is read-only, why, and both remedies, each tested
    (tests/unit/impl/bookie/test_full_disk.py)."""
    served = f"{held} entries are served from the journal; " if held else ""
    return (
        f"read-only: no ledger directory has room to make what the start replayed durable "
        f"({exc}). {served}reads are served, adds answer no_space, and lastMark stays at "
        f"{last_mark} until a checkpoint finds room. Free space in {', '.join(ledger_dirs)}: "
        "the next disk check (every diskCheckInterval ms) sees it, the next checkpoint writes "
        "what was served from the journal, and the bookie takes adds again. Or stop the "
        "bookie, add an empty ledger directory with `"
        + accept_command(journal_dirs, [*ledger_dirs, "NEW_DIR"])
        + "` (with the rest of its configuration), and start it with that directory "
        "configured: the start replays into the new directory."
    )
