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

The workload has the refinement machine's biases (tests/refinement/machine.py, whose
docstring says why they pay; proofs/ does not import tests/): a handful of ledgers reused,
one master key each (now and then a wrong one), half the payloads large so entry logs
rotate, bursts of pipelined adds (a group commit acknowledges many at once), fences, deletes
(a deleted ledger is never written again: a new one takes its place), reads of acknowledged
entries, of entries still in flight, of entries never written and of ledgers that do not
exist, forced garbage collections and checkpoints when the bookie claims them, an
``inspect`` after some steps when it claims a state; and crashes: a SIGKILL of the bookie's
process group with adds in flight or when it is idle, and with the lazy disk a power loss
with a drawn plan of spec/crash.py. Each crash is followed by a restart; each scenario ends
with a clean ``shutdown`` (the runner's, not an action: shrinking keeps it).

An (ledger, entry) is added at most once in a scenario: the model does not cover an entry
added twice, and a bookie's answer to it is its own business (spec/adapter.md, ``add``).
"""

from __future__ import annotations

import random

import attrs

from proofs.conform.results import Capabilities
from spec.crash import CrashPlan, KeepAll, KeepPrefix, KeepSubset, LoseUnsynced, TornWrite

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
class PowerLossAction:
    """The bookie's processes killed, then the lazy disk's power loss with ``plan``, then a
    restart on what survived."""

    plan: CrashPlan
    idle: bool
    op = "power_loss"


Action = (
    AddAction
    | FenceAction
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
    ops = ",".join(sorted(capabilities.ops))
    return random.Random(f"bkref-conform:{seed}:{index}:{profile}:{ops}:{int(lazy_disk)}")


def draw_plan(rng: random.Random) -> CrashPlan:
    """A power-loss plan of spec/crash.py (the lazy disk applies it)."""
    kind = rng.randrange(5)
    if kind == 0:
        return LoseUnsynced()
    if kind == 1:
        return KeepPrefix(rng.randint(0, 12))
    if kind == 2:
        return TornWrite(rng.randint(0, 8), rng.randint(0, 3))
    if kind == 3:
        return KeepSubset(frozenset(i for i in range(16) if rng.random() < 0.5))
    return KeepAll()


class _Workload:
    """The generator's memory: ledgers in use, their keys and next entries, what was sent."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_ledger = rng.randint(1, 5)
        self.ledgers: list[int] = []
        self.keys: dict[int, bytes] = {}
        self.next_entry: dict[int, int] = {}
        #: Entries sent before the last settle (acknowledged unless refused), by ledger.
        self.settled: dict[int, int] = {}
        #: Ledgers fenced since the last settle.
        self.unsettled_fences: set[int] = set()
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
        # A wrong key only where the right one is surely set (an add was settled): where a
        # crash may have lost the key, the model cannot tell unauthorized from ok without
        # the bookie's state (a bookie of state none).
        if self.settled.get(ledger, 0) and self.rng.random() < 0.05:
            return self.rng.randbytes(4)  # a wrong key: unauthorized
        return self.keys[ledger]

    def payload(self) -> bytes:
        if self.rng.random() < 0.5:
            return self.rng.randbytes(self.rng.randint(0, SMALL_PAYLOAD_MAX))
        return self.rng.randbytes(self.rng.randint(*LARGE_PAYLOAD))

    def burst(self) -> list[Action]:
        out: list[Action] = []
        for _ in range(self.rng.randint(1, BURST_MAX)):
            ledger = self.rng.choice(self.ledgers)
            entry = self.next_entry[ledger]
            self.next_entry[ledger] = entry + 1
            out.append(AddAction(ledger, entry, self.key(ledger), self.payload()))
        return out

    def settle(self) -> Settle:
        self.settled = dict(self.next_entry)
        self.unsettled_fences.clear()
        return Settle()

    def crashed(self) -> None:
        """A crash: a ledger with a fence in flight is retired (no add goes to it again): the
        fence may or may not have survived, and without the bookie's state the model cannot
        tell which (it would refuse the add's ok)."""
        for ledger in sorted(self.unsettled_fences):
            if ledger in self.ledgers:
                self.ledgers.remove(ledger)
                self.settled.pop(ledger, None)
                self._new_ledger()
        self.unsettled_fences.clear()

    def read(self) -> ReadAction:
        roll = self.rng.random()
        ledger = self.rng.choice(self.ledgers)
        done = self.settled.get(ledger, 0)
        if roll < 0.6 and done:
            return ReadAction(ledger, self.rng.randrange(done))  # acknowledged (or refused)
        if roll < 0.8:
            return ReadAction(ledger, self.next_entry[ledger] + self.rng.randint(0, 2))
        if roll < 0.9 and self.next_entry[ledger] > done:
            return ReadAction(ledger, self.rng.randrange(done, self.next_entry[ledger]))
        return ReadAction(self.next_ledger + 1000, 0)  # a ledger nobody wrote

    def delete(self) -> DeleteAction:
        ledger = self.rng.choice(self.ledgers)
        self.ledgers.remove(ledger)
        self.settled.pop(ledger, None)
        self._new_ledger()
        return DeleteAction(ledger)

    def fence(self) -> FenceAction:
        ledger = self.rng.choice(self.ledgers)
        self.unsettled_fences.add(ledger)
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
            step = [work.settle(), work.delete()]
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
            actions.append(_crash(rng, work, lazy_disk=lazy_disk))
    return Scenario(seed, index, profile, tuple(actions))


def _crash(rng: random.Random, work: _Workload, *, lazy_disk: bool) -> Action:
    idle = rng.random() < 0.4
    if idle:
        work.settle()
    work.crashed()
    if lazy_disk and rng.random() < 0.6:
        return PowerLossAction(draw_plan(rng), idle)
    return KillAction(idle)
