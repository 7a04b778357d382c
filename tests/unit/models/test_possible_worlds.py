"""The bookie model against the possible-worlds reference, on the class of correct bookies.

tests/unit/models/worlds_bookie.py draws histories from a bookie that makes every choice the
spec leaves open at random; models/index/possible_worlds.py keeps every world consistent with
a history. The bookie model (models/bookie/bookie.py, through the trace replay that
``bkref check-trace`` and ``bkref conform`` use) must:

- pass every history of the random correct bookie (no false verdict on a correct bookie, of
  any design: each of its choices is one some correct bookie makes);
- on the same history with one answer or ack changed, fail at exactly the step where the
  reference finds no world left, and pass where the reference still has one (no bug let
  through on what a client can see, no false verdict either).

Each test runs a few hundred seeded histories per profile (``-m slow``: many thousands).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from models.index.possible_worlds import judge
from proofs.harness.replay import Replay, ReplayError
from spec.profile import Profile
from spec.trace import Trace, read_trace_bytes
from tests.unit.models.worlds_bookie import draw_history, mutations

#: Histories on which the two once disagreed (found by the slow test), kept.
TRACES = sorted((Path(__file__).resolve().parents[1] / "data" / "traces").glob("worlds-*.jsonl"))

PROFILES = [
    Profile(acks="async", state=state, answers=answers)
    for state in ("none", "protocol")
    for answers in ("bkref", "bookkeeper", "either")
]


def reference(trace: Trace) -> int | None:
    """The first step no possible world allows, or None."""
    return judge(
        trace.header.profile,
        ((s.index, s.op, s.result, s.completed, s.state) for s in trace.steps),
    ).step


def model(trace: Trace) -> tuple[int | None, str]:
    """The first step the bookie model fails (its invariants checked after every step), and
    its message. A model that cannot follow the history is a failure of the test."""
    replay = Replay(trace.header)
    for step in trace.steps:
        try:
            report = replay.advance(step)
            replay.check_invariants()
        except (ReplayError, AssertionError) as exc:
            pytest.fail(f"the model broke at step {step.index}: {exc}\n{_dump(trace)}")
        if report.failure is not None:
            return step.index, report.failure.describe()
    return None, ""


def _dump(trace: Trace) -> str:
    from spec.trace import encode_header, encode_step

    return "\n".join([encode_header(trace.header), *(encode_step(s) for s in trace.steps)])


def _check(trace: Trace) -> None:
    expected = reference(trace)
    got, why = model(trace)
    assert got == expected, (
        f"reference fails at {expected}, the model at {got} ({why})\n{_dump(trace)}"
    )


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.state}-{p.answers}")
def test_the_model_passes_every_correct_history(profile: Profile) -> None:
    for seed in range(150):
        trace = draw_history(random.Random(f"correct:{seed}:{profile}"), profile)
        assert reference(trace) is None, _dump(trace)
        got, why = model(trace)
        assert got is None, f"seed {seed}: the model failed step {got}: {why}\n{_dump(trace)}"


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.state}-{p.answers}")
def test_the_model_fails_exactly_where_no_world_is_left(profile: Profile) -> None:
    for seed in range(60):
        rng = random.Random(f"mutant:{seed}:{profile}")
        trace = draw_history(rng, profile)
        for mutant in mutations(trace, rng, 6):
            _check(mutant)


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.state}-{p.answers}")
def test_the_model_and_the_reference_agree_on_many_more_histories(profile: Profile) -> None:
    """The two tests above on 2,000 correct histories of 40 requests per profile, and 8
    mutants of each (``-m slow``)."""
    for seed in range(2_000):
        rng = random.Random(f"deep:{seed}:{profile}")
        trace = draw_history(rng, profile, requests=40)
        assert reference(trace) is None, _dump(trace)
        _check(trace)
        for mutant in mutations(trace, rng, 8):
            _check(mutant)


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_the_histories_they_once_disagreed_on(path: Path) -> None:
    """A state that showed a pending entry as the last one (a later read must see it:
    R-NO-FLICKER; the model let it vanish), and a fenced ledger deleted and created again
    under BookKeeper's answers before the first state after a crash (the crash's outcomes
    still required the old fence: R-CRASH-SUBSET judged a ledger a request had changed)."""
    trace = read_trace_bytes(path.read_bytes(), str(path))
    _check(trace)
