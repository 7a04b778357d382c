"""Which promise each step of a trace observed, and after which crash: coverage that says what
was checked, not only what was run.

Spec pages: spec/properties.md (properties 1-4), spec/adapter.md ("Rules the model
enforces"), docs/conformance.md ("Promises observed").

Why: a run passes when no answer broke a promise, but a promise no answer could have broken
passes too. A delete acknowledged before it is durable passes every run whose workload never
reads the deleted ledger after a power loss; a read cache that a delete does not invalidate
passes every run that never reads a ledger right after its delete (issue 25: three real bug
classes passed every run while the coverage matrix, which counted operations by crash
point, looked full). So a step **observes** a promise when its answer could have shown the
promise broken, judged by what the model knew just before it:

- ``durability``: a read of an acknowledged entry (it must read back with its bytes);
- ``in_flight``: a read of an entry a crash left unsure (an add in flight at it): whatever
  it returns must be the bytes some add wrote, never a torn record, and it then stays;
- ``fence``: an add to a ledger whose fence is acknowledged (it must be refused);
- ``auth``: an add or fence with another key to a ledger whose key is durable;
- ``resurrection``: a read of, an add to or a fence of a ledger whose delete is durable.

Each observation is counted under the plan of the last crash before it (``none`` before
the first crash of the run): the promises that matter most are the ones kept across a power
loss. The report shows every (promise, plan) pair the run could have observed and did not
as a gap.

Not counted: observations through a state (``inspect``), which only bookies claiming one
give, and the acknowledgements themselves (every run observes those).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from models.bookie.bookie import BookieModel
from models.index.ledger_index import Dur, Sure
from spec.crash import (
    CrashPlan,
    KeepAll,
    KeepPrefix,
    KeepSubset,
    KillProcess,
    LoseUnsynced,
    TornSectors,
    TornWrite,
    Unknown,
)
from spec.operations import Add, Crash, Fence, Operation, Read

#: The promises, in the order reports show them.
PROMISES = ("durability", "in_flight", "fence", "auth", "resurrection")
#: The plan a crash is counted under (spec/crash.py), and ``none`` before any crash: the
#: names coverage cells and promise counts use (proofs/conform/results.py).
PLAN_NAMES: dict[type[CrashPlan], str] = {
    KillProcess: "kill",
    LoseUnsynced: "lose_unsynced",
    KeepPrefix: "keep_prefix",
    TornWrite: "torn_write",
    TornSectors: "torn_write",
    KeepSubset: "keep_subset",
    KeepAll: "keep_all",
    Unknown: "unknown",
}
PLANS = ("none", "kill", "lose_unsynced", "keep_prefix", "torn_write", "keep_subset", "keep_all")

Observation = tuple[str, str]


def plan_name(op: Crash) -> str:
    return PLAN_NAMES.get(type(op.plan), "unknown")


def observes(
    model: BookieModel, op: Operation, unsure: frozenset[tuple[int, int]] = frozenset()
) -> list[str]:
    """The promises ``op``'s answer will observe, from the model's knowledge before it.
    ``unsure``: the entries the last crash left unsure (a read of one observes
    ``in_flight`` even where a state has since shown what recovery kept)."""
    if not model.up or not isinstance(op, Add | Fence | Read):
        return []
    ledgers = model.ledgers
    ledger = ledgers.ledgers.get(op.ledger)
    if ledger is None:
        return []
    if ledgers.durably_deleted(op.ledger):
        return ["resurrection"]
    if isinstance(op, Read):
        entry = ledger.entries.get(op.entry)
        if (op.ledger, op.entry) in unsure:
            return ["in_flight"]
        if entry is None:
            return []
        if entry.sure is Sure.DURABLE and entry.heads is None:
            return ["durability"]
        return ["in_flight"] if entry.sure is Sure.MAYBE else []
    found = []
    keyed = ledgers.key_durable(op.ledger)
    if keyed and ledger.every(lambda head: head.key != op.key):
        found.append("auth")
    elif isinstance(op, Add) and ledger.every(
        lambda head: head.exists and head.fence_mem and head.fence_dur is Dur.YES
    ):
        found.append("fence")
    return found


class PromiseCounter:
    """Counts the observations of a trace replayed step by step: call :meth:`before` with
    each step's operation before the model takes it, and :meth:`after` after."""

    def __init__(self) -> None:
        self.counts: Counter[Observation] = Counter()
        self.plan = "none"
        self.unsure: frozenset[tuple[int, int]] = frozenset()

    def before(self, model: BookieModel, op: Operation) -> None:
        if isinstance(op, Crash):
            self.plan = plan_name(op)
            return
        for promise in observes(model, op, self.unsure):
            self.counts[(promise, self.plan)] += 1

    def after(self, model: BookieModel, op: Operation) -> None:
        if isinstance(op, Crash):
            self.unsure = frozenset(model.uncertain_entries())


def promise_keys(counts: Counter[Observation]) -> dict[str, int]:
    """The counts keyed ``promise/plan``, as campaign rows hold them."""
    return {f"{promise}/{plan}": n for (promise, plan), n in sorted(counts.items()) if n}


def promise_counts(keys: dict[str, int]) -> Counter[Observation]:
    """:func:`promise_keys` undone."""
    counts: Counter[Observation] = Counter()
    for key, n in keys.items():
        promise, _, plan = key.partition("/")
        counts[(promise, plan)] += n
    return counts


def gaps(counts: Counter[Observation], plans: Iterable[str]) -> list[Observation]:
    """The (promise, plan) pairs, of ``plans``, never observed (an entry in flight at a crash
    needs a crash: not ``in_flight`` before one)."""
    return [
        (promise, plan)
        for promise in PROMISES
        for plan in plans
        if not counts[(promise, plan)] and (promise, plan) != ("in_flight", "none")
    ]
