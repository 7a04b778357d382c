"""What a campaign reached: coverage cells counted from each scenario's trace, the probes (the
rare situations the refinement workload records) with the minimum counts a campaign must
reach, and the steering of a second pass toward what the first one missed.

Spec pages: spec/crash.py (the crash plans), spec/operations.py (the operations and faults),
docs/campaign.md ("Coverage").

Why it is shaped so:

- A **cell** is ``operation/point/plan/fault``: the operation a crash met, ``inside`` it
  (the machine died after some of its file-system operations) or ``after`` it (the crash was
  the next step), the crash plan's kind, and the kind of the last injected fault that fired
  since the bookie last started (``none`` if none did); a fault that fired with no crash is
  the cell ``operation/none/none/fault``. Cells are counted from the trace alone
  (:func:`cells_of`), so a recorded trace of any bookie yields them too.
- The cells a campaign is expected to reach are the crash inside each operation the
  workload runs with a crash point, under each plan (:func:`expected_cells`): the report
  highlights the ones never reached, and the second pass steers toward them.
- A **probe** is a situation the workload records through its ``seen`` callback; its
  minimum is a rate per 1,000 rules run (:data:`PROBES`), so a campaign of any size has a
  minimum of its own (:func:`minimum`), at least 1.
- Steering (:func:`targets`) gives each scenario of the second pass one thing to aim at, in
  turn: a missed probe (favouring the rules that produce it, :data:`PROBES`) or a missed cell
  (the rules that run its operation with a crash point, :data:`CRASH_RULES`, and its plan
  kind). One target per scenario, not all at once: favouring every rule of every target is
  favouring nothing.

Not verified here: that a favoured rule does reach its probe; tests/unit/proofs/campaign/
measures that the steering closes what it aims at.
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

from impl.entrylog.manager import (
    EVICTED_AT_MOST_ACTIVE,
    EVICTED_ON_EXPIRY,
    FORGOTTEN_AT_MOST_MAPPED,
    FORGOTTEN_ON_EXPIRY,
    IDLE_SLOT_SEALED,
    MOVED_OFF_FULL_DIR,
    RETIRED_FULL_DIR,
    SEALED_WRITE_CLOSED,
)
from proofs.harness.workload import PLAN_KINDS
from spec.crash import CrashPlan
from spec.operations import Crash, Restart
from spec.trace import Step

#: The plan kinds in the order the matrix shows them (kill -9 first, then power cuts).
PLAN_ORDER = ("kill", "keep_all", "lose_unsynced", "keep_prefix", "torn_write", "keep_subset")

#: The operations the workload runs with a crash point (a crash inside them), each with the
#: rules that do so.
CRASH_RULES: Mapping[str, tuple[str, ...]] = {
    "add": ("add_then_crash",),
    "delete": ("delete",),
    "checkpoint": ("checkpoint",),
    "journal_force": ("journal_force",),
    "journal_sync": ("group_commit_with_adds_between_its_phases",),
    "checkpoint_persist": ("checkpoint_with_adds_between_its_phases",),
    "rotate": ("rotate",),
    "shutdown": ("shutdown_and_restart",),
    "restart": ("crash", "checkpoint_then_crash", "crash_inside_recovery_of_a_compaction"),
    "gc": ("gc",),
    "gc_begin": (
        "gc_begin",
        "crash_inside_a_compaction_phase",
        "compaction_with_requests_between_its_phases",
    ),
    "compact_copy": ("compact_copy", "crash_inside_a_compaction_phase"),
    "compact_flush": ("compact_flush", "crash_inside_a_compaction_phase"),
    "compact_index": ("compact_index", "crash_inside_a_compaction_phase"),
}


def plan_name(plan: CrashPlan) -> str:
    """A crash plan's kind as cells name it (``unknown`` for a recorded ``unknown``)."""
    kind = PLAN_KINDS.get(type(plan))
    if kind is not None:
        return kind
    name = type(plan).__name__
    return {"TornSectors": "torn_write", "Unknown": "unknown"}.get(name, name.lower())


def cells_of(steps: Sequence[Step]) -> dict[str, int]:
    """The cells ``steps`` reached, with how often (see the module docstring)."""
    cells: collections.Counter[str] = collections.Counter()
    fault = "none"
    for position, step in enumerate(steps):
        if isinstance(step.op, Crash):
            before = steps[position - 1] if position else None
            op = before.op.name if before is not None else "start"
            point = "inside" if before is not None and before.result.crashed else "after"
            cells[f"{op}/{point}/{plan_name(step.op.plan)}/{fault}"] += 1
            continue
        if isinstance(step.op, Restart):
            fault = "none"
        for fired in step.faults:
            fault = fired.op
            cells[f"{step.op.name}/none/none/{fired.op}"] += 1
    return dict(cells)


def expected_cells() -> tuple[str, ...]:
    """The crash cells a campaign is expected to reach, fault collapsed (``*``): a crash
    inside each operation of :data:`CRASH_RULES` under each plan kind."""
    return tuple(f"{op}/inside/{plan}/*" for op in CRASH_RULES for plan in PLAN_ORDER)


def collapse(cell: str) -> str:
    """A cell with its fault replaced by ``*``."""
    op, point, plan, _ = cell.split("/")
    return f"{op}/{point}/{plan}/*"


def collapsed(cells: Mapping[str, int]) -> dict[str, int]:
    """Cell counts with the fault dimension summed out."""
    out: collections.Counter[str] = collections.Counter()
    for cell, count in cells.items():
        out[collapse(cell)] += count
    return dict(out)


# --- probes -------------------------------------------------------------------------------


@attrs.frozen
class Probe:
    """A situation the workload records: at least ``per_1000_rules`` of it per 1,000 rules a
    campaign runs, and the rules that produce it."""

    per_1000_rules: float
    rules: tuple[str, ...]


def _p(rate: float, *rules: str) -> Probe:
    return Probe(rate, rules)


#: Every probe a campaign is held to, by the text the workload records. Their names are the
#: refinement test's (tests/refinement/test_coverage.py MINIMUMS): the same situations,
#: measured both ways. The rates are about a third of what a seeded campaign of the default
#: shape measured (docs/benchmarks.md, "Campaign coverage rates"), so a default campaign
#: meets them with room; a rare one (under 1 per 1,000) is reached only by larger campaigns
#: or the second pass.
PROBES: Mapping[str, Probe] = {
    "crash during add": _p(4.4, "add_then_crash"),
    "crash during journal_force": _p(0.7, "journal_force"),
    "crash during checkpoint": _p(1.1, "checkpoint"),
    "crash during restart": _p(11.0, "crash", "checkpoint_then_crash"),
    "crash during journal_sync": _p(0.47, "group_commit_with_adds_between_its_phases"),
    "crash during checkpoint_persist": _p(1.1, "checkpoint_with_adds_between_its_phases"),
    "crash between a fence and its ack": _p(0.9, "fence", "crash"),
    "crash with adds waiting for the journal": _p(12.0, "crash", "add"),
    "crash right after a checkpoint": _p(7.8, "checkpoint_then_crash"),
    "crash after a failed fsync in a checkpoint": _p(8.2, "fsync_failure_in_checkpoint"),
    "crash after a group commit with adds between its phases": _p(
        4.0, "group_commit_with_adds_between_its_phases"
    ),
    "crash after a checkpoint with adds between its phases": _p(
        3.6, "checkpoint_with_adds_between_its_phases"
    ),
    "a power cut after a process kill and a restart": _p(8.5, "process_killed_then_power_cut"),
    "a power cut right after a shutdown": _p(3.5, "shutdown_and_restart"),
    "restart replayed journal records": _p(9.8, "crash", "healthy_stretch"),
    "replay with fence records": _p(0.86, "fence", "crash"),
    "entry log rotated": _p(156.0, "healthy_stretch", "rotate"),
    "journal rolled over": _p(15.0, "healthy_stretch", "journal_force"),
    "a journal id with one more hex digit": _p(304.0, "healthy_stretch", "crash"),
    "an add at the rotation boundary": _p(3.5, "add_to_the_boundary"),
    "an add as large as the write buffer": _p(1.9, "add_to_the_boundary"),
    "a log sealed with its ledgers at a map batch boundary": _p(1.7, "add_to_the_boundary"),
    "an add sent again": _p(8.1, "add_again"),
    "an add taken while the active log's directory is full": _p(12.0, "disk_full", "add"),
    "a fault fired: fsync of entry_log": _p(4.8, "inject_fault", "fsync_failure_in_checkpoint"),
    "a fault fired: fsync of last_mark": _p(3.1, "inject_fault", "fsync_failure_in_checkpoint"),
    "a fault fired: write of entry_log": _p(0.74, "inject_fault", "add"),
    "a fault fired: read of entry_log": _p(2.0, "inject_fault"),
    "a fault fired: no_space of journal": _p(1.2, "disk_full", "add"),
    "a fault fired: fsync of journal": _p(0.26, "inject_fault", "journal_force"),
    "a fault fired: fsync of directory": _p(1.3, "inject_fault", "rotate"),
    "a fault fired: write of index": _p(0.44, "inject_fault", "checkpoint"),
    "a fault fired: read of index": _p(0.57, "inject_fault", "read"),
    "a fault fired: no_space of entry_log": _p(4.6, "disk_full", "add"),
    "checkpoint found no room": _p(2.2, "full_disk_in_background_work"),
    "checkpoint_flush found no room": _p(2.2, "full_disk_in_background_work"),
    "preallocate found no room": _p(1.2, "full_disk_in_background_work"),
    "service resumed after checkpoint found no room": _p(2.2, "full_disk_in_background_work"),
    "service resumed after checkpoint_flush found no room": _p(2.2, "full_disk_in_background_work"),
    "service resumed after preallocate found no room": _p(1.2, "full_disk_in_background_work"),
    "crash inside compaction gc_begin": _p(
        1.1, "crash_inside_a_compaction_phase", "compaction_with_requests_between_its_phases"
    ),
    "crash inside compaction gc": _p(0.69, "gc"),
    "crash inside compaction copy": _p(
        0.7, "crash_inside_a_compaction_phase", "compaction_with_requests_between_its_phases"
    ),
    "crash inside compaction flush": _p(
        0.56, "crash_inside_a_compaction_phase", "compaction_with_requests_between_its_phases"
    ),
    "crash inside compaction index": _p(
        0.69, "crash_inside_a_compaction_phase", "compaction_with_requests_between_its_phases"
    ),
    "crash inside recovery after a compaction": _p(3.3, "crash_inside_recovery_of_a_compaction"),
    "an add between compaction phases (copied)": _p(2.2, "crash_inside_a_compaction_phase"),
    "an add between compaction phases (flushed)": _p(1.7, "crash_inside_a_compaction_phase"),
    "a delete between copy and index": _p(0.73, "crash_inside_a_compaction_phase"),
    "a fault in compact_copy": _p(1.4, "fault_in_a_compaction"),
    "a fault in compact_flush": _p(1.5, "fault_in_a_compaction"),
    "a fault in compact_index": _p(0.9, "fault_in_a_compaction"),
    "a GC deleted dead logs": _p(30.0, "compaction_with_requests_between_its_phases", "gc"),
    "a compaction finished": _p(4.6, "compaction_with_requests_between_its_phases"),
    "a whole gc compacted logs": _p(0.61, "gc"),
    "a compaction of a log id >= 16": _p(2.9, "rotate_many", "crash_inside_a_compaction_phase"),
}


#: With an entry log per ledger (``--manager per-ledger``) a log holds one ledger's records, so
#: it is either wholly live or wholly dead: GC deletes dead logs and never finds a log to
#: compact (usage is 0 or 1), and nothing is preallocated. What cannot happen is not a
#: coverage miss (docs/entry-log-managers.md measures the first).
NOT_WITH_MANAGER: Mapping[str, frozenset[str]] = {
    "single": frozenset(),
    "per-ledger": frozenset(
        name
        for name in PROBES
        if "compaction" in name
        or "compact_" in name
        or name == "a whole gc compacted logs"
        or name == "a delete between copy and index"
        or "preallocate" in name
    ),
    # With slots (``--manager slots``, bkref's own) logs hold several ledgers, so GC does
    # compact; only preallocation cannot happen (the slots manager preallocates nothing).
    "slots": frozenset(name for name in PROBES if "preallocate" in name),
}
#: The same for the expected crash cells: a crash inside a compaction phase.
CELLS_NOT_WITH_MANAGER: Mapping[str, tuple[str, ...]] = {
    "single": (),
    "per-ledger": ("compact_copy/", "compact_flush/", "compact_index/"),
    "slots": (),
}


#: The probes of the managers with many active logs, each held by its manager's campaigns
#: only: what the bookie's entry-log manager let go or moved, and why (impl/entrylog/
#: manager.py EVENTS, counted by the manager, recorded by the workload after each step).
#: The clock rule and the write close are drawn only with these managers
#: (proofs/harness/workload.py MANY_LOG_RULES). Rates as for PROBES: about a third of what
#: a seeded campaign measured (docs/benchmarks.md, "The managers' own coverage").
MANAGER_PROBES: Mapping[str, Mapping[str, Probe]] = {
    "single": {},
    "per-ledger": {
        EVICTED_ON_EXPIRY: _p(1.7, "advance_clock"),
        EVICTED_AT_MOST_ACTIVE: _p(100.0, "healthy_stretch", "add", "new_ledger"),
        SEALED_WRITE_CLOSED: _p(1.9, "write_close"),
        MOVED_OFF_FULL_DIR: _p(1.7, "disk_full"),
    },
    "slots": {
        FORGOTTEN_ON_EXPIRY: _p(2.9, "advance_clock"),
        FORGOTTEN_AT_MOST_MAPPED: _p(100.0, "healthy_stretch", "add", "new_ledger"),
        SEALED_WRITE_CLOSED: _p(2.0, "write_close"),
        RETIRED_FULL_DIR: _p(1.7, "disk_full"),
        IDLE_SLOT_SEALED: _p(1.9, "advance_clock"),
    },
}


#: The shared probes whose rate is another with a manager, measured (a seeded campaign of
#: 400 scenarios; PROBES's rates are a third of the single log's): with many active logs an
#: fsync fault aimed at any file lands on one of several logs first, so lastMark's fsync
#: fails less often (1.4 per 1,000 rules with a log per ledger, 1.2 with slots, against 9);
#: slots' shared logs are compacted fewer at a time, so fewer compactions reach a log id of
#: 16 (2.9 per 1,000 rules, against 8.7).
RATE_WITH_MANAGER: Mapping[str, Mapping[str, float]] = {
    "single": {},
    "per-ledger": {"a fault fired: fsync of last_mark": 0.45},
    "slots": {"a fault fired: fsync of last_mark": 0.4, "a compaction of a log id >= 16": 1.0},
}


def probes_for(manager: str) -> dict[str, Probe]:
    """The probes a campaign with ``manager`` is held to: those of :data:`PROBES` that can
    happen with it (at its rate, :data:`RATE_WITH_MANAGER`), then its own
    (:data:`MANAGER_PROBES`)."""
    rates = RATE_WITH_MANAGER[manager]
    shared = {
        name: attrs.evolve(p, per_1000_rules=rates.get(name, p.per_1000_rules))
        for name, p in PROBES.items()
        if name not in NOT_WITH_MANAGER[manager]
    }
    return {**shared, **MANAGER_PROBES[manager]}


def _probe(name: str) -> Probe:
    """Probe ``name``, of :data:`PROBES` or of a manager's own."""
    if name in PROBES:
        return PROBES[name]
    return next(table[name] for table in MANAGER_PROBES.values() if name in table)


def minimum(probe: Probe, rules_run: int) -> int:
    """The minimum count of ``probe`` for a campaign that ran ``rules_run`` rules (at least
    1: every probe must be reached once)."""
    return max(1, math.ceil(round(probe.per_1000_rules * rules_run / 1000, 6)))


@attrs.frozen
class ProbeStatus:
    name: str
    count: int
    minimum: int

    @property
    def met(self) -> bool:
        return self.count >= self.minimum


def probe_status(
    counts: Mapping[str, int], rules_run: int, manager: str = "single"
) -> tuple[ProbeStatus, ...]:
    """Every probe of :data:`PROBES` that applies with ``manager``, with its count and
    minimum, in table order."""
    return tuple(
        ProbeStatus(name, counts.get(name, 0), minimum(probe, rules_run))
        for name, probe in probes_for(manager).items()
    )


def missed_cells(counts: Mapping[str, int], manager: str = "single") -> tuple[str, ...]:
    """The expected cells (fault collapsed) with no count, of those that can happen with
    ``manager``."""
    reached = collapsed(counts)
    skip = CELLS_NOT_WITH_MANAGER[manager]
    return tuple(
        cell for cell in expected_cells() if not reached.get(cell) and not cell.startswith(skip)
    )


@attrs.frozen
class Target:
    """One thing a second-pass scenario aims at: a missed probe or cell, and what reaches it
    (the rules to favour, and the crash plans, crash points inside a step and faults)."""

    name: str
    rules: frozenset[str]
    plans: frozenset[str] = frozenset()
    inside: bool = False
    faults: frozenset[str] = frozenset()


_FAULT_PROBE = re.compile(r"^a fault fired: (fsync|write|read) of (\w+)$")


def probe_target(name: str) -> Target:
    """What reaches probe ``name``: its rules; a crash inside a step for the crash probes;
    the fault itself for a fault probe."""
    fault = _FAULT_PROBE.match(name)
    return Target(
        name,
        frozenset(_probe(name).rules),
        inside=name.startswith(("crash during", "crash inside")),
        faults=frozenset({f"{fault.group(1)}:{fault.group(2)}"}) if fault else frozenset(),
    )


def targets(missed_probes: Iterable[str], cells: Iterable[str]) -> tuple[Target, ...]:
    """A target per missed probe and per missed cell (the rules that crash inside its
    operation, its plan kind, a crash point inside), probes first."""
    found = [probe_target(name) for name in missed_probes]
    for cell in cells:
        op, _, plan, _ = cell.split("/")
        rules = frozenset(CRASH_RULES.get(op, ()))
        found.append(Target(cell, rules, frozenset({plan}), inside=True))
    return tuple(found)
