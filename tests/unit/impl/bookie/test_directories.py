"""impl/bookie/directories.py: each kind of directory of spec/format/identity.md ("Kinds of
directory") is told apart by its names, on the simulated disk and on real files alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from impl.bookie.directories import DirKind, classify_dir
from impl.format.identity import Stamp, encode_stamp
from impl.fs.api import FileSystem, join
from impl.fs.os_backend import OsFileSystem
from models.fs.simdisk import SimDisk


def put(fs: FileSystem, path: str, data: bytes = b"") -> None:
    fs.mkdir(path.rsplit("/", 1)[0])
    handle = fs.open(path, create=True)
    handle.pwrite(0, data)
    handle.close()


STAMP = Stamp(
    instance="ab" * 16,
    generation=1,
    sealed=True,
    directory="/d",
    journal_dirs=("/j",),
    ledger_dirs=("/d",),
    index_dir="/d",
)

CASES: dict[str, tuple[list[tuple[str, bytes]], list[str], DirKind]] = {
    "missing": ([], [], DirKind.MISSING),
    "empty": ([], ["/d"], DirKind.EMPTY),
    "empty current": ([], ["/d/current"], DirKind.EMPTY),
    "a crashed first stamp": ([("/d/current/bkref-identity.tmp", b"bkref")], [], DirKind.EMPTY),
    "bkref": ([("/d/current/bkref-identity", encode_stamp(STAMP))], [], DirKind.BKREF),
    "bkref, damaged stamp": ([("/d/current/bkref-identity", b"junk")], [], DirKind.BKREF),
    "bkref before stamps": (
        [("/d/current/0.log", b"x")],
        ["/d/current/bkref-index"],
        DirKind.BKREF_PRE_STAMP,
    ),
    "BookKeeper's cookie": ([("/d/current/VERSION", b"4\n")], [], DirKind.BOOKKEEPER),
    "BookKeeper's journal": ([("/d/current/18b0f3c2a00.txn", b"")], [], DirKind.BOOKKEEPER),
    "BookKeeper's log and lastMark": (
        [("/d/current/0.log", b""), ("/d/current/lastMark", b"")],
        [],
        DirKind.BOOKKEEPER,
    ),
    "BookKeeper's index": ([("/d/current/3a/0/7.idx", b"")], [], DirKind.BOOKKEEPER),
    "DbLedgerStorage": ([], ["/d/current/ledgers"], DirKind.BOOKKEEPER),
    "BookKeeper's old layout": ([("/d/1.txn", b"")], [], DirKind.BOOKKEEPER),
    "not a bookie": ([("/d/notes.txt", b"")], [], DirKind.NOT_A_BOOKIE),
    "not a bookie, in current": ([("/d/current/notes.txt", b"")], [], DirKind.NOT_A_BOOKIE),
}


@pytest.mark.parametrize("backend", ["simdisk", "os"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_kind_of_directory_is_told_apart(name: str, backend: str, tmp_path: Path) -> None:
    fs: FileSystem
    if backend == "os":
        fs = OsFileSystem(str(tmp_path))
        root = "d"
    else:
        fs = SimDisk()
        root = "/d"
    files, dirs, kind = CASES[name]
    for directory in dirs:
        fs.mkdir(directory.replace("/d", root, 1))
    for path, data in files:
        put(fs, path.replace("/d", root, 1), data)
    info = classify_dir(fs, root)
    assert info.kind is kind, info
    if name == "bkref":
        assert info.stamp == STAMP and info.stamp_problem is None
    if name == "bkref, damaged stamp":
        assert info.stamp is None and info.stamp_problem
    if kind is DirKind.BOOKKEEPER and name != "BookKeeper's cookie":
        assert info.data, info  # what dropping it would lose is named


def test_the_evidence_names_what_was_seen() -> None:
    disk = SimDisk()
    put(disk, join("/d", "current", "VERSION"))
    put(disk, join("/d", "current", "0.log"))
    assert classify_dir(disk, "/d").evidence() == "VERSION, 0.log"
