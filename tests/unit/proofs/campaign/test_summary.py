"""A campaign's summary (proofs/campaign/summary.py): rows folded into totals, counts and a
timeline; the verdict and the exit status from them."""

from __future__ import annotations

from typing import Any

import attrs

from proofs.campaign.coverage import PROBES, expected_cells
from proofs.campaign.summary import (
    EXIT_COVERAGE,
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_PASS,
    Aggregates,
    CampaignSummary,
    PassReport,
    Settings,
    Totals,
    aggregate,
    closed,
    failure_trace_name,
    timeline_bucket_seconds,
)
from proofs.harness.promises import PLANS, PROMISES

#: The one pair no run can observe: an entry in flight at a crash, before any crash.
NO_GAP = ("in_flight", "none")


def record(index: int, verdict: str = "pass", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "pass_number": 1,
        "index": index,
        "verdict": verdict,
        "steps": 100,
        "rules": 20,
        "crashes": 3,
        "crash_states": 5,
        "restarts": 3,
        "adds_acked": 30,
        "reads": 40,
        "seconds": 0.5,
        "shrink_seconds": 0.0,
        "started_at": 1000.0 + index,
        "probes": {"crash during add": 1},
        "coverage": {"add/inside/kill/none": 2},
        "promises": {"durability/kill": 3, "fence/none": 1},
        "commit": "git:abc",
        "worker": f"host:{index % 2}",
        "trace": None,
    }
    base.update(changes)
    return base


def test_rows_fold_into_totals_counts_and_a_timeline() -> None:
    rows = [record(0), record(1, "fail", trace="t"), record(2, "error"), record(3)]
    folded = aggregate(rows, start=1000.0, bucket_seconds=2.0)
    assert folded.totals == Totals(
        scenarios=4,
        passed=2,
        failed=1,
        errors=1,
        steps=400,
        rules=80,
        crashes=12,
        crash_states=20,
        restarts=12,
        adds_acked=120,
        reads=160,
        seconds=2.0,
        shrink_seconds=0.0,
    )
    assert folded.probes == {"crash during add": 4}
    assert folded.cells == {"add/inside/kill/none": 8}
    assert folded.promises == {"durability/kill": 12, "fence/none": 4}
    # Finished at 1000.5, 1001.5, 1002.5, 1003.5: two per 2-second bucket.
    assert folded.timeline == {0: (2, 200, 10), 1: (2, 200, 10)}
    assert [r["index"] for r in folded.failures] == [1, 2]
    assert folded.commits == ("git:abc",) and folded.workers == ("host:0", "host:1")


def test_aggregates_add_up() -> None:
    one = aggregate([record(0)], start=1000.0, bucket_seconds=1.0)
    two = aggregate([record(1, pass_number=2)], start=1000.0, bucket_seconds=1.0)
    both = one.plus(two)
    assert both.totals.scenarios == 2 and both.probes == {"crash during add": 2}
    assert both.promises == {"durability/kill": 6, "fence/none": 2}
    assert both == aggregate(
        [record(0), record(1, pass_number=2)], start=1000.0, bucket_seconds=1.0
    )


def _summary(*passes: Aggregates, commit: str = "git:abc") -> CampaignSummary:
    settings = Settings(seed=1, scenarios=4, steps=100, master="local[2]", bookie="bkref")
    return CampaignSummary(
        settings=settings,
        passes=tuple(PassReport(i + 1, agg, 1.0) for i, agg in enumerate(passes)),
        started_at=1000.0,
        wall_seconds=10.0,
        commit=commit,
    )


def _met_everything() -> dict[str, Any]:
    probes = dict.fromkeys(PROBES, 10_000)
    cells = {cell.replace("*", "none"): 1 for cell in expected_cells()}
    return record(0, probes=probes, coverage=cells)


def test_the_verdict_and_the_exit_status() -> None:
    good = aggregate([_met_everything()], start=1000.0, bucket_seconds=1.0)
    assert _summary(good).verdict == "pass" and _summary(good).exit_code == EXIT_PASS
    short = aggregate([record(0)], start=1000.0, bucket_seconds=1.0)
    assert _summary(short).verdict == "pass" and _summary(short).exit_code == EXIT_COVERAGE
    assert "crash during journal_sync" in _summary(short).missed_probes
    assert _summary(short).missed_cells == expected_cells()[1:] or _summary(short).missed_cells
    failing = aggregate([record(1, "fail")], start=1000.0, bucket_seconds=1.0)
    assert _summary(good, failing).exit_code == EXIT_FAIL
    erring = aggregate([record(1, "error")], start=1000.0, bucket_seconds=1.0)
    assert _summary(good, erring).exit_code == EXIT_ERROR
    assert _summary(good, erring, failing).verdict == "fail"


def test_rows_from_other_code_are_an_error() -> None:
    good = aggregate([_met_everything()], start=1000.0, bucket_seconds=1.0)
    other = _summary(good, commit="git:def")
    assert other.foreign_commits == ("git:abc",)
    assert other.verdict == "error" and other.exit_code == EXIT_ERROR


def test_an_adapter_campaign_is_held_to_no_probe() -> None:
    short = aggregate([record(0)], start=1000.0, bucket_seconds=1.0)
    summary = _summary(short)
    adapter = attrs.evolve(summary, settings=attrs.evolve(summary.settings, probes_apply=False))
    assert adapter.probes == () and adapter.missed_cells == ()
    assert adapter.exit_code == EXIT_PASS


def test_the_promise_gaps_are_what_no_step_observed_after_a_plan_the_campaign_has() -> None:
    every = {f"{p}/{plan}": 1 for p in PROMISES for plan in PLANS if (p, plan) != NO_GAP}
    full = _summary(aggregate([record(0, promises=every)], start=1000.0, bucket_seconds=1.0))
    assert full.promise_plans == PLANS and full.promise_gaps == ()
    holed = dict(every)
    del holed["in_flight/keep_subset"], holed["auth/none"]
    summary = _summary(aggregate([record(0, promises=holed)], start=1000.0, bucket_seconds=1.0))
    assert summary.promise_gaps == (("in_flight", "keep_subset"), ("auth", "none"))
    # An adapter's campaign without the lazy disk can observe after a kill only.
    adapter = attrs.evolve(summary, settings=attrs.evolve(summary.settings, probes_apply=False))
    assert adapter.promise_plans == ("none", "kill")
    assert adapter.promise_gaps == (("auth", "none"),)


def test_small_helpers() -> None:
    assert closed(("a", "b", "c"), ("b",)) == ("a", "c")
    assert failure_trace_name({"pass_number": 2, "index": 7}) == "failures/pass2-scenario7.jsonl"
    assert timeline_bucket_seconds(30) == 1.0
    assert timeline_bucket_seconds(600) == 10.0
