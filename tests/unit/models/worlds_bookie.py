"""A randomly behaving correct bookie, and histories drawn from it: the class of bookies the
model must never fail.

Why: a model tuned to the bookies its authors wrote rejects the next one. This bookie is every
correct bookie at once: at each request it makes a random choice among everything
spec/adapter.md allows (admit or refuse where the answers profile leaves both open, answer at
once or later, a read seeing an add in flight or not), acknowledges requests in random groups
at random steps, and at a crash keeps a random subset of what it had not acknowledged. Its
choices are exactly the options of the possible-worlds reference
(models/index/possible_worlds.py), taken one at a time: a history it writes is correct by
construction.

:func:`draw_history` draws one history from a seeded ``random.Random`` with the conformance
workload's shape (a few ledgers, bursts of pipelined adds, reads of acknowledged, in-flight
and missing entries, fences, deletes after the ledger settled, wrong keys, crashes with
requests in flight, restarts, reads and adds of deleted ledgers after a restart, a clean
shutdown at the end), and :func:`mutations` the same history with one answer changed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import attrs

from models.index.possible_worlds import World, answer_of, complete, options, shows, stopped
from spec.crash import KillProcess
from spec.operations import (
    OK,
    PENDING,
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
    failed,
)
from spec.profile import Profile
from spec.state import AbstractState, LedgerView, Mark
from spec.trace import Step, Trace, TraceHeader

LEDGERS = (1, 2, 3)
KEYS = {1: b"\x01", 2: b"\x02", 3: b"\x03"}
WRONG_KEY = b"\xee"


def _result(answer: tuple[str, bytes | None]) -> Result:
    kind, data = answer
    if kind == "pending":
        return PENDING
    if kind == "ok":
        return OK
    if kind == "data":
        return Result(data=data)
    return failed(kind)


def _state(world: World) -> AbstractState:
    views = tuple(
        LedgerView(ledger_id, max((e for e, _ in led.entries), default=None), led.fenced)
        for ledger_id, led in world.memory.ledgers
    )
    mark: Mark = (0, 0)
    return AbstractState(
        entry_logs=(),
        least_unflushed_log_id=0,
        last_mark=mark,
        journal_mark=mark,
        current_log_id=None,
        ledgers=views,
        deleted_ledgers=tuple(sorted(world.memory.deleted)),
    )


@attrs.define
class RandomBookie:
    """One world, its choices drawn from ``rng`` (see the module docstring)."""

    rng: random.Random
    profile: Profile
    world: World = attrs.Factory(World)
    steps: list[Step] = attrs.Factory(list)

    def _acks(self, index: int, everything: bool = False) -> tuple[Completion, ...]:
        """Answers of requests in flight that arrive during step ``index``: a random group
        (a request answered in its own step has that answer as its result, not a
        completion: spec/trace.md)."""
        flights = [f for f in self.world.flights if f.step != index]
        if not everything:
            flights = [f for f in flights if self.rng.random() < 0.35]
        self.rng.shuffle(flights)
        done: list[Completion] = []
        for flight in flights:
            error = flight.refusal
            if error == "either":
                error = self.rng.choice((None, "no_ledger"))
            completion = Completion(flight.step, error)
            after = complete(self.world, completion)
            assert after is not None, flight
            self.world = after
            done.append(completion)
        return tuple(done)

    def request(self, op: Operation, *, inspect: bool = False) -> None:
        index = len(self.steps)
        choices = list(options(self.world, index, op, self.profile))
        answer, world = self.rng.choice(choices)
        self.world = world
        completed = self._acks(index, everything=isinstance(op, Shutdown))
        if isinstance(op, Shutdown):
            done = stopped(self.world)
            assert done is not None
            self.world = done
        state = _state(self.world) if inspect and self.world.up else None
        if state is not None:
            shown = shows(self.world, state)
            assert shown is not None
            self.world = shown
        self.steps.append(Step(index, op, _result(answer), completed, state))

    def settle(self) -> None:
        """Every request in flight answered (the runner's settle): in a read's window."""
        if not self.world.flights:
            return
        index = len(self.steps)
        op = Read(LEDGERS[0], 10_000)
        answer, world = self.rng.choice(list(options(self.world, index, op, self.profile)))
        self.world = world
        self.steps.append(Step(index, op, _result(answer), self._acks(index, everything=True)))

    def crash(self) -> None:
        from models.index.possible_worlds import _survivors

        index = len(self.steps)
        survivors = list(_survivors(self.world))
        self.world = attrs.evolve(self.rng.choice(survivors), up=True)
        self.steps.append(Step(index, Crash(KillProcess()), OK))
        self.steps.append(Step(index + 1, Restart(), OK))


def draw_history(rng: random.Random, profile: Profile, *, requests: int = 30) -> Trace:
    """One history of the random correct bookie (see the module docstring)."""
    bookie = RandomBookie(rng, profile)
    inspects = profile.state != "none"
    next_entry = dict.fromkeys(LEDGERS, 0)
    acked_key: set[int] = set()  # ledgers with an acknowledged add or fence
    deleted: set[int] = set()
    in_flight_at_crash: list[tuple[int, int]] = []
    for _ in range(requests):
        live = [led for led in LEDGERS if led not in deleted] or list(LEDGERS)
        roll = rng.random()
        if roll < 0.40:
            for _ in range(rng.randint(1, 4)):
                ledger = rng.choice(live)
                key = KEYS[ledger]
                if ledger in acked_key and rng.random() < 0.1:
                    key = WRONG_KEY
                bookie.request(Add(ledger, next_entry[ledger], key, rng.randbytes(2)))
                next_entry[ledger] += 1
        elif roll < 0.60:
            ledger = rng.choice(LEDGERS)
            pick = rng.random()
            if in_flight_at_crash and pick < 0.3:
                ledger, entry = rng.choice(in_flight_at_crash)
            else:
                entry = rng.randrange(next_entry[ledger] + 2)
            bookie.request(Read(ledger, entry), inspect=inspects and rng.random() < 0.3)
        elif roll < 0.67:
            ledger = rng.choice(live)
            key = WRONG_KEY if ledger in acked_key and rng.random() < 0.2 else KEYS[ledger]
            bookie.request(Fence(ledger, key))
        elif roll < 0.72 and len(deleted) < 2:
            bookie.settle()
            ledger = rng.choice(live)
            bookie.request(Delete(ledger), inspect=inspects and rng.random() < 0.5)
            deleted.add(ledger)
        elif roll < 0.78 and deleted:
            ledger = rng.choice(sorted(deleted))
            if rng.random() < 0.5:
                bookie.request(Read(ledger, rng.randrange(next_entry[ledger] + 1)))
            else:
                bookie.request(Add(ledger, next_entry[ledger], KEYS[ledger], b"again"))
                next_entry[ledger] += 1
        elif roll < 0.86:
            bookie.settle()
        else:
            in_flight_at_crash = [
                (f.op.ledger, f.op.entry) for f in bookie.world.flights if isinstance(f.op, Add)
            ]
            bookie.crash()
        acked_key |= _acknowledged_ledgers(bookie.steps)
    bookie.request(Shutdown())
    header = TraceHeader(config=(), source="tests: the random correct bookie", profile=profile)
    return Trace(header, tuple(bookie.steps))


def _acknowledged_ledgers(steps: list[Step]) -> set[int]:
    """Ledgers with an acknowledged add or fence (their key is durable)."""
    ops = {step.index: step.op for step in steps}
    out: set[int] = set()
    for step in steps:
        acks = [c.step for c in step.completed if c.error is None]
        if step.result.ok and isinstance(step.op, Add | Fence):
            acks.append(step.index)
        for index in acks:
            op = ops[index]
            if isinstance(op, Add | Fence):
                out.add(op.ledger)
    return out


def mutations(trace: Trace, rng: random.Random, count: int) -> Iterator[Trace]:
    """``count`` copies of ``trace`` with one answer or one ack changed (each may or may not
    still be a history some correct bookie writes: the reference decides)."""
    steps = list(trace.steps)
    for _ in range(count):
        index = rng.randrange(len(steps))
        step = steps[index]
        changed = _mutate(step, rng)
        if changed is None:
            continue
        yield Trace(trace.header, (*steps[:index], changed, *steps[index + 1 :]))


def _mutate(step: Step, rng: random.Random) -> Step | None:
    op = step.op
    if step.completed and rng.random() < 0.4:
        acks = list(step.completed)
        i = rng.randrange(len(acks))
        if rng.random() < 0.3:
            del acks[i]
        else:
            error = rng.choice(
                [e for e in (None, "fenced", "unauthorized", "no_ledger") if e != acks[i].error]
            )
            acks[i] = Completion(acks[i].step, error)
        return attrs.evolve(step, completed=tuple(acks))
    if isinstance(op, Add | Fence):
        answers = [PENDING, OK, failed("fenced"), failed("unauthorized"), failed("no_ledger")]
    elif isinstance(op, Read):
        answers = [failed("no_entry"), failed("no_ledger"), Result(data=b"zz"), Result(data=b"")]
        if step.result.data is None:
            answers.append(Result(data=b"again"))
    else:
        return None
    choices = [a for a in answers if answer_of(a) != answer_of(step.result)]
    return attrs.evolve(step, result=rng.choice(choices))
