"""The campaign's seeded scenarios find the known-bad variants of the bookie: each variant of
tests/quality/refinement_variants.py that is a Bookie subclass (what ``bkref campaign
--variant`` can check; the monkeypatch variants are the refinement test's alone) must fail a
scenario of seed 1, 400 steps, within its budget of scenarios.

The scenarios are drawn from (seed, index) alone, so the index that catches each variant is
the same on every run at the same commit; the budgets are about twice the catching index
measured when they were set (docs/benchmarks.md, "The campaign against known-bad variants"),
so an unrelated change of the workload's draws does not fail this test, and a change that
makes a variant twice as hard to find does. Three variants need many scenarios (their bug
shows only after a rare sequence: an add's flush failing, a record the index never had
reaching a compaction, a log unlinked and then listed); they run under ``slow``.

Each catch must also be the variant's: the same scenario against bkref's own Bookie passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from proofs.campaign.scenario import ScenarioRow, ScenarioSpec, run_scenario

MODULE = "tests.quality.refinement_variants"

#: Variant -> the most scenarios it may take.
BUDGETS = {
    "AckAppendsDuringTheFsyncBookie": 10,
    "AckBeforeJournalFsyncBookie": 4,
    "AckPartOfAGroupBeforeFsyncBookie": 4,
    "CheckpointAfterFailureBookie": 8,
    "CheckpointCapturingItsMarkLateBookie": 8,
    "CompactingTheCurrentLogBookie": 4,
    "DeletedLedgerCountedLiveBookie": 4,
    "FailingForGoodOnABackgroundNoSpaceBookie": 4,
    "FailingOnAReadErrorBookie": 10,
    "FenceAckedAtNextForceBookie": 4,
    "FenceAckedAtOnceBookie": 4,
    "IndexBeforeCompactionLogSyncedBookie": 6,
    "LastMarkBeforeLogsBookie": 4,
    "RefusingAddsWhenOneLedgerDirIsFullBookie": 4,
    "ReplayNotAdvancingMarkBookie": 4,
    "ServingOnAfterAFailedBackgroundFsyncBookie": 8,
    "SourceRemovedBeforeIndexFlushBookie": 20,
    "StaleCheckpointOverwritesLastMarkBookie": 4,
}
#: The hard ones, under ``slow``.
SLOW_BUDGETS = {
    "IndexingRecordsTheIndexNeverHadBookie": 160,
    "RemembersALogItUnlinkedBookie": 160,
    "CarryOnAfterAddFlushFailureBookie": 600,
}

#: Variants no scenario of seed 1 reaches within a CI budget, each with the scenarios (seed,
#: index) of the README's main job that found the bug: each must fail there, and bkref's own
#: bookie pass. A failed delete whose tombstone was written needs a read fault of the index
#: to meet the delete's read-back, then adds acknowledged and a crash.
AT_SCENARIOS = {
    "ServingOnAfterAnUncertainTombstoneBookie": ((2, 613), (3, 362)),
}


def _first_failing(variant: str, budget: int) -> tuple[int, ScenarioRow] | None:
    for index in range(budget):
        spec = ScenarioSpec(seed=1, index=index, steps=400, variant=f"{MODULE}:{variant}")
        row = run_scenario(spec, shrink_runs=0)
        if row.verdict != "pass":
            return index, row
    return None


def _check(variant: str, budget: int) -> None:
    found = _first_failing(variant, budget)
    assert found is not None, f"{variant} passed {budget} scenarios"
    index, row = found
    _assert_the_variants_catch(row, seed=1, index=index)


def _assert_the_variants_catch(row: ScenarioRow, *, seed: int, index: int) -> None:
    """The variant's row failed (the bookie is wrong, not the checker), and the same scenario
    against bkref's own bookie passes."""
    assert row.verdict == "fail", row.message
    alone = run_scenario(ScenarioSpec(seed=seed, index=index, steps=400), shrink_runs=0)
    assert alone.verdict == "pass", (
        f"bkref's own bookie fails scenario {index} of seed {seed}: {alone.message}"
    )


@pytest.mark.parametrize("variant", sorted(BUDGETS))
def test_the_campaign_catches_every_refinement_variant(variant: str) -> None:
    _check(variant, BUDGETS[variant])


@pytest.mark.parametrize(
    ("variant", "seed", "index"),
    [(v, seed, index) for v, at in sorted(AT_SCENARIOS.items()) for seed, index in at],
)
def test_the_campaign_catches_a_variant_at_the_scenario_that_found_it(
    variant: str, seed: int, index: int
) -> None:
    spec = ScenarioSpec(seed=seed, index=index, steps=400, variant=f"{MODULE}:{variant}")
    row = run_scenario(spec, shrink_runs=0)
    assert row.verdict != "pass", f"{variant} passed scenario {index} of seed {seed}"
    _assert_the_variants_catch(row, seed=seed, index=index)


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(SLOW_BUDGETS))
def test_the_campaign_catches_the_hard_refinement_variants(variant: str) -> None:
    _check(variant, SLOW_BUDGETS[variant])


def test_the_budgets_name_every_bookie_subclass_variant() -> None:
    import inspect

    from impl.bookie.bookie import Bookie
    from tests.quality import refinement_variants

    subclasses = {
        name
        for name, cls in inspect.getmembers(refinement_variants, inspect.isclass)
        if issubclass(cls, Bookie) and cls is not Bookie and not name.startswith("_")
    }
    assert subclasses == set(BUDGETS) | set(SLOW_BUDGETS) | set(AT_SCENARIOS)


def test_the_campaign_catches_a_row_whose_trace_leaves_out_the_shadow_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The campaign's own bug, found while it was built: a failure the harness saw in a
    shadow crash (a crash of a copy of the disk) was stored with the run's steps only, so the
    row's trace replayed as a pass. The variant brings that back; the campaign's check of its
    own record (proofs/campaign/scenario.py ``record_problem``) must turn the row into an
    error that says so."""
    from proofs.campaign import scenario

    def run_steps_only(failed: object, work: Any, knobs: object) -> tuple[Any, tuple[Any, ...]]:
        return work.harness.header, tuple(work.harness.steps)

    monkeypatch.setattr(scenario, "_steps_of", run_steps_only)
    spec = ScenarioSpec(seed=1, index=0, steps=400, variant=f"{MODULE}:LastMarkBeforeLogsBookie")
    row = run_scenario(spec)
    assert row.verdict == "error" and row.failure_kind == "record"
    assert row.message is not None and "the row's trace passes" in row.message
