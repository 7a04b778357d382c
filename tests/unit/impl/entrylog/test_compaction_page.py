"""spec/protocol/compaction.md against impl/entrylog/compactor.py and impl/format/names.py.

The page is normative. Its constants must be the code's; its "Order of operations" table must
be the operations the compactor issues on the simulated disk, in order (writes of one stretch
counted as one row, the bookie's index update as one), and the outcome it gives for a crash
before each operation must be what recovery reaches under every plan tried; its file-state
table must be what recovery does with each state, built here step by step.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import impl.entrylog.compactor as compactor_module
from impl.entrylog.compactor import Compaction, TransactionalCompactor
from impl.format import names
from models.fs.simdisk import SimDisk
from spec.crash import CrashPlan, KeepAll, KeepPrefix, LoseUnsynced
from spec.ids import EntryLogId
from tests.unit import format_page
from tests.unit.impl.entrylog.test_compactor import (
    World,
    leftovers,
    make_world,
    put_moves,
    read_back,
    recover,
)
from tests.unit.impl.entrylog.test_compactor import (
    names as listed,
)

PAGE = Path(__file__).resolve().parents[4] / "spec" / "protocol" / "compaction.md"
PLANS: tuple[CrashPlan, ...] = (LoseUnsynced(), KeepAll(), KeepPrefix(1), KeepPrefix(2))
#: Kinds of the simulated disk's operations that the page counts as one "write" stretch.
WRITES = {"create", "pwrite", "append", "truncate"}


def rows(title: str) -> list[list[str]]:
    return format_page.table_rows(format_page.section(PAGE, title))


def test_the_constants_are_the_codes() -> None:
    constants = {row[0]: ast.literal_eval(row[1]) for row in rows("Constants")}
    assert constants == {
        "COMPACTING_SUFFIX": names.COMPACTING_SUFFIX,
        "COMPACTED_SUFFIX": names.COMPACTED_SUFFIX,
        "COPYING": compactor_module.COPYING,
        "COPIED": compactor_module.COPIED,
        "FLUSHED": compactor_module.FLUSHED,
        "DONE": compactor_module.DONE,
        "ABORTED": compactor_module.ABORTED,
    }


def test_the_file_names_are_the_names_modules() -> None:
    table = {row[0]: row[1] for row in rows("The files")}
    assert names.compacting_file_name(0x1A) in table
    assert names.compacted_file_name(0x1A, 0xB) in table
    assert names.log_file_name(0x1A) in table
    assert set(table.values()) == {"phase 1", "phase 2", "phase 3"}


# --- the order of operations and a crash before each --------------------------------------


def record_phases(world: World) -> tuple[list[tuple[str, str, SimDisk]], EntryLogId]:
    """(phase, kind, image before the operation) for every operation of one compaction, the
    bookie's index update recorded as the kind ``index``, then ("done", "-", final image)."""
    compactor = TransactionalCompactor(world.disk, world.logger)
    ops: list[tuple[str, str, SimDisk]] = []
    label = ["copy"]

    def hook(kind: str) -> None:
        ops.append((label[0], kind, world.disk.copy()))

    world.disk.on_operation = hook
    try:
        c: Compaction = compactor.copy(world.source, world.is_live)
        label[0] = "flush"
        compactor.flush(c)
        label[0] = "index"
        compactor.link(c)
        label[0] = "index-part"
        put_moves(world.index, c.moved)
        world.logger.flush()
        world.index.flush()
        label[0] = "index"
        compactor.remove_source(c)
    finally:
        world.disk.on_operation = None
    ops.append(("done", "-", world.disk.copy()))
    assert c.new_log is not None
    return ops, c.new_log


def collapse(ops: list[tuple[str, str, SimDisk]]) -> list[tuple[str, str, list[SimDisk]]]:
    """Runs of writes become one ``write`` row, the index update one ``index`` row."""
    out: list[tuple[str, str, list[SimDisk]]] = []
    for phase, kind, image in ops:
        if phase == "index-part":
            phase, kind = "index", "index"
        elif kind in WRITES:
            kind = "write"
        if out and out[-1][0] == phase and out[-1][1] == kind and kind in ("write", "index"):
            out[-1][2].append(image)
        else:
            out.append((phase, kind, [image]))
    return out


def outcome(world: World, image: SimDisk, plan: CrashPlan, new_log: EntryLogId) -> str:
    disk = image.copy()
    disk.crash(plan)
    world.disk = disk
    recover(world)
    assert leftovers(world) == []
    read_back(world)
    has_source = names.log_file_name(world.source) in listed(world)
    has_new = names.log_file_name(new_log) in listed(world)
    assert has_source != has_new, listed(world)
    return "finished" if has_new else "undone"


def test_the_order_of_operations_is_the_pages_and_so_is_each_crash_outcome() -> None:
    world = make_world()
    ops, new_log = record_phases(world)
    recorded = collapse(ops)
    table = rows("Order of operations")
    assert [(r[0], r[1]) for r in table] == [(p, k) for p, k, _ in recorded]
    for (phase, kind, images), row in zip(recorded, table, strict=True):
        expected = set(row[3].split(" or "))
        seen = {outcome(world, image, plan, new_log) for image in images for plan in PLANS}
        assert seen == expected, (phase, kind, row[2], seen)


# --- the file states ------------------------------------------------------------------------


def build_state(state: str) -> tuple[World, EntryLogId]:
    """A world in the page's file state ``state`` (its first column)."""
    world = make_world()
    compactor = TransactionalCompactor(world.disk, world.logger)
    c = compactor.copy(world.source, world.is_live)
    assert c.new_log is not None
    new_log = c.new_log
    if state == "source, .compacting":
        return world, new_log
    compactor.flush(c)
    if state == "source, .compacting, .compacted":
        world.disk.link(c.compacted_path, c.compacting_path)
        world.disk.fsync_dir(c.directory)
        return world, new_log
    if state == "source, .compacted":
        return world, new_log
    compactor.link(c)
    if state == "source, .compacted, new":
        return world, new_log
    put_moves(world.index, c.moved)
    world.logger.flush()
    world.index.flush()
    if state == ".compacted, new":
        world.disk.unlink(c.source_path)
        world.disk.fsync_dir(c.directory)
        return world, new_log
    if state == "source, new":
        world.disk.unlink(c.compacted_path)
        world.disk.fsync_dir(c.directory)
        return world, new_log
    assert state == "new", state
    compactor.remove_source(c)
    return world, new_log


def state_files(world: World, new_log: EntryLogId) -> str:
    """The page's spelling of the compaction's files in ``world``."""
    present = set(listed(world))
    parts = []
    if names.log_file_name(world.source) in present:
        parts.append("source")
    if any(names.parse_compacting_file_name(n) is not None for n in present):
        parts.append(".compacting")
    if any(names.parse_compacted_file_name(n) is not None for n in present):
        parts.append(".compacted")
    if names.log_file_name(new_log) in present:
        parts.append("new")
    return ", ".join(parts)


@pytest.mark.parametrize("row", rows("The file states and what recovery does"), ids=lambda r: r[0])
def test_each_file_state_recovers_as_the_page_says(row: list[str]) -> None:
    state, _how, _what, after = (cell.replace("`", "") for cell in row)
    if state == "source":
        world, new_log = make_world(), EntryLogId(999)
    else:
        world, new_log = build_state(state)
    assert state_files(world, new_log) == state
    world.disk.crash(LoseUnsynced())
    recover(world)
    assert sorted(state_files(world, new_log).split(", ")) == sorted(after.split(", "))
    read_back(world)


def test_the_page_names_bookkeepers_issues() -> None:
    section = format_page.section(PAGE, "What BookKeeper does differently")
    for issue in ("#1534", "#4804"):
        assert issue in section
