"""impl/bookie/state.py: the abstract state built from the parts (the bookie's inspect() on a
live bookie is tests/unit/impl/bookie/test_bookie.py "inspect")."""

from __future__ import annotations

import struct

import attrs
import pytest

from impl.bookie.state import EntryLogInfos, LedgerInfo, bookie_state
from impl.journal.last_mark import NO_MARK, LogMark
from models.fs.simdisk import SimDisk
from spec.errors import FsIOError
from spec.ids import EntryId, LedgerId
from tests.unit.impl.bookie.test_bookie import add_and_ack, body, open_bookie, restart
from tests.unit.impl.bookie.test_recovery import bookie_parts


def _payload(ledger: int, entry: int) -> bytes:
    return struct.pack(">qq", ledger, entry) + b"x"


def test_the_state_lists_ledgers_fences_deletions_and_marks() -> None:
    _, _, logger, index = bookie_parts()
    index.set_master_key(LedgerId(1), b"k")
    index.put_entry(LedgerId(1), EntryId(4), logger.add_entry(LedgerId(1), _payload(1, 4)))
    index.set_fenced(LedgerId(2))
    index.delete_ledger(LedgerId(3))
    logger_state = logger.state()
    infos = EntryLogInfos(logger).describe(logger_state.logs)
    state = bookie_state(index, logger_state, infos, NO_MARK, LogMark(5, 512))
    assert state.ledgers == (
        LedgerInfo(LedgerId(1), EntryId(4), False),
        LedgerInfo(LedgerId(2), None, True),
    )
    assert state.fenced_ledgers == (LedgerId(2),)
    assert state.deleted_ledgers == (LedgerId(3),)
    assert (state.last_mark, state.journal_mark) == (NO_MARK, LogMark(5, 512))
    assert [info.ledgers for info in state.entry_logs] == [(LedgerId(1),)]
    assert state.current_log_id == state.entry_logs[0].log_id


def test_a_flushed_log_is_described_once_and_then_cached() -> None:
    _, _, logger, _ = bookie_parts()
    logger.add_entry(LedgerId(1), _payload(1, 4))
    logger.rotate()
    logger.flush()
    infos = EntryLogInfos(logger)
    first = infos.describe(logger.state().logs)
    again = infos.describe(logger.state().logs)
    flushed = [info for info in first if info.state == "flushed"]
    assert flushed, first
    assert all(any(info is other for other in again) for info in flushed)
    infos.check_invariants()


def test_the_cache_invariant_catches_a_wrong_entry() -> None:
    _, _, logger, _ = bookie_parts()
    logger.add_entry(LedgerId(1), _payload(1, 4))
    logger.rotate()
    logger.flush()
    infos = EntryLogInfos(logger)
    infos.describe(logger.state().logs)
    log_id, info = next(iter(infos._flushed_infos.items()))
    infos._flushed_infos[log_id] = attrs.evolve(info, state="active")
    with pytest.raises(AssertionError):
        infos.check_invariants()


def test_a_read_error_on_an_old_log_is_raised_and_never_cached() -> None:
    # Logs of an earlier run are described once and cached; a read error must not be cached
    # as "holds nothing" (the state would then show the log empty for the rest of the run).

    disk = SimDisk()
    bookie = open_bookie(disk)
    for entry in range(30):
        add_and_ack(bookie, 1, entry, body(1, entry, 200))
    bookie.checkpoint()
    bookie = restart(disk)
    disk.fail_next("read", "/bk/ledgers")
    with pytest.raises(FsIOError, match="read"):
        bookie.inspect()
    old = [info for info in bookie.inspect().entry_logs if info.state == "flushed"]
    assert old and all(info.ledger_bytes for info in old), old
    bookie.check_invariants()
