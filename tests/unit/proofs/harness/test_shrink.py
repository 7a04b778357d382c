"""Delta debugging (proofs/harness/shrink.py): the smallest failing sublist it can find,
within its budget, taking the items a run kept."""

from __future__ import annotations

from proofs.harness.shrink import delta_debug


def test_it_finds_the_two_items_that_fail_together() -> None:
    def fails(candidate: list[int]) -> list[int] | None:
        return candidate if {3, 17} <= set(candidate) else None

    kept, spent = delta_debug(list(range(40)), fails, budget=500)
    assert kept == [3, 17]
    assert spent < 100


def test_it_stops_at_its_budget_and_keeps_what_it_had() -> None:
    calls: list[list[int]] = []

    def fails(candidate: list[int]) -> list[int] | None:
        calls.append(candidate)
        return candidate if 5 in candidate else None

    kept, spent = delta_debug(list(range(16)), fails, budget=3)
    assert spent == len(calls) == 3
    assert 5 in kept and len(kept) < 16


def test_a_run_may_keep_fewer_items_than_it_was_given() -> None:
    # A run that skips the odd items (their preconditions no longer hold) and still fails:
    # the shrinking goes on from what it kept.
    def fails(candidate: list[int]) -> list[int] | None:
        run = [i for i in candidate if i % 2 == 0]
        return run if 8 in run else None

    kept, _ = delta_debug(list(range(12)), fails, budget=100)
    assert kept == [8]


def test_nothing_to_shrink() -> None:
    assert delta_debug([], lambda c: c, budget=10) == ([], 0)
