"""The refinement test (tests/refinement/machine.py) in two profiles: a fast one in every
test run, and a deep one (many more, longer runs) behind the ``slow`` marker."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.refinement.machine import machine_for

RefinementMachine = machine_for()

FAST = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
DEEP = settings(
    max_examples=1500,
    stateful_step_count=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_bookie_refines_the_model_fast() -> None:
    FAST(RefinementMachine.TestCase.runTest)(RefinementMachine.TestCase())


@pytest.mark.slow
def test_bookie_refines_the_model_deep() -> None:
    DEEP(RefinementMachine.TestCase.runTest)(RefinementMachine.TestCase())
