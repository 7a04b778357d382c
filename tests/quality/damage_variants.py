"""Known-bad variants of the damage detection, each a real way to lose data silently.

Each is a drop-in replacement for one decision that recovery and ``bkref inspect`` share
(impl/journal/damage.py, impl/bookie/recovery.py), differing from it in exactly the way its
name says. tests/quality/test_damage_check_catches.py requires ``bkref damage-check``
(proofs/damage/) to catch every one within the CI budget. They live here, never in impl/.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from impl.bookie import recovery
from impl.journal import damage
from impl.journal.damage import StopFacts, StopVerdict
from spec.errors import DamagedFile

_judge_stop = damage.judge_stop
_indexed_log_damage = recovery.indexed_log_damage


def judge_stop_reading_a_headerless_journal_as_v1(facts: StopFacts, *, strict: bool) -> StopVerdict:
    """The survey before issue 32: a journal after lastMark's whose header was zeroed is read
    as a version 1 journal, where a zero length anywhere is a crash's end (row j19 undone)."""
    if facts.version < damage.MIN_WRITTEN_VERSION:
        return _judge_stop(facts, strict=False)
    return _judge_stop(facts, strict=strict)


def judge_stop_without_the_later_group_rule(facts: StopFacts, *, strict: bool) -> StopVerdict:
    """The survey that reads no further than the stop: a zeroed group with synced groups
    after it is taken for a crash's torn last group (rows j4 and j15 undone)."""
    return _judge_stop(attrs.evolve(facts, later_group=None), strict=strict)


def indexed_log_damage_reading_no_size_field(
    log_id: int,
    count: int,
    largest: int,
    path: str | None,
    size: int | None,
    *,
    last_length: int | None = None,
    copies: Sequence[str] = (),
) -> DamagedFile | None:
    """The check before issue 32: the last indexed entry's ids must fit in the log, its
    body need not (row e2's cut inside the last entry undone: the read fails instead)."""
    return _indexed_log_damage(log_id, count, largest, path, size, copies=copies)


def indexed_log_damage_taking_the_first_copy(
    log_id: int,
    count: int,
    largest: int,
    path: str | None,
    size: int | None,
    *,
    last_length: int | None = None,
    copies: Sequence[str] = (),
) -> DamagedFile | None:
    """The check before issue 32: a log id in two ledger directories is read from the first
    that has it, whichever the index meant (row e9 undone)."""
    return _indexed_log_damage(log_id, count, largest, path, size, last_length=last_length)
