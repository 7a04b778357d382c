"""The refinement test (tests/refinement/machine.py) in two profiles: a fast one in every
test run, and a deep one (many more, longer runs) behind the ``slow`` marker.

Coverage is recorded with hypothesis.event (rotations, crashes in the middle of each kind of
step, replay with fence records, a crash between a fence and its ack, ...): run with
``--hypothesis-show-statistics`` to see how often each happened.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from proofs.harness.refinement import MANAGER_SETTINGS
from tests.refinement.machine import machine_for, machine_with

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


#: An entry log per ledger (BookKeeper's EntryLogManagerForEntryLogPerLedger): many active
#: logs, judged by the layout rules (models/entrylog/layout.py), not predicted. At most two
#: active at once, so that the least recently used ledger's log is evicted (sealed, its map
#: appended) whenever a third ledger writes; the default expiry (300 s) is reached when the
#: clock rule (advance_clock) moves the clock past it, and with an expiry of 0 s every add
#: finds the other ledgers' logs expired.
PER_LEDGER = MANAGER_SETTINGS["per-ledger"]
PER_LEDGER_EXPIRING = {
    "entryLogPerLedgerEnabled": "true",
    "entrylogMapAccessExpiryTimeInSeconds": "0",
}
PER_LEDGER_FAST = settings(
    max_examples=100, stateful_step_count=50, deadline=None, suppress_health_check=_QUIET
)


class TestPerLedgerBookieRefinesTheModelFast(machine_with(PER_LEDGER).TestCase):  # type: ignore[misc]
    settings = PER_LEDGER_FAST


_EXPIRING = machine_with(PER_LEDGER_EXPIRING)


class TestExpiringPerLedgerBookieRefinesTheModelFast(_EXPIRING.TestCase):  # type: ignore[misc, name-defined]
    settings = PER_LEDGER_FAST


_DEEP_PER_LEDGER = machine_with(PER_LEDGER, stretch_max=DEEP_STRETCH_MAX)


@pytest.mark.slow
class TestPerLedgerBookieRefinesTheModelDeep(_DEEP_PER_LEDGER.TestCase):  # type: ignore[misc, name-defined]
    settings = DEEP


#: bkref's slots manager (impl/entrylog/slots.py, entryLogSlotsPerLedgerDir): many active
#: logs shared by ledgers, judged by the layout rules. Two slots per directory (four active
#: logs) and at most two ledgers mapped, so mappings are forgotten and slots' logs shared;
#: and with an access expiry of 0 s every add forgets every mapping, so each add takes the
#: next slot in round robin.
SLOTS = MANAGER_SETTINGS["slots"]
SLOTS_EXPIRING = {
    "entryLogSlotsPerLedgerDir": "2",
    "entrylogMapAccessExpiryTimeInSeconds": "0",
}


class TestSlotsBookieRefinesTheModelFast(machine_with(SLOTS).TestCase):  # type: ignore[misc]
    settings = PER_LEDGER_FAST


_EXPIRING_SLOTS = machine_with(SLOTS_EXPIRING)


class TestExpiringSlotsBookieRefinesTheModelFast(_EXPIRING_SLOTS.TestCase):  # type: ignore[misc, name-defined]
    settings = PER_LEDGER_FAST


_DEEP_SLOTS = machine_with(SLOTS, stretch_max=DEEP_STRETCH_MAX)


@pytest.mark.slow
class TestSlotsBookieRefinesTheModelDeep(_DEEP_SLOTS.TestCase):  # type: ignore[misc, name-defined]
    settings = DEEP
