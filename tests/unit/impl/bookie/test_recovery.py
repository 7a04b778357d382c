"""impl/bookie/recovery.py: the pure decisions (replay_action, must_rebuild_index) case by
case, and the JournalReplayer applying records to a real entry logger and index on the
simulated disk without a bookie. Recovery through Bookie.open is tests/unit/impl/bookie/
test_bookie.py."""

from __future__ import annotations

import random
import struct

import pytest

from impl.bookie.layout import BookieLayout, ensure_durable_dir, layout_from_config
from impl.bookie.recovery import (
    JournalReplayer,
    ReplayAction,
    must_rebuild_index,
    recover,
    replay_action,
)
from impl.entrylog.compactor import TransactionalCompactor
from impl.entrylog.logger import EntryLogger, settings_from_config
from impl.format.journal import JournalRecord
from impl.format.names import log_file_name
from impl.index.ledger_index import LedgerIndex
from impl.journal.last_mark import NO_MARK
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import NoLedger, RecoveryError
from spec.ids import EntryId, EntryLogId, LedgerId, location_log_id
from tests.unit.impl.bookie.test_bookie import KEY, add_and_ack, make_config, open_bookie

# --- decisions ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "ledger", "deleted", "known", "key", "present", "expected"),
    [
        ("data", 1, True, False, None, False, ReplayAction.SKIP_DELETED),
        ("key", 1, True, False, None, False, ReplayAction.SKIP_DELETED),
        ("fence", 1, True, False, None, False, ReplayAction.SKIP_DELETED),
        ("key", 1, False, False, None, False, ReplayAction.SET_KEY),
        ("key", 1, False, True, None, False, ReplayAction.SET_KEY),
        ("key", 1, False, True, KEY, False, ReplayAction.KEEP_KEY),
        ("fence", 1, False, False, None, False, ReplayAction.FENCE),
        ("lac", 1, False, True, KEY, False, ReplayAction.IGNORE_LAC),
        ("data", 1, False, False, None, False, ReplayAction.SKIP_UNKNOWN),
        ("data", 1, False, True, None, False, ReplayAction.RE_ADD),
        ("data", 1, False, True, KEY, False, ReplayAction.RE_ADD),
        ("data", 1, False, True, KEY, True, ReplayAction.PRESENT),
        ("key", -5, False, False, None, False, ReplayAction.SKIP_BAD_ID),
        ("fence", -1, False, False, None, False, ReplayAction.SKIP_BAD_ID),
        ("data", -1, False, False, None, False, ReplayAction.SKIP_BAD_ID),
    ],
)
def test_replay_action(
    kind: str,
    ledger: int,
    deleted: bool,
    known: bool,
    key: bytes | None,
    present: bool,
    expected: ReplayAction,
) -> None:
    assert replay_action(kind, ledger, deleted, known, key, present) is expected


def test_the_index_is_rebuilt_only_when_never_persisted_and_logs_exist() -> None:
    logs = [EntryLogId(0), EntryLogId(3)]
    assert must_rebuild_index(False, logs)
    assert not must_rebuild_index(False, [])
    assert not must_rebuild_index(True, logs)  # it holds keys and fences the logs do not
    assert not must_rebuild_index(True, [])


# --- applying records -----------------------------------------------------------------------------


def bookie_parts() -> tuple[SimDisk, BookieLayout, EntryLogger, LedgerIndex]:
    disk = SimDisk()
    config = make_config()
    layout = layout_from_config(config)
    for directory in layout.directories():
        ensure_durable_dir(disk, directory)
    logger = EntryLogger(disk, layout.ledger_dirs, settings_from_config(config), random.Random(7))
    return disk, layout, logger, LedgerIndex.load(disk, layout.index_dir)


def _record(kind: str, ledger: int, entry: int = 0, body: bytes = b"") -> JournalRecord:
    payload = struct.pack(">qq", ledger, entry) + body if kind == "data" else body
    return JournalRecord(kind, ledger, entry, payload, 0x10, 512, 512 + 4 + len(payload))  # type: ignore[arg-type]


def test_a_replayed_ledger_gets_its_key_fence_and_entries() -> None:
    _, _, logger, index = bookie_parts()
    notes: list[str] = []
    replayer = JournalReplayer(index, logger, notes.append)
    assert replayer.apply(_record("key", 1, -0x1000, KEY)) is ReplayAction.SET_KEY
    assert replayer.apply(_record("data", 1, 0, b"zero")) is ReplayAction.RE_ADD
    assert replayer.apply(_record("data", 1, 0, b"zero")) is ReplayAction.PRESENT
    assert replayer.apply(_record("key", 1, -0x1000, b"other")) is ReplayAction.KEEP_KEY
    assert replayer.apply(_record("fence", 1, -0x2000)) is ReplayAction.FENCE
    replayer.check_invariants()
    assert index.master_key(LedgerId(1)) == KEY
    assert index.is_fenced(LedgerId(1))
    location = index.get_location(LedgerId(1), EntryId(0))
    assert location is not None
    assert logger.read_entry(LedgerId(1), EntryId(0), location).endswith(b"zero")
    assert notes == ["journal 10.txn offset 512: a second, different key for ledger 1 is ignored"]
    report = replayer.report(start_mark=NO_MARK, end_mark=NO_MARK, entries_rebuilt=None)
    assert (report.records_replayed, report.keys_set, report.fences_set) == (5, 1, 1)
    assert (report.entries_re_added, report.entries_present, report.ignored) == (1, 1, 1)
    assert not report.index_rebuilt


def test_entries_of_an_unknown_ledger_are_skipped_and_said_once() -> None:
    _, _, logger, index = bookie_parts()
    notes: list[str] = []
    replayer = JournalReplayer(index, logger, notes.append)
    for entry in range(3):
        assert replayer.apply(_record("data", 4, entry, b"x")) is ReplayAction.SKIP_UNKNOWN
    assert replayer.apply(_record("data", -1, 0, b"x")) is ReplayAction.SKIP_BAD_ID
    assert not index.has_ledger(LedgerId(4))
    assert len([note for note in notes if "ledger 4" in note]) == 1
    report = replayer.report(start_mark=NO_MARK, end_mark=NO_MARK, entries_rebuilt=7)
    assert report.skipped_unknown == 4 and report.index_rebuilt and report.entries_rebuilt == 7


def test_a_changed_entry_is_appended_again() -> None:
    _, _, logger, index = bookie_parts()
    replayer = JournalReplayer(index, logger, lambda _: None)
    replayer.apply(_record("key", 2, -0x1000, KEY))
    replayer.apply(_record("data", 2, 0, b"old"))
    first = index.get_location(LedgerId(2), EntryId(0))
    assert replayer.apply(_record("data", 2, 0, b"new")) is ReplayAction.RE_ADD
    assert index.get_location(LedgerId(2), EntryId(0)) != first


def test_a_key_longer_than_any_bookie_accepts_is_a_recovery_error() -> None:
    _, _, logger, index = bookie_parts()
    replayer = JournalReplayer(index, logger, lambda _: None)
    with pytest.raises(RecoveryError, match=r"damaged file .*more than any bookie accepts"):
        replayer.apply(_record("key", 1, -0x1000, b"k" * 1025))
    assert index.master_key(LedgerId(1)) is None


def test_recovering_an_empty_bookie_replays_nothing() -> None:
    disk, layout, logger, _ = bookie_parts()
    recovered = recover(disk, make_config(), layout, logger, lambda _: None)
    assert recovered.report.records_replayed == 0
    assert recovered.report.start_mark == recovered.report.end_mark == NO_MARK
    assert not recovered.index.persisted and not recovered.report.index_rebuilt


# --- compaction leftovers (recovery step 2) -----------------------------------------------------


def _bookie_with_a_compaction(
    phase: str, missed: int | None = None
) -> tuple[SimDisk, EntryLogId, EntryLogId, dict[tuple[int, int], bytes]]:
    """A bookie whose sealed, checkpointed log (ledgers 1, 2 and 3; ledger 2 then deleted) is
    compacted up to the end of ``phase`` ("copy" or "flush"), then the machine crashes.
    ``missed``: a live ledger the copy leaves out, as a scan stopped by damage would."""

    disk = SimDisk()
    bookie = open_bookie(disk)
    data: dict[tuple[int, int], bytes] = {}
    for entry in range(4):
        for ledger in (1, 2, 3):
            data[(ledger, entry)] = f"ledger {ledger} entry {entry}".encode()
            add_and_ack(bookie, ledger, entry, data[(ledger, entry)])
    bookie.rotate_log()
    bookie.checkpoint()
    bookie.delete_ledger(LedgerId(2))
    index = bookie._index  # the engine parts, as the GC will use them
    logger = bookie._entry_logger
    location = index.get_location(LedgerId(1), EntryId(0))
    assert location is not None
    source = location_log_id(location)
    compactor = TransactionalCompactor(disk, logger)
    compaction = compactor.copy(
        source, lambda ledger: not index.is_deleted(ledger) and ledger != missed
    )
    if phase == "flush":
        compactor.flush(compaction)
    assert compaction.new_log is not None
    disk.crash(LoseUnsynced())
    return disk, source, compaction.new_log, data


@pytest.mark.parametrize("phase", ["copy", "flush"])
def test_a_restart_undoes_a_copy_and_finishes_a_flushed_compaction(phase: str) -> None:

    disk, source, new_log, data = _bookie_with_a_compaction(phase)
    lines: list[str] = []
    bookie = open_bookie(disk, progress=lines.append)
    names = [n for d in ("/bk/ledgers0/current", "/bk/ledgers1/current") for n in disk.listdir(d)]
    assert not [n for n in names if n.endswith((".compacting", ".compacted"))], names
    finished = phase == "flush"
    assert (log_file_name(source) in names) != finished
    assert (log_file_name(new_log) in names) == finished
    said = "finished the compaction" if finished else ".log.compacting"
    assert any(said in line for line in lines)
    for (ledger, entry), body in data.items():
        if ledger == 2:
            with pytest.raises(NoLedger):
                bookie.read_entry(LedgerId(ledger), EntryId(entry))
            continue
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == body
        location = bookie._index.get_location(LedgerId(ledger), EntryId(entry))
        assert location is not None
        assert location_log_id(location) == (new_log if finished else source)
    bookie.check_invariants()
    # The index that names the new log was flushed before the source went: a crash now and
    # a restart still find every entry.
    disk.crash(LoseUnsynced())
    again = open_bookie(disk)
    for (ledger, entry), body in data.items():
        if ledger != 2:
            assert again.read_entry(LedgerId(ledger), EntryId(entry)) == body


def test_a_source_the_index_still_needs_is_kept_when_recovery_finishes_its_compaction() -> None:
    disk, source, new_log, data = _bookie_with_a_compaction("flush", missed=3)
    lines: list[str] = []
    bookie = open_bookie(disk, progress=lines.append)
    names = [n for d in ("/bk/ledgers0/current", "/bk/ledgers1/current") for n in disk.listdir(d)]
    assert not [n for n in names if n.endswith((".compacting", ".compacted"))], names
    assert log_file_name(source) in names and log_file_name(new_log) in names
    assert any(f"kept entry log {log_file_name(source)}" in line for line in lines)
    for (ledger, entry), body in data.items():
        if ledger == 2:
            continue
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == body
        location = bookie._index.get_location(LedgerId(ledger), EntryId(entry))
        assert location is not None
        assert location_log_id(location) == (source if ledger == 3 else new_log)
