"""impl/entrylog/ledger_dirs.py: DiskChecker's classification, state changes and listeners, the
choice of a directory for a new log, and the NoWritableLedgerDir message."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from impl.entrylog.ledger_dirs import DirState, LedgerDirs, classify
from impl.fs.api import DiskSpace
from impl.fs.os_backend import OsFileSystem
from spec.errors import ConfigError, NoWritableLedgerDir


class SpaceStub(OsFileSystem):
    """Real directories, with the free/total space of each directory set by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.usage_by_dir: dict[str, float] = {}

    def disk_space(self, path: str) -> DiskSpace:
        usage = self.usage_by_dir.get(path, 0.0)
        total = 1_000_000
        return DiskSpace(free_bytes=round(total * (1.0 - usage)), total_bytes=total)


def _setup(tmp_path: Path, count: int) -> tuple[SpaceStub, list[str]]:
    fs = SpaceStub()
    dirs = []
    for index in range(count):
        directory = tmp_path / f"l{index}" / "current"
        directory.mkdir(parents=True)
        dirs.append(str(directory))
    return fs, dirs


def test_classify_uses_strict_comparisons_like_disk_checker() -> None:
    assert classify(0.5, 0.90, 0.95) is DirState.WRITABLE
    assert classify(0.90, 0.90, 0.95) is DirState.WRITABLE  # not above the warn threshold
    assert classify(0.91, 0.90, 0.95) is DirState.ALMOST_FULL
    assert classify(0.95, 0.90, 0.95) is DirState.ALMOST_FULL  # not above the threshold
    assert classify(0.951, 0.90, 0.95) is DirState.FULL
    assert classify(1.0, 0.90, 0.95) is DirState.FULL


@pytest.mark.parametrize(
    ("warn", "full", "key"),
    [
        (0.9, 1.0, "diskUsageThreshold"),
        (0.9, 0.0, "diskUsageThreshold"),
        (0.0, 0.95, "diskUsageWarnThreshold"),
        (0.97, 0.95, "diskUsageWarnThreshold"),
    ],
)
def test_bad_thresholds_are_config_errors(
    tmp_path: Path, warn: float, full: float, key: str
) -> None:
    fs, dirs = _setup(tmp_path, 1)
    with pytest.raises(ConfigError, match=key):
        LedgerDirs(fs, dirs, warn_threshold=warn, threshold=full)


def test_no_dirs_or_a_repeated_dir_is_a_config_error(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 1)
    with pytest.raises(ConfigError, match="empty"):
        LedgerDirs(fs, [])
    with pytest.raises(ConfigError, match="twice"):
        LedgerDirs(fs, dirs + dirs)


def test_check_moves_dirs_between_states_and_tells_listeners_on_changes(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 3)
    ledger_dirs = LedgerDirs(fs, dirs)
    events: list[tuple[str, DirState]] = []
    ledger_dirs.add_listener(lambda d, s: events.append((d, s)))

    assert ledger_dirs.check() == dict.fromkeys(dirs, DirState.WRITABLE)
    assert events == []  # no change, no event

    fs.usage_by_dir = {dirs[0]: 0.92, dirs[1]: 0.99}
    ledger_dirs.check()
    ledger_dirs.check_invariants()
    assert events == [(dirs[0], DirState.ALMOST_FULL), (dirs[1], DirState.FULL)]
    assert ledger_dirs.writable_dirs() == [dirs[0], dirs[2]]
    assert ledger_dirs.usage(dirs[1]) == pytest.approx(0.99)

    ledger_dirs.check()
    assert len(events) == 2  # the same states again: no new event

    fs.usage_by_dir = {}
    ledger_dirs.check()
    assert events[2:] == [(dirs[0], DirState.WRITABLE), (dirs[1], DirState.WRITABLE)]
    assert ledger_dirs.writable_dirs() == dirs


def test_mark_full_removes_a_dir_until_a_check_finds_space(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 2)
    ledger_dirs = LedgerDirs(fs, dirs)
    events: list[tuple[str, DirState]] = []
    ledger_dirs.add_listener(lambda d, s: events.append((d, s)))
    ledger_dirs.mark_full(dirs[0])
    ledger_dirs.mark_full(dirs[0])
    assert events == [(dirs[0], DirState.FULL)]
    assert ledger_dirs.writable_dirs() == [dirs[1]]
    ledger_dirs.check()
    assert ledger_dirs.state(dirs[0]) is DirState.WRITABLE
    ledger_dirs.check_invariants()


def test_new_logs_go_to_writable_dirs_only(tmp_path: Path) -> None:
    # CreateNewLogTest.testEntryLogCreationWithFilledDirs for the single-log manager's choice:
    # with all but one directory full, every new log goes to the one left.
    fs, dirs = _setup(tmp_path, 10)
    ledger_dirs = LedgerDirs(fs, dirs)
    rng = random.Random(7)
    seen = {ledger_dirs.dir_for_new_log(rng) for _ in range(200)}
    assert seen == set(dirs)  # a shuffle reaches every directory
    for directory in dirs[:-1]:
        ledger_dirs.mark_full(directory)
    assert {ledger_dirs.dir_for_new_log(rng) for _ in range(20)} == {dirs[-1]}


def test_almost_full_dirs_still_take_new_logs(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 1)
    ledger_dirs = LedgerDirs(fs, dirs)
    fs.usage_by_dir = {dirs[0]: 0.93}
    ledger_dirs.check()
    assert ledger_dirs.dir_for_new_log(random.Random(0)) == dirs[0]


def test_no_writable_dir_is_a_typed_error_that_says_what_to_do(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 2)
    ledger_dirs = LedgerDirs(fs, dirs)
    fs.usage_by_dir = {dirs[0]: 0.97}
    ledger_dirs.check()
    ledger_dirs.mark_full(dirs[1])
    with pytest.raises(NoWritableLedgerDir) as info:
        ledger_dirs.dir_for_new_log(random.Random(0))
    message = str(info.value)
    assert dirs[0] in message
    assert dirs[1] in message
    assert "97.0% used" in message
    assert "diskUsageThreshold=0.95" in message
    assert "Free disk space (the next disk check" in message
    assert "add a ledger directory (stop the bookie, run `bkref dirs accept`" in message


def test_the_rng_decides_the_dir(tmp_path: Path) -> None:
    fs, dirs = _setup(tmp_path, 3)
    ledger_dirs = LedgerDirs(fs, dirs)

    class Fixed:
        def __init__(self, value: int) -> None:
            self.value = value

        def randrange(self, stop: int, /) -> int:
            assert stop == 3
            return self.value

    assert [ledger_dirs.dir_for_new_log(Fixed(i)) for i in range(3)] == dirs
