"""impl/limits.py: a Limits refuses a bound of zero or less (naming the field) and bounds that
contradict each other; TEST_LIMITS is smaller than LIMITS wherever it differs; and each part
of the engine obeys the Limits it was given, not the production values (docs/design.md,
"Limits").

The bounds already covered by a test of their own module are checked there, through a
Limits: the index merge (tests/unit/impl/index/test_ledger_index.py), journal replay across
chunks (tests/unit/impl/journal/test_replay.py), pending-ack pruning
(tests/unit/impl/bookie/test_ack.py), rebuild progress (tests/unit/impl/index/test_rebuild.py)
and the adapter's in-flight bound (tests/unit/impl/server/test_dispatcher.py).
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
from collections.abc import Callable

import attrs
import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.driver import NS_PER_MS, BookieDriver
from impl.clock import ManualClock
from impl.entrylog.logger import EntryLogger
from impl.entrylog.reader import peek_header
from impl.format.entry_log import (
    LEDGERS_MAP_ENTRY_SIZE,
    LEDGERS_MAP_HEADER_SIZE,
    LEDGERS_MAP_MAX_BATCH_SIZE,
)
from impl.fs.api import FileHandle, FileSystem
from impl.journal.last_mark import NO_MARK
from impl.journal.replay import replay
from impl.limits import LIMITS, SCAN_WINDOW_MIN_BYTES, TEST_LIMITS, TEST_SETTINGS, Limits
from impl.server.protocol import Rejection, RequestBounds, parse_request
from impl.server.stdio import serve
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import BadRequest, BookieIOError
from spec.ids import EntryId, LedgerId, Location, location_log_id
from tests.unit import bk_journal_layout as bk
from tests.unit.fs_wrappers import ForwardingFs
from tests.unit.impl.bookie.test_bookie import KEY, add_and_ack, body, make_config, open_bookie
from tests.unit.impl.bookie.test_driver import LockedFs
from tests.unit.impl.entrylog.test_buffered_channel import FaultyHandle
from tests.unit.impl.entrylog.test_logger import add, payload, read, settings_for, sim_disk
from tests.unit.impl.journal.journal_files import JDIR, T0, new_disk, put_journal
from tests.unit.impl.server.fakes import BOUNDS, FakeBookie
from tests.unit.impl.server.fakes import add as add_request

FIELDS = [field.name for field in attrs.fields(Limits)]


# --- the object ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("value", [0, -1])
def test_a_bound_of_zero_or_less_is_refused_naming_the_field(name: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"Limits.{name} must be positive, got {value}"):
        Limits(**{name: value})


def test_every_field_is_named_with_its_unit_or_kind_last() -> None:
    endings = ("_bytes", "_ms", "_max", "_min", "_logs")
    assert [name for name in FIELDS if not name.endswith(endings)] == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"scan_chunk_bytes": SCAN_WINDOW_MIN_BYTES - 1}, "scan_chunk_bytes"),
        ({"master_key_max_bytes": LIMITS.master_key_max_bytes + 1}, "master_key_max_bytes"),
        ({"group_wait_min_ms": 600, "journal_idle_ms": 500}, "group_wait_min_ms"),
        ({"log_size_limit_max_bytes": 1 << 32}, "log_size_limit_max_bytes"),
        ({"ledgers_map_batch_max": LEDGERS_MAP_MAX_BATCH_SIZE + 1}, "ledgers_map_batch_max"),
    ],
)
def test_check_invariants_refuses_bounds_that_contradict_each_other(
    changes: dict[str, int], named: str
) -> None:
    with pytest.raises(AssertionError, match=named):
        Limits(**changes)


def test_check_invariants_runs_on_an_object_changed_behind_its_back() -> None:
    limits = Limits()
    limits.check_invariants()
    object.__setattr__(limits, "scan_chunk_bytes", 1)  # bypasses the frozen class
    with pytest.raises(AssertionError, match="scan_chunk_bytes"):
        limits.check_invariants()


def test_the_smallest_scan_window_is_accepted() -> None:
    assert Limits(scan_chunk_bytes=SCAN_WINDOW_MIN_BYTES).scan_chunk_bytes == 20


def test_test_limits_are_smaller_than_limits_on_every_field_they_set() -> None:
    changed = [name for name in FIELDS if getattr(TEST_LIMITS, name) != getattr(LIMITS, name)]
    assert len(changed) >= 8  # guards against a TEST_LIMITS that sets nothing
    bigger = [name for name in changed if getattr(TEST_LIMITS, name) > getattr(LIMITS, name)]
    assert bigger == []


def test_test_settings_are_bookkeeper_keys_the_configuration_accepts() -> None:
    from impl.config.config import load_config

    config = load_config(None, "test", [f"{key}={value}" for key, value in TEST_SETTINGS.items()])
    assert config.log_size_limit_bytes == int(TEST_SETTINGS["logSizeLimit"])
    assert config.write_buffer_size_bytes == int(TEST_SETTINGS["writeBufferSizeBytes"])
    assert config.journal_max_group_wait_ms == 0


# --- entry logs: read handles, scan window, lastId ----------------------------------------------


class HandleWatchingFs(ForwardingFs):
    """Wraps every read-only handle of a file named ``*<suffix>`` to count how many are opened
    and still open, and what they read (``lastId`` is read through a read-only handle too:
    not counted)."""

    def __init__(self, inner: FileSystem, suffix: str = ".log") -> None:
        super().__init__(inner)
        self.suffix = suffix
        self.read_handles: list[FaultyHandle] = []

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        handle = self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)
        if not (read_only and path.endswith(self.suffix)):
            return handle
        watched = FaultyHandle(handle)
        self.read_handles.append(watched)
        return watched

    def open_now(self) -> int:
        return sum(1 for handle in self.read_handles if "close" not in handle.calls)

    def preads(self) -> int:
        return sum(handle.calls.count("pread") for handle in self.read_handles)


def _three_closed_logs() -> tuple[SimDisk, list[str], list[tuple[int, Location]]]:
    """Two entries in each of three logs that a first logger rotated and closed: the first
    two are sealed (a ledgers map), the last has none."""
    disk, dirs = sim_disk(1)
    logger = EntryLogger(disk, dirs, settings_for(log_size_limit_bytes=1150), random.Random(0))
    added = [(entry, add(logger, 1, entry, body_bytes=40)) for entry in range(6)]
    logger.close()
    assert len({location_log_id(location) for _, location in added}) == 3
    return disk, dirs, added


def _reopen(disk: SimDisk, dirs: list[str], limits: Limits) -> tuple[EntryLogger, HandleWatchingFs]:
    fs = HandleWatchingFs(disk)
    logger = EntryLogger(fs, dirs, settings_for(), random.Random(1), limits=limits)
    return logger, fs


@pytest.mark.parametrize(("handles_max", "opens"), [(2, 4), (LIMITS.read_handles_max, 3)])
def test_the_entry_logger_keeps_at_most_read_handles_max_handles(
    handles_max: int, opens: int
) -> None:
    disk, dirs, added = _three_closed_logs()
    logger, fs = _reopen(disk, dirs, Limits(read_handles_max=handles_max))
    first_of_each_log = [added[0], added[2], added[4], added[0]]  # the first log twice
    for entry, location in first_of_each_log:
        assert read(logger, 1, entry, location) == payload(1, entry, 40)
        logger.check_invariants()
        assert fs.open_now() <= handles_max
    assert len(fs.read_handles) == opens  # with 2 handles, the first log was evicted


def test_the_entry_logger_scans_in_windows_of_scan_chunk_bytes() -> None:
    disk, dirs = sim_disk(1)
    first = EntryLogger(disk, dirs, settings_for(), random.Random(0))
    log_id = location_log_id(add(first, 1, 0, body_bytes=40))
    for entry in range(1, 10):
        add(first, 1, entry, body_bytes=40)
    first.close()  # the active log gets no ledgers map: its metadata comes from a scan
    results, preads = [], []
    for limits in (LIMITS, Limits(scan_chunk_bytes=SCAN_WINDOW_MIN_BYTES)):
        logger, fs = _reopen(disk, dirs, limits)
        found = logger.extract_metadata(log_id)
        assert found.source == "scan"
        results.append(found.metadata)
        preads.append(fs.preads())
    assert results[0] == results[1]
    # The header, then one 1 MiB window for all ten records, or one 20-byte window each.
    assert preads == [2, 11]


@pytest.mark.parametrize(("batch_max", "records"), [(3, 3), (LIMITS.ledgers_map_batch_max, 1)])
def test_the_entry_logger_writes_map_records_of_ledgers_map_batch_max_ledgers(
    batch_max: int, records: int
) -> None:
    """Seven ledgers in a log: three map records of at most three ledgers with batch_max 3,
    one with BookKeeper's 10,000; either map reads back whole."""
    disk, dirs = sim_disk(1)
    logger = EntryLogger(
        disk, dirs, settings_for(), random.Random(0), limits=Limits(ledgers_map_batch_max=batch_max)
    )
    log_id = location_log_id(add(logger, 1, 0))
    for ledger in range(2, 8):
        add(logger, ledger, 0)
    logger.rotate()
    sealed, found = logger.ledgers_map(log_id)
    assert sealed and found is not None and sorted(found) == list(range(1, 8))
    assert logger.extract_metadata(log_id).source == "map"
    path = logger.find_log(log_id)
    assert path is not None
    handle = disk.open(path, read_only=True)
    header = peek_header(handle)
    assert header is not None
    map_bytes = handle.size() - header.ledgers_map_offset
    handle.close()
    assert map_bytes == records * LEDGERS_MAP_HEADER_SIZE + 7 * LEDGERS_MAP_ENTRY_SIZE
    logger.close()


def test_the_entry_logger_ignores_a_last_id_longer_than_last_id_file_max_bytes() -> None:
    last_id = b"1f\n" + b"\n" * 10  # 13 bytes: an id, then blank lines
    first_logs = []
    for limits in (LIMITS, Limits(last_id_file_max_bytes=12)):
        disk, dirs = sim_disk(1)
        handle = disk.open(f"{dirs[0]}/lastId", create=True)
        handle.pwrite(0, last_id)
        handle.close()
        logger = EntryLogger(disk, dirs, settings_for(), random.Random(0), limits=limits)
        first_logs.append(location_log_id(add(logger, 1, 0)))
    assert first_logs == [0x20, 0]  # after lastId's id, or (garbage) the first id


# --- journal replay -----------------------------------------------------------------------------


def test_journal_replay_reads_replay_chunk_bytes_at_a_time_and_whole_longer_records() -> None:
    disk = new_disk()
    builder = bk.JournalBuilder(version=6, alignment=512)
    builder.key(1, b"k")
    bodies = [b"s" * 10, b"L" * 2000, b"s" * 10, b"L" * 700]  # two records above a chunk
    for entry, data in enumerate(bodies):
        builder.entry(1, entry, data)
    put_journal(disk, T0, builder.file_bytes())
    replays, preads = [], []
    for limits in (LIMITS, Limits(replay_chunk_bytes=64)):
        fs = HandleWatchingFs(disk, suffix=".txn")
        run = replay(fs, JDIR, NO_MARK, skip_invalid=False, limits=limits)
        replays.append(list(run))
        preads.append(fs.preads())
    assert replays[0] == replays[1]
    assert [record.payload[16:] for record in replays[1][1:]] == bodies
    # The version, one 4 MiB chunk and the end; or the version, a 64-byte chunk, the 2000-byte
    # record whole, a chunk, the 700-byte record whole and the end. Plus, before either, the
    # survey of where the scan will stop (impl/journal/replay.py, ``_survey``): the version,
    # then one chunk, or with 64-byte chunks a chunk after each record it steps over.
    assert preads == [3 + 3, 6 + 4]


# --- the bookie hands its Limits to the parts it builds -----------------------------------------


def _segments(disk: SimDisk, bookie: Bookie) -> list[str]:
    return [name for name in disk.listdir(bookie.layout.index_dir) if name.endswith(".seg")]


@pytest.mark.parametrize(("limits", "most"), [(Limits(index_segments_max=2), 2), (LIMITS, 4)])
def test_the_bookie_index_merges_at_the_index_segments_max_it_was_given(
    limits: Limits, most: int
) -> None:
    disk = SimDisk()
    bookie = open_bookie(disk, limits=limits)
    assert bookie.limits is limits
    counts = []
    for entry in range(3):
        add_and_ack(bookie, 1, entry, b"e")
        bookie.checkpoint()
        counts.append(len(_segments(disk, bookie)))
    assert max(counts) == most, counts  # the recovery checkpoint's, then one per checkpoint


def test_the_bookie_refuses_keys_above_its_master_key_max_bytes() -> None:
    limits = Limits(master_key_max_bytes=len(KEY))
    bookie = open_bookie(SimDisk(), limits=limits)
    add_and_ack(bookie, 1, 0, b"e")
    with pytest.raises(BadRequest, match=f"above the maximum {len(KEY)}"):
        bookie.add_entry(LedgerId(2), EntryId(0), KEY + b"!", b"e")
    with pytest.raises(BadRequest, match=f"above the maximum {len(KEY)}"):
        bookie.fence(LedgerId(2), KEY + b"!")
    longer = open_bookie(SimDisk())  # production limits: accepted
    add_and_ack(longer, 2, 0, b"e")


def _crashed_with_journal_to_replay() -> SimDisk:
    """A disk whose journal holds five forced adds after lastMark (no checkpoint)."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(5):
        add_and_ack(bookie, 1, entry, body(1, entry, size=100))
    disk.crash(LoseUnsynced())
    return disk


def test_the_bookie_replays_its_journal_in_the_replay_chunk_bytes_it_was_given() -> None:
    preads = []
    for limits in (LIMITS, Limits(replay_chunk_bytes=64)):
        fs = HandleWatchingFs(_crashed_with_journal_to_replay(), suffix=".txn")
        bookie = open_bookie(fs, limits=limits)
        assert bookie.recovery.entries_re_added == 5
        preads.append(fs.preads())
    # One chunk (and the version and the end), in the survey and in the scan, and the
    # version for the check of lastMark (at the header's end since the start's recovery
    # checkpoint); or a read per record at least.
    assert preads[0] <= 7 < preads[1], preads


def test_the_bookie_rebuilds_its_index_with_the_limits_it_was_given() -> None:
    runs = []
    for limits in (LIMITS, Limits(rebuild_progress_every_logs=2)):
        disk = SimDisk()
        bookie = open_bookie(disk, make_config("logSizeLimit=1200"))
        for entry in range(8):
            add_and_ack(bookie, 1, entry, body(1, entry, size=100))
        bookie.shutdown()
        for name in _segments(disk, bookie):  # the index is gone: rebuilt from the logs
            disk.unlink(f"{bookie.layout.index_dir}/{name}")
        for ledger_dir in bookie.layout.ledger_dirs:  # as in a BookKeeper directory: a
            disk.unlink(f"{ledger_dir}/lastMark")  # bkref lastMark would refuse the loss,
        disk.unlink(f"{bookie.layout.journal_dir}/bkref-coverage")  # and so would this
        lines: list[str] = []
        reopened = open_bookie(disk, progress=lines.append, limits=limits)
        assert reopened.recovery.index_rebuilt
        assert reopened.read_entry(LedgerId(1), EntryId(7)) == body(1, 7, size=100)
        runs.append([line for line in lines if "entry logs read" in line])
    assert runs[0] == []
    assert runs[1][:2] == [
        "index rebuild: 2/8 entry logs read, 2 entries indexed",
        "index rebuild: 4/8 entry logs read, 4 entries indexed",
    ]


# --- the driver ----------------------------------------------------------------------------------


def _driver(limits: Limits, *settings: str) -> tuple[Bookie, BookieDriver, ManualClock]:
    clock = ManualClock()
    fs = LockedFs(SimDisk())
    config = make_config(*settings)
    bookie = Bookie.open(fs, config, clock=clock, rng=random.Random(3))
    return bookie, BookieDriver(bookie, clock, config, limits=limits), clock


def test_the_journal_thread_sleeps_as_its_limits_say() -> None:
    limits = Limits(group_wait_min_ms=3, journal_idle_ms=40)
    for given, (idle_ms, least_ms) in ((limits, (40, 3)), (LIMITS, (500, 1))):
        bookie, driver, _clock = _driver(given, "journalMaxGroupWaitMSec=0")
        assert driver._journal_sleep_ns() == idle_ms * NS_PER_MS  # nothing queued
        bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"x")  # due at once (no group wait)
        assert driver._journal_sleep_ns() == least_ms * NS_PER_MS
        driver.check_invariants()
        bookie.shutdown()


@pytest.mark.parametrize(("tick_ms", "wakes"), [(5, True), (3_600_000, False)])
def test_the_maintenance_thread_wakes_at_the_tick_it_was_given(tick_ms: int, wakes: bool) -> None:
    limits = Limits(maintenance_tick_ms=tick_ms, journal_idle_ms=tick_ms)
    bookie, driver, clock = _driver(limits, "flushInterval=600000")
    driver.start()
    threading.Event().wait(0.05)  # the thread is asleep for min(10 minutes, one tick)
    clock.advance_ms(600_000)  # a checkpoint is due, on the clock only
    for _ in range(100 if wakes else 6):
        if driver.checkpoints:
            break
        threading.Event().wait(0.05)
    assert (driver.checkpoints > 0) == wakes  # an hour's tick sleeps through it
    driver.stop()
    bookie.shutdown()


def test_stop_waits_for_each_thread_as_long_as_thread_join_timeout_ms() -> None:
    limits = Limits(thread_join_timeout_ms=50, maintenance_tick_ms=1)
    bookie, driver, clock = _driver(limits, "flushInterval=1")
    fs = bookie._fs
    assert isinstance(fs, LockedFs)
    driver.start()
    with fs.lock:
        clock.advance_ms(5)  # a checkpoint is due: the maintenance thread blocks in it
        threading.Event().wait(0.1)
        started = time.monotonic()
        with pytest.raises(BookieIOError, match="did not stop in time"):
            driver.stop()
        assert time.monotonic() - started < 10  # 50 ms for the stuck thread, not 30 s
    bookie.shutdown()


# --- the adapter server --------------------------------------------------------------------------


def _serve_in_thread(
    stdin: bytes, bookie: FakeBookie, limits: Limits, shutdown: Callable[[], None]
) -> tuple[threading.Thread, io.BytesIO]:
    out = io.BytesIO()

    def run() -> None:
        serve(
            bookie,
            start=lambda: None,
            shutdown=shutdown,
            bounds=BOUNDS,
            stdin=io.BytesIO(stdin),
            out=out,
            log=lambda _line: None,
            limits=limits,
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_the_adapter_stops_reading_at_in_flight_max() -> None:
    adds = [
        json.dumps(add_request(number, 1, number, b"d")).encode() + b"\n" for number in range(3)
    ]
    bookie = FakeBookie(auto_complete=False)
    thread, _out = _serve_in_thread(
        b"".join(adds), bookie, Limits(in_flight_max=2), bookie.shutdown
    )
    thread.join(0.3)
    assert thread.is_alive() and bookie.calls == ["add_entry", "add_entry"]  # waits at 2
    bookie.pending[0].complete()
    thread.join(10)
    assert not thread.is_alive() and bookie.calls == ["add_entry"] * 3 + ["shutdown"]


def test_the_adapter_waits_for_answers_in_flight_as_long_as_drain_timeout_ms() -> None:
    line = json.dumps(add_request(1, 1, 0, b"d")).encode() + b"\n"
    bookie = FakeBookie(auto_complete=False)  # its Ack never completes: nothing to drain
    started = time.monotonic()
    thread, out = _serve_in_thread(line, bookie, Limits(drain_timeout_ms=50), lambda: None)
    thread.join(30)
    assert time.monotonic() - started < 5  # 50 ms, not the production 10 s
    answer = json.loads(out.getvalue().decode().splitlines()[-1])
    assert answer["id"] == 1 and answer["error"] == "io_error"


def test_the_adapter_refuses_keys_above_the_master_key_max_bytes_of_its_limits() -> None:
    bounds = RequestBounds.from_max_sane_entry_size(1000, Limits(master_key_max_bytes=8))
    assert bounds.key_max_bytes == 8
    assert RequestBounds.from_max_sane_entry_size(1000).key_max_bytes == LIMITS.master_key_max_bytes
    request = json.dumps(add_request(1, 1, 0, b"d", key=b"k" * 9))
    rejection = parse_request(request, bounds)
    assert isinstance(rejection, Rejection)
    assert "more than the 8 allowed" in rejection.message


# --- the checks run with TEST_LIMITS and TEST_SETTINGS -------------------------------------------


def test_the_refinement_harness_and_the_crash_check_open_the_bookie_with_test_limits() -> None:
    from proofs.crash.bookie_check import crash_settings
    from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie

    assert {key: SMALL_SETTINGS[key] for key in TEST_SETTINGS} == TEST_SETTINGS
    for settings in (SMALL_SETTINGS, crash_settings()):
        sut = InProcessBookie(settings)
        assert sut.bookie is not None and sut.bookie.limits is TEST_LIMITS
