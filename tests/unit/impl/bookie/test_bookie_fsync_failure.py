"""What a failed journal fsync means for acknowledged adds, under both behaviours of the
simulated disk (models/fs/simdisk.py, "Injected failures"): the bookie itself fails the group
and acknowledges nothing, so it loses nothing under either; a journal that retries the fsync
and acknowledges loses acknowledged adds, and one kind of retry only where the failed fsync
keeps the bytes readable (ext4, XFS)."""

from __future__ import annotations

import contextlib

import pytest

from impl.journal.journal import Journal
from models.fs.simdisk import SimDisk
from spec.errors import BookieIOError, NoEntry, NoLedger
from spec.fs import FsyncFailure
from spec.ids import EntryId, LedgerId
from tests.quality import bookie_variants
from tests.unit.impl.bookie.test_bookie import JOURNAL, KEY, add_and_ack, open_bookie, restart

MODES = [FsyncFailure.REVERT, FsyncFailure.KEEP]


def acked_then_crashed(disk: SimDisk) -> bool:
    """Add entry 0 (acknowledged), fail the journal's next fsync, add entry 1 and force; then
    crash (losing everything unsynced), restart and say whether entry 1 was acknowledged and
    is gone. Entry 0 must survive in every case."""
    bookie = open_bookie(disk)
    add_and_ack(bookie, 1, 0, b"zero")
    ack = bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"one")
    disk.fail_next("fsync", JOURNAL)
    with contextlib.suppress(BookieIOError):  # the unchanged bookie fails the group
        bookie.journal_force()
    acked = ack.done and ack.error is None
    after = restart(disk)
    assert after.read_entry(LedgerId(1), EntryId(0)) == b"zero"
    try:
        after.read_entry(LedgerId(1), EntryId(1))
    except (NoEntry, NoLedger):
        return acked
    return False


@pytest.mark.parametrize("mode", MODES)
def test_the_bookie_acknowledges_nothing_a_failed_fsync_covered(mode: FsyncFailure) -> None:
    assert not acked_then_crashed(SimDisk(fsync_failure=mode))


@pytest.mark.parametrize("mode", MODES)
def test_a_simple_retry_loses_an_acknowledged_add_in_both_modes(
    mode: FsyncFailure, monkeypatch: pytest.MonkeyPatch
) -> None:
    # revert: the group's bytes vanished with the failure, the retry syncs nothing and the
    # position moves past a hole; keep: the bytes are readable but never written back.
    sync = bookie_variants.journal_simply_retrying_a_failed_fsync(Journal._sync)
    monkeypatch.setattr(Journal, "_sync", sync)
    assert acked_then_crashed(SimDisk(fsync_failure=mode))


@pytest.mark.parametrize(
    ("mode", "lost"), [(FsyncFailure.REVERT, False), (FsyncFailure.KEEP, True)]
)
def test_a_retry_that_trusts_the_readable_bytes_loses_only_under_keep(
    mode: FsyncFailure, lost: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    write, sync = bookie_variants.journal_retrying_a_failed_fsync(Journal._write, Journal._sync)
    monkeypatch.setattr(Journal, "_write", write)
    monkeypatch.setattr(Journal, "_sync", sync)
    assert acked_then_crashed(SimDisk(fsync_failure=mode)) is lost
