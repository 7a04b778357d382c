"""Each rule the model judges an entry-log layout by has a known-bad variant, caught by it.

models/entrylog/layout.py judges each observed layout against the one before it by the rules
every entry-log manager keeps, instead of predicting the single-log manager's decisions.
Each variant here (tests/quality/refinement_variants.py, "the layout rules") breaks one of
those rules and loses no acknowledged data, so it is the layout judgement, not a durability
property, that must catch it, and by the rule its name says: the message carries the rule
id. The refinement machine and its derandomized profile are the unchanged ones of
tests/quality/test_refinement_catches.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis.stateful import run_state_machine_as_test

from impl.bookie.bookie import Bookie
from proofs.harness.refinement import (
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
    RefinementFailure,
)
from spec.operations import Add, Checkpoint, Delete, Gc, Operation
from tests.quality import refinement_variants as rv
from tests.quality import slots_variants as sv
from tests.quality.test_refinement_catches import PROFILE, run_profile
from tests.refinement.machine import machine_with, stable_draws

#: (the variant's monkeypatch, the rule that must catch it).
CASES: list[tuple[Callable[[pytest.MonkeyPatch], None], str]] = [
    (rv.apply_rotation_counting_the_header_twice, "R-LOG-ROTATION"),
    (rv.apply_rotation_forgetting_the_header, "R-LOG-ROTATION"),
    (rv.apply_checkpoint_leaving_a_rotated_log, "R-LOG-FLUSH"),
    (rv.apply_compaction_ids_filling_holes, "R-LOG-IDS"),
    (rv.apply_empty_rotated_logs_unlinked_at_checkpoint, "R-LOG-SEALED"),
    (rv.apply_record_bytes_counting_the_prefix_twice, "R-LOG-BYTES"),
    (rv.apply_least_unflushed_past_unflushed, "R-LEAST-UNFLUSHED"),
    (rv.apply_seal_without_header, "R-LOG-MAP"),
]


@pytest.fixture(autouse=True)
def _traces_in_tmp(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BKREF_TRACE_DIR", str(tmp_path))


def test_the_unchanged_bookie_passes_with_the_layout_judged_by_rules() -> None:
    assert run_profile() is None


@pytest.mark.parametrize(
    ("apply", "rule"), CASES, ids=[apply.__name__.removeprefix("apply_") for apply, _ in CASES]
)
def test_each_layout_rule_catches_its_variant(
    apply: Callable[[pytest.MonkeyPatch], None], rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(monkeypatch)
    caught = run_profile()
    assert caught is not None, "the variant slipped through the layout rules"
    assert caught.by_model, caught.message
    assert caught.message.endswith(f"[{rule}]"), caught.message


#: An entry log per ledger, at most two active at once (eviction by size in every run with
#: three ledgers): tests/refinement/test_refinement.py's per-ledger settings.
PER_LEDGER = {"entryLogPerLedgerEnabled": "true", "maximumNumberOfActiveEntryLogs": "2"}

#: The per-ledger manager's own variants, and the rule that must catch each.
PER_LEDGER_CASES: list[tuple[Callable[[pytest.MonkeyPatch], None], str]] = [
    (rv.apply_eviction_without_the_map, "R-LOG-MAP"),
    (rv.apply_expiry_without_the_map, "R-LOG-MAP"),
    (rv.apply_two_active_logs_for_one_ledger, "R-LOG-ACTIVE"),
    (rv.apply_write_close_ignored, "R-WRITE-CLOSE"),
    (rv.apply_early_write_close, "R-LOG-FLUSH"),
]


def _run_per_ledger(
    opener: Callable[..., Bookie] = Bookie.open, fixed: dict[str, str] = PER_LEDGER
) -> str | None:
    """The refinement profile over the per-ledger bookie (or ``fixed``'s): the failure's
    first line, or None."""
    try:
        with stable_draws():
            run_state_machine_as_test(machine_with(fixed, opener), settings=PROFILE)  # type: ignore[no-untyped-call, unused-ignore]
    except RefinementFailure as failure:
        return failure.message.splitlines()[0]
    return None


def test_the_unchanged_per_ledger_bookie_passes() -> None:
    assert _run_per_ledger() is None


@pytest.mark.parametrize(
    ("apply", "rule"),
    PER_LEDGER_CASES,
    ids=[apply.__name__.removeprefix("apply_") for apply, _ in PER_LEDGER_CASES],
)
def test_each_per_ledger_rule_catches_its_variant(
    apply: Callable[[pytest.MonkeyPatch], None], rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(monkeypatch)
    message = _run_per_ledger()
    assert message is not None, "the variant slipped through the layout rules"
    assert message.endswith(f"[{rule}]"), message


#: bkref's slots manager, two slots per ledger directory (four active logs over the
#: machine's two directories), at most two ledgers mapped: tests/refinement/
#: test_refinement.py's slots settings.
SLOTS = {"entryLogSlotsPerLedgerDir": "2", "maximumNumberOfActiveEntryLogs": "2"}


def test_the_unchanged_slots_bookie_passes() -> None:
    assert _run_per_ledger(fixed=SLOTS) is None


def test_a_slots_manager_with_more_active_logs_than_slots_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sv.apply_more_active_logs_than_slots(monkeypatch)
    message = _run_per_ledger(fixed=SLOTS)
    assert message is not None, "the variant slipped through the layout rules"
    assert message.endswith("[R-LOG-ACTIVE]"), message


def test_gc_that_stops_at_least_unflushed_log_id_is_caught_bookkeeper_2728(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BookKeeper #2728: with an entry log per ledger, GC's assumption that every log below
    leastUnflushedLogId is flushed, and none above, leaves a dead log above it uncollected.
    The profile's small logs rotate too often for a long-lived ledger to hold the id down, so
    the check is the scenario itself, on the unchanged machinery: ledger 1 keeps its log
    active (log 0, leastUnflushedLogId), ledger 2's log is evicted by ledger 3's first add
    (two active at most) and flushed by a checkpoint, ledger 2 is deleted, a GC runs. bkref
    deletes log 1; the variant leaves it, and the model's R-GC (a cycle deletes exactly the
    flushed logs with no live ledger) says so."""
    settings = {**SMALL_SETTINGS, **PER_LEDGER, "logSizeLimit": "1048576"}
    ops: list[Operation] = [
        Add(1, 0, b"k1", b"a"),
        Add(2, 0, b"k2", b"b"),
        Add(1, 1, b"k1", b"c"),
        Add(3, 0, b"k3", b"d"),  # evicts ledger 2's log, the least recently added to
        Checkpoint(),
        Delete(2),
        Gc(True),
    ]
    fine = Refinement(InProcessBookie(settings), settings)
    for op in ops:
        fine.run(op)
    gc = fine.steps[-1].result.gc
    assert gc is not None and gc.logs_deleted == 1, fine.steps[-1].result
    rv.apply_gc_below_least_unflushed(monkeypatch)
    bad = Refinement(InProcessBookie(settings), settings)
    with pytest.raises(RefinementFailure, match=r"\[R-GC\]"):
        for op in ops:
            bad.run(op)
