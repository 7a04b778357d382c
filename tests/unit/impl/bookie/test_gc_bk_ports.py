"""Ports of BookKeeper's garbage collection tests to impl/bookie/gc.py and the Bookie's GC.

Each test's docstring names the BookKeeper test it ports (CompactionTest,
GarbageCollectorThreadTest) and says what differs. BookKeeper's tests run a bookie with a
ledger manager and real time; here the bookie runs on the simulated disk, a deleted ledger is
one deleted on the bookie (bkref has no ledger manager: contract S1), "restartBookies" is a
clean shutdown and an open, and time is a ManualClock.
"""

from __future__ import annotations

import pytest

from impl.bookie.bookie import Bookie
from impl.bookie.gc import GarbageCollector, GcPolicy, Suspension, compaction_kind
from impl.clock import ManualClock
from impl.config.config import ServerConfig
from impl.fs.api import FileSystem
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import ConfigError, NoLedger
from spec.ids import EntryId, EntryLogId, LedgerId
from tests.unit.impl.bookie.test_bookie import KEY, make_config, open_bookie

#: CompactionTest: 100 entries of ENTRY_SIZE fill one entry log (logSizeLimit = 100 *
#: ENTRY_SIZE). Our records are 4 + 16 + data bytes: 990 bytes of data make 100 records and
#: the header fit in 102400 bytes, and the 101st rotate.
ENTRIES_PER_LOG = 100
DATA = b"a" * 990
LOG_SIZE_LIMIT = 102400
LEDGER_DIRS = ("/bk/ledgers0/current", "/bk/ledgers1/current")


def _config(*overrides: str) -> ServerConfig:
    """CompactionTest's base configuration (gcWaitTime 1 s, minor 0.1 every 2 s, major 0.5
    every 4 s, no preallocation), then the test's own changes."""
    return make_config(
        f"logSizeLimit={LOG_SIZE_LIMIT}",
        "writeBufferSizeBytes=65536",
        "gcWaitTime=1000",
        "minorCompactionThreshold=0.1",
        "majorCompactionThreshold=0.5",
        "minorCompactionInterval=2",
        "majorCompactionInterval=4",
        "entryLogFilePreallocationEnabled=false",
        *overrides,
    )


def _open(fs: FileSystem, clock: ManualClock, *overrides: str) -> Bookie:
    return open_bookie(fs, _config(*overrides), clock=clock)


def prepare_data(bookie: Bookie, logs: int, change_num: bool) -> dict[int, int]:
    """CompactionTest.prepareData: per entry log, 2 entries of ledger 1, 28 of ledger 2 and
    70 of ledger 3 (with ``change_num``, ledger 2 one fewer and ledger 3 one more in each
    next log). Returns the entries written per ledger."""
    num1, num3 = 2, int(ENTRIES_PER_LOG * 0.7)
    num2 = ENTRIES_PER_LOG - num3 - num1
    written = {1: 0, 2: 0, 3: 0}
    for _ in range(logs):
        for ledger, count in ((1, num1), (2, num2), (3, num3)):
            for _ in range(count):
                entry = EntryId(written[ledger])
                bookie.add_entry(LedgerId(ledger), entry, KEY, DATA)
                written[ledger] += 1
        if change_num:
            num2, num3 = num2 - 1, num3 + 1
    bookie.journal_force()
    return written


def log_names(disk: SimDisk) -> set[str]:
    return {name for d in LEDGER_DIRS for name in disk.listdir(d) if ".log" in name}


def restart(disk: SimDisk, bookie: Bookie, clock: ManualClock, *overrides: str) -> Bookie:
    """restartBookies(c -> ...): a clean shutdown and an open with the new settings."""
    bookie.shutdown()
    return _open(disk, clock, *overrides)


def verify_ledger(bookie: Bookie, ledger: int, entries: int) -> None:
    for entry in range(entries):
        assert bookie.read_entry(LedgerId(ledger), EntryId(entry)) == DATA, (ledger, entry)


def _data_of_three_logs(
    change_num: bool, *overrides: str
) -> tuple[SimDisk, ManualClock, Bookie, dict[int, int]]:
    disk, clock = SimDisk(), ManualClock()
    bookie = _open(disk, clock)
    written = prepare_data(bookie, 3, change_num)
    assert bookie.inspect().current_log_id == 2  # 100 records per log: logs 0, 1, 2
    bookie = restart(disk, bookie, clock, *overrides)
    assert {"0.log", "1.log", "2.log"} <= log_names(disk)
    return disk, clock, bookie, written


def test_minor_compaction() -> None:
    """CompactionTest.testMinorCompaction: major disabled (threshold 0), ledgers 2 and 3
    deleted, a forced GC runs minor compaction only; logs 0, 1 and 2 are gone and ledger 1
    reads back from the compaction logs."""
    disk, clock, bookie, written = _data_of_three_logs(
        False,
        "majorCompactionThreshold=0",
        "gcWaitTime=60000",
        "minorCompactionInterval=120000",
        "majorCompactionInterval=240000",
    )
    major_before, minor_before = bookie.gc_last_times_ms
    bookie.delete_ledger(LedgerId(2))
    bookie.delete_ledger(LedgerId(3))
    clock.advance_ms(1)
    stats = bookie.gc(force=True)
    assert stats.compaction == "minor"
    assert stats.logs_compacted == 3 and stats.entries_moved == 6
    assert stats.bytes_reclaimed > 0
    major_after, minor_after = bookie.gc_last_times_ms
    assert major_after == major_before  # major compaction did not run
    assert minor_after > minor_before
    assert not {"0.log", "1.log", "2.log"} & log_names(disk)
    verify_ledger(bookie, 1, written[1])
    bookie.check_invariants()


def test_major_compaction() -> None:
    """CompactionTest.testMajorCompaction: minor disabled, prepareData with changeNum,
    ledgers 1 and 3 deleted: every log holds 26-28% of ledger 2, below 0.5; major runs and
    moves the minor time too; logs 0-2 are gone and ledger 2 reads back."""
    disk, clock, bookie, written = _data_of_three_logs(
        True,
        "minorCompactionThreshold=0",
        "gcWaitTime=60000",
        "minorCompactionInterval=120000",
        "majorCompactionInterval=240000",
    )
    major_before, minor_before = bookie.gc_last_times_ms
    bookie.delete_ledger(LedgerId(1))
    bookie.delete_ledger(LedgerId(3))
    clock.advance_ms(1)
    stats = bookie.gc(force=True)
    assert stats.compaction == "major"
    assert stats.logs_compacted == 3 and stats.entries_moved == 28 + 27 + 26
    assert bookie.gc_last_times_ms[0] > major_before
    assert bookie.gc_last_times_ms[1] > minor_before
    assert not {"0.log", "1.log", "2.log"} & log_names(disk)
    verify_ledger(bookie, 2, written[2])


def test_major_compaction_above_threshold() -> None:
    """CompactionTest.testMajorCompactionAboveThreshold: ledgers 1 and 2 deleted leave 70%
    of each log live, above the major threshold 0.5: a forced GC runs major compaction and
    compacts nothing; logs 0, 1 and 2 stay."""
    disk, clock, bookie, written = _data_of_three_logs(False)
    major_before, minor_before = bookie.gc_last_times_ms
    bookie.delete_ledger(LedgerId(1))
    bookie.delete_ledger(LedgerId(2))
    clock.advance_ms(1)
    stats = bookie.gc(force=True)
    assert stats.compaction == "major"
    assert (stats.logs_compacted, stats.logs_deleted, stats.entries_moved) == (0, 0, 0)
    assert bookie.gc_last_times_ms[0] > major_before
    assert bookie.gc_last_times_ms[1] > minor_before
    assert {"0.log", "1.log", "2.log"} <= log_names(disk)
    verify_ledger(bookie, 3, written[3])


def test_disable_compaction() -> None:
    """CompactionTest.testDisableCompaction: both thresholds 0 disable compaction; an
    unforced cycle after deleting ledgers 2 and 3 compacts nothing and stamps no time; the
    logs (each still holding ledger 1) stay."""
    disk, clock, bookie, _ = _data_of_three_logs(
        False, "minorCompactionThreshold=0", "majorCompactionThreshold=0"
    )
    times = bookie.gc_last_times_ms
    bookie.delete_ledger(LedgerId(2))
    bookie.delete_ledger(LedgerId(3))
    clock.advance_ms(10_000_000)
    stats = bookie.gc()
    assert stats.compaction == "none" and stats.logs_compacted == 0
    assert bookie.gc_last_times_ms == times
    assert {"0.log", "1.log"} <= log_names(disk)


def test_force_gc_when_disable_compaction_configuration_settings() -> None:
    """CompactionTest.testForceGarbageCollectionWhenDisableCompactionConfigurationSettings:
    forceAllowCompaction with thresholds 0.5 / 0.2 and both intervals 0: neither kind is
    enabled, both may be forced, and the thresholds are kept."""
    policy = GcPolicy.create(
        force_allow_compaction=True,
        major_threshold=0.5,
        minor_threshold=0.2,
        major_interval_s=0,
        minor_interval_s=0,
    )
    assert not policy.enable_major and not policy.enable_minor
    assert policy.force_major_allowed and policy.force_minor_allowed
    assert (policy.major_threshold, policy.minor_threshold) == (0.5, 0.2)


@pytest.mark.parametrize("force_allow_when_disabled", [True, False])
def test_force_garbage_collection(force_allow_when_disabled: bool) -> None:
    """CompactionTest.testForceGarbageCollection: a forced GC compacts (major, which stamps
    both times) whether compaction is enabled by its intervals or only allowed by
    forceAllowCompaction."""
    settings: tuple[str, ...]
    if force_allow_when_disabled:
        settings = (
            "minorCompactionInterval=0",
            "majorCompactionInterval=0",
            "forceAllowCompaction=true",
            "majorCompactionThreshold=0.5",
            "minorCompactionThreshold=0.2",
        )
    else:
        settings = ("minorCompactionInterval=120000", "majorCompactionInterval=240000")
    disk, clock = SimDisk(), ManualClock()
    bookie = _open(disk, clock, "gcWaitTime=60000", *settings)
    start = clock.monotonic_ns() // 1_000_000
    clock.advance_ms(1)
    assert bookie.gc(force=True).compaction == "major"
    major, minor = bookie.gc_last_times_ms
    assert major > start and minor > start


#: CompactionTest.testForceGarbageCollectionWhenDiskIsFull: triggerGC(force, suspendMajor,
#: suspendMinor) -> which compaction counter moves.
FORCED_GC_TABLE = [
    ((True, True, True), "none"),
    ((True, False, False), "major"),
    ((True, False, True), "major"),
    ((True, True, False), "minor"),
]


@pytest.mark.parametrize("force_allow_when_disabled", [True, False])
@pytest.mark.parametrize(("flags", "kind"), FORCED_GC_TABLE)
def test_forced_gc_table(
    force_allow_when_disabled: bool, flags: tuple[bool, bool, bool], kind: str
) -> None:
    """CompactionTest.testForceGarbageCollectionWhenDiskIsFull, both configurations: the
    forced GC's kind from (force, suspendMajor, suspendMinor). (The flags a bookie's full or
    almost full directories give are tested in test_gc.py.)"""
    if force_allow_when_disabled:
        policy = GcPolicy.create(
            minor_interval_s=0,
            major_interval_s=0,
            force_allow_compaction=True,
            major_threshold=0.5,
            minor_threshold=0.2,
        )
    else:
        policy = GcPolicy.create(minor_interval_s=120000, major_interval_s=240000)
    force, suspend_major, suspend_minor = flags
    decided = compaction_kind(
        policy,
        force=force,
        suspend_major=suspend_major,
        suspend_minor=suspend_minor,
        now_ms=0,
        last_major_ms=0,
        last_minor_ms=0,
    )
    assert decided == kind


def test_suspend_garbage_collection() -> None:
    """CompactionTest.testSuspendGarbageCollection on the injected clock: gcWaitTime 500 ms,
    minor every 1 s, major every 2 s. Cycles compact when due; suspending major stops major
    (minor goes on); suspending minor too stops both; resuming brings both back."""
    policy = GcPolicy.create(gc_wait_ms=500, minor_interval_s=1, major_interval_s=2)
    clock = ManualClock()
    gc = GarbageCollector(policy, clock)

    def cycle(flags: Suspension) -> str:
        clock.advance_ms(500)  # one gcWaitTime between cycles
        kind = gc.decide(flags, force=False)
        gc.begin(kind, 0, 0)
        gc.end()
        return kind

    free = Suspension()
    kinds = [cycle(free) for _ in range(12)]
    assert "major" in kinds and "minor" in kinds
    no_major = Suspension(suspend_major=True)
    major_time = gc.last_major_ms
    kinds = [cycle(no_major) for _ in range(12)]
    assert "major" not in kinds and "minor" in kinds
    assert gc.last_major_ms == major_time
    minor_time = gc.last_minor_ms
    kinds = [cycle(Suspension(suspend_major=True, suspend_minor=True)) for _ in range(12)]
    assert set(kinds) == {"none"} and gc.last_minor_ms == minor_time
    kinds = [cycle(free) for _ in range(12)]
    assert "major" in kinds and "minor" in kinds


def test_compaction_safety() -> None:
    """CompactionTest.testCompactionSafety (BOOKKEEPER-530/664): compaction must not put
    into the index a location whose log is not durable. Ledgers 1, 2 and 3 in log 0,
    ledgers 2 and 3 deleted, log 0 compacted away; an add to ledger 4, then a crash that
    loses everything unsynced: entry (1, 1) still reads."""
    disk, clock = SimDisk(), ManualClock()
    config = (
        f"logSizeLimit={1024 + 3 * (4 + 1024)}",
        "minorCompactionThreshold=0.7",
        "majorCompactionThreshold=0",
        "minorCompactionInterval=1",
        "majorCompactionInterval=10",
        "gcWaitTime=100",
    )
    bookie = _open(disk, clock, *config)
    data = b"e" * (1024 - 16)
    for ledger, entry in ((1, 1), (2, 1), (2, 2), (3, 2)):
        bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, data)
    bookie.journal_force()
    bookie = restart(disk, bookie, clock, *config)
    assert "0.log" in log_names(disk)
    bookie.delete_ledger(LedgerId(2))
    bookie.delete_ledger(LedgerId(3))
    clock.advance_ms(1001)
    stats = bookie.gc()
    assert stats.compaction == "minor" and stats.logs_compacted >= 1, stats
    assert "0.log" not in log_names(disk)
    bookie.add_entry(LedgerId(4), EntryId(1), KEY, data)
    disk.crash(LoseUnsynced())
    bookie = _open(disk, clock, *config)
    assert bookie.read_entry(LedgerId(1), EntryId(1)) == data
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(2), EntryId(1))


def test_extract_meta_from_entry_logs() -> None:
    """GarbageCollectorThreadTest.testExtractMetaFromEntryLogs: ledger 1 in the first log,
    ledger 2 across the first three, ledger 3 in the third (active) one. With every ledger
    live the flushed logs' metadata is extracted and nothing goes; with ledger 2 deleted the
    log that is 100% ledger 2 goes; with all deleted every flushed log goes but the current
    one; once that one rolls and is flushed, it goes too. (bkref's cycle deletes at step 3
    what BookKeeper's extractMetaFromEntryLogs drops on the spot.)"""
    disk, clock = SimDisk(), ManualClock()
    bookie = _open(disk, clock, "logSizeLimit=20000")

    def add(ledger: int, entry: int, size: int) -> int:
        bookie.add_entry(LedgerId(ledger), EntryId(entry), KEY, b"d" * size)
        log_id = bookie.inspect().current_log_id
        assert log_id is not None
        return log_id

    log1 = EntryLogId(add(1, 1, 5000))
    assert add(2, 1, 5000) == log1
    log2 = EntryLogId(add(2, 2, 15000))
    assert log2 > log1
    log3 = add(2, 3, 15000)
    assert log3 > log2
    assert add(3, 1, 1000) == log3
    bookie.journal_force()
    bookie.checkpoint()

    stats = bookie.gc_begin()
    assert stats.logs_deleted == 0
    assert set(bookie.gc_metadata()) == {log1, log2}  # not the current log
    assert bookie.gc_metadata()[log1][0] == bookie.gc_metadata()[log1][1]  # all live

    bookie.delete_ledger(LedgerId(2))
    stats = bookie.gc_begin()
    assert stats.logs_deleted == 1  # log 2 was all ledger 2
    assert set(bookie.gc_metadata()) == {log1}
    assert f"{log2:x}.log" not in log_names(disk)

    bookie.delete_ledger(LedgerId(1))
    bookie.delete_ledger(LedgerId(3))
    assert bookie.gc_begin().logs_deleted == 1
    assert bookie.gc_metadata() == {}
    assert f"{log3:x}.log" in log_names(disk)  # the current log is never a candidate

    bookie.add_entry(LedgerId(5), EntryId(0), KEY, b"r" * 25000)  # rolls log 3
    assert bookie.inspect().current_log_id != log3
    bookie.journal_force()
    bookie.checkpoint()
    assert bookie.gc_begin().logs_deleted == 1
    assert f"{log3:x}.log" not in log_names(disk)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"minor_threshold": 1.5}, "minorCompactionThreshold=1.5"),
        ({"major_threshold": 1.01}, "majorCompactionThreshold=1.01"),
        ({"gc_wait_ms": 600_000, "minor_interval_s": 10}, "minorCompactionInterval=10"),
        ({"gc_wait_ms": 600_000, "major_interval_s": 599}, "majorCompactionInterval=599"),
        ({"minor_interval_s": 86400, "major_interval_s": 3600}, "minor must run more often"),
        ({"minor_threshold": 0.8, "major_threshold": 0.5}, "minor must run more often"),
        ({"minor_interval_s": 3600, "major_interval_s": 3600}, "minor must run more often"),
        ({"rate_by_entries": 0}, "compactionRateByEntries=0"),
    ],
)
def test_garbage_collector_thread_refuses(settings: dict[str, float], words: str) -> None:
    """GarbageCollectorThread's constructor: "Invalid minor/major compaction threshold",
    "Too short minor/major compaction interval", "Invalid minor/major compaction settings"
    (minor below major in both), and Guava's refusal of a zero rate."""
    with pytest.raises(ConfigError, match=words):
        GcPolicy.create(**settings)  # type: ignore[arg-type]


def test_garbage_collector_thread_accepts_disabled_kinds_out_of_range() -> None:
    """GarbageCollectorThread checks a kind only when it is enabled (interval > 0 and
    threshold > 0): a disabled kind may have any threshold and interval."""
    policy = GcPolicy.create(minor_threshold=1.5, minor_interval_s=0, major_interval_s=-1)
    assert not policy.enable_minor and not policy.enable_major
    policy = GcPolicy.create(major_threshold=0, major_interval_s=1)
    assert not policy.enable_major and policy.enable_minor
