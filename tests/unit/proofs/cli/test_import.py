"""``bkref import`` through proofs.cli.main.main: a BookKeeper bookie copied into new bkref
directories, the source never changed (its tree hashed before and after: names, modes, sizes,
mtimes, bytes), keys and fences carried over from ``.idx`` files and from a DbLedgerStorage
``ledgers`` RocksDB database, and stderr saying what was and was not carried over.

Sources are built independently of our writers: entry logs and journals by
tests/unit/bk_layout.py and tests/unit/bk_journal_layout.py (test_bookie_interop's
directory), ``.idx`` files and LedgerData values by tests/unit/bk_index_layout.py, and the
RocksDB database by rocksdict in BookKeeper's layout (raw 8-byte keys, default column family;
rocksdict's own config file removed, as a BookKeeper database has none).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

import proofs.cli.main
from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.fs.os_backend import OsFileSystem
from spec.errors import Fenced, Unauthorized
from spec.ids import EntryId, LedgerId
from tests.unit import bk_index_layout as bki
from tests.unit import bk_layout
from tests.unit.impl.bookie.test_bookie import OTHER_KEY
from tests.unit.impl.bookie.test_bookie_bk_metadata import (
    KEY4,
    KEY6,
    add_idx_files,
    check_bk_keys_and_fences,
)
from tests.unit.impl.bookie.test_bookie_interop import KEY, build_bk_directory, check_every_entry


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(directory) / name
            info = path.lstat()
            digest.update(f"{path.relative_to(root)} {info.st_mode} {info.st_mtime_ns}".encode())
            if path.is_file() and not path.is_symlink():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def run_import(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = proofs.cli.main.main(["import", *argv])
    return code, capsys.readouterr().err


def source_args(source: Path, *ledger_dirs: str) -> list[str]:
    """``--journal-dir`` and ``--ledger-dirs`` of a source bookie built under ``source``."""
    dirs = ",".join(str(source / name) for name in ledger_dirs or ("ledgers0",))
    return ["--journal-dir", str(source / "journal"), "--ledger-dirs", dirs]


def open_target(target: Path) -> Bookie:
    conf = (target / "bk_server.conf").read_text(encoding="iso-8859-1")
    config = load_config(conf, str(target / "bk_server.conf"), [])
    return Bookie.open(OsFileSystem(), config, clock=ManualClock(), rng=random.Random(1))


def test_import_copies_entries_keys_and_fences_and_never_changes_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bk"
    built = build_bk_directory(OsFileSystem(), str(source))
    add_idx_files(OsFileSystem(), built)
    (source / "ledgers0" / "current" / "notes.txt").write_text("an operator's note")
    os.mkfifo(source / "ledgers1" / "current" / "7.log")  # a FIFO named like an entry log
    before = tree_hash(source)
    target = tmp_path / "imported"

    code, err = run_import(
        capsys,
        str(target),
        *source_args(source, "ledgers0", "ledgers1"),
    )
    assert code == 0, err
    assert tree_hash(source) == before
    assert "4 .idx files" in err
    assert "4 master keys and 1 fence flags from 4 .idx files" in err
    assert "the explicit LAC of 1 ledgers" in err
    assert f"copied but not recognised (bkref does not use it): {source}" in err
    assert "notes.txt" in err
    assert "7.log: not a regular file" in err
    assert "journal records replayed" in err
    assert not (target / "ledgers1" / "current" / "7.log").exists()

    bookie = open_target(target)
    assert not bookie.recovery.index_rebuilt
    assert bookie.recovery.records_replayed == 0  # the import's open replayed them
    check_every_entry(bookie, built)
    check_bk_keys_and_fences(bookie)
    bookie.shutdown()
    assert tree_hash(source) == before


def test_import_from_a_bk_server_conf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "bk"
    built = build_bk_directory(OsFileSystem(), str(source))
    add_idx_files(OsFileSystem(), built)
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        f"journalDirectories={source / 'journal'}\n"
        f"ledgerDirectories={source / 'ledgers0'},{source / 'ledgers1'}\n"
        "ledgerStorageClass=org.apache.bookkeeper.bookie.InterleavedLedgerStorage\n"
    )
    code, err = run_import(capsys, str(tmp_path / "out"), "--conf", str(conf))
    assert code == 0, err
    bookie = open_target(tmp_path / "out")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(4), EntryId(0), OTHER_KEY, b"thief")
    check_every_entry(bookie, built)
    bookie.shutdown()


def test_separate_index_directories_are_paired_with_ledger_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bk"
    built = build_bk_directory(OsFileSystem(), str(source))
    index_dirs = [source / "index0", source / "index1"]
    for number, directory in enumerate(index_dirs):
        (directory / "current").mkdir(parents=True)
        if number == 1:
            path = directory / "current" / bki.idx_path(6)
            path.parent.mkdir(parents=True)
            path.write_bytes(bki.idx_file(KEY6, fenced=True))
    code, err = run_import(
        capsys,
        str(tmp_path / "out"),
        *source_args(source, "ledgers0", "ledgers1"),
        "--index-dirs",
        f"{index_dirs[0]},{index_dirs[1]}",
    )
    assert code == 0, err
    bookie = open_target(tmp_path / "out")
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(6), EntryId(0), KEY6, b"late")
    check_every_entry(bookie, built)
    bookie.shutdown()


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_non_empty_target_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    source = tmp_path / "bk"
    build_bk_directory(OsFileSystem(), str(source))
    target = tmp_path / "out"
    if kind == "dir":
        target.mkdir()
        (target / "something").write_text("x")
    else:
        target.write_text("x")
    before = tree_hash(tmp_path)
    code, err = run_import(capsys, str(target), *source_args(source))
    assert code == 2
    assert str(target) in err
    assert tree_hash(tmp_path) == before


def test_a_target_inside_the_source_and_a_source_that_is_no_bookie_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bk"
    build_bk_directory(OsFileSystem(), str(source))
    args = source_args(source)
    code, err = run_import(capsys, str(source / "ledgers0" / "new"), *args)
    assert code == 2
    assert "overlaps the source" in err
    (tmp_path / "empty").mkdir()
    code, err = run_import(
        capsys, str(tmp_path / "o"), "--journal-dir", str(tmp_path / "empty"), "--ledger-dirs", "/"
    )
    assert code == 2
    assert "no current/ directory" in err
    code, err = run_import(capsys, str(tmp_path / "o"))
    assert code == 2
    assert "name the source" in err


def test_a_damaged_index_file_fails_the_import_and_leaves_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bk"
    build_bk_directory(OsFileSystem(), str(source))
    path = source / "ledgers0" / "current" / bki.idx_path(1)
    path.parent.mkdir(parents=True)
    path.write_bytes(bki.idx_file(KEY, key_len=-2))
    before = tree_hash(source)
    code, err = run_import(capsys, str(tmp_path / "out"), *source_args(source))
    assert code == 1
    assert f"{path} offset 8" in err
    assert "remove it, then run again" in err
    assert tree_hash(source) == before


# --- DbLedgerStorage ------------------------------------------------------------------------------


def build_db_bookie(root: Path) -> None:
    """A DbLedgerStorage bookie: entry logs in current/, a ledgers database with ledger 1
    (key KEY, fenced), ledger 2 (KEY4, an explicit LAC), ledger 9 (empty key, in limbo, no
    entry), ledger 5 (exists false), and a locations database (not read)."""
    from rocksdict import Options, Rdict

    journal = root / "journal" / "current"
    current = root / "ledgers0" / "current"
    journal.mkdir(parents=True)
    current.mkdir(parents=True)
    log = bk_layout.build_log([(1, 0, b"one"), (2, 0, b"two"), (2, 1, b"three")])
    (current / "0.log").write_bytes(log.data)
    db_dir = current / "ledgers"
    db = Rdict(str(db_dir), options=Options(raw_mode=True))
    db[bki.ledger_key(1)] = bki.ledger_data(KEY, fenced=True)
    db[bki.ledger_key(2)] = bki.ledger_data(KEY4, lac=bki.lac_buffer(2, 1))
    db[bki.ledger_key(9)] = bki.ledger_data(b"", limbo=True)
    db[bki.ledger_key(5)] = bki.ledger_data(KEY, exists=False)
    db.close()
    (db_dir / "rocksdict-config.json").unlink()
    (current / "locations").mkdir()
    (current / "locations" / "CURRENT").write_text("MANIFEST-000001\n")


def test_import_of_a_dbledgerstorage_bookie_reads_its_ledgers_database_from_a_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bk"
    build_db_bookie(source)
    before = tree_hash(source)
    db_files = sorted(os.listdir(source / "ledgers0" / "current" / "ledgers"))
    code, err = run_import(capsys, str(tmp_path / "out"), *source_args(source))
    assert code == 0, err
    assert tree_hash(source) == before
    assert sorted(os.listdir(source / "ledgers0" / "current" / "ledgers")) == db_files
    assert "3 master keys and 1 fence flags from 3 ledgers of DbLedgerStorage" in err
    assert "ledger 9 is in limbo" in err
    assert "the explicit LAC of 1 ledgers" in err
    assert "locations database: not copied" in err
    assert not (tmp_path / "out" / "ledgers0" / "current" / "ledgers").exists()

    bookie = open_target(tmp_path / "out")
    assert bookie.read_entry(LedgerId(2), EntryId(1)) == b"three"
    with pytest.raises(Fenced):
        bookie.add_entry(LedgerId(1), EntryId(1), KEY, b"late")
    with pytest.raises(Unauthorized):
        bookie.fence(LedgerId(1), OTHER_KEY)
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(2), EntryId(2), OTHER_KEY, b"thief")
    with pytest.raises(Unauthorized):
        bookie.add_entry(LedgerId(9), EntryId(0), OTHER_KEY, b"thief")  # the empty key holds
    bookie.add_entry(LedgerId(2), EntryId(2), KEY4, b"four").wait(5)
    bookie.add_entry(LedgerId(5), EntryId(0), OTHER_KEY, b"new")  # no such ledger: a new one
    bookie.shutdown()


def test_without_rocksdict_a_dbledgerstorage_import_stops_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "bk"
    build_db_bookie(source)
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # import rocksdict -> ImportError
    args = source_args(source)
    code, err = run_import(capsys, str(tmp_path / "out"), *args)
    assert code == 1
    assert "needs rocksdict" in err
    assert "--skip-db-metadata" in err
    shutil.rmtree(tmp_path / "out")
    code, err = run_import(capsys, str(tmp_path / "out"), *args, "--skip-db-metadata")
    assert code == 0, err
    assert "was not read (--skip-db-metadata)" in err


def test_a_damaged_ledgers_value_or_an_oversized_key_fails_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rocksdict import Options, Rdict

    for number, value in enumerate([b"\x08\x01\x10", bki.ledger_data(b"k" * 5000)]):
        source = tmp_path / f"bk{number}"
        build_db_bookie(source)
        db = Rdict(str(source / "ledgers0" / "current" / "ledgers"), options=Options(raw_mode=True))
        db[bki.ledger_key(3)] = value
        db.close()
        (source / "ledgers0" / "current" / "ledgers" / "rocksdict-config.json").unlink()
        before = tree_hash(source)
        code, err = run_import(capsys, str(tmp_path / f"out{number}"), *source_args(source))
        assert code == 1
        assert "key 0000000000000003" in err
        assert tree_hash(source) == before
