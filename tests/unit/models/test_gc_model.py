"""The model's garbage collection (models/bookie/bookie.py, models/entrylog/manager.py): the
compaction kind a cycle may choose, the dead logs and the candidates it computes, and the
outcomes a crash may leave of a compaction (spec/protocol/compaction.md)."""

from __future__ import annotations

import pytest

from models.bookie.bookie import BookieModel, Divergence, ModelConfig
from models.entrylog.manager import CompactionOutcome, EntryLogManagerModel, LogModel
from spec.operations import OK, GcBegin, GcReport, Result
from spec.state import LogView


def _manager(logs: dict[int, dict[int, int]]) -> EntryLogManagerModel:
    manager = EntryLogManagerModel(4096)
    for log_id, written in logs.items():
        manager.logs[log_id] = LogModel(log_id, "flushed", dict(written), dict(written))
        manager.max_seen_id = max(manager.max_seen_id, log_id)
    manager.next_id = manager.max_seen_id + 1
    return manager


def test_a_forced_cycle_has_exactly_the_kind_of_the_configuration() -> None:
    assert ModelConfig().compaction_kinds(force=True, pressure=False) == {"major"}
    minor_only = ModelConfig(major_interval_s=0)
    assert minor_only.compaction_kinds(force=True, pressure=False) == {"minor"}
    neither = ModelConfig(major_interval_s=0, minor_interval_s=0)
    assert neither.compaction_kinds(force=True, pressure=False) == {"none"}
    # forceAllowCompaction makes a forced major compaction with major disabled by interval.
    forced = ModelConfig(major_interval_s=0, force_allow_compaction=True)
    assert forced.compaction_kinds(force=True, pressure=False) == {"major"}


def test_an_unforced_cycle_may_choose_any_kind_its_intervals_can_make_due() -> None:
    assert ModelConfig().compaction_kinds(force=False, pressure=False) == {
        "major",
        "minor",
        "none",
    }
    minor_only = ModelConfig(major_interval_s=0)
    assert minor_only.compaction_kinds(force=False, pressure=False) == {"minor", "none"}


def test_settings_carry_the_compaction_keys() -> None:
    config = ModelConfig.from_settings(
        {"majorCompactionThreshold": "0.5", "minorCompactionInterval": "0"}
    )
    assert config.major_threshold == 0.5 and config.minor_interval_s == 0
    assert config.compaction_kinds(force=False, pressure=False) == {"major", "none"}


def test_dead_logs_and_candidates_lowest_usage_first_ties_by_id() -> None:
    manager = _manager(
        {
            0: {1: 100},  # dead (ledger 1 deleted)
            1: {1: 100, 2: 100},  # usage 0.5
            2: {2: 100, 1: 300},  # usage 0.25
            3: {2: 100, 1: 100},  # usage 0.5, ties with 1
            4: {2: 100},  # usage 1.0: never a candidate
            5: {},  # empty: dead
        }
    )
    live = {2}
    assert manager.dead_logs(live) == [0, 5]
    assert manager.candidates(live, 0.8) == [2, 1, 3]
    assert manager.candidates(live, 0.3) == [2]
    manager.logs[1].state = "active"
    assert 1 not in manager.candidates(live, 0.8)  # only flushed logs


def test_a_compaction_takes_the_next_id_and_rotations_skip_it() -> None:
    manager = _manager({0: {1: 100}})
    assert manager.next_compaction_ids() == {1}
    manager.take_compaction_id(1)
    manager.compacted(0, 1, {1: 100})
    assert manager.logs[1].state == "flushed" and 0 not in manager.logs
    assert manager.rotate() == 2
    manager.preallocated = True
    assert manager.next_compaction_ids() == {3, 4}  # a preallocated log may hold 3


def test_a_gc_begin_naming_other_candidates_diverges() -> None:
    model = BookieModel(ModelConfig())
    model.logs = _manager({0: {1: 100, 2: 300}, 1: {2: 100}})
    model.ledgers.delete(1, "ok")
    right = Result(gc=GcReport("major", 0, 0, 0, 0, (0,)))
    model.step(0, GcBegin(True), right, [])
    model2 = BookieModel(ModelConfig())
    model2.logs = _manager({0: {1: 100, 2: 300}, 1: {2: 100}})
    model2.ledgers.delete(1, "ok")
    wrong = Result(gc=GcReport("major", 0, 0, 0, 0, (0, 1)))
    with pytest.raises(Divergence, match="named the candidates"):
        model2.step(0, GcBegin(True), wrong, [])
    with pytest.raises(Divergence, match="without its statistics"):
        BookieModel(ModelConfig()).step(0, GcBegin(True), OK, [])


def test_a_compaction_outcome_after_a_crash() -> None:
    moved = ((2, 100),)
    finished = CompactionOutcome(5, 9, moved, "yes")
    seen = {9: LogView(9, "flushed", moved)}
    assert finished.problem(seen, {9}) is None
    assert "recovery must finish it" in (
        finished.problem({5: LogView(5, "flushed", ())}, set()) or ""
    )
    undone = CompactionOutcome(5, 9, moved, "no")
    assert "vanished" in (undone.problem({}, set()) or "")
    both = CompactionOutcome(5, 9, moved, "maybe")
    assert both.problem({5: LogView(5, "flushed", moved)}, set()) is None
    short = {9: LogView(9, "flushed", ((2, 50),))}
    assert "must be flushed with exactly" in (both.problem(short, {9}) or "")


def test_an_undone_compaction_s_id_may_be_the_new_run_s_log() -> None:
    # An id an undone compaction took is durable nowhere: the restart may give it to the
    # log its journal replay writes (found by the refinement test: 22.log.compacting lost
    # in a power cut, 22 the replay's active log). Only a flushed log holding exactly what
    # the compaction copied is the compaction's, left beside its source.
    moved = ((3, 22),)
    undone = CompactionOutcome(11, 22, moved, "no")
    source = LogView(11, "flushed", ((1, 168), (3, 22)))
    for reused in (LogView(22, "active", ((3, 140),)), LogView(22, "flushed", ((3, 140),))):
        assert undone.problem({11: source, 22: reused}, {22}) is None
    left = LogView(22, "flushed", moved)
    assert "appeared beside its source" in (undone.problem({11: source, 22: left}, {22}) or "")
