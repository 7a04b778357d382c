"""The independent disk reader (proofs/harness/disk_view.py) on entry logs, journals and
index files built by hand from the spec pages, and the disk check (proofs/harness/
disk_check.py) failing on each kind of damage."""

from __future__ import annotations

import struct

import pytest

from models.bookie.bookie import BookieModel, Divergence, ModelConfig
from models.entrylog.manager import LogModel
from models.fs.simdisk import SimDisk
from proofs.harness.disk_check import DiskCheck
from proofs.harness.disk_view import (
    DiskView,
    journal_boundaries,
    read_ledgers_map,
    record_at,
    scan_ledger_bytes,
)
from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement
from spec.crash import LoseUnsynced
from spec.operations import OK, Add
from spec.state import MapView

LEDGER_DIRS = ("/l0", "/l1")


def header(map_offset: int = 0, count: int = 0) -> bytes:
    return b"BKLO" + struct.pack(">iqi", 1, map_offset, count) + bytes(1004)


def record(ledger: int, entry: int, body: bytes) -> bytes:
    return struct.pack(">iqq", 16 + len(body), ledger, entry) + body


def ledgers_map(pairs: dict[int, int]) -> bytes:
    body = struct.pack(">qqi", -1, -2, len(pairs))
    body += b"".join(struct.pack(">qq", k, v) for k, v in pairs.items())
    return struct.pack(">i", len(body)) + body


def worked_example(*, sealed: bool = True) -> bytes:
    """spec/format/entry_log.md "Worked example"."""
    records = record(1, 0, b"hello") + record(2, 0, b"bk")
    if not sealed:
        return header() + records
    return header(1071, 2) + records + ledgers_map({1: 25, 2: 22})


def test_the_worked_example_scans_and_maps_as_the_page_says() -> None:
    data = worked_example()
    assert len(data) == 1127
    assert scan_ledger_bytes(data) == {1: 25, 2: 22}
    found = read_ledgers_map(data)
    assert found.sealed and found.ledgers == {1: 25, 2: 22}
    assert record_at(data, 1028) == (1, 0) and record_at(data, 1053) == (2, 0)
    assert isinstance(record_at(data, 1060), str)


def test_a_torn_tail_and_padding() -> None:
    data = worked_example(sealed=False)
    assert scan_ledger_bytes(data[:1060]) == {1: 25}  # cut at 1060: an 11-byte torn tail
    padded = header() + bytes(40) + record(3, 1, b"x")
    assert scan_ledger_bytes(padded) == {3: 21}
    assert not read_ledgers_map(data).sealed


def test_a_map_that_disagrees_with_the_header_is_a_problem() -> None:
    data = header(1071, 3) + worked_example()[1024:]
    found = read_ledgers_map(data)
    assert found.sealed and found.ledgers is None and "header says 3" in str(found.problem)


def test_each_log_file_gives_the_map_view_the_state_reports() -> None:
    """LogFile.map_view: the header and map as spec/state.py's MapView (the harness puts
    them in every recorded state as ``ledgers_maps``)."""
    disk = SimDisk()
    disk.mkdir("/l")
    disk.mkdir("/l/current")
    files = {
        "0.log": worked_example(),
        "1.log": worked_example(sealed=False),
        "2.log": header(1071, 3) + worked_example()[1024:],
    }
    for name, data in files.items():
        handle = disk.open(f"/l/current/{name}", create=True)
        handle.pwrite(0, data)
        handle.close()
    view = DiskView(disk, ("/l",), "/j")
    assert view.ledgers_maps() == (
        MapView(0, True, ((1, 25), (2, 22))),
        MapView(1, False, None),
        MapView(2, True, None),  # sealed, but the map disagrees with the header's count
    )


def test_the_harness_records_each_log_s_map_from_the_disk() -> None:
    harness = Refinement(InProcessBookie(SMALL_SETTINGS), SMALL_SETTINGS)
    for entry in range(30):
        step = harness.run(Add(1 + entry % 2, entry // 2, b"k", b"x" * 100))
    assert step.state is not None and step.state.ledgers_maps is not None
    logs = {view.log_id: view for view in step.state.entry_logs}
    maps = {view.log_id: view for view in step.state.ledgers_maps}
    assert set(maps) == set(logs) and len(logs) > 1
    for log_id, log in logs.items():
        expected = (False, None) if log.state == "active" else (True, log.ledger_bytes)
        assert (maps[log_id].sealed, maps[log_id].ledger_bytes) == expected


def test_journal_boundaries_skip_padding() -> None:
    head = b"BKLG" + struct.pack(">i", 6) + bytes(504)
    rec = struct.pack(">iqq", 17, 1, 0) + b"a"
    pad = struct.pack(">ii", -256, 10) + bytes(10)
    data = head + rec + pad + rec
    assert journal_boundaries(data) == {512, 533, 551, 572}
    assert 530 not in journal_boundaries(data)


def disk_with(files: dict[str, bytes], *, sync: bool = True) -> SimDisk:
    disk = SimDisk()
    for directory in ("/j", "/j/current", *LEDGER_DIRS, *(f"{d}/current" for d in LEDGER_DIRS)):
        disk.mkdir(directory)
        disk.fsync_dir(directory.rsplit("/", 1)[0] or "/")
    for path, data in files.items():
        handle = disk.open(path, create=True)
        handle.pwrite(0, data)
        if sync:
            handle.fsync()
            disk.fsync_dir(path.rsplit("/", 1)[0])
    return disk


def test_the_view_reads_current_and_durable_contents_incrementally() -> None:
    disk = disk_with({"/l1/current/1.log": worked_example(sealed=False)})
    view = DiskView(disk, LEDGER_DIRS, "/j")
    first = view.logs()[1]
    assert first.current == first.durable == {1: 25, 2: 22} and not first.sealed
    assert view.logs()[1] is first  # nothing changed: nothing re-read
    handle = disk.open("/l1/current/1.log")
    handle.append(record(1, 1, b"more"))
    second = view.logs()[1]
    assert second.current == {1: 49, 2: 22} and second.durable == {1: 25, 2: 22}
    disk.crash(LoseUnsynced())
    assert view.logs()[1].current == {1: 25, 2: 22}


def model_with(log: LogModel) -> BookieModel:
    model = BookieModel(ModelConfig(log_size_limit_bytes=1 << 20))
    model.logs.logs = {log.log_id: log}
    model.logs.current = log.log_id if log.state == "active" else None
    model.logs.max_seen_id = log.log_id
    return model


def check(disk: SimDisk, model: BookieModel, ledgers: tuple[int, ...] = (1, 2)) -> None:
    checker = DiskCheck(DiskView(disk, LEDGER_DIRS, "/j"))
    checker.run_starts = False
    checker.named = set(ledgers)
    checker.check(0, Add(ledgers[0], 0, b"k", b""), OK, model)


def test_a_rotated_log_holding_what_the_model_wrote_passes() -> None:
    disk = disk_with({"/l0/current/1.log": worked_example()})
    check(disk, model_with(LogModel(1, "rotated", {1: 25, 2: 22})))


@pytest.mark.parametrize(
    ("data", "log", "ledgers", "message"),
    [
        # a record lost below the counters
        (worked_example(), LogModel(1, "flushed", {1: 50, 2: 22}, {1: 50, 2: 22}), (1, 2), "holds"),
        # a record from nowhere (or written twice)
        (worked_example(), LogModel(1, "rotated", {1: 25}), (1, 2), "wrote only 0"),
        # bytes of a ledger no add named
        (worked_example(), LogModel(1, "rotated", {1: 25, 2: 22}), (1,), "which no add named"),
        # a rotated log whose header points to no map
        (
            worked_example(sealed=False),
            LogModel(1, "rotated", {1: 25, 2: 22}),
            (1, 2),
            "not sealed",
        ),
        # a sealed log whose map differs from its scan
        (
            header(1071, 2) + worked_example()[1024:1071] + ledgers_map({1: 25, 2: 23}),
            LogModel(1, "rotated", {1: 25, 2: 22}),
            (1, 2),
            "its ledgers map says",
        ),
        # the active log holding more than the model wrote
        (worked_example(sealed=False), LogModel(1, "active", {1: 25}), (1, 2), "wrote only"),
    ],
)
def test_each_kind_of_damage_is_a_divergence(
    data: bytes, log: LogModel, ledgers: tuple[int, ...], message: str
) -> None:
    disk = disk_with({"/l0/current/1.log": data})
    with pytest.raises(Divergence, match=message):
        check(disk, model_with(log), ledgers)


def test_a_flushed_log_that_is_not_durable_is_a_divergence() -> None:
    disk = disk_with({"/l0/current/1.log": worked_example()}, sync=False)
    log = LogModel(1, "flushed", {1: 25, 2: 22}, {1: 25, 2: 22})
    with pytest.raises(Divergence, match="the model made 25 durable"):
        check(disk, model_with(log))


def test_the_active_log_may_lag_until_a_checkpoint() -> None:
    disk = disk_with({"/l0/current/1.log": header() + record(1, 0, b"hello")})
    check(disk, model_with(LogModel(1, "active", {1: 25, 2: 22})))
    # After a checkpoint (all written is durable) the file must hold all of it.
    with pytest.raises(Divergence, match="the model made 22 durable"):
        check(disk, model_with(LogModel(1, "active", {1: 25, 2: 22}, {1: 25, 2: 22})))


def index_segment(entries: dict[tuple[int, int], int]) -> bytes:
    """A full segment, seq 1, one block per ledger (spec/format/ledger_index.md)."""
    import zlib

    body = b""
    for ledger in sorted({led for led, _ in entries}):
        pairs = sorted((e, loc) for (led, e), loc in entries.items() if led == ledger)
        body += struct.pack(">qHHI", ledger, 0, 0, len(pairs))
        body += b"".join(struct.pack(">qq", e, loc) for e, loc in pairs)
    ledgers = len({led for led, _ in entries})
    head = struct.pack(
        ">4sIIIQQQI", b"BKIX", 1, 1, ledgers, 1, len(entries), len(body), zlib.crc32(body)
    )
    return head + struct.pack(">I", zlib.crc32(head)) + body


def test_the_durable_index_must_point_at_durable_records() -> None:
    good = {(1, 0): (1 << 32) | 1028, (2, 0): (1 << 32) | 1053}
    files = {
        "/l1/current/1.log": worked_example(),
        "/l0/current/bkref-index/0000000000000001.seg": index_segment(good),
    }
    disk = disk_with({})
    disk.mkdir("/l0/current/bkref-index")
    disk.fsync_dir("/l0/current")
    for path, data in files.items():
        handle = disk.open(path, create=True)
        handle.pwrite(0, data)
        handle.fsync()
        disk.fsync_dir(path.rsplit("/", 1)[0])
    DiskCheck(DiskView(disk, LEDGER_DIRS, "/j")).check_durable(0)
    bad = {(1, 0): (1 << 32) | 1053}
    handle = disk.open("/l0/current/bkref-index/0000000000000001.seg")
    handle.truncate(0)
    handle.pwrite(0, index_segment(bad))
    handle.fsync()
    with pytest.raises(Divergence, match="the durable bytes there hold the record of 2:0"):
        DiskCheck(DiskView(disk, LEDGER_DIRS, "/j")).check_durable(0)


def test_the_durable_last_mark_must_lie_on_a_journal_record_boundary() -> None:
    head = b"BKLG" + struct.pack(">i", 6) + bytes(504)
    journal = head + struct.pack(">iqq", 17, 1, 0) + b"a"
    files = {"/j/current/5.txn": journal, "/l0/current/lastMark": struct.pack(">qq", 5, 533)}
    DiskCheck(DiskView(disk_with(files), LEDGER_DIRS, "/j")).check_durable(0)
    files["/l0/current/lastMark"] = struct.pack(">qq", 5, 520)
    with pytest.raises(Divergence, match="not a record boundary"):
        DiskCheck(DiskView(disk_with(files), LEDGER_DIRS, "/j")).check_durable(0)
    files["/l0/current/lastMark"] = struct.pack(">qq", 6, 512)
    with pytest.raises(Divergence, match="not durable"):
        DiskCheck(DiskView(disk_with(files), LEDGER_DIRS, "/j")).check_durable(0)
