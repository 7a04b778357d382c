"""Journal replay (impl/journal/replay.py, spec/format/journal.md "Replay"): BookieJournalTest's
journals built independently from the page by tests/unit/bk_journal_layout.py, every version,
invalid records refused or skipped, marks, missing journals, records cut short, and every
chunk size against the page's writer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl.format.journal as fmt
from impl.format.journal import JournalRecord
from impl.journal.last_mark import NO_MARK, LogMark
from impl.journal.replay import replay
from impl.limits import Limits
from spec.errors import RecoveryError
from tests.unit import bk_journal_layout as bk
from tests.unit.impl.journal.journal_files import (
    JDIR,
    T0,
    new_disk,
    put_journal,
    record_ids,
    replayed,
)

# --- replay: BookieJournalTest and friends --------------------------------------------------


def _v5_journal(entries: int, corrupt_length: bool = False) -> bk.JournalBuilder:
    """BookieJournalTest.writeV5Journal: key, entries 1..N, padding after each, a fence."""
    builder = bk.JournalBuilder(version=5)
    builder.key(1, b"testV5Journal")
    builder.flush()
    for entry in range(1, entries + 1):
        body = b"X" * entry
        if corrupt_length:
            builder.raw(b"\xff\xff\xff\xff")  # length -1
            builder.raw(bk.entry_payload(1, entry, body))
        else:
            builder.entry(1, entry, body)
        builder.flush()
    builder.fence(1)
    builder.flush()
    return builder


def _v4_journal(entries: int, invalid_at: int | None = None) -> bk.JournalBuilder:
    """BookieJournalTest.writeV4Journal(WithInvalidRecord): key, entries 1..N, fence; the
    invalid variant writes length -1 for entry ``invalid_at``."""
    builder = bk.JournalBuilder(version=4)
    builder.key(1, b"testPasswd")
    for entry in range(1, entries + 1):
        payload = bk.entry_payload(1, entry, b"X" * 1024)
        if entry == invalid_at:
            builder.raw(b"\xff\xff\xff\xff" + payload)
        else:
            builder.entry(1, entry, b"X" * 1024)
    builder.fence(1)
    return builder


def _expected(builder: bk.JournalBuilder, journal_id: int) -> list[JournalRecord]:
    """The records replay must yield for a journal the independent builder wrote."""
    kinds: dict[str, fmt.RecordKind] = {
        "data": "data",
        "key": "key",
        "fence": "fence",
        "lac": "lac",
    }
    return [
        JournalRecord(kinds[w.kind], w.ledger, w.entry, w.payload, journal_id, w.offset, w.end)
        for w in builder.replayable()
    ]


def test_v5_journal_replays_key_entries_and_fence_in_order() -> None:
    disk = new_disk()
    builder = _v5_journal(2 * 512)
    put_journal(disk, T0, builder.file_bytes(zero_tail=4096))
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False)
    records = list(run)
    assert records == _expected(builder, T0)
    assert [r.kind for r in records] == ["key"] + ["data"] * 1024 + ["fence"]
    assert records[0].payload == b"testV5Journal"
    assert records[-2].entry_id == 1024  # entry N+1 does not exist
    assert run.end_mark == LogMark(T0, len(builder.data))  # stops at the zero tail


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_pre_v5_journals_replay(version: int) -> None:
    disk = new_disk()
    builder = bk.JournalBuilder(version=version)
    if version >= 3:
        builder.key(1, b"testPasswd")
    for entry in range(1, 101):
        builder.entry(1, entry, b"JournalTestData")
    if version >= 4:
        builder.fence(1)
    put_journal(disk, T0, builder.file_bytes(zero_tail=512))
    assert replayed(disk) == _expected(builder, T0)


def test_a_zeroed_last_length_loses_that_entry_only() -> None:
    # BookieJournalTest.testTruncatedInLenJournal: zeros over the last record's length.
    disk = new_disk()
    builder = bk.JournalBuilder(version=2)
    for entry in range(1, 101):
        builder.entry(1, entry, b"X" * 1024)
    data = bytearray(builder.file_bytes(zero_tail=4096))
    last = builder.written[-1]
    data[last.offset : last.offset + 2048] = bytes(2048)
    put_journal(disk, T0, bytes(data))
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False)
    assert [r.entry_id for r in run] == list(range(1, 100))
    assert run.end_mark == LogMark(T0, last.offset)


def test_zeros_inside_the_last_entry_replay_as_zeros() -> None:
    # BookieJournalTest.testTruncatedInEntryJournal: the entry is there, its bytes are junk.
    disk = new_disk()
    builder = bk.JournalBuilder(version=2)
    for entry in range(1, 101):
        builder.entry(1, entry, b"X" * 1024)
    data = bytearray(builder.file_bytes(zero_tail=4096))
    end = builder.written[-1].end
    data[end - 0x300 : end] = bytes(0x300)
    put_journal(disk, T0, bytes(data))
    records = replayed(disk)
    assert [r.entry_id for r in records] == list(range(1, 101))
    assert records[-1].payload[-0x300:] == bytes(0x300)
    assert records[-1].payload[:16] == bk.entry_payload(1, 100, b"")


def test_a_negative_length_refuses_to_start() -> None:
    # BookieInitializationTest.testNegativeLengthEntryBookieShutdown.
    disk = new_disk()
    put_journal(disk, T0, _v5_journal(5, corrupt_length=True).file_bytes())
    with pytest.raises(RecoveryError, match="negative length -1") as info:
        replay(disk, JDIR, NO_MARK, skip_invalid=False)  # refused before any record is yielded
    assert "skipReplayJournalInvalidRecord=true" in str(info.value)
    assert "18bcfe56800.txn" in str(info.value)


def test_skip_invalid_skips_the_rest_of_that_journal_only() -> None:
    # BookieJournalTest.testJournalScanInvalidRecordWithSkipFlag, plus a later journal.
    disk = new_disk()
    broken = _v4_journal(100, invalid_at=99)
    put_journal(disk, T0, broken.file_bytes())
    later = bk.JournalBuilder(version=6)
    later.entry(2, 0, b"after")
    later.flush()
    put_journal(disk, T0 + 1, later.file_bytes())
    with pytest.raises(RecoveryError, match="invalid record"):
        replayed(disk)
    run = replay(disk, JDIR, NO_MARK, skip_invalid=True)
    records = list(run)
    assert record_ids(records) == [("key", 1, -0x1000)] + [("data", 1, e) for e in range(1, 99)] + [
        ("data", 2, 0)
    ]
    assert any("the rest of this journal" in note for note in run.notes)
    assert run.end_mark == LogMark(T0 + 1, 1024)


def test_an_all_junk_journal_refuses_to_start_with_a_clear_error() -> None:
    # BookieJournalTest.testAllJunkJournal (which passes either way in BookKeeper).
    disk = new_disk()
    put_journal(disk, T0, bk.junk())
    with pytest.raises(RecoveryError) as info:
        replayed(disk)
    message = str(info.value)
    assert "length 1249209963" in message
    assert "junk" in message
    assert "does not start with BKLG" in message
    assert replayed(disk, skip=True) == []


def test_junk_after_a_header_refuses_to_start() -> None:
    # BookieJournalTest.testJunkEndedJournal: "JunkJunkJunk" after a V2 header.
    disk = new_disk()
    put_journal(disk, T0, bk.header(2) + b"JunkJunkJunk" + bytes(512))
    with pytest.raises(RecoveryError, match="junk"):
        replayed(disk)


@pytest.mark.parametrize(
    "data",
    [b"", b"BK", bk.header(2), bk.header(5), bk.header(6) + bytes(4096), bytes(4096)],
    ids=["empty", "3-bytes", "v2-header", "v5-header", "v6-zero-tail", "zeros"],
)
def test_empty_and_header_only_journals_start_fine(data: bytes) -> None:
    # BookieJournalTest.testEmptyJournal and testHeaderOnlyJournal.
    disk = new_disk()
    put_journal(disk, T0, data)
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False)
    assert list(run) == []
    assert run.end_mark.journal_id == T0


def test_a_missing_marked_journal_is_a_clear_startup_error() -> None:
    disk = new_disk()
    put_journal(disk, T0 + 5, bk.header(6))
    with pytest.raises(RecoveryError, match=f"Recovery log {T0} is missing at {JDIR}"):
        replay(disk, JDIR, LogMark(T0, 1024), skip_invalid=True)
    with pytest.raises(RecoveryError, match="Recovery log"):
        replay(new_disk(), JDIR, LogMark(T0, 512), skip_invalid=False)


def test_replay_starts_at_the_mark_and_skips_older_journals() -> None:
    disk = new_disk()
    older = bk.JournalBuilder(version=6)
    older.entry(9, 0, b"old")
    older.flush()
    put_journal(disk, T0 - 1, older.file_bytes())
    marked = bk.JournalBuilder(version=6)
    for entry in range(4):
        marked.entry(1, entry, b"m")
        marked.flush()
    put_journal(disk, T0, marked.file_bytes())
    later = bk.JournalBuilder(version=6)
    later.entry(2, 0, b"l")
    later.flush()
    put_journal(disk, T0 + 1, later.file_bytes())
    start = marked.written[2].offset
    run = replay(disk, JDIR, LogMark(T0, start), skip_invalid=False)
    assert run.journal_ids == [T0, T0 + 1]
    assert record_ids(list(run)) == [("data", 1, 2), ("data", 1, 3), ("data", 2, 0)]
    assert run.end_mark == LogMark(T0 + 1, 1024)
    assert record_ids(replayed(disk, LogMark(T0, 100))) == record_ids(
        replayed(disk, LogMark(T0, 512))
    )


def test_no_journal_and_no_mark_replays_nothing() -> None:
    run = replay(new_disk(), JDIR, NO_MARK, skip_invalid=False)
    assert list(run) == []
    assert run.end_mark == NO_MARK


def test_end_mark_is_known_only_after_the_iteration() -> None:
    run = replay(new_disk(), JDIR, NO_MARK, skip_invalid=False)
    with pytest.raises(AssertionError, match="iterated to the end"):
        _ = run.end_mark


@pytest.mark.parametrize("skip", [False, True])
def test_an_unknown_version_refuses_whatever_the_flag(skip: bool) -> None:
    disk = new_disk()
    put_journal(disk, T0, b"BKLG" + (7).to_bytes(4, "big") + bytes(504))
    with pytest.raises(RecoveryError, match="format version 7"):
        replayed(disk, skip=skip)


def test_unknown_meta_records_are_skipped_with_a_note() -> None:
    disk = new_disk()
    builder = bk.JournalBuilder(version=6)
    builder.entry(1, 0, b"a")
    builder.other(1, -0x10000, b"from a newer bookie")
    builder.other(1, fmt.METAENTRY_ID_FORCE_LEDGER, b"")
    builder.lac(1, b"\x00\x01")
    builder.flush()
    put_journal(disk, T0, builder.file_bytes())
    lines: list[str] = []
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False, progress=lines.append)
    assert list(run) == _expected(builder, T0)
    assert sum("unknown kind" in line for line in lines) == 2
    assert lines == run.notes
    assert lines[0].startswith(f"replaying journal {JDIR}/18bcfe56800.txn: version 6")


@pytest.mark.parametrize(
    ("version", "raw", "reason"),
    [
        (3, bk.record(bk.fence_payload(1)), "fence records exist from version 4"),
        (2, bk.record(bk.key_payload(1, b"k")), "ledger key records exist from version 3"),
        (6, bk.record(b"short"), "too short"),
        (4, bk.padding(8 + 20), "padding record in a version 4 journal"),
        (6, b"\xff\xff\xff\x00\xff\xff\xff\xf0" + bytes(64), "padding record of -16 bytes"),
        (6, (10**9).to_bytes(4, "big") + bytes(64), "junk"),
    ],
)
def test_invalid_records_refuse_or_skip_the_rest(version: int, raw: bytes, reason: str) -> None:
    disk = new_disk()
    builder = bk.JournalBuilder(version=version)
    builder.entry(1, 0, b"before")
    builder.raw(raw)
    builder.entry(1, 1, b"after")
    put_journal(disk, T0, builder.file_bytes())
    with pytest.raises(RecoveryError, match=reason):
        replayed(disk)
    assert record_ids(replayed(disk, skip=True)) == [("data", 1, 0)]


@pytest.mark.parametrize("cut", range(1, 12))
def test_a_padding_or_record_cut_short_ends_replay_cleanly(cut: int) -> None:
    disk = new_disk()
    builder = bk.JournalBuilder(version=6)
    builder.entry(1, 0, b"a" * 30)
    end = builder.flush()
    builder.entry(1, 1, b"b")
    put_journal(disk, T0, builder.file_bytes()[: 512 + 4 + 16 + 30 + cut])
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False)
    assert record_ids(list(run)) == [("data", 1, 0)]
    assert run.end_mark == LogMark(T0, 512 + 4 + 16 + 30)
    assert end == 1024


records_strategy = st.lists(
    st.tuples(st.sampled_from(["entry", "key", "fence", "lac", "flush"]), st.binary(max_size=300)),
    max_size=40,
)


@given(
    items=records_strategy,
    version=st.sampled_from([5, 6]),
    chunk=st.integers(min_value=1, max_value=700),
    tail=st.sampled_from([0, 3, 512]),
    cut=st.integers(min_value=0, max_value=50),
)
@settings(max_examples=150, deadline=None)
def test_replay_yields_exactly_the_whole_records_before_the_end(
    items: list[tuple[str, bytes]], version: int, chunk: int, tail: int, cut: int
) -> None:
    builder = bk.JournalBuilder(version=version, alignment=512)
    for number, (kind, body) in enumerate(items):
        if kind == "entry":
            builder.entry(number % 3, number, body)
        elif kind == "key":
            builder.key(number % 3, body)
        elif kind == "fence":
            builder.fence(number % 3)
        elif kind == "lac" and version >= 6:
            builder.lac(number % 3, body)
        else:
            builder.flush()
    data = builder.file_bytes(zero_tail=tail)
    data = data[: max(512, len(data) - cut)] if tail == 0 else data
    expected = [record for record in _expected(builder, T0) if record.end_offset <= len(data)]
    disk = new_disk()
    put_journal(disk, T0, data)
    run = replay(disk, JDIR, NO_MARK, skip_invalid=False, limits=Limits(replay_chunk_bytes=chunk))
    records = list(run)
    assert records == expected
    assert run.records_replayed == len(expected)
    assert run.end_mark.offset >= (expected[-1].end_offset if expected else 512)
