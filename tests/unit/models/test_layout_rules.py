"""models/entrylog/layout.py: each rule accepts what a correct manager does and names itself
when broken, on hand-made layouts (the variants that break them in a real bookie are
tests/quality/test_layout_rules_catch.py)."""

from __future__ import annotations

import pytest

from models.entrylog.layout import (
    Between,
    Layout,
    LayoutProblem,
    ManagerRules,
    RunHistory,
    check_active,
    judge,
)
from spec.state import LogView

SINGLE = ManagerRules("single", 1400)
PER_LEDGER = ManagerRules("per_ledger", 1400)
R = 120  # one record's bytes (20 of overhead, 100 of data)


def lay(
    *logs: tuple[int, str, dict[int, int]], least: int = 0, current: int | None = None
) -> Layout:
    views = [LogView(i, state, tuple(sorted(b.items()))) for i, state, b in logs]
    maps = {
        i: ((True, tuple(sorted(b.items()))) if state in ("rotated", "flushed") else (False, None))
        for i, state, b in logs
    }
    return Layout.of(views, maps, least, current)


def run(before: Layout, after: Layout, between: Between, manager: ManagerRules = SINGLE) -> None:
    history = RunHistory()
    history.learn(before)
    judge(before, after, between, manager, history)


def rule_of(before: Layout, after: Layout, between: Between, manager: ManagerRules = SINGLE) -> str:
    with pytest.raises(LayoutProblem) as problem:
        run(before, after, between, manager)
    return problem.value.rule


def test_an_add_a_rotation_and_a_checkpoint_as_a_correct_manager_does_them() -> None:
    one = lay((0, "active", {1: 10 * R}), current=0)
    # The next record (120 bytes) would pass 1400 (1024 + 240 + 120 = 1384: fits; at 3 it
    # would not): two records fit, the third rotates.
    two = lay((0, "active", {1: 2 * R}), current=0)
    three = lay((0, "rotated", {1: 3 * R}), (1, "active", {1: R}), current=1)
    run(lay((0, "active", {1: R}), current=0), two, Between([(1, R)]))
    run(two, lay((0, "active", {1: 3 * R}), current=0), Between([(1, R)]))
    run(
        lay((0, "active", {1: 3 * R}), current=0),
        three,
        Between([(1, R)]),
    )
    flushed = lay((0, "flushed", {1: 3 * R}), (1, "active", {1: R}), least=1, current=1)
    run(three, flushed, Between(checkpoint=True))
    assert one.current == 0


def test_each_rule_names_itself() -> None:
    base = lay((0, "rotated", {1: R}), (1, "active", {1: R}), current=1)
    # A new log below one seen.
    assert (
        rule_of(
            lay((5, "active", {1: R}), current=5),
            lay((5, "rotated", {1: R}), (3, "active", {}), current=3),
            Between(rotate=True),
        )
        == "R-LOG-IDS"
    )
    # A sealed log that grew.
    assert (
        rule_of(
            base,
            lay((0, "rotated", {1: 2 * R}), (1, "active", {1: R}), current=1),
            Between([(1, R)]),
        )
        == "R-LOG-SEALED"
    )
    # Bytes nobody added.
    assert (
        rule_of(base, lay((0, "rotated", {1: R}), (1, "active", {1: 2 * R}), current=1), Between())
        == "R-LOG-BYTES"
    )
    # Flushed with no checkpoint.
    assert (
        rule_of(
            base, lay((0, "flushed", {1: R}), (1, "active", {1: R}), least=1, current=1), Between()
        )
        == "R-LOG-FLUSH"
    )
    # A checkpoint that left a rotated log.
    assert rule_of(base, base, Between(checkpoint=True)) == "R-LOG-FLUSH"
    # Rotated with no reason.
    assert (
        rule_of(
            lay((0, "active", {1: R}), current=0),
            lay((0, "rotated", {1: R}), (1, "active", {1: R}), current=1),
            Between([(1, R)]),
        )
        == "R-LOG-ROTATION"
    )
    # Past logSizeLimit with a second record.
    assert (
        rule_of(
            lay((0, "active", {1: 3 * R}), current=0),
            lay((0, "active", {1: 4 * R}), current=0),
            Between([(1, R)]),
        )
        == "R-LOG-ROTATION"
    )
    # leastUnflushedLogId behind a flushed log of this run.
    after = lay((0, "flushed", {1: R}), (1, "active", {1: R}), least=0, current=1)
    assert rule_of(base, after, Between(checkpoint=True)) == "R-LEAST-UNFLUSHED"


def test_the_active_log_rule_is_the_managers() -> None:
    two = lay((0, "active", {1: R}), (1, "active", {2: R}), current=1)
    with pytest.raises(LayoutProblem, match="one log takes the adds"):
        check_active(two, SINGLE)
    check_active(two, PER_LEDGER)
    shared = lay((0, "active", {1: R}), (1, "active", {1: R}), current=1)
    with pytest.raises(LayoutProblem, match="two active entry logs"):
        check_active(shared, PER_LEDGER)
    mixed = lay((0, "active", {1: R, 2: R}), current=0)
    with pytest.raises(LayoutProblem, match="one ledger's records"):
        check_active(mixed, PER_LEDGER)


def test_per_ledger_eviction_is_a_reason_a_single_log_does_not_have() -> None:
    before = lay((0, "active", {1: R}), (1, "active", {2: R}), current=1)
    evicted = lay((0, "rotated", {1: R}), (1, "active", {2: 2 * R}), current=1)
    run(before, evicted, Between([(2, R)]), PER_LEDGER)
    assert rule_of(before, evicted, Between([(2, R)]), SINGLE) == "R-LOG-ROTATION"


def test_in_flight_adds_bound_the_bytes_from_above() -> None:
    before = lay((0, "active", {1: R}), current=0)
    run(before, lay((0, "active", {1: R}), current=0), Between([(1, R)], unsure=True))
    assert (
        rule_of(before, lay((0, "active", {1: 3 * R}), current=0), Between([(1, R)], unsure=True))
        == "R-LOG-BYTES"
    )


SLOTS = ManagerRules("slots", 1400, active_max=2)


def test_slots_share_active_logs_up_to_dirs_times_slots() -> None:
    shared = lay((0, "active", {1: R, 3: R}), (1, "active", {2: R, 1: R}), current=1)
    check_active(shared, SLOTS)  # several ledgers per log, a ledger in two active logs
    three = lay((0, "active", {1: R}), (1, "active", {2: R}), (2, "active", {3: R}), current=2)
    with pytest.raises(LayoutProblem, match="above 2"):
        check_active(three, SLOTS)
    check_active(three, ManagerRules("slots", 1400))  # directories unknown: not counted


def test_slots_put_a_ledger_s_new_records_in_one_active_log() -> None:
    before = lay((0, "active", {1: R}), (1, "active", {2: R}), current=1)
    # Ledger 1's two records between two states went to two active logs: wrong ...
    split = lay((0, "active", {1: 2 * R}), (1, "active", {1: R, 2: R}), current=1)
    assert rule_of(before, split, Between([(1, R), (1, R)]), SLOTS) == "R-LOG-ACTIVE"
    # ... unless another ledger's add came between them (the map may have forgotten it),
    moved = lay((0, "active", {1: 2 * R}), (1, "active", {1: R, 2: 2 * R}), current=1)
    run(before, moved, Between([(1, R), (2, R), (1, R)]), SLOTS)
    # or the first went to a log sealed since (a rotation at logSizeLimit).
    rotated = lay((0, "rotated", {1: 2 * R}), (1, "active", {2: R}), (2, "active", {1: R}))
    run(before, rotated, Between([(1, R), (1, R)]), ManagerRules("slots", 1400, 3))
