"""Every consumer's per-operation table covers the operation registry (spec/operations.py).

The consumers check their tables when their modules are imported (``require_complete``);
here they are gathered and checked again, against the registry and against a registry with
new operations declared (one answered at once, one answered later: a ``trim`` and a
``force_ledger``, which do not exist): each table must then fail, naming its consumer and
the operation, so adding an operation is pointed at every place still missing it. And the Hypothesis
machine's table is checked against the machine: the rules it names exist, every rule is
named, and each named rule does run its operation.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from hypothesis.stateful import RULE_MARKER

import models.bookie.bookie
import proofs.cli.check_trace
import proofs.cli.explain
import proofs.harness.refinement
import spec.properties
import spec.trace
import tests.refinement.machine
from proofs.harness.refinement import MANAGER_SETTINGS
from proofs.harness.workload import PRODUCERS
from spec.crash import LoseUnsynced
from spec.operations import (
    REGISTRY,
    DiskFull,
    FailFsync,
    FailRead,
    FailWrite,
    IncompleteTable,
    Kind,
    OperationSpec,
    checked_tables,
    require_complete,
    table_problem,
)
from tests.paths import ROOT
from tests.refinement.machine import machine_for, machine_with

#: Every table of a consumer, by the consumer's name in its require_complete call.
CONSUMERS: Mapping[str, Mapping[type[Any], object]] = {
    "the model's step rules (models/bookie/bookie.py STEP_RULES)": (
        models.bookie.bookie.STEP_RULES
    ),
    "the in-process system under test (proofs/harness/refinement.py IN_PROCESS)": (
        proofs.harness.refinement.IN_PROCESS
    ),
    "the trace codec's result shapes (spec/trace.py RESULT_SHAPES)": spec.trace.RESULT_SHAPES,
    "the property monitor's rules (spec/properties.py RULES)": spec.properties.RULES,
    "the property monitor's ack rules (spec/properties.py ACK_RULES)": (spec.properties.ACK_RULES),
    "check-trace's describers (proofs/cli/check_trace.py DESCRIBERS)": (
        proofs.cli.check_trace.DESCRIBERS
    ),
    "check-trace's ack targets (proofs/cli/check_trace.py ACK_TARGETS)": (
        proofs.cli.check_trace.ACK_TARGETS
    ),
    "explain's tellings (proofs/cli/explain.py TELLINGS)": proofs.cli.explain.TELLINGS,
    "the refinement workload (proofs/harness/workload.py PRODUCERS)": PRODUCERS,
}


def _recorded() -> dict[str, Any]:
    return {checked.consumer: checked for checked in checked_tables()}


def test_every_consumer_checked_its_table_at_import() -> None:
    recorded = _recorded()
    for consumer, table in CONSUMERS.items():
        assert consumer in recorded, f"{consumer} does not check its table"
        assert recorded[consumer].table is table, consumer


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_each_table_covers_the_registry(consumer: str) -> None:
    checked = _recorded()[consumer]
    assert table_problem(checked.table, consumer, among=checked.among) is None


def _declared(new_name: str, *, later: bool) -> OperationSpec:
    """A new operation ``new_name``, declared beside the registry's (not in it)."""

    @attrs.frozen
    class New:
        """A new operation."""

        ledger: int
        name = new_name

    return OperationSpec(
        New, new_name, ("ledger",), Kind.REQUEST, later, new_name, "A new operation."
    )


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_a_new_operation_is_missing_from_each_table_by_name(consumer: str) -> None:
    checked = _recorded()[consumer]
    trim, later = _declared("trim", later=False), _declared("force_ledger", later=True)
    registry = [*REGISTRY.values(), trim, later]
    problem = table_problem(checked.table, consumer, among=checked.among, registry=registry)
    assert problem is not None, f"{consumer} does not notice a new operation"
    assert problem.startswith(f"{consumer} has no entry for the operation(s) ")
    expected = "force_ledger" if checked.among(trim) is False else "trim, force_ledger"
    assert f"operation(s) {expected} declared in spec/operations.py" in problem


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_a_copy_of_each_table_without_an_entry_is_refused(consumer: str) -> None:
    checked = _recorded()[consumer]
    copy = dict(checked.table)
    removed = next(iter(copy))
    del copy[removed]
    with pytest.raises(IncompleteTable) as info:
        require_complete(copy, consumer, among=checked.among)
    assert str(info.value).startswith(f"{consumer} has no entry for the operation(s) ")
    assert f"operation(s) {REGISTRY[removed].name} declared" in str(info.value)
    assert _recorded()[consumer].table is checked.table, "a refused table is not recorded"


def test_declaring_an_operation_fails_the_imports_naming_the_consumer() -> None:
    """End to end, in a fresh interpreter: declare ``trim`` with the decorator, then import
    the trace codec: the import fails, naming its table and ``trim``."""
    program = (
        "import attrs\n"
        "from spec.operations import Kind, operation\n"
        "@operation(Kind.BACKGROUND)\n"
        "@attrs.frozen\n"
        "class Trim:\n"
        "    '''Trim a ledger.'''\n"
        "    name = 'trim'\n"
        "import spec.trace\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("spec.operations.IncompleteTable: the trace codec's result shapes")
    assert "operation(s) trim declared in spec/operations.py" in last


# --- the Hypothesis machine ------------------------------------------------------------------

PLAN = LoseUnsynced()
#: Arguments for each rule that make it run every operation PRODUCERS names for it: a crash
#: point at 0 kills the step at its first disk operation (the add of add_then_crash is
#: larger than the write buffer, so that it writes at once).
RULE_ARGS: Mapping[str, dict[str, object]] = {
    "add": {"ledger": 1, "data": b"x", "count": 1, "gap": 1},
    "healthy_stretch": {"ledger": 1, "data": b"x", "count": 2, "read_back": True},
    "add_to_the_boundary": {"ledger": 1, "delta": 0, "boundary": "log"},
    "add_again": {"pick": 0},
    "new_ledger": {"data": b"x"},
    "add_then_crash": {"ledger": 1, "data": b"x" * 300, "at": 0, "plan": PLAN},
    "add_with_wrong_key": {"ledger": 1},
    "read": {"ledger": 1, "back": 0},
    "fence": {"ledger": 1, "wrong": False},
    "write_close": {"ledger": 0, "wrong": False, "then": "delete_and_gc", "data": b"x"},
    "advance_clock": {"seconds": 300, "ledger": 0, "then": "add", "data": b"x"},
    "delete": {"ledger": 1, "at": 0, "plan": PLAN},
    "checkpoint": {"at": 0, "plan": PLAN},
    "checkpoint_then_crash": {"plan": PLAN, "restart_crash": None},
    "journal_force": {"at": 0, "plan": PLAN},
    "rotate": {"at": 0, "plan": PLAN},
    "crash": {"plan": PLAN, "restart_crash": None},
    "shutdown_and_restart": {"at": 0, "plan": PLAN, "power_cut": False},
    "disk_full": {"where": "ledger_dirs", "ledger": 1, "data": b"x"},
    "disk_writable": {},
    "inject_fault": {"fault": FailRead("entry_log"), "ledger": 1, "back": 0},
    "preallocate": {},
    "check_dirs": {},
    "fsync_failure_in_checkpoint": {"plan": PLAN, "retry": False},
    "full_disk_in_background_work": {
        "step": "checkpoint",
        "ledger": 1,
        "data": b"x",
        "plan": PLAN,
        "crash": True,
    },
    "process_killed_then_power_cut": {"plan": PLAN},
    "journal_write": {},
    "journal_sync": {},
    "journal_ack": {},
    "checkpoint_flush": {},
    "checkpoint_persist": {},
    "group_commit_with_adds_between_its_phases": {
        "ledger": 1,
        "data": b"x",
        "before": 1,
        "during": 1,
        "at": None,
        "plan": PLAN,
        "crash_after": True,
    },
    "checkpoint_with_adds_between_its_phases": {
        "ledger": 1,
        "data": b"x",
        "count": 1,
        "force": True,
        "rotate": True,
        "at": None,
        "plan": PLAN,
        "crash_after": True,
    },
    "gc": {"force": True, "at": None, "plan": PLAN},
    "gc_begin": {"force": True, "at": None, "plan": PLAN},
    "compact_copy": {"at": None, "plan": PLAN},
    "compact_flush": {"at": None, "plan": PLAN},
    "compact_index": {"at": None, "plan": PLAN},
    "rotate_many": {"count": 2, "data": b"x", "ledger": 1},
    "compaction_with_requests_between_its_phases": {
        "ledger": 1,
        "data": b"x" * 150,
        "deletes": 1,
        "force": True,
        "between": ["fence", "delete", "add", "read", "checkpoint", "rotate"],
        "crash_in": "recovery",
        "at": 3,
        "plan": PLAN,
    },
    "crash_inside_a_compaction_phase": {
        "ledger": 1,
        "data": b"x" * 150,
        "phase": "copy",
        "at": 3,
        "plan": PLAN,
        "delete_between": True,
    },
    "crash_inside_recovery_of_a_compaction": {
        "ledger": 1,
        "data": b"x" * 150,
        "flushed": True,
        "plan": PLAN,
        "at": 3,
    },
    "fault_in_a_compaction": {
        "ledger": 1,
        "data": b"x" * 150,
        "fault": FailWrite("compaction"),
        "phase": "copy",
        "repeat": 1,
        "plan": PLAN,
        "crash": True,
    },
}


#: Further arguments for the rules that run different operations by their arguments: each
#: call's operations count too.
MORE_RULE_ARGS: Mapping[str, list[dict[str, object]]] = {
    # Dying in the index phase: the copy and the flush before it run whole.
    "crash_inside_a_compaction_phase": [
        {**RULE_ARGS["crash_inside_a_compaction_phase"], "phase": "index", "at": 1}
    ],
    "full_disk_in_background_work": [
        {"step": step, "ledger": 1, "data": b"x", "plan": PLAN, "crash": False}
        for step in ("checkpoint_flush", "preallocate")
    ],
    "inject_fault": [
        {"fault": FailFsync("journal"), "ledger": 1, "back": 0},
        {"fault": FailWrite("index"), "ledger": 1, "back": 0},
    ],
    "fault_in_a_compaction": [
        {
            "ledger": 1,
            "data": b"x" * 150,
            "fault": fault,
            "phase": phase,
            "repeat": 1,
            "plan": PLAN,
            "crash": False,
        }
        for fault, phase in (
            (FailFsync("compaction"), "flush"),
            (FailRead("entry_log"), "copy"),
            (DiskFull("ledger_dirs"), "copy"),
            (FailFsync("any"), "index"),
        )
    ],
}


def _rules() -> set[str]:
    """The rules of the single-log machine and of a machine with many active logs (which
    also draws the write close and the clock)."""
    names: set[str] = set()
    for machine in (machine_for(), machine_with(MANAGER_SETTINGS["per-ledger"])):
        names |= {name for name in dir(machine) if hasattr(getattr(machine, name), RULE_MARKER)}
    return names


def test_the_machine_s_rules_are_the_ones_its_table_names() -> None:
    named = {rule for rules in PRODUCERS.values() for rule in rules}
    assert named == _rules()
    assert set(RULE_ARGS) == _rules()


def _ops_run_by(rule: str) -> set[type[Any]]:
    """The operations one call of ``rule`` runs, on a fresh machine after two adds."""
    machine: Any = machine_for()()
    machine.add(ledger=1, data=b"y" * 150, count=2, gap=1)
    if rule == "disk_writable":
        machine.disk_full(where="ledger_dirs", ledger=1, data=b"x")
    before = len(machine.harness.steps)
    getattr(machine, rule)(**RULE_ARGS[rule])
    ran = {type(step.op) for step in machine.harness.steps[before:]}
    for args in MORE_RULE_ARGS.get(rule, []):
        before = len(machine.harness.steps)
        getattr(machine, rule)(**args)
        ran |= {type(step.op) for step in machine.harness.steps[before:]}
    return ran


def test_each_rule_runs_the_operations_the_table_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tests.refinement.machine, "event", lambda _text: None)
    ran = {rule: _ops_run_by(rule) for rule in sorted(_rules())}
    for cls, rules in PRODUCERS.items():
        for rule in rules:
            assert cls in ran[rule], f"rule {rule} does not run {cls.name}: {ran[rule]}"
    assert DiskFull not in ran["disk_writable"], "the prelude is not counted"
