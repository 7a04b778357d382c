"""Delta debugging over a list: the shrinking of a failure that ``bkref conform`` (over a
scenario's actions) and ``bkref campaign`` (over a scenario's rules) share.

Why one function: both drop chunks of the list, halving the chunk down to single items,
and keep a candidate only when it fails the same way; the loop's bounds (a budget of
re-runs, the chunk that halves, the end when single items no longer shrink) are the same
and were written twice before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def delta_debug(
    items: Sequence[T], fails: Callable[[list[T]], list[T] | None], budget: int
) -> tuple[list[T], int]:
    """The smallest sublist of ``items`` found that still fails, and the re-runs spent.
    ``fails(candidate)`` runs a candidate (``items`` with a chunk dropped) and returns None
    when it does not fail the same way, else the items that run kept (a run may skip items
    whose precondition no longer holds: the list goes on from those). At most ``budget``
    candidates are run."""
    kept = list(items)
    spent = 0
    chunk = max(1, len(kept) // 2)
    while spent < budget and kept:
        changed = False
        start = 0
        while start < len(kept) and spent < budget:
            candidate = kept[:start] + kept[start + chunk :]
            spent += 1
            survivors = fails(candidate)
            if survivors is not None:
                kept = survivors
                changed = True
            else:
                start += chunk
        if chunk == 1 and not changed:
            break
        chunk = max(1, chunk // 2)
    return kept, spent
