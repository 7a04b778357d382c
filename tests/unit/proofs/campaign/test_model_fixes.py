"""Histories that seeded campaign scenarios (proofs/campaign/scenario.py, 400 steps each) found
the model could not judge, kept so that they stay judged. Each trace is the shrunk run of
bkref's own Bookie, and each fails on the model before its fix (the first two with a
divergence, the third with a KeyError in the model, which ``bkref check-trace`` reports as a
history the model cannot follow). None was an engine bug: the Hypothesis refinement test's
shorter examples had not reached them.

- A compaction copied (phase 1 only), then every ledger of its source deleted, then a GC
  cycle cut by a crash: the cycle rolls the compaction back and deletes the source as a dead
  log, so the source may be gone though its compaction was undone
  (models/entrylog/manager.py CompactionOutcome.problem ``may_vanish``).
- A read fault of the index that fired in a whole ``gc``: when it met phase 3 (its index
  flush reads the index) the bookie fails, as after any failed phase 3, so the deletes after
  it may answer io_error (models/bookie/bookie.py ``_fired``).
- A compaction copied while the model followed the layout (a fault), finished, then the next
  copy cut by a crash: the followed copy never took its source off the cycle's candidates, so
  the crash outcome looked up a log already gone (models/bookie/bookie.py ``_compact_copy``
  and ``_interrupted_compact_copy``).
- Two compactions rolled back (their ids 4 and 5 taken, their files removed), a GC deleting
  the logs above the highest kept one, and a restart whose ``lastId`` was not durable: the
  new run takes ids 3 and 4 again. The model forgot the rolled-back ids at the restart
  without counting them among the ids a new run may reuse (models/entrylog/manager.py, the
  reset of ``taken``), and refused log 4 as "used before". Found by the campaign's
  quality run (docs/benchmarks.md), where it showed as three variants "caught" by the same
  scenario.
- A compaction copy failed by a fault (its id unknown to the model, the layout followed),
  its id never a log's, used by a later run after the logs above it were removed: an id no
  log ever held is as free as a removed log's (models/entrylog/manager.py ``held`` and
  ``reusable``).
- A preallocation that met a full disk after it had taken the next id (bkref's and
  BookKeeper's allocateNewLog take the id, then create the file): the next log has the id
  after it (models/bookie/bookie.py ``_preallocate`` forgets the next id). Both found by the
  README's main job (seed 2).
- A compaction rolled back after its phase 2 (its id 7 taken, its files removed), the logs
  above the kept ones removed by a GC, a restart whose ``lastId`` was not durable taking ids
  5 and 6 again, and a crash after which recovery's new log took 7: no file or index names
  7, so spec/adapter.md's R-LOG-IDS allows it. The check of the logs after a crash refused
  every id at or below the highest known unless a GC had removed its log, while every other
  R-LOG-IDS check also let through an id no log ever held. Now the ids compactions took and
  never made logs are kept across restarts, and recovery may take them
  (models/entrylog/manager.py ``released`` and ``freed``). Found by the README's main job
  (seed 1) once its workload read each ledger right after its delete.
- Found by the Hypothesis refinement test (tests/refinement/test_refinement.py, a random run),
  shrunk by hand from 32 steps to 12: an entry log sealed (its ledgers map appended, its
  header pointed at it) but never fsynced, and a crash that kept the map and the header but
  not the records. The restarted bookie reports the map's bytes; a forced cycle takes the log
  as a candidate and its copy finds no live record, so it deletes the source and makes no new
  log. The model expected a copy of the map's live bytes; it now gives each log adopted after
  a crash the bytes surely held (fsynced before it) and lets a compaction copy anything
  between those and the map's (spec/protocol/compaction.md, "A map that claims records a
  crash lost"; models/entrylog/manager.py ``LogModel.sure``). The class of such histories:
  tests/unit/models/test_compaction_after_crash.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from models.entrylog.manager import CompactionOutcome
from proofs.harness.replay import Verdict, replay_trace
from spec.operations import CompactCopy, Crash, Gc, PhaseReport, Restart
from spec.state import LogView
from spec.trace import Trace, read_trace_bytes

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def _verdict(name: str) -> tuple[Trace, Verdict]:
    path = TRACES / f"{name}.jsonl"
    trace = read_trace_bytes(path.read_bytes(), str(path))
    return trace, replay_trace(trace)


def test_an_undone_compaction_s_source_may_be_deleted_as_a_dead_log() -> None:
    trace, verdict = _verdict("undone-compaction-source-deleted-as-dead")
    assert verdict.ok, verdict.failure
    ops = [step.op for step in trace.steps]
    assert any(isinstance(op, Crash) for op in ops) and isinstance(ops[-1], Restart)


def test_the_outcome_allows_the_vanishing_only_for_a_log_that_may_vanish() -> None:
    undone = CompactionOutcome(10, 24, ((4, 179),), "no")
    assert undone.problem({}, set(), frozenset({10})) is None
    assert "vanished" in (undone.problem({}, set(), frozenset({11})) or "")
    assert "vanished" in (undone.problem({}, set()) or "")
    kept = LogView(10, "flushed", ((4, 179),))
    assert undone.problem({10: kept}, set(), frozenset({10})) is None


def test_a_gc_failed_by_an_index_read_may_have_failed_the_bookie() -> None:
    trace, verdict = _verdict("gc-failed-by-an-index-read-in-phase-3")
    assert verdict.ok, verdict.failure
    steps = trace.steps
    failed_gc = [s for s in steps if isinstance(s.op, Gc) and s.result.error == "io_error"]
    assert failed_gc and any(f.op == "read" and f.file == "index" for f in failed_gc[0].faults)
    assert steps[-1].result.error == "io_error"  # the delete after it


@pytest.mark.parametrize("name", ["crash-in-a-copy-after-a-followed-compaction"])
def test_a_crash_in_a_copy_after_a_followed_compaction_is_judged(name: str) -> None:
    trace, verdict = _verdict(name)
    assert verdict.ok, verdict.failure
    last = trace.steps[-1]
    assert last.op.name == "compact_copy" and last.result.crashed


def test_ids_of_rolled_back_compactions_may_be_used_again_after_a_restart() -> None:
    trace, verdict = _verdict("rolled-back-compaction-ids-reused-after-a-restart")
    assert verdict.ok, verdict.failure
    last = trace.steps[-1].state
    assert last is not None and 4 in {view.log_id for view in last.entry_logs}


@pytest.mark.parametrize(
    "name",
    ["id-of-a-failed-compaction-used-by-a-later-run", "failed-preallocation-took-an-id"],
)
def test_ids_a_failed_step_took_are_followed(name: str) -> None:
    _, verdict = _verdict(name)
    assert verdict.ok, verdict.failure


def test_recovery_may_take_the_id_of_a_rolled_back_compaction() -> None:
    trace, verdict = _verdict("rolled-back-compaction-id-taken-by-recovery")
    assert verdict.ok, verdict.failure
    last = trace.steps[-1]
    assert isinstance(last.op, Restart) and last.state is not None
    assert 7 in {view.log_id for view in last.state.entry_logs if view.ledger_bytes}


def test_which_ids_a_new_log_may_take_again() -> None:
    from models.entrylog.manager import EntryLogManagerModel, LogModel

    logs = EntryLogManagerModel(1400)
    for log_id in (2, 3, 5):
        logs._put(log_id, LogModel(log_id, "flushed"))
    logs.removed.add(3)
    del logs.logs[3]
    assert not logs.reusable(2)  # a log holds it
    assert logs.reusable(3)  # a GC removed its log
    assert logs.reusable(4)  # no log ever held it (a rolled-back compaction's)
    del logs.logs[5]
    assert not logs.reusable(5)  # a log held it and nothing removed it: lost in a crash
    logs.run_first_id = 4
    assert not logs.reusable(3) and logs.reusable(4)  # a run's ids only go up
    # What recovery after a crash may take: only ids the model knows were freed (4 was
    # never seen: it may be a file the bookie made unreported), until a compaction that took
    # it is known to have rolled back by the next restart.
    assert logs.freed(3) and not logs.freed(4) and not logs.freed(5)
    logs.take_compaction_id(4)
    logs.restarted()
    assert logs.freed(4) and not logs.freed(5)


def test_a_copy_of_a_log_whose_map_claims_records_a_crash_lost_may_find_nothing() -> None:
    trace, verdict = _verdict("compaction-of-a-map-claiming-records-a-crash-lost")
    assert verdict.ok, verdict.failure
    ops = [step.op for step in trace.steps]
    assert any(isinstance(op, Crash) for op in ops) and isinstance(ops[-1], CompactCopy)
    assert trace.steps[-1].result.phase == PhaseReport("copy", 0, None, 0)
