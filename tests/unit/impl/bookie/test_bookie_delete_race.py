"""impl/bookie/bookie.py: an add in flight when its ledger is deleted (issue 10).

The add was answered ok after its ledger's delete had been answered ok, and its entry was
unreadable. Now an add whose journal fsync is not done when the delete is carried out
completes with NoLedger (spec/adapter.md, ``delete``), in every phase of the group commit;
an add already acknowledged stays acknowledged (and goes with the ledger); a restart keeps
the delete. The adapter end to end, pipelined, is tests/unit/proofs/cli/test_adapter_edges.py.
"""

from __future__ import annotations

import pytest

from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import NoLedger
from spec.ids import EntryId, LedgerId
from tests.unit.impl.bookie.test_bookie import KEY, is_done, make_config, open_bookie


@pytest.mark.parametrize("phase", ["queued", "written", "synced"])
def test_an_add_in_flight_at_its_ledgers_delete_completes_no_ledger(phase: str) -> None:
    disk = SimDisk()
    bookie = open_bookie(disk)
    other = bookie.add_entry(LedgerId(2), EntryId(0), KEY, b"kept")
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"gone")
    if phase in ("written", "synced"):
        bookie.journal_write()
    if phase == "synced":
        bookie.journal_sync()
    assert not is_done(ack)
    bookie.delete_ledger(LedgerId(1))
    bookie.journal_force()
    bookie.journal_release_acks()
    assert ack.done and isinstance(ack.error, NoLedger), ack.error
    assert "deleted while this add was in flight" in str(ack.error)
    assert other.done and other.error is None  # another ledger's add is not touched
    with pytest.raises(NoLedger):
        bookie.read_entry(LedgerId(1), EntryId(0))
    bookie.check_invariants()
    disk.crash(LoseUnsynced())
    again = open_bookie(disk, make_config())
    with pytest.raises(NoLedger):
        again.read_entry(LedgerId(1), EntryId(0))
    assert again.read_entry(LedgerId(2), EntryId(0)) == b"kept"


def test_an_add_acknowledged_before_the_delete_stays_acknowledged() -> None:
    bookie = open_bookie(SimDisk())
    ack = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"a")
    bookie.journal_force()
    assert ack.done and ack.error is None and ack.answered
    bookie.delete_ledger(LedgerId(1))
    assert ack.error is None
    with pytest.raises(NoLedger):
        bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"b")
