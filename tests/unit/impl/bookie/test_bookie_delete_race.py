"""impl/bookie/bookie.py: an add in flight when its ledger is deleted (issue 10).

The add was answered ok after its ledger's delete had been answered ok, and its entry was
unreadable. Now an add whose journal fsync is not done when the delete is carried out
completes with NoLedger (spec/adapter.md, ``delete``), in every phase of the group commit;
an add already acknowledged stays acknowledged (and goes with the ledger); a restart keeps
the delete. The adapter end to end, pipelined, is tests/unit/proofs/cli/test_adapter_edges.py.
"""

from __future__ import annotations

import pytest

from impl.format.names import DELETED_FILE_NAME
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import BookieIOError, NoLedger
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


@pytest.mark.parametrize("failing", ["fsync", "read"])
def test_a_delete_whose_tombstone_may_be_durable_acknowledges_no_later_add(failing: str) -> None:
    """The delete's tombstone was written and a later step of its write failed (its fsync,
    the read-back): the delete may survive a crash, so the bookie fails (refuses writes,
    serves reads) and the ledger's add in flight is answered io_error though its journal
    fsync comes; after a crash the ledger is deleted or whole, never short of an ack. Until
    the main job found it, the bookie served on and acknowledged the add, which the
    surviving tombstone then took (tests/quality: ServingOnAfterAnUncertainTombstoneBookie)."""
    disk = SimDisk()
    bookie = open_bookie(disk)
    acked = bookie.add_entry(LedgerId(1), EntryId(0), KEY, b"acked")
    bookie.journal_force()
    assert acked.done and acked.error is None
    in_flight = bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"in flight")
    disk.fail_next(failing, match=lambda path: path.endswith(DELETED_FILE_NAME))
    with pytest.raises(BookieIOError, match="may or may not be deleted"):
        bookie.delete_ledger(LedgerId(1))
    bookie.journal_force()  # the add's fsync comes all the same
    assert in_flight.done and isinstance(in_flight.error, BookieIOError)
    with pytest.raises(BookieIOError, match=r"refuses writes|stopped accepting writes"):
        bookie.add_entry(LedgerId(2), EntryId(0), KEY, b"refused")
    assert bookie.read_entry(LedgerId(1), EntryId(0)) == b"acked"  # reads are served
    disk.crash(LoseUnsynced())
    again = open_bookie(disk, make_config())
    survived: bytes | None
    try:
        survived = again.read_entry(LedgerId(1), EntryId(0))
    except NoLedger:
        survived = None  # the delete held: the ledger is gone whole
    assert survived in (b"acked", None)
