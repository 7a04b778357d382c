"""proofs/crash/plans.py: the plan family is complete where it promises, bounded, and unique."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.crash.plans import plans_for
from spec.crash import KeepPrefix, KeepSubset, LoseUnsynced, TornSectors, TornWrite


def test_no_pending_operation_gives_only_lose_unsynced() -> None:
    assert list(plans_for([], [])) == [LoseUnsynced()]


def test_small_pending_list_gets_every_prefix_tear_and_single_drop() -> None:
    plans = list(plans_for(["write", "create", "write"], [1000, 0, 10]))
    assert plans[0] == LoseUnsynced()
    assert {KeepPrefix(1), KeepPrefix(2), KeepPrefix(3)} <= set(plans)
    # 1000 bytes can span 3 sectors; 10 bytes at most 2 (it may straddle a boundary).
    tears = {p for p in plans if isinstance(p, TornWrite)}
    assert tears == {
        TornWrite(0, 1),
        TornWrite(0, 2),
        TornWrite(0, 3),
        TornWrite(2, 1),
        TornWrite(2, 2),
    }
    drops = {p for p in plans if isinstance(p, KeepSubset)}
    assert drops == {KeepSubset({1, 2}), KeepSubset({0, 2}), KeepSubset({0, 1})}
    assert not any(isinstance(p, TornSectors) for p in plans)  # off by default
    plans = list(plans_for(["write", "create", "write"], [1000, 0, 10], garbled=True))
    # The first and the last write garbled whole, and with only their first sector garbage.
    garbled = {p for p in plans if isinstance(p, TornSectors)}
    assert garbled == {
        TornSectors(0, frozenset(), 0),
        TornSectors(0, frozenset({1, 2}), 0),
        TornSectors(2, frozenset(), 2),
        TornSectors(2, frozenset({1}), 2),
    }


def test_garbled_writes_are_only_the_first_and_the_last() -> None:
    plans = list(plans_for(["write"] * 5, [1, 2, 3, 4, 1], garbled=True))
    garbled = [p for p in plans if isinstance(p, TornSectors)]
    assert {p.keep for p in garbled} == {0, 4}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["write", "create", "rename"]), st.integers(0, 5000))))
def test_plans_are_unique_bounded_and_always_include_the_extremes(
    ops: list[tuple[str, int]],
) -> None:
    kinds = [kind for kind, _ in ops]
    lengths = [length if kind == "write" else 0 for kind, length in ops]
    plans = list(plans_for(kinds, lengths, garbled=True))
    assert len(plans) == len(set(plans))
    assert LoseUnsynced() in plans
    if ops:
        assert KeepPrefix(len(ops)) in plans
    # Linear in the pending list: prefixes + 3 tears per write + 4 garbled + drops + 1.
    assert len(plans) <= 64 + 1 + 3 * len(ops) + 4 + 32 + 1 + 1
