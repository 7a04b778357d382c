"""A ledger's possible heads, and its entries conditioned on them: the representation of the
ledger sub-model (models/index/ledger_index.py, whose docstring says why it is exact).

Spec pages: spec/adapter.md ("Rules the model enforces": R-CRASH-SUBSET, R-CRASH-KEY),
docs/model.md ("What a crash may leave, exactly").

A **head** (:class:`Head`) is one complete guess at a ledger's key, fence and deletion, in
memory and on disk, and at what each of its requests in flight will be answered; an
:class:`Entry` says in which heads it may exist; a :class:`LedgerModel` holds both. The
functions here are the pure transitions on them: what an admitted request does to a head
(:func:`carry_out`), what a crash may leave of one (:func:`survivors`), and how entries
follow when heads are replaced (:func:`remap`, :func:`normalize`, :func:`merge`).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator

import attrs


class Sure(enum.Enum):
    """How sure the model is that an entry survives a crash."""

    PENDING = "pending"
    DURABLE = "durable"
    FAILED = "failed"
    MAYBE = "maybe"


#: The marks of an entry that may be missing (and so may not be relied on).
UNSURE = (Sure.FAILED, Sure.MAYBE)


class Dur(enum.Enum):
    """Whether a fact of a head survives a crash: surely, surely not, or maybe."""

    NO = "no"
    MAY = "may"
    YES = "yes"


#: How many heads one ledger may have before the history is beyond what the model judges.
HEADS_MAX = 256


class BeyondModel(Exception):
    """The history goes beyond what the model covers (see the module docstring); the
    bookie model turns it into its ModelUsageError."""


@attrs.frozen
class Head:
    """One guess at a ledger's key, fence and deletion (see the module docstring).

    ``key``: the ledger's key (None: no key fact at all); ``*_mem``: the fact is in the
    bookie's memory now; ``*_dur``: it survives a crash. ``newer``: which came last of the
    key and the deletion (a deleted ledger created again by BookKeeper's answers: "key"),
    which decides when both survive a crash. ``flights``: the ledger's requests in flight,
    by step, with this head's answer to each: None (admitted), a refusal's code, or
    ``either`` (an add in flight at the ledger's delete, under BookKeeper's answers: ok or
    no_ledger, nothing kept either way)."""

    key: bytes | None = None
    key_mem: bool = False
    key_dur: Dur = Dur.NO
    fence_mem: bool = False
    fence_dur: Dur = Dur.NO
    del_mem: bool = False
    del_dur: Dur = Dur.NO
    newer: str = "key"
    flights: tuple[tuple[int, str | None], ...] = ()
    #: Keys failed (io_error) requests may still leave after a crash, where the ledger was
    #: created since with another key: one of them may come back if that key does not.
    ghosts: tuple[bytes, ...] = ()

    @property
    def exists(self) -> bool:
        """The ledger exists in memory (reads find it, adds with its key are admitted)."""
        return self.key_mem

    @property
    def deleted(self) -> bool:
        """The ledger is deleted in memory and not created again."""
        return self.del_mem and not self.key_mem

    @property
    def recreated(self) -> bool:
        """A deleted ledger created again (BookKeeper's answers): a state may list it as
        deleted or not."""
        return self.key_mem and self.del_dur is not Dur.NO and self.newer == "key"

    def outcome(self, step: int) -> str | None:
        return dict(self.flights)[step]

    def without(self, step: int) -> Head:
        return attrs.evolve(self, flights=tuple(f for f in self.flights if f[0] != step))

    def check(self) -> None:
        assert (self.key is None) <= (not self.key_mem and self.key_dur is Dur.NO), self
        assert not self.fence_mem or self.key_mem or self.del_mem, self
        assert self.fence_dur is not Dur.YES or self.key_dur is Dur.YES or self.del_mem, self
        assert self.newer in ("key", "delete"), self
        steps = [step for step, _ in self.flights]
        assert len(steps) == len(set(steps)), self.flights


@attrs.define
class Entry:
    """One entry: its data, how sure, and the heads it may exist in (None: every head in
    which the ledger has a key)."""

    data: bytes
    sure: Sure
    heads: frozenset[int] | None = None
    #: The key of the add that wrote it: it exists only where the ledger has that key.
    key: bytes | None = None
    #: Durable because its add was acknowledged (not because recovery showed it): which
    #: rule a divergence about it names.
    acked: bool = False

    def possible_in(self, head_id: int, head: Head) -> bool:
        return (
            head.key is not None
            and (self.key is None or head.key == self.key)
            and (self.heads is None or head_id in self.heads)
        )


@attrs.define
class LedgerModel:
    """One ledger id the history named: its heads and its entries."""

    ledger_id: int
    heads: dict[int, Head]
    entries: dict[int, Entry] = attrs.Factory(dict)
    #: Older data of entries added again with other data: a read may return any of it.
    versions: dict[int, set[bytes]] = attrs.Factory(dict)
    #: What reads of this run showed (R-NO-FLICKER): entries read back, entries whose
    #: failed add was found missing, and whether the ledger was found to exist.
    seen: set[int] = attrs.Factory(set)
    unseen: set[int] = attrs.Factory(set)
    shown: bool = False
    #: The steps of the adds of this ledger sent in this run (the rest of its requests in
    #: flight are fences).
    add_steps: set[int] = attrs.Factory(set)
    #: An add or fence of it was acknowledged (its key is durable by an ack, not only
    #: because recovery showed it).
    acked: bool = False

    def readable(self, entry_id: int, data: bytes) -> bool:
        """``data`` is a version of the entry some add wrote."""
        found = self.entries.get(entry_id)
        return found is not None and (found.data == data or data in self.versions.get(entry_id, ()))

    def one(self, predicate: Callable[[Head], bool]) -> bool:
        """Whether some head satisfies ``predicate``."""
        return any(predicate(head) for head in self.heads.values())

    def every(self, predicate: Callable[[Head], bool]) -> bool:
        return all(predicate(head) for head in self.heads.values())

    def check_invariants(self) -> None:
        assert self.ledger_id >= 0, self.ledger_id
        assert self.heads, f"ledger {self.ledger_id} has no possible head"
        assert len(self.heads) <= HEADS_MAX, len(self.heads)
        for head in self.heads.values():
            head.check()
        heads = list(self.heads.items())
        for entry_id, entry in self.entries.items():
            if entry.heads is not None:
                assert entry.heads and entry.heads <= self.heads.keys(), (entry_id, entry)
            if len(heads) == 1 and heads[0][1].key == entry.key and entry.heads is None:
                # The common case, one head holding the entry, said quickly.
                assert entry.sure is not Sure.DURABLE or heads[0][1].key_dur is Dur.YES, entry_id
                continue
            holders = [h for i, h in heads if entry.possible_in(i, h)]
            dormant = [
                h
                for i, h in self.heads.items()
                if entry.key in h.ghosts and (entry.heads is None or i in entry.heads)
            ]
            assert holders or dormant, f"entry {self.ledger_id}:{entry_id} is in no possible head"
            if entry.sure is Sure.DURABLE:
                assert all(h.key_dur is Dur.YES for h in holders), (entry_id, holders)
        assert not self.seen & self.unseen, (self.seen, self.unseen)
        assert self.versions.keys() <= self.entries.keys(), self.ledger_id


def carry_out(
    head: Head, key: bytes, *, fence: bool, flights: tuple[tuple[int, str | None], ...]
) -> Head:
    """An admitted add or fence in memory: it creates the ledger if it has no key (a deleted
    one too, under BookKeeper's answers), and a fence fences it."""
    if not head.exists:
        ghosts = head.ghosts
        if head.key is not None and head.key != key and head.key_dur is Dur.MAY:
            ghosts = (head.key, *ghosts)  # a failed request's key: it may still come back
        head = attrs.evolve(
            head,
            key=key,
            key_mem=True,
            key_dur=Dur.MAY,
            newer="key",
            fence_mem=False,
            fence_dur=Dur.NO,
            ghosts=tuple(sorted(set(ghosts) - {key})),
        )
    if fence:
        head = attrs.evolve(
            head, fence_mem=True, fence_dur=Dur.YES if head.fence_dur is Dur.YES else Dur.MAY
        )
    return attrs.evolve(head, flights=flights)


def _choices(dur: Dur) -> tuple[bool, ...]:
    return {Dur.NO: (False,), Dur.MAY: (False, True), Dur.YES: (True,)}[dur]


def survivors(head: Head) -> Iterator[Head]:
    """R-CRASH-SUBSET, R-CRASH-KEY: every combination of the head's facts that may survive a
    crash: a fence that survived keeps the key; a deletion and a key that both survived
    leave the later of the two; where the key did not survive, a failed request's key (the
    ghost) may. After the crash memory is what survived, all durable."""
    ghosts: tuple[bytes | None, ...] = (None, *head.ghosts)
    for key, fence, deleted, ghost in itertools.product(
        _choices(head.key_dur), _choices(head.fence_dur), _choices(head.del_dur), ghosts
    ):
        key = key or fence
        if ghost is not None and key:
            continue  # the ghost comes back only in place of a key that did not survive
        if key and deleted and head.newer == "delete":
            key = fence = False  # (a ledger created again after its delete lives on)
        if key and head.key is None:
            continue
        value = ghost if ghost is not None else head.key if key else None
        yield Head(
            key=value,
            key_mem=value is not None,
            key_dur=Dur.NO if value is None else Dur.YES,
            fence_mem=fence,
            fence_dur=Dur.YES if fence else Dur.NO,
            del_mem=deleted,
            del_dur=Dur.YES if deleted else Dur.NO,
            newer=head.newer if key and deleted else ("delete" if deleted else "key"),
        )


def remap(ledger: LedgerModel, mapping: dict[int, set[int]]) -> None:
    """Heads were replaced (``mapping``: old id -> new ids): entries follow."""
    for entry_id, entry in list(ledger.entries.items()):
        if entry.heads is None:
            continue
        where = frozenset(new for old in entry.heads for new in mapping.get(old, ()))
        ledger.entries[entry_id] = attrs.evolve(entry, heads=where)
    normalize(ledger)


def normalize(ledger: LedgerModel) -> None:
    """An entry possible in every head is marked so (None)."""
    everywhere = ledger.heads.keys()
    for entry_id, entry in ledger.entries.items():
        if entry.heads is not None and entry.heads >= everywhere:
            ledger.entries[entry_id] = attrs.evolve(entry, heads=None)


def merge(ledger: LedgerModel) -> None:
    """Heads that are equal and that every entry treats alike become one."""
    by_value: dict[tuple[Head, tuple[bool, ...]], int] = {}
    keep: dict[int, Head] = {}
    entries = list(ledger.entries.values())
    for head_id, head in ledger.heads.items():
        signature = tuple(e.heads is None or head_id in e.heads for e in entries)
        if (head, signature) in by_value:
            continue
        by_value[(head, signature)] = head_id
        keep[head_id] = head
    if len(keep) == len(ledger.heads):
        return
    ledger.heads = keep
    for entry_id, entry in ledger.entries.items():
        if entry.heads is not None:
            ledger.entries[entry_id] = attrs.evolve(entry, heads=entry.heads & keep.keys())
    normalize(ledger)
