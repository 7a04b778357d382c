"""What a client can see, as the set of every possible world: the reference that the ledger
model (models/index/ledger_index.py, inside models/bookie/bookie.py) is tested against.

Spec pages: spec/adapter.md ("Rules the model enforces": each rule's id is named where this
module carries it out), spec/properties.md properties 1-4.

Why a second model: the bookie model keeps one fact per entry, fence, key and deletion, each
marked durable, pending or unsure, and relates them by rules. That is fast, but each rule is
one more chance to refuse an outcome some crash can produce (a false verdict on a correct
bookie) or to allow one none can. This module states the same protocol with no cleverness at
all, as linearizability checkers do (Porcupine, Knossos): a **world** is one complete guess
at the bookie (what it holds in memory, what is durable, what every request in flight will be
answered), and the checker keeps **every** world consistent with the answers so far. A crash
turns each world into one world per subset of its unacknowledged requests that survived
(applied in the order they were written). An answer no world allows is a divergence; an
answer some world allows keeps exactly those worlds. It never guesses and never merges two
worlds into one. It is exponential in what a crash leaves unsure, so it judges short
histories only: tests/unit/models/test_possible_worlds.py draws thousands of them from a
randomly behaving correct bookie (:func:`options` chosen at random) and from that bookie with
one answer changed, and requires the bookie model's verdict to equal this one's at every step.

Scope (what it judges): asynchronous acks (spec/profile.py ``async``), states ``none`` and
``protocol``, every ``answers`` profile; the requests add, read, fence and delete; crashes
(every subset of the unacknowledged requests survives), restarts and clean shutdowns.
Not covered (the bookie model's own tests cover them): faults (io_error, no_space), the
in-process ack schedule, the entry-log layout and the marks (state ``full``), an entry id
added twice, and garbage collection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs

from spec.operations import (
    Add,
    Completion,
    Crash,
    Delete,
    Fence,
    Operation,
    Read,
    Restart,
    Result,
    Shutdown,
)
from spec.profile import Profile
from spec.state import AbstractState

Ledgers = tuple[tuple[int, "Ledger"], ...]


@attrs.frozen
class Ledger:
    """One ledger as a world holds it: its key, its fence, its entries (id, data), sorted."""

    key: bytes
    fenced: bool = False
    entries: tuple[tuple[int, bytes], ...] = ()

    def data(self, entry: int) -> bytes | None:
        return dict(self.entries).get(entry)

    def with_entry(self, entry: int, data: bytes) -> Ledger:
        return attrs.evolve(
            self, entries=tuple(sorted({**dict(self.entries), entry: data}.items()))
        )


@attrs.frozen
class Store:
    """Ledgers by id (sorted) and the ids of deleted ledgers: a bookie's client-visible
    contents, in memory or durable."""

    ledgers: Ledgers = ()
    deleted: frozenset[int] = frozenset()

    def get(self, ledger: int) -> Ledger | None:
        return dict(self.ledgers).get(ledger)

    def put(self, ledger: int, value: Ledger | None) -> Store:
        table = dict(self.ledgers)
        if value is None:
            table.pop(ledger, None)
        else:
            table[ledger] = value
        return attrs.evolve(self, ledgers=tuple(sorted(table.items())))

    def apply(self, op: Add | Fence) -> Store:
        """An admitted add or fence carried out (it creates the ledger with its key when the
        ledger has none: a deleted ledger too, where BookKeeper's answers admit it)."""
        ledger = self.get(op.ledger) or Ledger(op.key)
        store = attrs.evolve(self, deleted=self.deleted - {op.ledger})
        if isinstance(op, Add):
            return store.put(op.ledger, ledger.with_entry(op.entry, op.data))
        return store.put(op.ledger, attrs.evolve(ledger, fenced=True))

    def create(self, op: Add | Fence) -> Store:
        """The ledger an add or fence created, without the entry or the fence itself."""
        return attrs.evolve(self, deleted=self.deleted - {op.ledger}).put(op.ledger, Ledger(op.key))

    def delete(self, ledger: int) -> Store:
        return attrs.evolve(self.put(ledger, None), deleted=self.deleted | {ledger})


@attrs.frozen
class Flight:
    """A request written and not answered yet: its step, and what this world answers it
    (``None``: admitted, so ok; else the refusal's error code)."""

    step: int
    op: Add | Fence
    refusal: str | None


@attrs.frozen
class World:
    """One complete guess (see the module docstring).

    - ``memory``: what the bookie holds, every admitted request carried out;
    - ``durable``: what survives any crash (every acknowledged request, every delete);
    - ``flights``: requests in flight, in the order they were written;
    - ``hidden``: (ledger, entry) of admitted adds not acknowledged and not yet shown by a
      read: a read may still miss them (rule R-READ-INFLIGHT), and ledgers whose only
      existence is such an add or a fence in flight (a read may answer no_ledger);
    - ``recreated``: deleted ledgers an admitted request created again (BookKeeper's answer):
      a state may list them as deleted or not;
    - ``up``: the bookie is running.
    """

    memory: Store = Store()
    durable: Store = Store()
    flights: tuple[Flight, ...] = ()
    hidden: frozenset[tuple[int, int]] = frozenset()
    hidden_ledgers: frozenset[int] = frozenset()
    recreated: frozenset[int] = frozenset()
    up: bool = True


# An answer, as one value: "pending", "ok", "data" with bytes, or an error code.
Answer = tuple[str, bytes | None]
PENDING: Answer = ("pending", None)
OK: Answer = ("ok", None)


def answer_of(result: Result) -> Answer:
    if result.pending:
        return PENDING
    if result.error is not None:
        return (result.error, None)
    if result.data is not None:
        return ("data", result.data)
    return OK


def _admissions(world: World, op: Add | Fence, profile: Profile) -> list[str | None]:
    """What the bookie may decide for an add or fence when it reads it (R-ADMIT-ORDER): None
    admits it, else the refusal. Deleted: no_ledger (bkref) or admitted, created again
    (BookKeeper); another key: unauthorized; an add to a fenced ledger, also one whose fence
    is still in flight: fenced."""
    if op.ledger in world.memory.deleted:
        choices: dict[str, list[str | None]] = {"bkref": ["no_ledger"], "bookkeeper": [None]}
        return choices.get(profile.answers, ["no_ledger", None])
    ledger = world.memory.get(op.ledger)
    if ledger is None:
        return [None]
    if ledger.key != op.key:
        return ["unauthorized"]
    if isinstance(op, Add) and ledger.fenced:
        return ["fenced"]
    return [None]


def _admit(world: World, index: int, op: Add | Fence, refusal: str | None) -> World:
    flights = (*world.flights, Flight(index, op, refusal))
    if refusal is not None:
        return attrs.evolve(world, flights=flights)
    hidden_ledgers = world.hidden_ledgers
    recreated = world.recreated
    if op.ledger in world.memory.deleted:
        recreated = recreated | {op.ledger}
    if world.memory.get(op.ledger) is None:
        hidden_ledgers = hidden_ledgers | {op.ledger}
    hidden = world.hidden | ({(op.ledger, op.entry)} if isinstance(op, Add) else set())
    return attrs.evolve(
        world,
        memory=world.memory.apply(op),
        flights=flights,
        hidden=hidden,
        hidden_ledgers=hidden_ledgers,
        recreated=recreated,
    )


def _answer(world: World, step: int, answer: Answer) -> World | None:
    """The answer of the request of ``step``, in flight: ok if this world admitted it, its
    refusal if not; None when this world cannot give it."""
    flight = next((f for f in world.flights if f.step == step), None)
    if flight is None:
        return None
    expected = "ok" if flight.refusal is None else flight.refusal
    if answer[0] != expected:
        return None
    flights = tuple(f for f in world.flights if f.step != step)
    if flight.refusal is not None:
        return attrs.evolve(world, flights=flights)
    op = flight.op
    shown = world.hidden - {(op.ledger, op.entry)} if isinstance(op, Add) else world.hidden
    return attrs.evolve(
        world,
        durable=world.durable.apply(op),  # R-ACK-DURABLE
        flights=flights,
        hidden=shown,
        hidden_ledgers=world.hidden_ledgers - {op.ledger},
    )


def _request(
    world: World, index: int, op: Add | Fence, profile: Profile
) -> Iterator[tuple[Answer, World]]:
    for refusal in _admissions(world, op, profile):
        admitted = _admit(world, index, op, refusal)
        yield PENDING, admitted  # answered later (R-ACK-ASYNC)
        now = _answer(admitted, index, OK if refusal is None else (refusal, None))
        assert now is not None
        yield (OK if refusal is None else (refusal, None)), now


def _read(world: World, op: Read) -> Iterator[tuple[Answer, World]]:
    """R-READ-ACKED, R-READ-INFLIGHT, R-DELETE-DURABLE: a read sees what was acknowledged before
    it, may or may not see an add in flight, and sees what it once saw."""
    ledger = world.memory.get(op.ledger)
    if ledger is None or op.ledger in world.memory.deleted:
        yield ("no_ledger", None), world
        return
    if op.ledger in world.hidden_ledgers:
        yield ("no_ledger", None), world  # the add or fence that made it is in flight
    shown = attrs.evolve(world, hidden_ledgers=world.hidden_ledgers - {op.ledger})
    data = ledger.data(op.entry)
    if data is None:
        yield ("no_entry", None), shown
        return
    if (op.ledger, op.entry) in world.hidden:
        yield ("no_entry", None), shown
        shown = attrs.evolve(shown, hidden=shown.hidden - {(op.ledger, op.entry)})
    yield ("data", data), shown


def _delete(world: World, op: Delete, profile: Profile) -> Iterator[tuple[Answer, World]]:
    """R-DELETE-DURABLE, R-DELETE-INFLIGHT: durable when answered; an add of the ledger in
    flight is then refused no_ledger (bkref's answers; BookKeeper's are not judged on it:
    answered ok or no_ledger, its entry gone either way), and a fence in flight may be
    answered either way (an ok fence of a deleted ledger promises nothing)."""
    flights = []
    for flight in world.flights:
        if flight.op.ledger == op.ledger and flight.refusal is None:
            strict = profile.answers != "bookkeeper" and isinstance(flight.op, Add)
            flights.append(attrs.evolve(flight, refusal="no_ledger" if strict else "either"))
        else:
            flights.append(flight)
    yield (
        OK,
        attrs.evolve(
            world,
            memory=world.memory.delete(op.ledger),
            durable=world.durable.delete(op.ledger),
            flights=tuple(flights),
            hidden=frozenset(h for h in world.hidden if h[0] != op.ledger),
            hidden_ledgers=world.hidden_ledgers - {op.ledger},
            recreated=world.recreated - {op.ledger},
        ),
    )


def _survivors(world: World) -> Iterator[World]:
    """R-CRASH-SUBSET: after a crash, what was durable, plus any part of the admitted and
    unacknowledged requests: each add's entry, each fence, and the ledger a request created
    (its key), each on its own, except that an entry or a fence that survived brings its
    ledger's key with it (R-CRASH-KEY: the key is part of every add and fence, and a bookie
    may keep a new ledger's key without the entry that brought it, as bkref's journal does
    when its key record is written before the entry's). What any read or state then shows
    is durable (R-RECOVERY-SHOWN): the restarted world's memory is its durable store."""
    effects: list[tuple[str, Add | Fence]] = []
    keys: set[int] = set()
    for flight in world.flights:
        if flight.refusal is None:
            op = flight.op
            if op.ledger not in keys and world.durable.get(op.ledger) is None:
                keys.add(op.ledger)  # one key per new ledger: every request carries it
                effects.append(("key", op))
            effects.append(("fact", op))
    seen: set[Store] = set()
    for mask in range(1 << len(effects)):
        store = world.durable
        kept = [effects[bit] for bit in range(len(effects)) if mask >> bit & 1]
        keyed = {op.ledger for kind, op in kept}  # a kept fact keeps the key too
        for kind, op in kept:
            if kind == "fact":
                store = store.apply(op)
            elif op.ledger in keyed and store.get(op.ledger) is None:
                store = store.create(op)
        if store not in seen:
            seen.add(store)
            yield World(memory=store, durable=store, recreated=world.recreated, up=False)


def options(
    world: World, index: int, op: Operation, profile: Profile
) -> Iterator[tuple[Answer, World]]:
    """Every answer a correct bookie in ``world`` may give to step ``index`` (``op``), with
    the world that answer leaves."""
    if isinstance(op, Add | Fence):
        yield from _request(world, index, op, profile)
    elif isinstance(op, Read):
        yield from _read(world, op)
    elif isinstance(op, Delete):
        yield from _delete(world, op, profile)
    elif isinstance(op, Shutdown):
        yield OK, world  # its completions follow, then :func:`stopped`
    else:
        raise ValueError(f"the possible-worlds reference does not judge {op.name}")


def complete(world: World, done: Completion) -> World | None:
    """A completion (an answer arriving later), or None when this world cannot give it."""
    flight = next((f for f in world.flights if f.step == done.step), None)
    if flight is not None and flight.refusal == "either":
        flights = tuple(f for f in world.flights if f.step != done.step)
        return attrs.evolve(world, flights=flights) if done.error in (None, "no_ledger") else None
    return _answer(world, done.step, (done.error or "ok", None))


def stopped(world: World) -> World | None:
    """A clean shutdown answered: every request was answered (R-SHUTDOWN), and all
    the bookie held is durable."""
    if world.flights:
        return None
    return World(memory=world.memory, durable=world.memory, recreated=world.recreated, up=False)


def shows(world: World, state: AbstractState) -> World | None:
    """The state ``inspect`` returned (state ``protocol``: ledgers and deleted ledgers), or
    None when this world cannot show it. R-STATE-MEMORY: every request written before the
    inspect is carried out (admitted or refused) and shown, in flight or not."""
    live = {view.ledger_id: view for view in state.ledgers}
    ledgers = dict(world.memory.ledgers)
    if set(live) != set(ledgers):
        return None
    for ledger_id, ledger in ledgers.items():
        view = live[ledger_id]
        last = max((e for e, _ in ledger.entries), default=None)
        if view.last_entry != last or view.fenced != ledger.fenced:
            return None
    deleted = set(state.deleted_ledgers)
    if not world.memory.deleted <= deleted <= world.memory.deleted | world.recreated:
        return None
    # What the state showed stays (R-NO-FLICKER): the ledgers it listed, and the last entry
    # of each; the entries below it were not shown one by one.
    shown = {(view.ledger_id, view.last_entry) for view in state.ledgers}
    return attrs.evolve(
        world,
        hidden=frozenset(h for h in world.hidden if h not in shown),
        hidden_ledgers=world.hidden_ledgers - set(live),
    )


@attrs.frozen
class Verdict:
    """``step``: the first step no world allows (None: every step is allowed), and why."""

    step: int | None
    why: str = ""
    worlds_max: int = 0


class Worlds:
    """The checker: the set of worlds, fed one step at a time."""

    def __init__(self, profile: Profile, *, limit: int = 200_000) -> None:
        if profile.acks != "async" or profile.state == "full":
            raise ValueError(
                f"the possible-worlds reference judges async acks, state none or "
                f"protocol; not {profile.describe()}"
            )
        self.profile = profile
        self.worlds: set[World] = {World()}
        self.limit = limit
        self.worlds_max = 1

    def step(
        self,
        index: int,
        op: Operation,
        result: Result,
        completed: Sequence[Completion],
        state: AbstractState | None = None,
    ) -> str | None:
        """Judge one step; return why no world allows it, or None."""
        if isinstance(op, Crash):
            self.worlds = {w for world in self.worlds for w in _survivors(world)}
            return self._count()
        if isinstance(op, Restart):
            if result.error is not None:
                return f"recovery failed: {result.error}"
            self.worlds = {attrs.evolve(w, up=True) for w in self.worlds}
            return None
        answer = answer_of(result)
        after: set[World] = set()
        for world in self.worlds:
            for given, successor in options(world, index, op, self.profile):
                if given != answer:
                    continue
                done = _complete_all(successor, completed)
                if done is not None and isinstance(op, Shutdown):
                    done = stopped(done)
                if done is not None and state is not None and self.profile.state != "none":
                    done = shows(done, state)
                if done is not None:
                    after.add(done)
        if not after:
            return (
                f"no possible world answers {op.name} {_say(answer)} with acks {_acks(completed)}"
            )
        self.worlds = after
        return self._count()

    def _count(self) -> str | None:
        self.worlds_max = max(self.worlds_max, len(self.worlds))
        if len(self.worlds) > self.limit:
            raise OverflowError(f"{len(self.worlds)} worlds: the history is too long to judge")
        return None


def _complete_all(world: World, completed: Iterable[Completion]) -> World | None:
    for done in completed:
        next_world = complete(world, done)
        if next_world is None:
            return None
        world = next_world
    return world


def _say(answer: Answer) -> str:
    return f"data ({len(answer[1] or b'')} bytes)" if answer[0] == "data" else answer[0]


def _acks(completed: Sequence[Completion]) -> str:
    return "[" + ", ".join(f"{c.step}:{c.error or 'ok'}" for c in completed) + "]"


def judge(
    profile: Profile,
    steps: Iterable[tuple[int, Operation, Result, Sequence[Completion], AbstractState | None]],
) -> Verdict:
    """Judge a whole history: the first step no world allows."""
    worlds = Worlds(profile)
    for index, op, result, completed, state in steps:
        why = worlds.step(index, op, result, completed, state)
        if why is not None:
            return Verdict(index, why, worlds.worlds_max)
    return Verdict(None, "", worlds.worlds_max)
