"""The refinement test (tests/refinement/machine.py) in two profiles: a fast one in every
test run, and a deep one (many more, longer runs) behind the ``slow`` marker.

Coverage is recorded with hypothesis.event (rotations, crashes in the middle of each kind of
step, replay with fence records, a crash between a fence and its ack, ...): run with
``--hypothesis-show-statistics`` to see how often each happened.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.refinement.machine import machine_for

_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much]

FAST = settings(
    max_examples=250, stateful_step_count=50, deadline=None, suppress_health_check=_QUIET
)
#: The deep profile's longest healthy stretch: with it an example acknowledges about 200 adds
#: (docs/benchmarks.md). An example then runs a few thousand steps, so the deep profile runs
#: fewer of them (about three seconds each on this machine).
DEEP_STRETCH_MAX = 180
DEEP = settings(
    max_examples=1000, stateful_step_count=150, deadline=None, suppress_health_check=_QUIET
)


class TestBookieRefinesTheModelFast(machine_for().TestCase):  # type: ignore[misc]
    settings = FAST


@pytest.mark.slow
class TestBookieRefinesTheModelDeep(machine_for(stretch_max=DEEP_STRETCH_MAX).TestCase):  # type: ignore[misc]
    settings = DEEP
