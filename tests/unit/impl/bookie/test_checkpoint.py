"""impl/bookie/checkpoint.py: the Checkpointer's rules on their own (the order of its effects on
disk, through a bookie, is tests/unit/impl/bookie/test_bookie.py "the checkpoint's order")."""

from __future__ import annotations

import threading

import pytest

from impl.bookie.checkpoint import Checkpointer
from impl.bookie.layout import BookieLayout
from impl.entrylog.logger import EntryLogger
from impl.format.names import LAST_MARK_FILE_NAME
from impl.fs.api import join
from impl.index.ledger_index import LedgerIndex
from impl.journal.last_mark import LogMark, read_last_mark
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from tests.unit.impl.bookie.test_recovery import bookie_parts

START = LogMark(0x10, 512)


def _checkpointer() -> tuple[SimDisk, BookieLayout, Checkpointer]:
    disk, layout, logger, index = bookie_parts()
    return disk, layout, _make(disk, layout, logger, index)


def _make(
    disk: SimDisk, layout: BookieLayout, logger: EntryLogger, index: LedgerIndex
) -> Checkpointer:
    return Checkpointer(disk, layout.ledger_dirs, threading.RLock(), logger, index, START)


def test_the_post_replay_checkpoint_writes_last_mark_even_when_it_did_not_move() -> None:
    disk, layout, checkpointer = _checkpointer()
    with checkpointer.lock:
        checkpointer.complete(START, None)
    disk.crash(LoseUnsynced())
    for directory in layout.ledger_dirs:  # every ledger directory gets the file
        assert disk.exists(join(directory, LAST_MARK_FILE_NAME)), directory
    assert read_last_mark(disk, list(layout.ledger_dirs)) == START
    assert checkpointer.last_mark == START


def test_a_checkpoint_persists_the_new_mark_durably() -> None:
    disk, layout, checkpointer = _checkpointer()
    later = LogMark(0x11, 1024)
    with checkpointer.lock:
        checkpointer.complete(later, None)
    disk.crash(LoseUnsynced())
    assert read_last_mark(disk, list(layout.ledger_dirs)) == later
    assert checkpointer.last_mark == later
    checkpointer.check_invariants()


def test_last_mark_never_moves_back() -> None:
    _, _, checkpointer = _checkpointer()
    with checkpointer.lock, pytest.raises(AssertionError, match="would move back"):
        checkpointer.complete(LogMark(0x10, 0), None)
    assert checkpointer.last_mark == START


def test_complete_runs_under_the_checkpoint_lock_only() -> None:
    _, _, checkpointer = _checkpointer()
    with pytest.raises(AssertionError, match="checkpoint lock"):
        checkpointer.complete(START, None)


def test_the_invariant_catches_a_mark_older_than_the_start() -> None:
    _, _, checkpointer = _checkpointer()
    checkpointer._last_mark = LogMark(1, 0)  # what a stale checkpoint would leave
    with pytest.raises(AssertionError):
        checkpointer.check_invariants()
