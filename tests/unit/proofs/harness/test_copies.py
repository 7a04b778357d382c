"""The cheap copies the shadow crashes make (proofs/harness/refinement.py): the judge's copy
equals ``copy.deepcopy``'s, the disk's (``SimDisk.copy``) a pickle round trip's, and neither
shares anything mutable with the original, at every few steps of a scenario with crashes,
faults and full disks.
"""

from __future__ import annotations

import copy
import enum
import pickle
from typing import Any

import attrs

from models.fs.simdisk import SimDisk
from proofs.harness.refinement import (
    SMALL_SETTINGS,
    InProcessBookie,
    Refinement,
    _deep_copy,
)
from spec.operations import Add, DiskFull, DiskWritable, FailFsync, FailWrite
from tests.bench.bench_refinement import scenario

_ATOMS = (type(None), bool, int, float, str, bytes, enum.Enum, type)


def structure(obj: Any, seen: dict[int, int] | None = None) -> Any:
    """``obj`` as nested tuples of plain values: equal for equal object graphs (sharing
    included: an object reached again is named by the order it was first reached in)."""
    seen = {} if seen is None else seen
    if isinstance(obj, _ATOMS):
        return obj
    if id(obj) in seen:
        return ("again", seen[id(obj)])
    seen[id(obj)] = len(seen)
    kind = type(obj).__qualname__
    if isinstance(obj, list | tuple):
        return (kind, tuple(structure(item, seen) for item in obj))
    if isinstance(obj, set | frozenset):
        return (kind, frozenset(structure(item, seen) for item in obj))
    if isinstance(obj, dict):
        return (kind, tuple((structure(k, seen), structure(v, seen)) for k, v in obj.items()))
    if isinstance(obj, bytearray):
        return (kind, bytes(obj))
    return (kind, tuple((name, structure(getattr(obj, name), seen)) for name in _fields(obj)))


def _fields(obj: Any) -> list[str]:
    names = {*getattr(obj, "__dict__", {})}
    names |= {name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())}
    return sorted(name for name in names if name != "__weakref__" and hasattr(obj, name))


def _frozen(obj: Any) -> bool:
    """An instance of a frozen attrs class (immutable: copies may share it)."""
    if not attrs.has(type(obj)):
        return False
    name = attrs.fields(type(obj))[0].name
    try:
        setattr(obj, name, getattr(obj, name))
    except attrs.exceptions.FrozenInstanceError:
        return True
    return False


def object_ids(obj: Any, out: set[int] | None = None) -> set[int]:
    """The ids of the objects reachable from ``obj`` but the immutable ones (atoms, enum
    members, classes; tuples, frozensets and frozen attrs instances are walked, not
    counted)."""
    out = set() if out is None else out
    if isinstance(obj, _ATOMS) or id(obj) in out:
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        if not isinstance(obj, tuple | frozenset):
            out.add(id(obj))
        for item in obj:
            object_ids(item, out)
    elif isinstance(obj, dict):
        out.add(id(obj))
        for key, value in obj.items():
            object_ids(key, out)
            object_ids(value, out)
    elif isinstance(obj, bytearray):
        out.add(id(obj))
    elif hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__"):
        if not _frozen(obj):
            out.add(id(obj))
        for name in _fields(obj):
            object_ids(getattr(obj, name), out)
    return out


def test_judge_copy_is_deepcopy_and_independent() -> None:
    harness = Refinement(InProcessBookie(SMALL_SETTINGS), SMALL_SETTINGS, shadow_crash_every=0)
    checked = 0
    for number, op in enumerate(scenario(120, seed=7)):
        harness.run(op)
        if number % 7:
            continue
        original = harness.judge
        copied = _deep_copy(original)
        assert structure(copied) == structure(copy.deepcopy(original)) == structure(original)
        assert not object_ids(copied) & object_ids(original)
        checked += 1
    assert checked > 10


def _disk_copies_agree(disk: SimDisk) -> None:
    copied = disk.copy()
    pickled = pickle.loads(pickle.dumps(disk))
    assert structure(copied) == structure(pickled) == structure(disk)
    assert not object_ids(copied) & object_ids(disk)
    copied.check_invariants()


def test_disk_copy_is_a_pickle_round_trip_and_independent() -> None:
    sut = InProcessBookie(SMALL_SETTINGS)
    harness = Refinement(sut, SMALL_SETTINGS, shadow_crash_every=0)
    ops = scenario(160, seed=11)
    ops[40:40] = [FailWrite("journal"), Add(1, 1000, b"k1", b"x"), FailFsync("entry_log")]
    ops[90:90] = [DiskFull("active_log_dir"), Add(2, 1000, b"k2", b"y"), DiskWritable()]
    seen: set[str] = set()
    for number, op in enumerate(ops):
        harness.run(op)
        disk = sut.disk
        if disk._failures:
            seen.add("armed fault")
        if disk._capacity:
            seen.add("capacity")
        if disk._dir_ops:
            seen.add("pending directory operation")
        if disk._data_ops:
            seen.add("pending write")
        if number % 3 == 0 or disk._failures or disk._capacity or disk._dir_ops:
            _disk_copies_agree(disk)
            seen.add("checked")
    assert seen == {
        "armed fault",
        "capacity",
        "pending directory operation",
        "pending write",
        "checked",
    }


def test_disk_copy_leaves_the_hook_behind() -> None:
    disk = SimDisk()
    disk.on_operation = lambda _kind: None
    assert disk.copy().on_operation is None
