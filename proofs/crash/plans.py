"""Which crash plans to try at one crash point.

Given the operations still pending on the simulated disk when the process dies, enumerate a
deterministic, bounded family of crash plans (spec/crash.py):

- lose everything unsynced (what a power cut with a volatile cache does);
- keep everything (the kernel got it all out before the cut);
- every prefix of the pending operations (an ordered file system, ext4 data=journal);
- a torn write: every pending write cut after each of its first few 512-byte sectors, with the
  operations before it kept;
- with ``garbled=True`` only, a garbled write, for the first and the last pending write (the
  two ends of the unsynced window): the whole write turned to garbage, and its first sector
  garbage with the rest written (a tear no prefix can express). Off by default: a garbage
  journal tail makes recovery refuse to start (as BookKeeper's replay does), which the
  bookie check reports as a failure; the default check stays the one the engine passes
  until the engine decides what a garbage tail past the durable mark means.
- drop exactly one operation and keep the rest (ALICE's single reordering).

This is the small-scope hypothesis at work: most crash bugs show with one reordering or one
tear. Arbitrary subsets are drawn by Hypothesis in the tests, not enumerated here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from spec.crash import (
    SECTOR_BYTES,
    CrashPlan,
    KeepPrefix,
    KeepSubset,
    LoseUnsynced,
    TornSectors,
    TornWrite,
)


def plans_for(
    pending_kinds: Sequence[str],
    pending_lengths: Sequence[int],
    *,
    max_prefixes: int = 64,
    max_torn_sectors: int = 3,
    max_drop_one: int = 32,
    garbled: bool = False,
) -> Iterator[CrashPlan]:
    """Crash plans for a pending list described by each operation's kind and byte length.

    ``pending_kinds[i]`` is the kind of pending operation i ("write" for data writes), and
    ``pending_lengths[i]`` its length in bytes (0 for non-writes). Bounds keep the count
    linear in the number of pending operations. No plan is produced twice.
    """
    count = len(pending_kinds)
    assert count == len(pending_lengths)
    seen: set[CrashPlan] = set()

    def fresh(plan: CrashPlan) -> bool:
        if plan in seen:
            return False
        seen.add(plan)
        return True

    yield LoseUnsynced()
    if count == 0:
        return
    for plan in _prefixes(count, max_prefixes):
        if fresh(plan):
            yield plan
    for index, (kind, length) in enumerate(zip(pending_kinds, pending_lengths, strict=True)):
        if kind != "write" or length <= 0:
            continue
        sectors_spanned = -(-length // SECTOR_BYTES) + 1
        for sectors in range(1, min(max_torn_sectors, sectors_spanned) + 1):
            torn = TornWrite(keep=index, sectors=sectors)
            if fresh(torn):
                yield torn
    for garbled_plan in _garbled(pending_kinds, pending_lengths) if garbled else ():
        if fresh(garbled_plan):
            yield garbled_plan
    step = max(1, count // max_drop_one)
    for dropped in range(0, count, step):
        subset = KeepSubset(frozenset(range(count)) - {dropped})
        if fresh(subset):
            yield subset


def _garbled(kinds: Sequence[str], lengths: Sequence[int]) -> Iterator[TornSectors]:
    """At most four plans: the first and the last pending write all garbage, and (if it can
    span two sectors) with only its first sector garbage. The seed is the write's index, so a
    plan reads the same in a report as on a rerun."""
    writes = [i for i, kind in enumerate(kinds) if kind == "write" and lengths[i] > 0]
    for index in sorted({writes[0], writes[-1]} if writes else set()):
        yield TornSectors(keep=index, sectors=frozenset(), garbage=index)
        if lengths[index] > 1:
            spanned = -(-lengths[index] // SECTOR_BYTES) + 1
            yield TornSectors(keep=index, sectors=frozenset(range(1, spanned)), garbage=index)


def _prefixes(count: int, max_prefixes: int) -> Iterator[KeepPrefix]:
    """KeepPrefix for 1..count, thinned evenly to at most ``max_prefixes`` (always incl. all)."""
    step = max(1, count // max_prefixes)
    for kept in range(step, count, step):
        yield KeepPrefix(kept)
    yield KeepPrefix(count)
