"""The simulated disk behaves like real files when nothing crashes.

The same script of operations runs on OsFileSystem (in a temporary directory) and on SimDisk.
After every step the two must have returned the same value or raised the same typed error,
and at the end they must hold the same directories and the same bytes. The trees are read
back through the FileSystem protocol only, so the comparison trusts neither side's helpers.

Not compared: durability (the OS gives no way to observe it), disk_space values, and error
messages (only the error classes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from impl.fs.api import FileHandle, FileSystem, join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk
from spec.errors import FsError

Step = tuple[Any, ...]


def as_file_system(fs: FileSystem) -> FileSystem:
    """mypy checks here that SimDisk satisfies the FileSystem protocol structurally."""
    return fs


def tree_of(fs: FileSystem, top: str = "") -> dict[str, bytes | None]:
    """Every name under ``top``: a file's bytes, or None for a directory."""
    out: dict[str, bytes | None] = {}
    for name in fs.listdir(top):
        path = join(top, name) if top else name
        if fs.is_dir(path):
            out[path] = None
            out.update(tree_of(fs, path))
        else:
            handle = fs.open(path)
            out[path] = handle.pread(0, handle.size() + 1)
            handle.close()
    return out


def run_script(fs: FileSystem, script: Sequence[Step]) -> list[object]:
    """Run each step; record its result, or the class name of the FsError it raised."""
    handles: dict[int, FileHandle] = {}
    outcomes: list[object] = []
    for step in script:
        try:
            outcomes.append(_run(fs, handles, step))
        except FsError as exc:
            outcomes.append(type(exc).__name__)
    for handle in handles.values():
        handle.close()
    return outcomes


def _run(fs: FileSystem, handles: dict[int, FileHandle], step: Step) -> object:
    kind, *args = step
    if kind == "open":
        slot, path, create, exclusive = args
        handles[slot] = fs.open(path, create=create, exclusive=exclusive)
        return None
    if kind in ("mkdir", "unlink", "listdir", "exists", "is_dir", "fsync_dir"):
        return getattr(fs, kind)(*args)
    if kind in ("rename", "link"):
        return getattr(fs, kind)(*args)
    slot = args[0]
    if slot not in handles:
        return "no handle"
    return getattr(handles[slot], kind)(*args[1:])


def compare(script: Sequence[Step]) -> list[object]:
    """Run ``script`` on both file systems and assert they agree; return the outcomes."""
    with tempfile.TemporaryDirectory() as root:
        real = OsFileSystem(root)
        real_outcomes = run_script(real, script)
        real_tree = tree_of(real)
    sim = as_file_system(SimDisk())
    sim_outcomes = run_script(sim, script)
    assert isinstance(sim, SimDisk)
    sim.check_invariants()
    for index, step in enumerate(script):
        assert sim_outcomes[index] == real_outcomes[index], (index, step)
    assert tree_of(sim) == real_tree
    return sim_outcomes


# --- explicit scripts -------------------------------------------------------------------------


def test_a_full_script_gives_the_same_files_and_bytes() -> None:
    script: list[Step] = [
        ("mkdir", "d/e"),
        ("mkdir", "d"),
        ("open", 0, "d/f", True, True),
        ("append", 0, b"hello"),
        ("append", 0, b" world"),
        ("pwrite", 0, 20, b"past end"),
        ("size", 0),
        ("truncate", 0, 8),
        ("truncate", 0, 12),
        ("pread", 0, 0, 100),
        ("pread", 0, 100, 5),
        ("fsync", 0),
        ("open", 1, "d/g", True, False),
        ("append", 1, b"to be replaced"),
        ("rename", "d/f", "d/g"),
        ("pread", 0, 0, 5),
        ("pread", 1, 0, 5),
        ("link", "d/g", "d/e/h"),
        ("append", 0, b"!"),
        ("pread", 0, 0, 100),
        ("unlink", "d/g"),
        ("pwrite", 0, 0, b"H"),
        ("pread", 0, 0, 100),
        ("listdir", "d"),
        ("listdir", "d/e"),
        ("exists", "d/g"),
        ("is_dir", "d/e"),
        ("fsync_dir", "d"),
        ("close", 1),
        ("size", 1),
    ]
    outcomes = compare(script)
    assert outcomes[5] is None and outcomes[4] == 5  # the second append landed at 5
    assert outcomes[9] == b"hello wo\0\0\0\0"
    assert outcomes[22] == b"Hello wo\0\0\0\0!"
    assert outcomes[-1] == "FsClosed"


def test_the_same_mistakes_raise_the_same_typed_errors() -> None:
    script: list[Step] = [
        ("open", 0, "missing", False, False),
        ("open", 0, "no/such/dir", True, False),
        ("mkdir", "d"),
        ("open", 0, "d/f", True, True),
        ("open", 1, "d/f", True, True),
        ("unlink", "d/missing"),
        ("unlink", "d"),
        ("open", 2, "d", False, False),
        ("listdir", "d/f"),
        ("listdir", "nothing"),
        ("mkdir", "d/f"),
        ("mkdir", "d/f/x"),
        ("open", 2, "d/f/x", True, False),
        ("link", "d/missing", "d/new"),
        ("link", "d/f", "d/f"),
        ("link", "d", "d2"),
        ("rename", "d/missing", "d/new"),
        ("rename", "d", "d/sub"),
        ("rename", "d/f", "d"),
        ("mkdir", "e/sub"),
        ("rename", "e", "d/f"),
        ("rename", "e", "d"),
        ("fsync_dir", "d/f"),
        ("fsync_dir", "missing"),
    ]
    outcomes = compare(script)
    assert outcomes == [
        "FsNotFound",
        "FsNotFound",
        None,
        None,
        "FsExists",
        "FsNotFound",
        "FsIOError",
        "FsIOError",
        "FsNotADirectory",
        "FsNotFound",
        "FsNotADirectory",
        "FsNotADirectory",
        "FsNotADirectory",
        "FsNotFound",
        "FsExists",
        "FsIOError",
        "FsNotFound",
        "FsIOError",
        "FsIOError",
        None,
        "FsNotADirectory",
        "FsIOError",
        "FsNotADirectory",
        "FsNotFound",
    ]


def test_renaming_a_hard_link_onto_its_twin_changes_nothing() -> None:
    script: list[Step] = [
        ("open", 0, "a", True, False),
        ("link", "a", "b"),
        ("rename", "a", "b"),
        ("listdir", ""),
        ("mkdir", "e"),
        ("rename", "e", "empty"),
        ("mkdir", "full/x"),
        ("rename", "empty", "full"),
        ("mkdir", "other"),
        ("rename", "other", "empty"),
    ]
    outcomes = compare(script)
    assert outcomes[3] == ["a", "b"]
    assert outcomes[7] == "FsIOError"


# --- random scripts ---------------------------------------------------------------------------

PATHS = ("d", "d/e", "d/f", "d/g", "d/e/h", "f", "g")
path = st.sampled_from(PATHS)
slot = st.integers(0, 2)
data = st.binary(max_size=40)
offset = st.integers(0, 60)

random_step = st.one_of(
    st.tuples(st.just("mkdir"), path),
    st.tuples(st.just("open"), slot, path, st.booleans(), st.booleans()),
    st.tuples(st.just("pwrite"), slot, offset, data),
    st.tuples(st.just("append"), slot, data),
    st.tuples(st.just("truncate"), slot, offset),
    st.tuples(st.just("pread"), slot, offset, st.integers(0, 60)),
    st.tuples(st.just("size"), slot),
    st.tuples(st.just("close"), slot),
    st.tuples(st.just("rename"), path, path),
    st.tuples(st.just("link"), path, path),
    st.tuples(st.just("unlink"), path),
    st.tuples(st.just("listdir"), path),
    st.tuples(st.just("exists"), path),
    st.tuples(st.just("fsync_dir"), path),
)


#: A populated start (every slot open) so that most random steps do something.
PRELUDE: tuple[Step, ...] = (
    ("mkdir", "d/e"),
    ("open", 0, "d/f", True, True),
    ("append", 0, b"0123456789"),
    ("open", 1, "d/g", True, True),
    ("append", 1, b"abc"),
    ("open", 2, "f", True, True),
    ("pwrite", 2, 5, b"xyz"),
)


@settings(max_examples=200, deadline=None)
@given(script=st.lists(random_step, min_size=1, max_size=40))
def test_random_scripts_agree(script: list[Step]) -> None:
    compare([*PRELUDE, *script])
