"""impl/limits.py: a Limits refuses a bound of zero or less (naming the field) and bounds that
contradict each other; TEST_LIMITS is smaller than LIMITS wherever it differs; and each part
of the engine obeys the Limits it was given, not the production values (docs/design.md,
"Limits").

The bounds already covered by a test of their own module are checked there, through a
Limits: the index merge (tests/unit/impl/index/test_ledger_index.py), journal replay across
chunks (tests/unit/impl/journal/test_replay.py), pending-ack pruning
(tests/unit/impl/bookie/test_ack.py), rebuild progress (tests/unit/impl/index/test_rebuild.py)
and the adapter's in-flight bound (tests/unit/impl/server/test_dispatcher.py).
"""

from __future__ import annotations

import attrs
import pytest

from impl.limits import LIMITS, SCAN_WINDOW_MIN_BYTES, TEST_LIMITS, TEST_SETTINGS, Limits

FIELDS = [field.name for field in attrs.fields(Limits)]


# --- the object ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("value", [0, -1])
def test_a_bound_of_zero_or_less_is_refused_naming_the_field(name: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"Limits.{name} must be positive, got {value}"):
        Limits(**{name: value})


def test_every_field_is_named_with_its_unit_or_kind_last() -> None:
    endings = ("_bytes", "_ms", "_max", "_min", "_logs")
    assert [name for name in FIELDS if not name.endswith(endings)] == []


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"scan_chunk_bytes": SCAN_WINDOW_MIN_BYTES - 1}, "scan_chunk_bytes"),
        ({"master_key_max_bytes": LIMITS.master_key_max_bytes + 1}, "master_key_max_bytes"),
        ({"group_wait_min_ms": 600, "journal_idle_ms": 500}, "group_wait_min_ms"),
        ({"log_size_limit_max_bytes": 1 << 32}, "log_size_limit_max_bytes"),
    ],
)
def test_check_invariants_refuses_bounds_that_contradict_each_other(
    changes: dict[str, int], named: str
) -> None:
    with pytest.raises(AssertionError, match=named):
        Limits(**changes)


def test_check_invariants_runs_on_an_object_changed_behind_its_back() -> None:
    limits = Limits()
    limits.check_invariants()
    object.__setattr__(limits, "scan_chunk_bytes", 1)  # bypasses the frozen class
    with pytest.raises(AssertionError, match="scan_chunk_bytes"):
        limits.check_invariants()


def test_the_smallest_scan_window_is_accepted() -> None:
    assert Limits(scan_chunk_bytes=SCAN_WINDOW_MIN_BYTES).scan_chunk_bytes == 20


def test_test_limits_are_smaller_than_limits_on_every_field_they_set() -> None:
    changed = [name for name in FIELDS if getattr(TEST_LIMITS, name) != getattr(LIMITS, name)]
    assert len(changed) >= 8  # guards against a TEST_LIMITS that sets nothing
    bigger = [name for name in changed if getattr(TEST_LIMITS, name) > getattr(LIMITS, name)]
    assert bigger == []


def test_test_settings_are_bookkeeper_keys_the_configuration_accepts() -> None:
    from impl.config.config import load_config

    config = load_config(None, "test", [f"{key}={value}" for key, value in TEST_SETTINGS.items()])
    assert config.log_size_limit_bytes == int(TEST_SETTINGS["logSizeLimit"])
    assert config.write_buffer_size_bytes == int(TEST_SETTINGS["writeBufferSizeBytes"])
    assert config.journal_max_group_wait_ms == 0
