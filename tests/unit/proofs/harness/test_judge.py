"""The judging core (proofs/harness/judge.py), and the one step loop it gives the live harness
(proofs/harness/refinement.py) and the trace replay (proofs/harness/replay.py).

- a step the model allows gets the model's notes; one it refuses gets the divergence, and
  the property monitor does not see it; a broken property gets its violations;
- the model's and the monitor's invariants are asserted after every step;
- a failure found live and the replay of the trace it saved agree: same step, same kind,
  same message (a divergence, and a broken property).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import proofs.harness.refinement
import proofs.harness.replay
from impl.bookie.bookie import Bookie
from models.bookie.bookie import BookieModel, ModelConfig, ModelUsageError
from proofs.harness.judge import Judge
from proofs.harness.refinement import (
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
    RefinementFailure,
)
from proofs.harness.replay import replay_trace
from spec.crash import LoseUnsynced
from spec.errors import RecoveryError
from spec.operations import (
    OK,
    PENDING,
    Add,
    Completion,
    Crash,
    FiredFault,
    JournalForce,
    Operation,
    Read,
    Restart,
    Result,
)
from spec.properties import PropertyMonitor, Violation
from spec.state import AbstractState
from spec.trace import Step, read_trace

KEY = b"k"
CONFIG = ModelConfig(log_size_limit_bytes=4096)


class CountingMonitor(PropertyMonitor):
    """Counts the steps it observes; breaks durability at ``break_at``."""

    def __init__(self, break_at: int | None = None) -> None:
        super().__init__()
        self.observed = 0
        self.break_at = break_at

    def observe(self, step: Step) -> list[Violation]:
        self.observed += 1
        found = super().observe(step)
        if step.index == self.break_at:
            found.append(Violation("durability", step.index, "made up for the test"))
        return found


def _judge(monitor: PropertyMonitor | None = None) -> Judge:
    return Judge(BookieModel(CONFIG), monitor or CountingMonitor())


def test_an_allowed_step_gets_the_model_s_notes() -> None:
    judgement = _judge().judge(Step(0, Add(1, 0, KEY, b"a"), PENDING))
    assert judgement.ok and judgement.divergence is None and not judgement.violations
    assert judgement.notes and judgement.notes[0].startswith("add 1:0 accepted")


def test_a_refused_step_is_a_divergence_the_monitor_does_not_see() -> None:
    monitor = CountingMonitor()
    judge = _judge(monitor)
    judge.judge(Step(0, Add(1, 0, KEY, b"a"), PENDING))
    judgement = judge.judge(Step(1, JournalForce(), OK))  # the pending add's ack is missing
    assert not judgement.ok and judgement.notes == () and not judgement.violations
    assert judgement.divergence is not None
    assert "journal_force completed acks []" in judgement.divergence.message
    assert monitor.observed == 1


def test_a_state_is_compared_only_while_the_bookie_is_up() -> None:
    judge = _judge()
    wrong = AbstractState((), 0, (0, 0), (0, 0), None, (), (7,))  # ledger 7 deleted: no one did
    judgement = judge.judge(Step(0, Read(1, 0), Result(error="no_ledger"), state=wrong))
    assert judgement.divergence is not None
    assert "ledgers [7] are deleted; nobody deleted them" in judgement.divergence.message
    down = _judge()
    assert down.judge(Step(0, Crash(LoseUnsynced()), OK, state=wrong)).ok


def test_a_broken_property_is_reported_with_the_notes() -> None:
    judge = _judge(CountingMonitor(break_at=1))
    judge.judge(Step(0, Add(1, 0, KEY, b"a"), PENDING))
    judgement = judge.judge(Step(1, JournalForce(), OK, (Completion(0),)))
    assert not judgement.ok and judgement.divergence is None and judgement.notes
    assert judgement.violations == (Violation("durability", 1, "made up for the test"),)


def test_the_monitor_s_invariants_are_checked_after_every_step() -> None:
    monitor = CountingMonitor()
    judge = _judge(monitor)
    add = Add(1, 0, KEY, b"a")
    judge.judge(Step(0, add, PENDING))
    monitor._add_record(add, 0).acked_at = 9  # acknowledged at a step not yet taken
    with pytest.raises(AssertionError):
        judge.judge(Step(1, Read(1, 0), Result(data=b"a")))


def test_steps_come_in_order_and_a_history_the_model_cannot_run_raises() -> None:
    judge = _judge()
    with pytest.raises(AssertionError):
        judge.judge(Step(1, Read(1, 0), Result(error="no_ledger")))
    with pytest.raises(ModelUsageError, match="restart while the bookie is up"):
        judge.judge(Step(0, Restart(), OK))


# --- live and replayed alike ---------------------------------------------------------------


class LyingReads:
    """bkref's bookie, except that every read returns one byte too many."""

    def __init__(self) -> None:
        self.inner = InProcessBookie(SMALL_SETTINGS)

    def run(
        self, index: int, op: Operation, crash_after_ops: int | None
    ) -> tuple[Result, tuple[Completion, ...]]:
        result, completed = self.inner.run(index, op, crash_after_ops)
        if isinstance(op, Read) and result.data is not None:
            result = Result(data=result.data + b"!")
        return result, completed

    def inspect(self) -> AbstractState | None:
        return self.inner.inspect()

    def fired_faults(self) -> tuple[FiredFault, ...]:
        return self.inner.fired_faults()

    def check_invariants(self) -> None:
        self.inner.check_invariants()


SCENARIO: list[Operation] = [Add(1, 0, KEY, b"a"), JournalForce(), Read(1, 0)]


def _live_failure(sut: object) -> RefinementFailure:
    harness = Refinement(sut, SMALL_SETTINGS)  # type: ignore[arg-type]
    with pytest.raises(RefinementFailure) as info:
        harness.run_all(SCENARIO)
    return info.value


def test_a_divergence_found_live_replays_to_the_same_failure() -> None:
    failure = _live_failure(LyingReads())
    assert failure.message.startswith("step 2 (read): read 1:0 answered other bytes")
    verdict = replay_trace(failure.trace)
    assert verdict.failure is not None
    assert (verdict.failure.step, verdict.failure.kind) == (2, "divergence")
    assert failure.message == f"step 2 (read): {verdict.failure.message}"


def test_a_broken_property_found_live_replays_to_the_same_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def breaking(_profile: object = None) -> PropertyMonitor:
        return CountingMonitor(break_at=1)

    monkeypatch.setattr(proofs.harness.refinement, "PropertyMonitor", breaking)
    monkeypatch.setattr(proofs.harness.replay, "PropertyMonitor", breaking)
    failure = _live_failure(InProcessBookie(SMALL_SETTINGS))
    assert failure.message == "property durability at step 1: made up for the test"
    verdict = replay_trace(failure.trace)
    assert verdict.failure is not None
    assert (verdict.failure.step, verdict.failure.kind) == (1, "property")
    assert (verdict.failure.prop, verdict.failure.message) == ("durability", "made up for the test")


def test_a_recovery_that_refuses_the_disk_is_a_verdict_with_a_saved_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RecoveryError at a restart used to escape the harness as a bare exception, with no
    trace to replay. Now the restart's answer is io_error, the model judges it (recovery
    failed), and the failure names the reason and saves a trace that replays to the same
    verdict."""
    opened = []

    def opener(*args: object, **kwargs: object) -> Bookie:
        opened.append(1)
        if len(opened) > 1:
            raise RecoveryError("the journal is damaged (a test)")
        return Bookie.open(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setenv("BKREF_TRACE_DIR", str(tmp_path))
    harness = Refinement(InProcessBookie(SMALL_SETTINGS, opener=opener), SMALL_SETTINGS)
    harness.run(Crash(LoseUnsynced()))
    with pytest.raises(RefinementFailure) as caught:
        harness.run(Restart())
    assert "recovery failed" in caught.value.message
    assert "RecoveryError: the journal is damaged" in caught.value.message
    saved = read_trace(Path(caught.value.save()).read_text())
    verdict = replay_trace(saved)
    assert verdict.failure is not None and verdict.failure.step == 1
