"""BookKeeper's own tests of the bookie's storage part, ported to impl/bookie/bookie.py.

- BookieJournalTest: journals of every version built byte by byte (tests/unit/bk_journal_layout,
  independent of our writer) replay to entries 1..N readable, N+1 missing, the ledger fenced
  and the mark advanced (createBookieAndReadJournal); a length zeroed by a crash loses that
  entry only (testTruncatedInLenJournal); a record cut inside its payload still reads, junk
  (testTruncatedInEntryJournal); an all-junk journal, a junk-ended journal and a negative
  length refuse to start with a clear RecoveryError unless skipReplayJournalInvalidRecord
  (testAllJunkJournal, testJunkEndedJournal, testNegativeLengthEntryBookieShutdown,
  testJournalScanInvalidRecordWithSkipFlag); an empty or header-only journal starts fine.
- LedgerStorageCheckpointTest: after a checkpoint, a crash that also loses every journal and
  lastMark file still leaves every entry readable
  (testCheckPointForEntryLoggerWithMultipleActiveEntryLogs); the lastMark file follows the
  journal's mark at each checkpoint (testPeriodicCheckpointForLedgerStorage).
- TestFencing, storage part: fence, restart, add -> Fenced; wrong key -> Unauthorized, before
  and after a restart.

Where Java writes an index file (FileInfo) to give ledger 1 its master key before a pre-V3
journal, which cannot hold key records, we give the bookie an entry log holding entry 0 of
ledger 1: our index is rebuilt from it, so the ledger is known, as the index file makes it
known to BookKeeper. Without it both bookies skip the ledger's records (checked too).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from impl.bookie.bookie import Bookie
from impl.format.names import IDENTITY_FILE_NAME
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import Fenced, NoEntry, NoLedger, RecoveryError, Unauthorized
from spec.ids import EntryId, LedgerId
from tests.unit import bk_journal_layout as bkj
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import (
    JOURNAL,
    LEDGERS,
    OTHER_KEY,
    add_and_ack,
    body,
    make_config,
)
from tests.unit.impl.bookie.test_bookie import (
    open_bookie as open_bkref_bookie,
)


def open_bookie(*args: Any, **kwargs: Any) -> Bookie:
    """These directories are BookKeeper's (built from its format pages): bkref writes into
    them only when asked (impl/bookie/identity.py)."""
    return open_bkref_bookie(*args, write_bookkeeper_dirs=True, **kwargs)


JOURNAL_CURRENT = join(JOURNAL, "current")
LEDGER_CURRENT = join(LEDGERS[0], "current")
JOURNAL_ID = 0x18B0F3C2A00  # a millisecond timestamp, as BookKeeper names journals
PASSWD = b"testPasswd"


# --- building BookKeeper's directories -------------------------------------------------------


def put_file(disk: SimDisk, path: str, data: bytes) -> None:
    """A durable file, as a stopped BookKeeper leaves it."""
    directory = path.rsplit("/", 1)[0]
    disk.mkdir(directory)
    handle = disk.open(path, create=True)
    handle.pwrite(0, data)
    handle.fsync()
    handle.close()
    parts = directory.split("/")
    for depth in range(1, len(parts) + 1):
        disk.fsync_dir("/".join(parts[:depth]) or "/")


def bk_disk(journal: bytes, *, ledger_one_known: bool = True) -> SimDisk:
    """A bookie directory holding ``journal`` and, optionally, an entry log with entry 0 of
    ledger 1 (our stand-in for Java's writeIndexFileForLedger)."""
    disk = SimDisk()
    put_file(disk, join(JOURNAL_CURRENT, bkj.journal_name(JOURNAL_ID)), journal)
    for ledger_dir in LEDGERS:
        disk.mkdir(join(ledger_dir, "current"))
        disk.fsync_dir(ledger_dir)
    if ledger_one_known:
        log = bk_layout.build_log([(1, 0, b"entry zero")])
        put_file(disk, join(LEDGER_CURRENT, "0.log"), log.data)
    return disk


def bk_open(disk: SimDisk, *overrides: str) -> Bookie:
    return open_bookie(disk, make_config("logSizeLimit=1048576", *overrides))


def packet(entry: int, fill: bytes = b"X", size: int = 1048) -> bytes:
    """The body ClientUtil.generatePacket sends after the ids (LAC, length, digest, data)."""
    return (fill * size)[:size] if entry else b""


def v4_journal(entries: int) -> bkj.JournalBuilder:
    """BookieJournalTest.writeV4Journal: key record, entries 1..n, a fence record."""
    builder = bkj.JournalBuilder(version=4)
    builder.key(1, PASSWD)
    for entry in range(1, entries + 1):
        builder.entry(1, entry, packet(entry))
    builder.fence(1)
    return builder


def v5_journal(entries: int, *, corrupt_length: bool = False) -> bkj.JournalBuilder:
    """BookieJournalTest.writeV5Journal: key, entries 1..n of i bytes, fence, padding after
    each record; with ``corrupt_length`` every length is -1."""
    builder = bkj.JournalBuilder(version=5)
    records = [bkj.key_payload(1, PASSWD)]
    records += [bkj.entry_payload(1, i, b"X" * i) for i in range(1, entries + 1)]
    records.append(bkj.fence_payload(1))
    if not corrupt_length:
        builder.key(1, PASSWD)
        builder.flush()
        for entry in range(1, entries + 1):
            builder.entry(1, entry, b"X" * entry)
            builder.flush()
        builder.fence(1)
        builder.flush()
        return builder
    for payload in records:
        builder.raw(bytes.fromhex("ffffffff") + payload)
        builder.flush()
    return builder


def v2_journal(entries: int) -> bkj.JournalBuilder:
    """BookieJournalTest.writeV2Journal: no key record (V2 cannot hold one)."""
    builder = bkj.JournalBuilder(version=2)
    for entry in range(1, entries + 1):
        builder.entry(1, entry, packet(entry))
    return builder


def read(bookie: Bookie, ledger: int, entry: int) -> bytes:
    return bookie.read_entry(LedgerId(ledger), EntryId(entry))


# --- BookieJournalTest ----------------------------------------------------------------------


def test_v4_journal_replays_entries_and_the_fence() -> None:
    disk = bk_disk(v4_journal(100).file_bytes())
    bookie = bk_open(disk)
    for entry in range(1, 101):
        assert read(bookie, 1, entry) == packet(entry)
    with pytest.raises(NoEntry):
        read(bookie, 1, 101)
    assert bookie.inspect().fenced_ledgers == (LedgerId(1),)
    assert bookie.recovery.end_mark > bookie.recovery.start_mark  # createBookieAndReadJournal
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(1), OTHER_KEY)
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(1), EntryId(101), PASSWD, b"late")


def test_v5_journal_with_padding_replays_entries_and_the_fence() -> None:
    entries = 2 * 512
    disk = bk_disk(v5_journal(entries).file_bytes(zero_tail=8192), ledger_one_known=False)
    bookie = bk_open(disk)
    for entry in range(1, entries + 1):
        assert read(bookie, 1, entry) == b"X" * entry
    with pytest.raises(NoEntry):
        read(bookie, 1, entries + 1)
    assert bookie.inspect().fenced_ledgers == (LedgerId(1),)
    assert bookie.recovery.entries_re_added == entries
    assert bookie.recovery.end_mark > bookie.recovery.start_mark


def test_pre_v2_journal_replays_into_a_known_ledger() -> None:
    builder = bkj.JournalBuilder(version=1)
    for entry in range(1, 101):
        builder.entry(1, entry, b"JournalTestData")
    bookie = bk_open(bk_disk(builder.file_bytes(zero_tail=512)))
    assert read(bookie, 1, 100) == b"JournalTestData"
    assert read(bookie, 1, 0) == b"entry zero"  # from the entry log
    with pytest.raises(NoEntry):
        read(bookie, 1, 101)


def test_records_of_a_ledger_the_bookie_does_not_know_are_skipped_as_bookkeeper_does() -> None:
    bookie = bk_open(bk_disk(v2_journal(10).file_bytes(), ledger_one_known=False))
    assert bookie.recovery.skipped_unknown == 10
    with pytest.raises(NoLedger):
        read(bookie, 1, 1)


def test_an_all_junk_journal_refuses_to_start_with_a_clear_error() -> None:
    disk = bk_disk(bkj.junk())
    with pytest.raises(RecoveryError) as caught:
        bk_open(disk)
    message = str(caught.value)
    assert "invalid record at offset 0" in message
    assert "skipReplayJournalInvalidRecord" in message
    assert bkj.journal_name(JOURNAL_ID) in message


def test_an_empty_journal_starts_fine() -> None:
    bookie = bk_open(bk_disk(bkj.JournalBuilder(version=1).file_bytes(zero_tail=4096)))
    assert bookie.recovery.records_replayed == 0


def test_a_header_only_journal_starts_fine() -> None:
    bookie = bk_open(bk_disk(v2_journal(0).file_bytes()))
    assert bookie.recovery.records_replayed == 0
    add_and_ack(bookie, 1, 1, b"after")
    assert read(bookie, 1, 1) == b"after"


def test_a_junk_ended_journal_refuses_to_start_unless_told_to_skip() -> None:
    builder = v2_journal(0)
    builder.raw(b"JunkJunkJunk")
    with pytest.raises(RecoveryError, match="invalid record"):
        bk_open(bk_disk(builder.file_bytes()))
    bk_open(bk_disk(builder.file_bytes()), "skipReplayJournalInvalidRecord=true")


def test_a_length_zeroed_by_a_crash_loses_that_entry_only() -> None:
    # testTruncatedInLenJournal: 2048 zeros from 0x429 bytes before the end (inside the last
    # record's length field): the length becomes 0x400, a record of zeros (ledger 0, entry
    # 0), then the end. Entry 100 is lost, 99 reads, and the zeros create no ledger 0.
    data = bytearray(v2_journal(100).file_bytes())
    start = len(data) - 0x429
    data[start:] = bytes(2048)
    bookie = bk_open(bk_disk(bytes(data)))
    assert read(bookie, 1, 99) == packet(99)
    with pytest.raises(NoEntry):
        read(bookie, 1, 100)
    with pytest.raises(NoLedger):
        read(bookie, 0, 0)
    assert bookie.recovery.skipped_unknown == 1


def test_a_record_cut_inside_its_payload_still_reads_as_junk() -> None:
    # testTruncatedInEntryJournal: zeros from 0x300 bytes before the end; the last record's
    # length and ids survive, so entry 100 reads, but its tail is zeros.
    data = bytearray(v2_journal(100).file_bytes())
    start = len(data) - 0x300
    data[start:] = bytes(2048)
    bookie = bk_open(bk_disk(bytes(data)))
    assert read(bookie, 1, 99) == packet(99)
    last = read(bookie, 1, 100)
    assert len(last) == len(packet(100))
    assert last[:-0x300] == packet(100)[:-0x300]
    assert last[-0x300:] == bytes(0x300)
    with pytest.raises(NoEntry):
        read(bookie, 1, 101)


def test_a_negative_length_refuses_to_start_unless_told_to_skip() -> None:
    # testNegativeLengthEntryBookieShutdown.
    journal = v5_journal(5, corrupt_length=True).file_bytes()
    with pytest.raises(RecoveryError, match="negative length -1"):
        bk_open(bk_disk(journal, ledger_one_known=False))
    bookie = bk_open(
        bk_disk(journal, ledger_one_known=False), "skipReplayJournalInvalidRecord=true"
    )
    with pytest.raises(NoLedger):
        read(bookie, 1, 1)


def test_an_invalid_record_with_the_skip_flag_drops_the_rest_of_that_journal() -> None:
    # testJournalScanInvalidRecordWithSkipFlag: entry 99 of 100 has length -1.
    builder = bkj.JournalBuilder(version=4)
    builder.key(1, PASSWD)
    for entry in range(1, 101):
        payload = bkj.entry_payload(1, entry, packet(entry, size=64))
        if entry == 99:
            builder.raw(bytes.fromhex("ffffffff") + payload)
        else:
            builder.entry(1, entry, packet(entry, size=64))
    builder.fence(1)
    journal = builder.file_bytes()
    with pytest.raises(RecoveryError, match="negative length"):
        bk_open(bk_disk(journal))
    bookie = bk_open(bk_disk(journal), "skipReplayJournalInvalidRecord=true")
    assert read(bookie, 1, 98) == packet(98, size=64)
    with pytest.raises(NoEntry):
        read(bookie, 1, 99)
    with pytest.raises(NoEntry):
        read(bookie, 1, 100)
    assert bookie.inspect().fenced_ledgers == ()


# --- LedgerStorageCheckpointTest ------------------------------------------------------------


def test_after_a_checkpoint_losing_every_journal_and_last_mark_loses_no_entry() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    ledgers = (10, 2000, 33333)
    for ledger in ledgers:
        for entry in range(5):
            add_and_ack(bookie, ledger, entry, body(ledger, entry, 300))
    bookie.checkpoint()
    # The crash: nothing is flushed on the way down, then journals and lastMark vanish.
    disk.crash(LoseUnsynced())
    for name in disk.listdir(JOURNAL_CURRENT):
        if name != IDENTITY_FILE_NAME:  # the journals go; the directory stays this bookie's
            disk.unlink(join(JOURNAL_CURRENT, name))
    for ledger_dir in LEDGERS:
        disk.unlink(join(ledger_dir, "current", "lastMark"))
    bookie = open_bookie(disk)
    assert bookie.recovery.records_replayed == 0
    for ledger in ledgers:
        for entry in range(5):
            assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == body(ledger, entry, 300)


def test_the_last_mark_file_follows_the_journal_mark_at_each_checkpoint() -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    mark_path = join(LEDGER_CURRENT, "lastMark")

    def mark_file() -> tuple[int, int]:
        journal_id, offset = struct.unpack_from(">qq", disk.read_file(mark_path))
        return journal_id, offset

    start_mark = bookie.inspect().journal_mark
    for ledger in range(2):
        for entry in range(5):
            add_and_ack(bookie, ledger, entry, b"data")
    # No checkpoint since the (first) start: lastMark is where the start's recovery
    # checkpoint put it, the end of the new journal's header (bkref; BookKeeper: (0, 0)).
    assert mark_file() == (start_mark.journal_id, start_mark.offset) == (0x18BCFE56800, 512)
    journal_mark = bookie.inspect().journal_mark
    bookie.checkpoint()
    assert mark_file() == (journal_mark.journal_id, journal_mark.offset)
    assert bookie.inspect().journal_mark == journal_mark  # nothing added meanwhile
    for ledger in range(2, 4):
        for entry in range(5):
            add_and_ack(bookie, ledger, entry, b"data")
    bookie.checkpoint()
    second = bookie.inspect().journal_mark
    assert mark_file() == (second.journal_id, second.offset)
    assert second > journal_mark


# --- TestFencing (storage part) -----------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean restart", "crash"])
def test_a_fence_survives_a_restart_and_refuses_adds(clean: bool) -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, b"before")
    ack = bookie.fence(LedgerId(1), b"master-key")
    bookie.journal_force()
    assert ack.wait(5) and ack.error is None
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(1), OTHER_KEY)
    if clean:
        bookie.shutdown()
    else:
        disk.crash(LoseUnsynced())
    bookie = open_bookie(disk)
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(1), EntryId(1), b"master-key", b"after")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(1), EntryId(1), OTHER_KEY, b"after")
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(1), OTHER_KEY)
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"before"


def test_records_with_a_negative_ledger_id_are_skipped_not_a_traceback() -> None:
    builder = bkj.JournalBuilder(version=6)
    builder.key(-1, PASSWD)
    builder.fence(-3)
    builder.key(1, PASSWD)
    builder.entry(1, 1, b"good")
    builder.flush()
    lines: list[str] = []
    bookie = open_bookie(
        bk_disk(builder.file_bytes(), ledger_one_known=False), progress=lines.append
    )
    assert read(bookie, 1, 1) == b"good"
    assert bookie.recovery.skipped_unknown == 2
    assert sum("ledger id -1" in line or "ledger id -3" in line for line in lines) == 2
    assert [info.ledger_id for info in bookie.inspect().ledgers] == [1]
