"""The ledger sub-model: what a client can see of every ledger (its key, its fence, whether it
is deleted, its entries), and every outcome a crash or a failed request may have left of it.

Spec pages: spec/adapter.md ("Rules the model enforces": the rule ids below are that table's),
spec/properties.md properties 1-4; docs/model.md ("What a crash may leave, exactly").

**Representation.** A ledger's facts are its key (whether the ledger exists, and with which
key), its fence, its deletion and its entries. Every relation between two of them goes
through the first three: an entry or a fence that survived brings the ledger's key with it
(R-CRASH-KEY), a delete takes everything with it, a request is admitted or refused by the
key, the fence and the deletion as the bookie held them when it read the request
(R-ADMIT-ORDER). So the model keeps, per ledger:

- a small set of **heads**: each head is one complete guess at the key, the fence and the
  deletion, in memory and on disk, and at what every request of the ledger still in flight
  will be answered (admitted, or refused with which code). A crash turns each head into one
  head per combination of its unsure facts that may have survived (:func:`_survivors`);
  an observation (an answer, a read, a state) keeps the heads that give it;
- its **entries**, each with how sure it is (pending, durable, failed, maybe) and the heads
  it may exist in. Given a head, entries survive a crash independently of each other (no
  correct bookie has to keep them in any order: spec/adapter.md leaves it open).

The constraint graph of one ledger is a star around its head, and ledgers share nothing (no
request names two ledgers). On a star, keeping each entry consistent with some head, and
each head with every entry, is enough for every value left to belong to a whole outcome some
execution produces: the answers this model allows are exactly those of some outcome, so it
neither refuses a correct bookie nor lets through what no outcome explains. The reference
that checks it is models/index/possible_worlds.py (every world, no factoring), and
tests/unit/models/test_possible_worlds.py holds the two equal on thousands of histories of a
randomly behaving correct bookie and of mutations of them.

The words: an entry is ``pending`` from the moment its add is admitted until its ack,
``durable`` once acknowledged or once seen again after a crash (R-RECOVERY-SHOWN: what
recovery shows stays), ``failed`` when its add or its ack failed with io_error (the bookie
may or may not hold it, and it may or may not survive a crash), and ``maybe`` after a crash
that came while it was pending or failed. What a read showed within a run holds for the
rest of the run (R-NO-FLICKER): ``seen`` and ``unseen`` entries, ``shown`` ledgers.

Entry ids may come in any order and may be sent again (a re-send with other data overwrites
it, and a read may return any version ever added: ``versions``).

A failed (io_error) request may still leave its key after a crash where the run showed the
ledger without it; if the ledger is created meanwhile with another key, the failed key is
kept beside the head (``Head.ghosts``) and may come back where the new key does not survive.
Beyond the model (``BeyondModel``, a ModelUsageError of the bookie model): a ledger with more
than ``HEADS_MAX`` possible heads (crashes no observation resolved, piling up).

Not modelled: explicit LAC, trimming.
"""

from __future__ import annotations

import itertools

import attrs

from models.index.heads import (
    HEADS_MAX,
    UNSURE,
    BeyondModel,
    Dur,
    Entry,
    Head,
    LedgerModel,
    Sure,
    carry_out,
    merge,
    normalize,
    remap,
    survivors,
)

__all__ = ["UNSURE", "BeyondModel", "Dur", "LedgerIndexModel", "LedgerModel", "Sure"]


class LedgerIndexModel:
    """See the module docstring. ``answers``: the answers profile (spec/profile.py), which
    decides what an add or fence of a deleted ledger gets; ``async_acks``: a read may miss an
    add still in flight (R-READ-INFLIGHT)."""

    def __init__(self, answers: str = "bkref", *, async_acks: bool = False) -> None:
        self.answers = answers
        self.async_acks = async_acks
        self.ledgers: dict[int, LedgerModel] = {}
        self._ids = itertools.count()
        #: What observations resolved, in words (the bookie model hands them on).
        self.notes: list[str] = []

    def _ledger(self, ledger_id: int) -> LedgerModel:
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            ledger = LedgerModel(ledger_id, {next(self._ids): Head()})
            self.ledgers[ledger_id] = ledger
        return ledger

    # --- what a request is answered -----------------------------------------------------

    def _admissions(self, head: Head, key: bytes, *, add: bool) -> tuple[str | None, ...]:
        """R-ADMIT-ORDER: what the bookie decides for an add or fence when it reads it, in
        one head. A deleted ledger: no_ledger (bkref) or created again (BookKeeper); no
        ledger: created with this key; another key: unauthorized (before any fence); an add
        to a fenced ledger, also one whose fence is still in flight (R-FENCE-PENDING):
        fenced; else admitted (None)."""
        if head.deleted:
            return {"bkref": ("no_ledger",), "bookkeeper": (None,)}.get(
                self.answers, ("no_ledger", None)
            )
        if not head.exists:
            return (None,)
        if head.key != key:
            return ("unauthorized",)
        if add and head.fence_mem:
            return ("fenced",)
        return (None,)

    def admissions(self, ledger_id: int, key: bytes, *, add: bool) -> set[str | None]:
        """Every decision some head makes for an add or fence: None (admitted) or a code."""
        ledger = self.ledgers.get(ledger_id)
        heads = ledger.heads.values() if ledger is not None else (Head(),)
        return {o for head in heads for o in self._admissions(head, key, add=add)}

    def write_close_answers(self, ledger_id: int, key: bytes) -> set[str | None]:
        """What a write close may be answered (spec/protocol/write_close.md), in any of the
        ledger's heads: no_ledger where it does not exist (a write close creates nothing),
        unauthorized for another key, else None (ok). It changes nothing."""
        ledger = self.ledgers.get(ledger_id)
        heads = ledger.heads.values() if ledger is not None else (Head(),)
        return {
            "no_ledger" if not head.exists else "unauthorized" if head.key != key else None
            for head in heads
        }

    def send(
        self, step: int, ledger_id: int, key: bytes, *, entry: int | None = None, data: bytes = b""
    ) -> set[str | None]:
        """An add (``entry`` and ``data``) or a fence written at ``step``: in every head the
        bookie admits or refuses it, and an admitting head carries it out in memory (a head
        in which both are possible splits in two). Returns the decisions made."""
        ledger = self._ledger(ledger_id)
        if entry is not None:
            ledger.add_steps.add(step)
        heads: dict[int, Head] = {}
        admitted: set[int] = set()
        mapping: dict[int, set[int]] = {}
        made: set[str | None] = set()
        for head_id, head in ledger.heads.items():
            outcomes = self._admissions(head, key, add=entry is not None)
            for outcome in outcomes:
                new_id = head_id if len(outcomes) == 1 else next(self._ids)
                mapping.setdefault(head_id, set()).add(new_id)
                made.add(outcome)
                flights = (*head.flights, (step, outcome))
                if outcome is not None:
                    heads[new_id] = attrs.evolve(head, flights=flights)
                    continue
                admitted.add(new_id)
                heads[new_id] = carry_out(head, key, fence=entry is None, flights=flights)
        ledger.heads = heads
        remap(ledger, mapping)
        if entry is not None and admitted:
            self._add_entry(ledger, entry, data, frozenset(admitted), key)
        self._check_size(ledger)
        return made

    def _add_entry(
        self, ledger: LedgerModel, entry_id: int, data: bytes, heads: frozenset[int], key: bytes
    ) -> None:
        """An admitted add's entry: pending in the heads that admitted it. Added again: the
        same data stays durable if it was; other data is a new version (a read may return
        any version some add wrote)."""
        ledger.unseen.discard(entry_id)
        old = ledger.entries.get(entry_id)
        where = None if heads == ledger.heads.keys() else heads
        if old is None or old.key != key:
            ledger.entries[entry_id] = Entry(data, Sure.PENDING, where, key)
            ledger.versions.pop(entry_id, None)
            return
        if old.data != data:
            ledger.versions.setdefault(entry_id, set()).add(old.data)
        sure = Sure.DURABLE if old.sure is Sure.DURABLE else Sure.PENDING
        merged = None if old.heads is None or where is None else old.heads | where
        ledger.entries[entry_id] = Entry(data, sure, merged, key, old.acked)

    def settle(self, step: int, ledger_id: int, answer: str | None, *, entry: int | None) -> bool:
        """The answer of the request of ``step`` arrived: ``None`` (ok: acknowledged),
        ``admitted`` (taken, its ack to come: bkref's in-process answer ``pending``), or an
        error code. Keeps the heads that give it; returns False when none does (the answer
        is not allowed). ``io_error`` is allowed in every head (a fault fired): what an
        admitting head carried out may or may not be kept."""
        ledger = self.ledgers[ledger_id]
        if answer == "io_error":
            self._failed(ledger, step, entry)
            return True
        wanted = None if answer in (None, "admitted") else answer
        keep = {
            head_id
            for head_id, head in ledger.heads.items()
            if head.outcome(step) == wanted
            or (head.outcome(step) == "either" and wanted in (None, "no_ledger"))
        }
        if not keep:
            return False
        either = all(ledger.heads[h].outcome(step) == "either" for h in keep)
        self._keep(ledger, keep)
        if answer == "admitted":
            return True
        ledger.heads = {i: head.without(step) for i, head in ledger.heads.items()}
        if answer is None and not either:
            self._acknowledge(ledger, entry)
        return True

    def _acknowledge(self, ledger: LedgerModel, entry_id: int | None) -> None:
        """R-ACK-DURABLE: an acknowledged add or fence survives every crash, and so does the
        ledger's key (R-CRASH-KEY)."""
        heads = {}
        for head_id, head in ledger.heads.items():
            head = attrs.evolve(head, key_dur=Dur.YES, newer="key")
            if entry_id is None:
                head = attrs.evolve(head, fence_dur=Dur.YES)
            heads[head_id] = head
        ledger.heads = heads
        ledger.acked = True
        if entry_id is not None:
            found = ledger.entries[entry_id]
            ledger.entries[entry_id] = attrs.evolve(found, sure=Sure.DURABLE, acked=True)

    def _failed(self, ledger: LedgerModel, step: int, entry_id: int | None) -> None:
        """An add or fence failed with io_error (a fault fired): in a head that admitted it,
        what it carried out may or may not be in memory, and may or may not survive. A key
        it created is kept in memory while anything else of the ledger holds it."""
        heads: dict[int, Head] = {}
        mapping: dict[int, set[int]] = {}
        for head_id, head in ledger.heads.items():
            admitted = head.outcome(step) is None
            head = head.without(step)
            if not admitted:
                heads[head_id] = head
                mapping[head_id] = {head_id}
                continue
            variants = [head]
            if entry_id is None and head.fence_dur is not Dur.YES:
                variants = [
                    attrs.evolve(v, fence_mem=m, fence_dur=Dur.MAY)
                    for v in variants
                    for m in (True, False)
                ]
            if head.key_dur is not Dur.YES and not self._key_held(ledger, head, entry_id):
                variants = [
                    attrs.evolve(v, key_mem=m, fence_mem=v.fence_mem and m)
                    for v in variants
                    for m in (True, False)
                ]
            ids = [head_id] if len(variants) == 1 else [next(self._ids) for _ in variants]
            heads.update(zip(ids, variants, strict=True))
            mapping[head_id] = set(ids)
        ledger.heads = heads
        remap(ledger, mapping)
        if entry_id is not None and entry_id in ledger.entries:
            found = ledger.entries[entry_id]
            if found.sure is Sure.PENDING:
                ledger.entries[entry_id] = attrs.evolve(found, sure=Sure.FAILED)
        self._check_size(ledger)

    @staticmethod
    def _key_held(ledger: LedgerModel, head: Head, failed_entry: int | None) -> bool:
        if head.fence_mem and failed_entry is not None:
            return True
        return any(
            entry_id != failed_entry and entry.sure in (Sure.PENDING, Sure.DURABLE)
            for entry_id, entry in ledger.entries.items()
        ) or any(outcome is None for _, outcome in head.flights)

    # --- reads --------------------------------------------------------------------------

    def _hidden(self, ledger: LedgerModel, head: Head) -> bool:
        """R-READ-INFLIGHT: under asynchronous acks a ledger that only requests in flight
        made may not be visible to a read yet."""
        return self.async_acks and head.exists and head.key_dur is Dur.MAY and not ledger.shown

    def _entry_answers(
        self, ledger: LedgerModel, entry_id: int, head_id: int, head: Head
    ) -> set[str]:
        entry = ledger.entries.get(entry_id)
        if entry is None or not entry.possible_in(head_id, head):
            return {"no_entry"}
        if entry.sure is Sure.DURABLE or entry_id in ledger.seen:
            return {"data"}
        if entry.sure is Sure.FAILED:
            return {"no_entry"} if entry_id in ledger.unseen else {"data", "no_entry"}
        if entry.sure is Sure.PENDING and not self.async_acks:
            return {"data"}  # bkref indexes an add before it answers it
        return {"data", "no_entry"}

    def read_answers(self, ledger_id: int, entry_id: int) -> set[str]:
        """R-READ-ACKED, R-READ-INFLIGHT, R-DELETE-DURABLE, R-NO-FLICKER: what a read may be
        answered, in any head: data, no_entry or no_ledger."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            return {"no_ledger"}
        out: set[str] = set()
        for head_id, head in ledger.heads.items():
            if not head.exists:
                out.add("no_ledger")
                continue
            if self._hidden(ledger, head):
                out.add("no_ledger")
            out |= self._entry_answers(ledger, entry_id, head_id, head)
        return out

    def observe_read(self, ledger_id: int, entry_id: int, answer: str) -> list[str]:
        """A read answered ``answer`` (one of read_answers): keep the heads that give it and
        resolve the entry (R-RECOVERY-SHOWN, R-NO-FLICKER). Returns notes in words."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None or answer not in ("data", "no_entry", "no_ledger"):
            return []
        if answer == "no_ledger":
            self._keep(
                ledger,
                {i for i, h in ledger.heads.items() if not h.exists or self._hidden(ledger, h)},
            )
            return []
        self._keep(
            ledger,
            {
                i
                for i, h in ledger.heads.items()
                if h.exists and answer in self._entry_answers(ledger, entry_id, i, h)
            },
        )
        ledger.shown = True
        entry = ledger.entries.get(entry_id)
        if entry is None:
            return []
        if answer == "data":
            if entry.heads is not None:
                self._keep(ledger, set(entry.heads))
            if entry.sure is Sure.MAYBE:
                ledger.entries[entry_id] = attrs.evolve(entry, sure=Sure.DURABLE, heads=None)
                return [
                    f"entry {ledger_id}:{entry_id}, not acknowledged before the crash, "
                    "survived; the model holds the bookie to that from now on"
                ]
            ledger.seen.add(entry_id)
            return []
        if entry.sure is Sure.MAYBE:
            self._drop_entry(ledger, entry_id)
            return [
                f"entry {ledger_id}:{entry_id}, not acknowledged before the crash, was "
                "lost; the model holds the bookie to that from now on"
            ]
        if entry.sure is Sure.FAILED:
            ledger.unseen.add(entry_id)
        return []

    def read_rule(self, ledger_id: int, entry_id: int, observed: str) -> str:
        """The rule of spec/adapter.md that refuses ``observed`` as a read's answer, for the
        divergence's message."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is not None and ledger.every(lambda h: h.deleted):
            return "R-DELETE-DURABLE"
        if observed == "other bytes":
            return "R-READ-DATA"
        entry = None if ledger is None else ledger.entries.get(entry_id)
        if observed == "no_ledger" and self.key_durable(ledger_id):
            # The ledger's key was acknowledged, or recovery showed the ledger: it exists.
            assert ledger is not None
            return "R-ACK-DURABLE" if ledger.acked else "R-RECOVERY-SHOWN"
        if ledger is not None and (entry_id in ledger.seen or entry_id in ledger.unseen):
            return "R-NO-FLICKER"
        if entry is None:
            return "R-READ-DATA" if observed == "data" else "R-READ-ACKED"
        if entry.sure is Sure.DURABLE:
            return "R-READ-ACKED" if entry.acked else "R-RECOVERY-SHOWN"
        return "R-READ-INFLIGHT"

    def admission_rule(self, ledger_id: int, observed: str) -> str:
        """The rule that refuses ``observed`` as an add's or fence's answer."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None:
            return "R-ADMIT-ORDER"
        if ledger.every(lambda h: h.deleted):
            return "R-DELETE-DURABLE"
        if observed in ("pending", "ok") and ledger.every(lambda h: h.exists and h.fence_mem):
            durable = ledger.every(lambda h: h.fence_dur is Dur.YES)
            return "R-ACK-DURABLE" if durable else "R-FENCE-PENDING"
        return "R-ADMIT-ORDER"

    # --- deletes ------------------------------------------------------------------------

    def delete(self, ledger_id: int, how: str) -> None:
        """R-DELETE-DURABLE: a delete answered ok (``how`` ok) is durable, its entries gone;
        R-DELETE-INFLIGHT: an add of the ledger in flight is then refused no_ledger (under
        BookKeeper's answers not judged: ``either``). A delete that failed or was cut short
        (``failed``) may or may not be in effect now, and may or may not survive."""
        ledger = self._ledger(ledger_id)
        strict = "either" if self.answers == "bookkeeper" else "no_ledger"
        adds = self._adds_in_flight(ledger)
        heads: dict[int, Head] = {}
        mapping: dict[int, set[int]] = {}
        for head_id, head in ledger.heads.items():
            flights = tuple(
                (step, (strict if step in adds else "either") if outcome is None else outcome)
                for step, outcome in head.flights
            )
            gone = Head(del_mem=True, del_dur=Dur.YES, newer="delete", flights=flights)
            if how == "ok":
                heads[head_id] = gone
                mapping[head_id] = {head_id}
                continue
            hidden = attrs.evolve(
                head,
                key_mem=False,
                fence_mem=False,
                del_mem=True,
                del_dur=Dur.MAY,
                newer="delete",
                flights=flights,
            )
            kept = attrs.evolve(head, del_dur=Dur.MAY, newer="delete")
            ids = [next(self._ids), next(self._ids)]
            heads.update(zip(ids, (hidden, kept), strict=True))
            mapping[head_id] = set(ids)
        ledger.heads = heads
        ledger.shown = False  # a ledger created again is a new one (BookKeeper's answers)
        if how == "ok":
            ledger.acked = False
        if how == "ok":
            ledger.entries.clear()
            ledger.versions.clear()
            ledger.seen.clear()
            ledger.unseen.clear()
        else:
            remap(ledger, mapping)
        merge(ledger)
        self._check_size(ledger)

    @staticmethod
    def _adds_in_flight(ledger: LedgerModel) -> set[int]:
        """The steps of the ledger's adds in flight (the rest in flight are fences: a fence
        answered ok after the delete promises nothing about entries, so either answer is
        fine for it)."""
        in_flight = {step for head in ledger.heads.values() for step, _ in head.flights}
        return ledger.add_steps & in_flight

    def durably_deleted(self, ledger_id: int) -> bool:
        """Deleted in every head, for good (a GC counts it dead)."""
        ledger = self.ledgers.get(ledger_id)
        return ledger is not None and ledger.every(lambda h: h.deleted and h.del_dur is Dur.YES)

    def deletion_unsure(self) -> bool:
        """Some ledger may or may not be deleted (a GC's dead logs are then unknown)."""
        return any(
            ledger.one(lambda h: h.del_dur is Dur.MAY)
            or len({h.deleted for h in ledger.heads.values()}) > 1
            for ledger in self.ledgers.values()
        )

    # --- crash --------------------------------------------------------------------------

    def crash(self) -> None:
        """R-CRASH-SUBSET, R-CRASH-KEY: each head turns into every combination of its unsure
        facts that may have survived; an entry that was not durable may or may not survive,
        in the heads that keep its ledger's key. What a read showed is forgotten."""
        for ledger in self.ledgers.values():
            heads: dict[int, Head] = {}
            mapping: dict[int, set[int]] = {}
            old_ids = set(ledger.heads)
            for head_id, head in ledger.heads.items():
                for survivor in survivors(head):
                    new_id = next(self._ids)
                    heads[new_id] = survivor
                    mapping.setdefault(head_id, set()).add(new_id)
            ledger.heads = heads
            for entry_id, entry in list(ledger.entries.items()):
                parents = old_ids if entry.heads is None else entry.heads
                where = frozenset(
                    new for old in parents for new in mapping.get(old, ()) if heads[new].key_mem
                )
                if not where:
                    self._drop_entry(ledger, entry_id)
                    continue
                sure = Sure.DURABLE if entry.sure is Sure.DURABLE else Sure.MAYBE
                if sure is Sure.DURABLE:
                    # A durable entry is gone only where its ledger's deletion survived.
                    where = frozenset(i for i in where if heads[i].key_dur is Dur.YES)
                ledger.entries[entry_id] = Entry(entry.data, sure, where, entry.key, entry.acked)
            normalize(ledger)
            merge(ledger)
            ledger.seen.clear()
            ledger.unseen.clear()
            ledger.shown = False
            ledger.add_steps.clear()
            self._check_size(ledger)

    # --- the state ----------------------------------------------------------------------

    def observe_state(
        self, ledger_id: int, listed: tuple[int | None, bool] | None, deleted: bool
    ) -> str | None:
        """A state showed ledger ``ledger_id`` (``listed``: its last entry and whether it is
        fenced, or None when not listed as live) and whether it is deleted. R-STATE-MEMORY:
        the state is the bookie's memory after every request written before it (one in
        flight counts as carried out). Keeps the heads and entries that agree; returns why
        none does, or None."""
        ledger = self._ledger(ledger_id)
        keep = {i for i, h in ledger.heads.items() if self._shows(ledger, i, h, listed, deleted)}
        if not keep:
            return self._state_problem(ledger, listed, deleted)
        self._keep(ledger, keep)
        if listed is None:
            return None
        ledger.shown = True
        last, _ = listed
        for entry_id, entry in list(ledger.entries.items()):
            if entry.sure is Sure.PENDING and entry_id == last:
                ledger.seen.add(entry_id)  # shown: it stays readable (R-NO-FLICKER)
            if entry.sure not in UNSURE:
                continue
            present = last is not None and entry_id <= last
            if entry.sure is Sure.MAYBE:
                if entry_id == last:
                    ledger.entries[entry_id] = attrs.evolve(entry, sure=Sure.DURABLE, heads=None)
                    self.notes.append(f"entry {ledger_id}:{entry_id}, not acknowledged, survived")
                elif not present:
                    self._drop_entry(ledger, entry_id)
                    self.notes.append(f"entry {ledger_id}:{entry_id}, not acknowledged, was lost")
            elif entry_id == last:
                ledger.seen.add(entry_id)
            elif not present:
                ledger.unseen.add(entry_id)
        return None

    def _shows(
        self,
        ledger: LedgerModel,
        head_id: int,
        head: Head,
        listed: tuple[int | None, bool] | None,
        deleted: bool,
    ) -> bool:
        if deleted != head.deleted and not head.recreated:
            return False
        if listed is None:
            return not head.exists
        if not head.exists:
            return False
        last, fenced = listed
        if fenced != head.fence_mem:
            return False
        if last is not None:
            shown = ledger.entries.get(last)
            if shown is None or not shown.possible_in(head_id, head):
                return False
        # No entry that must show may lie above the last one shown.
        return not any(
            (last is None or entry_id > last)
            and entry.possible_in(head_id, head)
            and self._must_show(ledger, entry_id, entry)
            for entry_id, entry in ledger.entries.items()
        )

    @staticmethod
    def _must_show(ledger: LedgerModel, entry_id: int, entry: Entry) -> bool:
        if entry.sure in (Sure.DURABLE, Sure.PENDING):
            return True
        return entry.sure is Sure.FAILED and entry_id in ledger.seen

    def _state_problem(
        self, ledger: LedgerModel, listed: tuple[int | None, bool] | None, deleted: bool
    ) -> str:
        ledger_id = ledger.ledger_id
        if deleted and not ledger.one(lambda h: h.deleted or h.recreated):
            if ledger.one(lambda h: h.del_dur is Dur.MAY):
                return (
                    f"ledger {ledger_id}'s failed delete was not in effect earlier in this run; "
                    "now the state says deleted"
                )
            return (
                f"ledger {ledger_id} is deleted; nobody deleted it (or its delete did not survive)"
            )
        if not deleted and ledger.every(lambda h: h.deleted):
            if ledger.one(lambda h: h.del_dur is Dur.MAY):
                return (
                    f"ledger {ledger_id}'s failed delete was in effect earlier in this run; now "
                    "the state says not deleted"
                )
            return f"ledger {ledger_id} was deleted but is not any more (a resurrection)"
        if listed is None and deleted:
            return (
                f"ledger {ledger_id} is deleted; the model has it live (what was acknowledged "
                "since a delete that failed must survive)"
            )
        if listed is None:
            if ledger.every(lambda h: h.exists):
                return f"ledger {ledger_id} is missing"
            return f"ledger {ledger_id} is missing; its key was durable"
        if not ledger.one(lambda h: h.exists):
            return f"ledger {ledger_id} exists; nobody wrote it (or what wrote it was lost)"
        last, fenced = listed
        if not ledger.one(lambda h: h.exists and h.fence_mem == fenced):
            return f"ledger {ledger_id} should {'not ' if fenced else ''}be fenced"
        must = sorted(e for e, entry in ledger.entries.items() if entry.sure not in UNSURE)
        may = sorted(e for e, entry in ledger.entries.items() if entry.sure in UNSURE)
        return (
            f"ledger {ledger_id}'s last entry is {last}; the model has entries {must} for "
            f"sure and maybe {may}"
        )

    # --- helpers ------------------------------------------------------------------------

    def _keep(self, ledger: LedgerModel, keep: set[int]) -> None:
        """Keep only heads ``keep`` (non-empty): entries possible in none of them go."""
        assert keep, "an observation must keep a head"
        if keep == ledger.heads.keys():
            return
        ledger.heads = {i: h for i, h in ledger.heads.items() if i in keep}
        for entry_id, entry in list(ledger.entries.items()):
            if entry.heads is None:
                continue
            left = entry.heads & keep
            if not left:
                self._drop_entry(ledger, entry_id)
            else:
                ledger.entries[entry_id] = attrs.evolve(entry, heads=left)
        normalize(ledger)

    @staticmethod
    def _drop_entry(ledger: LedgerModel, entry_id: int) -> None:
        del ledger.entries[entry_id]
        ledger.versions.pop(entry_id, None)
        ledger.seen.discard(entry_id)
        ledger.unseen.discard(entry_id)

    @staticmethod
    def _check_size(ledger: LedgerModel) -> None:
        if len(ledger.heads) > HEADS_MAX:
            raise BeyondModel(
                f"ledger {ledger.ledger_id} has {len(ledger.heads)} possible heads (more than "
                f"{HEADS_MAX}): too much of it is left unsure by crashes no read resolved"
            )

    # --- what the rest of the model asks ------------------------------------------------

    def exists_surely(self, ledger_id: int) -> bool:
        ledger = self.ledgers.get(ledger_id)
        return ledger is not None and ledger.every(lambda h: h.exists)

    def key_durable(self, ledger_id: int) -> bool:
        """The ledger's key survives any crash, in every head."""
        ledger = self.ledgers.get(ledger_id)
        return ledger is not None and ledger.every(lambda h: h.key_dur is Dur.YES and not h.del_mem)

    def live_ids(self) -> list[int]:
        """Ledgers that exist in some head."""
        return sorted(i for i, led in self.ledgers.items() if led.one(lambda h: h.exists))

    def marked_entries(self, sure: Sure) -> list[tuple[int, int]]:
        """(ledger, entry) of every entry marked ``sure`` in a ledger that may exist, in
        order: the maybe ones are what a restart should probe, the durable ones what must
        read back."""
        return [
            (ledger_id, entry_id)
            for ledger_id in self.live_ids()
            for entry_id, entry in sorted(self.ledgers[ledger_id].entries.items())
            if entry.sure is sure
        ]

    def fence_state(self, ledger_id: int) -> str | None:
        """In words, for people: ``fenced`` (durably, in every head), ``fence pending`` (in
        effect, not durable), ``fence failed`` (its ack failed: in effect or not, and it may
        or may not survive), ``fence unknown`` (a crash may have lost it), or None."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None or not ledger.one(lambda h: h.exists and h.fence_mem):
            return None
        if ledger.every(lambda h: h.exists and h.fence_mem and h.fence_dur is Dur.YES):
            return "fenced"
        if ledger.every(lambda h: h.exists and h.fence_mem):
            return "fence pending"
        if ledger.one(lambda h: h.fence_dur is Dur.MAY):
            return "fence failed"
        return "fence unknown"

    def deletion_state(self, ledger_id: int) -> str | None:
        """``deleted`` (in every head), ``maybe deleted`` (in some), or None."""
        ledger = self.ledgers.get(ledger_id)
        if ledger is None or not ledger.one(lambda h: h.deleted):
            return None
        return "deleted" if ledger.every(lambda h: h.deleted) else "maybe deleted"

    def entries_of(self, ledger_id: int) -> dict[int, Entry]:
        ledger = self.ledgers.get(ledger_id)
        return {} if ledger is None else ledger.entries

    def check_invariants(self) -> None:
        for ledger_id, ledger in self.ledgers.items():
            assert ledger.ledger_id == ledger_id
            ledger.check_invariants()
