"""Scenarios: what ``bkref conform`` asks of a bookie, drawn from a seed.

Spec pages: spec/adapter.md (the requests), spec/crash.py (the crash plans), docs/conformance.md
("Scenarios").

Why scenarios are data: a failure must be reproduced from ``--seed S --scenario I`` alone, on
another machine, and shrunk by dropping actions; so a scenario is a plain tuple of actions
drawn by :func:`generate` from ``random.Random`` seeded with a string of (seed, index,
profile, claimed ops, lazy disk) -- never ``hash()``, which changes between processes -- and
the runner (proofs/conform/runner.py) only carries the actions out. What the bookie answers
never changes what is asked next: a read "of an acknowledged entry" reads an entry that was
sent before a :class:`Settle` (the runner waits there for every answer), whatever was
answered.

The workload has the refinement machine's biases (proofs/harness/workload.py, whose
docstring says why they pay): a handful of ledgers reused, one master key each (now and then
a wrong one, only where the right one was acknowledged), half the payloads large so entry
logs rotate, bursts of pipelined adds (a group commit acknowledges many at once), fences,
deletes (a new ledger takes the deleted one's place), reads of acknowledged entries, of
entries still in flight, of entries never written and of ledgers that do not exist, forced
garbage collections and checkpoints when the bookie claims them, an ``inspect`` after some
steps when it claims a state; and crashes: a SIGKILL of the bookie's process group with adds
in flight or when it is idle, and with the lazy disk a power loss with a drawn plan of
spec/crash.py. Each crash is followed by a restart; each scenario ends with a clean
``shutdown`` (the runner's, not an action: shrinking keeps it).

Every promise is observed, at every state level (a bookie of state ``none`` shows nothing but
its answers): a delete is followed at once by a read of the deleted ledger (a cache the
delete did not invalidate serves it), and every restart by what a client checks
(:meth:`_Workload.after_restart`): reads of entries that were in flight at the crash (a torn
record must never be served, and what is shown stays: now and then the power goes again right
after those reads, and they are read once more), a read of and an add to a deleted
ledger (it stays deleted; under BookKeeper's answers the add creates it again), an add to a
fenced ledger and a fence again (a fence in flight at the crash held or not, and the answers
say which), and a read of an acknowledged entry. What the crash left unsure is never avoided:
the model keeps every outcome a crash can leave (models/index/ledger_index.py).

An (ledger, entry) is added at most once in a scenario: the model does not cover an entry
added twice, and a bookie's answer to it is its own business (spec/adapter.md, ``add``).
"""

from __future__ import annotations

import random

import attrs

from proofs.conform.results import Capabilities
from spec.crash import (
    CrashPlan,
    KeepAll,
    KeepPrefix,
    KeepSubset,
    LoseUnsynced,
    TornSectors,
    TornWrite,
)

#: Profiles: (scenarios, requests per scenario, crashes per scenario).
PROFILES: dict[str, tuple[int, int, int]] = {
    "quick": (12, 40, 2),
    "standard": (50, 80, 3),
    "deep": (200, 200, 5),
}
#: Ledgers in use at once (the machine's "a handful of ledgers reused").
LEDGERS_IN_USE = 3
#: Payload sizes: half small, half large (a few adds rotate a small entry log).
SMALL_PAYLOAD_MAX = 64
LARGE_PAYLOAD = (600, 1500)
#: How many adds a burst pipelines before the runner reads anything.
BURST_MAX = 6
#: How many entries in flight at a crash are read back after the restart.
IN_FLIGHT_READS_MAX = 12


@attrs.frozen
class AddAction:
    """Pipelined: the runner does not wait for the answer."""

    ledger: int
    entry: int
    key: bytes
    data: bytes
    op = "add"


@attrs.frozen
class FenceAction:
    """Pipelined, like an add."""

    ledger: int
    key: bytes
    op = "fence"


@attrs.frozen
class ReadAction:
    ledger: int
    entry: int
    op = "read"


@attrs.frozen
class WriteCloseAction:
    """An advisory write close (spec/protocol/write_close.md), answered at once."""

    ledger: int
    key: bytes
    op = "write_close"


@attrs.frozen
class DeleteAction:
    ledger: int
    op = "delete"


@attrs.frozen
class CheckpointAction:
    op = "checkpoint"


@attrs.frozen
class GcAction:
    """A forced garbage collection (its compaction kind is predicted exactly by the model)."""

    op = "gc"


@attrs.frozen
class InspectAction:
    op = "inspect"


@attrs.frozen
class ProbeAction:
    """An optional op the bookie did not claim: it must answer ``unsupported``."""

    probe: str
    op = "probe"


@attrs.frozen
class Settle:
    """Wait until every request in flight is answered."""

    op = "settle"


@attrs.frozen
class KillAction:
    """SIGKILL of the bookie's process group (its page cache survives), then a restart.
    ``idle``: the runner settles first, so nothing is in flight."""

    idle: bool
    op = "kill"


@attrs.frozen
class TornTail:
    """A power loss that tears one of the last writes before it: the ``back``-th pending
    write from the end (0: the last), of which the first ``sectors`` 512-byte sectors
    survive, and with ``garbage`` the rest of its sectors hold garbage (spec/crash.py
    TornSectors) instead of nothing; every operation before it survives, none after. Which
    operation that is depends on what the bookie wrote, so the runner resolves it at the crash
    into the plan of spec/crash.py the trace records (``resolve``): a plan of fixed indices
    drawn ahead of time mostly tears a file's creation or a record that is not the last, never
    the torn last record a bookie must not serve."""

    back: int
    sectors: int
    garbage: int | None = None

    def resolve(self, writes: list[tuple[int, int]], pending: int) -> CrashPlan:
        """The plan for ``writes`` ((index, length) of each pending write) out of
        ``pending`` pending operations."""
        torn = [(i, n) for i, n in writes if n > 512 * self.sectors]  # a tear leaves some
        if not torn:
            return KeepPrefix(pending)
        index, _ = torn[max(0, len(torn) - 1 - self.back)]
        if self.garbage is None:
            return TornWrite(index, self.sectors)
        return TornSectors(index, frozenset(range(self.sectors)), self.garbage)

    def describe(self) -> str:
        garbage = ", garbage after" if self.garbage is not None else ""
        return f"tear the {self.back}-th last write after {self.sectors} sector(s){garbage}"


@attrs.frozen
class PowerLossAction:
    """The bookie's processes killed, then the lazy disk's power loss with ``plan``, then a
    restart on what survived."""

    plan: CrashPlan | TornTail
    idle: bool
    op = "power_loss"


Action = (
    AddAction
    | FenceAction
    | WriteCloseAction
    | ReadAction
    | DeleteAction
    | CheckpointAction
    | GcAction
    | InspectAction
    | ProbeAction
    | Settle
    | KillAction
    | PowerLossAction
)
CRASH_ACTIONS = (KillAction, PowerLossAction)


@attrs.frozen
class Scenario:
    """Scenario ``index`` of seed ``seed``: the actions, in order."""

    seed: int
    index: int
    profile: str
    actions: tuple[Action, ...]

    def with_actions(self, actions: tuple[Action, ...]) -> Scenario:
        return attrs.evolve(self, actions=actions)

    @property
    def crashes(self) -> int:
        return sum(isinstance(a, CRASH_ACTIONS) for a in self.actions)

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for action in self.actions:
            counts[action.op] = counts.get(action.op, 0) + 1
        parts = ", ".join(f"{n} {op}" for op, n in sorted(counts.items()))
        return f"scenario {self.index} (seed {self.seed}): {parts or 'nothing'}"


def rng_for(
    seed: int, index: int, *, profile: str, capabilities: Capabilities, lazy_disk: bool
) -> random.Random:
    """The scenario's random source, from a string of everything it may depend on."""
    # (write_close is left out: its actions are drawn apart, :func:`_with_write_closes`.)
    ops = ",".join(sorted(capabilities.ops - {"write_close"}))
    return random.Random(f"bkref-conform:{seed}:{index}:{profile}:{ops}:{int(lazy_disk)}")


def draw_plan(rng: random.Random) -> CrashPlan | TornTail:
    """A power-loss plan of spec/crash.py (the lazy disk applies it), or a torn last write
    (TornTail, resolved at the crash)."""
    kind = rng.randrange(7)
    if kind == 0:
        return LoseUnsynced()
    if kind == 1:
        return KeepPrefix(rng.randint(0, 12))
    if kind == 2:
        return TornWrite(rng.randint(0, 8), rng.randint(0, 3))
    if kind == 3:
        return KeepSubset(frozenset(i for i in range(16) if rng.random() < 0.5))
    if kind in (4, 5):  # twice as often: the torn last record is the case bookies miss
        garbage = rng.randrange(1 << 16) if rng.random() < 0.5 else None
        return TornTail(rng.randint(0, 2), rng.randint(1, 2), garbage)
    return KeepAll()


class _Workload:
    """The generator's memory: ledgers in use, their keys and next entries, what was sent, and
    what the client knows was acknowledged (sent, then settled with no crash between: a
    settle waits for every answer, and without faults an admitted add is answered ok)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_ledger = rng.randint(1, 5)
        self.ledgers: list[int] = []
        self.keys: dict[int, bytes] = {}
        self.next_entry: dict[int, int] = {}
        #: Entries acknowledged, by ledger; entries sent since the last settle.
        self.acked: dict[int, set[int]] = {}
        self.unsettled: dict[int, set[int]] = {}
        #: Ledgers with a fence sent, and with a fence acknowledged; fences since the settle.
        self.fenced: set[int] = set()
        self.fence_acked: set[int] = set()
        self.unsettled_fences: set[int] = set()
        #: Deleted ledgers (their keys stay in ``keys``).
        self.deleted: list[int] = []
        #: The entries in flight at the last crash with requests in flight.
        self.in_flight_at_crash: list[tuple[int, int]] = []
        for _ in range(LEDGERS_IN_USE):
            self._new_ledger()

    def _new_ledger(self) -> int:
        ledger = self.next_ledger
        self.next_ledger += self.rng.randint(1, 3)
        self.ledgers.append(ledger)
        self.keys[ledger] = self.rng.randbytes(self.rng.choice((4, 8, 20)))
        self.next_entry[ledger] = 0
        return ledger

    def key(self, ledger: int) -> bytes:
        # A wrong key only where the right one is acknowledged (spec/adapter.md R-CRASH-KEY:
        # where a crash may have lost the key, another key may create the ledger afresh, and
        # the add would observe nothing about auth).
        if (self.acked.get(ledger) or ledger in self.fence_acked) and self.rng.random() < 0.05:
            return self.rng.randbytes(4)  # a wrong key: unauthorized
        return self.keys[ledger]

    def payload(self) -> bytes:
        if self.rng.random() < 0.5:
            return self.rng.randbytes(self.rng.randint(0, SMALL_PAYLOAD_MAX))
        return self.rng.randbytes(self.rng.randint(*LARGE_PAYLOAD))

    def _add(self, ledger: int, key: bytes) -> AddAction:
        entry = self.next_entry[ledger]
        self.next_entry[ledger] = entry + 1
        self.unsettled.setdefault(ledger, set()).add(entry)
        return AddAction(ledger, entry, key, self.payload())

    def burst(self) -> list[Action]:
        out: list[Action] = []
        for _ in range(self.rng.randint(1, BURST_MAX)):
            ledger = self.rng.choice(self.ledgers)
            out.append(self._add(ledger, self.key(ledger)))
        return out

    def settle(self) -> Settle:
        for ledger, entries in self.unsettled.items():
            self.acked.setdefault(ledger, set()).update(entries)
        self.unsettled.clear()
        self.fence_acked |= self.unsettled_fences
        self.unsettled_fences.clear()
        return Settle()

    def crashed(self, *, idle: bool) -> None:
        """A crash: what was in flight may or may not have survived. Nothing is retired: the
        model keeps every outcome the crash can leave (a fence in flight held or not), and
        the next requests observe which one the bookie kept."""
        if not idle:
            self.in_flight_at_crash = sorted(
                (ledger, entry) for ledger, entries in self.unsettled.items() for entry in entries
            )
        self.unsettled.clear()
        self.unsettled_fences.clear()

    def after_restart(self) -> list[Action]:
        """What a client checks after a restart, so that every promise is observed
        (docs/conformance.md, "Promises observed"): entries that were in flight at the crash
        (never served torn, and what is shown stays), deleted ledgers (read, and added to:
        they stay deleted, or BookKeeper's answers create them again), fenced ledgers (added
        to, and fenced again), and an acknowledged entry."""
        rng = self.rng
        out: list[Action] = []
        in_flight = [(led, e) for led, e in self.in_flight_at_crash if led not in self.deleted]
        # Every one (the last ones first: a torn write is the last write before the crash).
        for ledger, entry in sorted(in_flight, key=lambda le: -le[1])[:IN_FLIGHT_READS_MAX]:
            out.append(ReadAction(ledger, entry))
        if self.deleted:
            ledger = rng.choice(self.deleted)
            out.append(ReadAction(ledger, rng.randrange(max(1, self.next_entry[ledger]))))
            if rng.random() < 0.5:
                out.append(self._add(ledger, self.keys[ledger]))
        fenced = sorted(set(self.fenced) & set(self.ledgers))
        if fenced:
            ledger = rng.choice(fenced)
            out.append(self._add(ledger, self.keys[ledger]))
            if rng.random() < 0.4:
                self.unsettled_fences.add(ledger)
                out.append(FenceAction(ledger, self.keys[ledger]))
        acked = [(led, e) for led in self.ledgers for e in sorted(self.acked.get(led, ()))]
        if acked:
            out.append(ReadAction(*rng.choice(acked)))
        self.in_flight_at_crash = []
        return out

    def read(self) -> ReadAction:
        roll = self.rng.random()
        ledger = self.rng.choice(self.ledgers)
        done = sorted(self.acked.get(ledger, ()))
        if roll < 0.6 and done:
            return ReadAction(ledger, self.rng.choice(done))  # acknowledged (or refused)
        if roll < 0.8:
            return ReadAction(ledger, self.next_entry[ledger] + self.rng.randint(0, 2))
        unsettled = sorted(self.unsettled.get(ledger, ()))
        if roll < 0.9 and unsettled:
            return ReadAction(ledger, self.rng.choice(unsettled))  # in flight
        return ReadAction(self.next_ledger + 1000, 0)  # a ledger nobody wrote

    def delete(self) -> list[Action]:
        """A delete, and a read of the deleted ledger at once (a cache the delete did not
        invalidate serves it)."""
        ledger = self.rng.choice(self.ledgers)
        self.ledgers.remove(ledger)
        self.deleted.append(ledger)
        self._new_ledger()
        entry = self.rng.randrange(max(1, self.next_entry[ledger]))
        return [DeleteAction(ledger), ReadAction(ledger, entry)]

    def fence(self) -> FenceAction:
        ledger = self.rng.choice(self.ledgers)
        self.unsettled_fences.add(ledger)
        self.fenced.add(ledger)
        return FenceAction(ledger, self.key(ledger))


def generate(
    seed: int,
    index: int,
    *,
    profile: str,
    capabilities: Capabilities,
    lazy_disk: bool,
    size: tuple[int, int] | None = None,
) -> Scenario:
    """Scenario ``index`` of ``seed``: deterministic from these arguments alone (of the
    capabilities only the claimed ops and whether inspect gives a state count). ``size``:
    (requests, crashes) instead of the profile's (the campaign's ``--steps``); the profile's
    name is then ``<requests>x<crashes>``, in the seed string too."""
    if size is not None:
        requests, crashes = size
        if requests < 1 or crashes < 0:
            raise ValueError(f"a scenario needs a request and no negative crashes: {size}")
        profile = f"{requests}x{crashes}"
    elif profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
    else:
        _, requests, crashes = PROFILES[profile]
    rng = rng_for(seed, index, profile=profile, capabilities=capabilities, lazy_disk=lazy_disk)
    work = _Workload(rng)
    ops = capabilities.ops
    inspects = "inspect" in ops and capabilities.state != "none"
    unclaimed = [op for op in ("checkpoint", "gc", "inspect") if op not in ops]
    probe_at = rng.randrange(requests) if capabilities.version >= 2 and unclaimed else -1
    crash_at = sorted(rng.sample(range(4, requests), min(crashes, max(0, requests - 4))))
    actions: list[Action] = []
    sent = 0
    while sent < requests:
        roll = rng.random()
        step: list[Action]
        if roll < 0.45:
            step = list(work.burst())
        elif roll < 0.63:
            step = [work.read()]
        elif roll < 0.67:
            step = [work.fence()]
        elif roll < 0.71:
            step = [work.settle(), *work.delete()]
        elif roll < 0.80:
            step = [work.settle()]
        elif roll < 0.85 and "checkpoint" in ops:
            step = [CheckpointAction()]
        elif roll < 0.89 and "gc" in ops:
            step = [work.settle(), GcAction()]
        elif roll < 0.96 and inspects:
            step = [InspectAction()]
        else:
            step = list(work.burst())
        before = sent
        sent += sum(not isinstance(a, Settle) for a in step)
        actions += step
        if before <= probe_at < sent:
            actions.append(ProbeAction(rng.choice(unclaimed)))
        while crash_at and before <= crash_at[0] < sent:
            crash_at.pop(0)
            actions += _crash(rng, work, lazy_disk=lazy_disk)
    if "write_close" in ops:
        actions = _with_write_closes(actions, seed, index, profile, "checkpoint" in ops)
    return Scenario(seed, index, profile, tuple(actions))


#: How often a write close follows an add (when the bookie claims write_close), and how often
#: a checkpoint follows it (when claimed: the checkpoint then seals the ledger's log).
WRITE_CLOSE_RATE = 0.08
CHECKPOINT_AFTER_WRITE_CLOSE = 0.5


def _with_write_closes(
    actions: list[Action], seed: int, index: int, profile: str, checkpoints: bool
) -> list[Action]:
    """``actions`` with write closes after some adds: of the add's ledger with its key (one
    in ten with a wrong key), now and then followed by a checkpoint; later adds to the
    ledger stay (a write close is a hint). Drawn from a random source of their own, so the
    rest of the scenario is the one a bookie without write_close gets, action for action."""
    rng = random.Random(f"bkref-conform-write-close:{seed}:{index}:{profile}")
    out: list[Action] = []
    for action in actions:
        out.append(action)
        if isinstance(action, AddAction) and rng.random() < WRITE_CLOSE_RATE:
            key = action.key if rng.random() < 0.9 else action.key + b"?"
            out.append(WriteCloseAction(action.ledger, key))
            if checkpoints and rng.random() < CHECKPOINT_AFTER_WRITE_CLOSE:
                out.append(CheckpointAction())
    return out


def _crash(rng: random.Random, work: _Workload, *, lazy_disk: bool) -> list[Action]:
    """A crash (the runner restarts the bookie after it), then what a client checks."""
    idle = rng.random() < 0.4
    if idle:
        work.settle()
    work.crashed(idle=idle)
    crash: Action
    if lazy_disk and rng.random() < 0.6:
        crash = PowerLossAction(draw_plan(rng), idle)
    else:
        crash = KillAction(idle)
    checks = work.after_restart()
    actions: list[Action] = [crash, *checks]
    if lazy_disk and not idle and rng.random() < 0.3:
        # Power goes again right after what recovery showed was read, before anything else
        # is written: what it showed must have been made durable (R-RECOVERY-SHOWN).
        reads = [a for a in checks if isinstance(a, ReadAction)]
        actions += [PowerLossAction(LoseUnsynced(), idle=True), *reads]
    return actions
