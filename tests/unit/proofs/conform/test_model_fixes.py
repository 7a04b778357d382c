"""Histories that ``bkref conform`` found the model could not judge, kept so that they stay
judged (each test fails on the model before its fix).

- A bookie judged without its state (state ``none``): a crash leaves the key of a ledger whose
  only add was unacknowledged unsure; an add with that key after the restart sets it again
  (models/index/ledger_index.py ``_keyed``; the model's invariants refused it).
- A read of a ledger whose first add is still in flight may be answered ``no_ledger``: the
  bookie need not have seen the add yet (spec/adapter.md, ``read``).
- A provisional entry log (its id unknown after a restart) flushed before a state showed its
  id was forgotten under its placeholder id (models/entrylog/manager.py
  ``_update_least_unflushed``); the next state raised a KeyError in the model. The trace is
  the one bkref conform recorded of bkref's own adapter.
- A bookie preallocating its next entry log on its own thread (no step says so): a forced
  GC's compaction log takes the id after the preallocated one, and a preallocation may run
  between two compactions of one cycle (models/entrylog/manager.py ``preallocates_unseen``,
  models/bookie/bookie.py ``_real_logs``). Both traces bkref conform recorded of bkref's
  adapter; the model refused each with "preallocated with an id already used".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.harness.replay import Replay, StepReport, Verdict, replay_trace
from spec.crash import KillProcess
from spec.operations import (
    OK,
    PENDING,
    Add,
    Crash,
    Operation,
    Read,
    Restart,
    Result,
    Shutdown,
    failed,
)
from spec.profile import Profile
from spec.trace import Step, Trace, TraceHeader, read_trace_bytes

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
KEY = b"k1"


def _trace(profile: Profile, *steps: Step) -> Trace:
    header = TraceHeader(config=(), source="tests", profile=profile)
    return Trace(header, tuple(Step(i, s.op, s.result) for i, s in enumerate(steps)))


def _replay_checked(trace: Trace) -> Verdict:
    """replay_trace, with the judge's invariants checked after every step."""
    replay = Replay(trace.header)
    reports: list[StepReport] = []
    for step in trace.steps:
        reports.append(replay.advance(step))
        replay.check_invariants()
        if reports[-1].failure is not None:
            break
    return Verdict(trace, tuple(reports))


def _step(op: Operation, result: Result = OK) -> Step:
    return Step(0, op, result)


def test_an_unsure_key_is_set_again_by_an_add_after_the_restart() -> None:
    profile = Profile(acks="async", state="none", answers="bkref")
    trace = _trace(
        profile,
        _step(Add(1, 0, KEY, b"a"), PENDING),
        _step(Crash(KillProcess())),
        _step(Restart()),
        _step(Add(1, 1, KEY, b"b"), PENDING),  # the model's invariants refused this one
        _step(Crash(KillProcess())),
        _step(Restart()),
        _step(Read(1, 1), failed("no_ledger")),
        _step(Add(1, 2, KEY, b"c")),
        _step(Read(1, 2), Result(data=b"c")),
        _step(Shutdown()),
    )
    verdict = _replay_checked(trace)
    assert verdict.ok, verdict.failure


def test_a_read_may_miss_the_ledger_of_an_add_in_flight() -> None:
    profile = Profile(acks="async", state="none", answers="bkref")
    trace = _trace(
        profile,
        _step(Add(1, 0, KEY, b"a"), PENDING),
        _step(Read(1, 1), failed("no_ledger")),
    )
    verdict = _replay_checked(trace)
    assert verdict.ok, verdict.failure


def test_a_log_flushed_before_its_id_was_seen_is_judged() -> None:
    path = TRACES / "provisional-log-flushed-before-seen.jsonl"
    trace = read_trace_bytes(path.read_bytes(), str(path))
    verdict = replay_trace(trace)
    assert verdict.ok, verdict.failure
    assert verdict.summary().crashes == 2


@pytest.mark.parametrize(
    "name",
    [
        "compaction-above-an-unseen-preallocated-log",
        "preallocated-between-two-compactions",
        # The refinement test's (in process): a preallocation after a restart, a GC whose
        # compactions take the ids above it, and the preallocated log still waiting after.
        "preallocated-waiting-after-compactions",
        # ... and the next rotation taking that waiting log (an id below the compactions').
        "preallocated-taken-by-the-next-rotation",
    ],
)
def test_compactions_beside_an_unseen_preallocation_are_judged(name: str) -> None:
    path = TRACES / f"{name}.jsonl"
    trace = read_trace_bytes(path.read_bytes(), str(path))
    verdict = replay_trace(trace)
    assert verdict.ok, verdict.failure
    assert any(step.op.name == "gc" and step.result.ok for step in trace.steps)
