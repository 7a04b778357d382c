"""Helpers shared by the journal writer's and replay's tests: a simulated disk holding a
durable journal directory, a journal file put there as given, and replay's records."""

from __future__ import annotations

from impl.format.journal import JournalRecord
from impl.format.names import journal_file_name
from impl.fs.api import join
from impl.journal.last_mark import NO_MARK, LogMark
from impl.journal.replay import replay
from models.fs.simdisk import SimDisk

JDIR = "/j/current"
T0 = 1_700_000_000_000


def new_disk() -> SimDisk:
    """A simulated disk whose journal directory ``/j/current`` is durable."""
    disk = SimDisk()
    disk.mkdir(JDIR)
    disk.fsync_dir("/")
    disk.fsync_dir("/j")
    return disk


def replayed(disk: SimDisk, mark: LogMark = NO_MARK, **kw: bool) -> list[JournalRecord]:
    """Every record replay yields from ``mark`` (``skip=True``: skipReplayJournalInvalidRecord)."""
    return list(replay(disk, JDIR, mark, skip_invalid=kw.get("skip", False)))


def record_ids(records: list[JournalRecord]) -> list[tuple[str, int, int]]:
    return [(r.kind, r.ledger_id, r.entry_id) for r in records]


def put_journal(disk: SimDisk, journal_id: int, data: bytes) -> None:
    """A journal file holding ``data``, durably (written by someone else)."""
    handle = disk.open(join(JDIR, journal_file_name(journal_id)), create=True)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()
