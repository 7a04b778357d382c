"""The ledger sub-model: master keys, fences, entries and deletions, each with how sure the
model is that it would survive a crash.

Spec pages: spec/adapter.md (what add, read, fence and delete answer), spec/properties.md properties
1-4. The words used throughout:

- an entry is ``pending`` from the moment its add is accepted until its ack, ``durable``
  once acknowledged (or once seen again after a crash: recovery makes what it finds durable),
  ``failed`` when its add or its ack failed with io_error (the bookie may or may not have
  kept it; seeing it now proves nothing about a crash), and ``maybe`` after a crash that came
  while it was pending or failed: it may or may not be there, until a read or the recovered
  state shows which;
- a fence is ``pending``, ``durable``, ``failed`` or ``maybe`` in the same way;
- a ledger's key is set by the first accepted add or fence; it is sure to survive once an
  add or fence of the ledger is acknowledged (its key record is journaled first); before
  that a crash may take the whole ledger with it;
- a deletion is durable when ``delete`` returns, and ``maybe`` when the delete failed or
  was interrupted.

Entry ids may come in any order (striped ensembles write every n-th id; a client may send
them out of order) and may be sent again (a client retrying an add): a re-send with the same
data is the same entry, pending again unless it is already durable; a re-send with other data
overwrites it (BookKeeper repoints its index), and a read may then return any version that was
ever added for that id (spec/adapter.md leaves overwriting to the bookie, and so does the model:
it pins no version, it only refuses bytes nobody added).

What a read showed within a run holds for the rest of the run (``seen``, ``unseen``): a
bookie whose reads flicker (an entry readable, then not, then readable again, with no crash
between) is wrong even where the model cannot say which answer is right. A crash forgets it:
what was only in memory may go.

Not modelled: explicit LAC, write_close, trimming (no operation removes entries below a
point).
"""

from __future__ import annotations

import enum

import attrs


class Sure(enum.Enum):
    """How sure the model is that a fact survives a crash."""

    PENDING = "pending"
    DURABLE = "durable"
    FAILED = "failed"
    MAYBE = "maybe"


#: The states in which a fact may be missing (and so may not be relied on).
UNSURE = (Sure.FAILED, Sure.MAYBE)


@attrs.define
class LedgerModel:
    """One ledger that has a key (it was added to or fenced)."""

    ledger_id: int
    key: bytes
    key_sure: Sure
    fence: Sure | None = None
    entries: dict[int, tuple[bytes, Sure]] = attrs.Factory(dict)
    #: Older data of entries added again with other data: a read may return any of it.
    versions: dict[int, set[bytes]] = attrs.Factory(dict)
    #: Entries a read of this run returned, and entries it found missing (their add failed
    #: or was cut by a crash, or was pending): what a read showed holds until the next crash.
    seen: set[int] = attrs.Factory(set)
    unseen: set[int] = attrs.Factory(set)
    #: Whether an unsure (failed) fence was seen in effect in this run (an add refused
    #: ``fenced``, or the state says fenced), or seen not in effect (an add accepted).
    fence_seen: bool | None = None

    def readable(self, entry_id: int, data: bytes) -> bool:
        """``data`` is a version of the entry some add wrote."""
        found = self.entries.get(entry_id)
        return found is not None and (found[0] == data or data in self.versions.get(entry_id, ()))

    def last_entry(self) -> int | None:
        return max(self.entries) if self.entries else None

    def check_invariants(self) -> None:
        assert self.ledger_id >= 0, self.ledger_id
        if self.fence is Sure.DURABLE or any(s is Sure.DURABLE for _, s in self.entries.values()):
            assert self.key_sure is Sure.DURABLE, self.ledger_id
        if self.key_sure in UNSURE:
            assert all(sure in UNSURE for _, sure in self.entries.values()), self.ledger_id
            assert self.fence in (None, *UNSURE), self.fence
        assert not self.seen & self.unseen, (self.seen, self.unseen)
        assert self.versions.keys() <= self.entries.keys(), self.ledger_id
        assert self.fence_seen is None or self.fence is Sure.FAILED, (self.fence, self.fence_seen)


class LedgerIndexModel:
    """See the module docstring."""

    def __init__(self) -> None:
        self.ledgers: dict[int, LedgerModel] = {}
        #: Deleted ledger ids: DURABLE (the delete answered ok), MAYBE (a crash cut it short
        #: or reopened a failed one: the next state shows which), FAILED (it answered
        #: io_error: in effect or not, as this run's states show, until a crash).
        self.deleted: dict[int, Sure] = {}
        #: Of the FAILED deletes: whether this run's states showed the ledger deleted.
        self.delete_seen: dict[int, bool] = {}

    # --- requests -----------------------------------------------------------------------

    def refusal(self, ledger_id: int, key: bytes, *, add: bool) -> str | None:
        """The error code an add (or a fence) gets before anything is written, else None:
        deleted -> no_ledger, another key -> unauthorized, fenced (adds only) -> fenced."""
        if self.deleted.get(ledger_id) is Sure.DURABLE:
            return "no_ledger"
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            return None
        if ledger.key != key:
            return "unauthorized"
        if add and ledger.fence is not None:
            return "fenced"
        return None

    def add_entry(self, ledger_id: int, entry_id: int, key: bytes, data: bytes) -> None:
        """An accepted add: the entry is pending (the key too, if it is new). Added again: the
        same data stays durable if it was, else is pending again; other data is a new version
        (see the module docstring), durable if the old one was (one of them must read)."""
        ledger = self._keyed(ledger_id, key)
        old = ledger.entries.get(entry_id)
        ledger.unseen.discard(entry_id)
        if old is None:
            ledger.entries[entry_id] = (data, Sure.PENDING)
            return
        old_data, old_sure = old
        sure = Sure.DURABLE if old_sure is Sure.DURABLE else Sure.PENDING
        if old_data != data:
            ledger.versions.setdefault(entry_id, set()).add(old_data)
        ledger.entries[entry_id] = (data, sure)

    def fence(self, ledger_id: int, key: bytes) -> None:
        """An accepted fence: pending until acknowledged (a durable fence stays durable)."""
        ledger = self._keyed(ledger_id, key)
        if ledger.fence is not Sure.DURABLE:
            ledger.fence = Sure.PENDING
            ledger.fence_seen = None

    def _keyed(self, ledger_id: int, key: bytes) -> LedgerModel:
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            ledger = LedgerModel(ledger_id, key, Sure.PENDING)
            self.ledgers[ledger_id] = ledger
        assert ledger.key == key, "refusal() lets only the ledger's own key through"
        if ledger.key_sure is Sure.MAYBE:
            # A crash left the key unsure and no state resolved it (a bookie judged without
            # its state, spec/profile.py): if it was lost, this request sets it again, so
            # it is pending like a new key until the request is acknowledged.
            ledger.key_sure = Sure.PENDING
        return ledger

    def acknowledge_add(self, ledger_id: int, entry_id: int) -> None:
        ledger = self.ledgers[ledger_id]
        data, _ = ledger.entries[entry_id]
        ledger.entries[entry_id] = (data, Sure.DURABLE)
        ledger.key_sure = Sure.DURABLE

    def acknowledge_fence(self, ledger_id: int) -> None:
        ledger = self.ledgers[ledger_id]
        ledger.fence = Sure.DURABLE
        ledger.fence_seen = None
        ledger.key_sure = Sure.DURABLE

    def fail_add(self, ledger_id: int, entry_id: int) -> None:
        """An add failed (io_error) after it may have been written: it may or may not have
        been kept; so may its ledger's key, if the ledger was new."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is not None and entry_id in ledger.entries:
            data, sure = ledger.entries[entry_id]
            if sure is Sure.PENDING:
                ledger.entries[entry_id] = (data, Sure.FAILED)
            if (
                ledger.key_sure is Sure.PENDING
                and not any(
                    sure in (Sure.PENDING, Sure.DURABLE) for _, sure in ledger.entries.values()
                )
                and ledger.fence in (None, Sure.FAILED)
            ):
                ledger.key_sure = Sure.FAILED

    def fail_fence(self, ledger_id: int) -> None:
        ledger = self.ledgers.get(ledger_id)
        if ledger is not None and ledger.fence is Sure.PENDING:
            ledger.fence = Sure.FAILED

    def read(self, ledger_id: int, entry_id: int) -> tuple[str | None, bytes | None, Sure | None]:
        """What a read may see: (error code or None, the entry's data, how sure). A maybe
        entry may also be missing (the caller resolves it with :meth:`resolve_entry`)."""
        if self.deleted.get(ledger_id) is Sure.DURABLE or ledger_id not in self.ledgers:
            return "no_ledger", None, None
        found = self.ledgers[ledger_id].entries.get(entry_id)
        if found is None:
            return "no_entry", None, None
        return None, found[0], found[1]

    def resolve_entry(self, ledger_id: int, entry_id: int, present: bool) -> None:
        """A maybe entry (left open by a crash) was seen present (recovery made it durable)
        or missing (gone for good)."""
        ledger = self.ledgers[ledger_id]
        data, sure = ledger.entries[entry_id]
        assert sure is Sure.MAYBE, sure
        if present:
            ledger.entries[entry_id] = (data, Sure.DURABLE)
        else:
            del ledger.entries[entry_id]
            ledger.versions.pop(entry_id, None)

    def delete(self, ledger_id: int, sure: Sure) -> None:
        """A delete that returned ok (DURABLE) or failed or crashed (MAYBE)."""
        assert sure is not Sure.PENDING
        if self.deleted.get(ledger_id) is not Sure.DURABLE:
            self.deleted[ledger_id] = sure
            self.delete_seen.pop(ledger_id, None)
        if sure is Sure.DURABLE:
            self.ledgers.pop(ledger_id, None)

    def resolve_deleted(self, ledger_id: int, deleted: bool) -> None:
        assert self.deleted.get(ledger_id) is Sure.MAYBE
        if deleted:
            self.delete(ledger_id, Sure.DURABLE)
        else:
            del self.deleted[ledger_id]

    # --- crash --------------------------------------------------------------------------

    def crash(self) -> None:
        """Whatever was pending may or may not survive."""
        unsure = (Sure.PENDING, Sure.FAILED)
        for ledger_id, sure in self.deleted.items():
            if sure is Sure.FAILED:
                self.deleted[ledger_id] = Sure.MAYBE
        self.delete_seen.clear()
        for ledger in self.ledgers.values():
            ledger.seen.clear()
            ledger.unseen.clear()
            ledger.fence_seen = None
            if ledger.key_sure in unsure:
                ledger.key_sure = Sure.MAYBE
            if ledger.fence in unsure:
                ledger.fence = Sure.MAYBE
            for entry_id, (data, sure) in list(ledger.entries.items()):
                if sure in unsure:
                    ledger.entries[entry_id] = (data, Sure.MAYBE)

    def marked_entries(self, sure: Sure) -> list[tuple[int, int]]:
        """(ledger, entry) of every entry of a live ledger marked ``sure``, in order: the
        maybe ones are what a restart should probe, the durable ones what must read back."""
        return [
            (ledger.ledger_id, entry_id)
            for ledger in sorted(self.ledgers.values(), key=lambda led: led.ledger_id)
            for entry_id, (_, mark) in sorted(ledger.entries.items())
            if mark is sure
        ]

    def check_invariants(self) -> None:
        for ledger_id, ledger in self.ledgers.items():
            assert ledger.ledger_id == ledger_id
            assert self.deleted.get(ledger_id) is not Sure.DURABLE, ledger_id
            ledger.check_invariants()
        for sure in self.deleted.values():
            assert sure in (Sure.DURABLE, Sure.MAYBE, Sure.FAILED), sure
        for ledger_id in self.delete_seen:
            assert self.deleted.get(ledger_id) is Sure.FAILED, ledger_id
