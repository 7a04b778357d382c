"""Coverage of a campaign (proofs/campaign/coverage.py): cells read off a trace, the probes
held to the same situations the refinement test counts, minimums that scale with a
campaign's size, and steering that reaches what it aims at."""

from __future__ import annotations

from impl.entrylog.manager import EVENTS
from proofs.campaign.coverage import (
    CRASH_RULES,
    MANAGER_PROBES,
    PLAN_ORDER,
    PROBES,
    Target,
    cells_of,
    collapsed,
    expected_cells,
    minimum,
    missed_cells,
    probe_status,
    probe_target,
    probes_for,
    targets,
)
from proofs.campaign.scenario import Focus, ScenarioSpec, run_scenario
from proofs.harness.workload import PRODUCERS, rules
from spec.crash import KeepPrefix, KillProcess, LoseUnsynced
from spec.operations import (
    CRASHED,
    OK,
    Add,
    Checkpoint,
    Crash,
    FailFsync,
    FiredFault,
    Restart,
    failed,
)
from spec.trace import Step
from tests.refinement.test_coverage import MANAGER_MINIMUMS, MINIMUMS


def _steps(*pairs: tuple[object, object]) -> tuple[Step, ...]:
    out = []
    for index, (op, result) in enumerate(pairs):
        faults: tuple[FiredFault, ...] = ()
        if isinstance(result, tuple):
            result, faults = result
        out.append(Step(index, op, result, faults=faults))  # type: ignore[arg-type]
    return tuple(out)


def test_cells_are_read_off_the_trace() -> None:
    fsync = FiredFault("fsync", "entry_log")
    steps = _steps(
        (Add(1, 0, b"k", b"x"), OK),
        (Checkpoint(), (failed("io_error"), (fsync,))),
        (Checkpoint(), CRASHED),  # dies inside, after the fault fired
        (Crash(KeepPrefix(3)), OK),
        (Restart(), OK),
        (Add(1, 1, b"k", b"x"), OK),
        (Crash(KillProcess()), OK),  # after the add, no fault since the restart
        (Restart(), OK),
        (FailFsync("journal"), OK),
        (Crash(LoseUnsynced()), OK),
    )
    assert cells_of(steps) == {
        "checkpoint/none/none/fsync": 1,
        "checkpoint/inside/keep_prefix/fsync": 1,
        "add/after/kill/none": 1,
        "fail_fsync/after/lose_unsynced/none": 1,
    }
    assert collapsed(cells_of(steps))["checkpoint/inside/keep_prefix/*"] == 1


def test_the_probes_are_the_refinement_test_s_situations() -> None:
    assert set(PROBES) == set(MINIMUMS)
    for manager, table in MANAGER_MINIMUMS.items():
        assert set(MANAGER_PROBES[manager]) == set(table), manager
    assert set(MANAGER_PROBES) == {"single", *MANAGER_MINIMUMS} and not MANAGER_PROBES["single"]
    # Every event a manager counts is some manager's probe, so none goes unmeasured.
    assert {name for table in MANAGER_PROBES.values() for name in table} == set(EVENTS)


def test_every_rule_named_exists_and_crash_rules_run_their_operation() -> None:
    names = {rule.name for rule in rules()}
    for probe in PROBES.values():
        assert set(probe.rules) <= names, probe
    names = {rule.name for rule in rules(many_logs=True)}
    for table in MANAGER_PROBES.values():
        for probe in table.values():
            assert set(probe.rules) <= names, probe
    by_name = {cls.name: rules for cls, rules in PRODUCERS.items()}
    for op, crash_rules in CRASH_RULES.items():
        for rule in crash_rules:
            assert rule in by_name[op], (op, rule)
    assert len(expected_cells()) == len(CRASH_RULES) * len(PLAN_ORDER)


def test_minimums_scale_with_the_rules_a_campaign_ran() -> None:
    probe = PROBES["crash during add"]
    assert minimum(probe, 0) == 1
    assert minimum(probe, 100_000) == round(probe.per_1000_rules * 100)
    status = probe_status({"crash during add": 5}, 1000)
    first = next(s for s in status if s.name == "crash during add")
    assert first.count == 5 and first.met == (first.minimum <= 5)
    assert all(not s.met for s in status if s.name != "crash during add")


def test_missed_cells_are_the_expected_ones_never_reached() -> None:
    reached = {cell.replace("*", "none"): 1 for cell in expected_cells()[1:]}
    assert missed_cells(reached) == (expected_cells()[0],)
    assert missed_cells({}) == expected_cells()


def test_targets_say_what_reaches_a_probe_or_a_cell() -> None:
    fault = probe_target("a fault fired: fsync of journal")
    assert fault.faults == frozenset({"fsync:journal"}) and not fault.inside
    crash = probe_target("crash during journal_sync")
    assert crash.inside and crash.rules == frozenset(PROBES["crash during journal_sync"].rules)
    (cell,) = targets((), ("delete/inside/kill/*",))
    assert cell == Target("delete/inside/kill/*", frozenset({"delete"}), frozenset({"kill"}), True)


def _reached(target: Target, focused: bool) -> int:
    count = 0
    for index in range(12):
        focus = Focus(target.rules, target.plans, target.inside, target.faults)
        spec = ScenarioSpec(seed=21, index=index, steps=200, focus=focus if focused else Focus())
        row = run_scenario(spec, shrink_runs=0)
        assert row.verdict == "pass", row.message
        if "/" in target.name:
            count += collapsed(row.coverage).get(target.name, 0)
        else:
            count += row.probes.get(target.name, 0)
    return count


def test_steering_reaches_what_it_aims_at() -> None:
    # Twelve scenarios aimed at each target against the same twelve unaimed: a rare fault
    # and a rare crash cell, both missed by the unaimed ones, reached several times.
    for target in targets(("a fault fired: fsync of journal",), ("delete/inside/kill/*",)):
        aimed, unaimed = _reached(target, True), _reached(target, False)
        assert aimed >= 5 and aimed > 4 * unaimed, (target.name, aimed, unaimed)


def test_a_per_ledger_campaign_is_not_held_to_what_cannot_happen_with_it() -> None:
    # A log per ledger is wholly live or wholly dead: no compaction, no preallocation.
    single, per_ledger = probes_for("single"), probes_for("per-ledger")
    assert single == dict(PROBES)
    gone = set(single) - set(per_ledger)
    assert "a compaction finished" in gone and "preallocate found no room" in gone
    assert "crash inside compaction copy" in gone
    assert "a GC deleted dead logs" in per_ledger and "entry log rotated" in per_ledger
    assert "crash during add" in per_ledger
    # Each manager is held to its own situations, and only its own.
    assert set(MANAGER_PROBES["per-ledger"]) <= set(per_ledger)
    assert not set(MANAGER_PROBES["slots"]) - set(MANAGER_PROBES["per-ledger"]) & set(per_ledger)
    assert not set(MANAGER_PROBES["per-ledger"]) & set(single)
    nothing: dict[str, int] = {}
    assert len(missed_cells(nothing, "per-ledger")) < len(missed_cells(nothing))
    assert not any(c.startswith("compact_") for c in missed_cells(nothing, "per-ledger"))
    assert any(c.startswith("rotate/") for c in missed_cells(nothing, "per-ledger"))
