"""impl/bookie/layout.py: BookKeeper's layout from the configuration, directories made durable,
and recovery step 0 (every file a previous process left is fsynced before it is trusted)."""

from __future__ import annotations

import pytest

from impl.bookie.layout import (
    CURRENT_DIR,
    ensure_durable_dir,
    layout_from_config,
    sync_previous_run,
)
from impl.config.config import load_config
from impl.fs.api import join
from models.fs.simdisk import SimDisk
from spec.crash import LoseUnsynced
from spec.errors import ConfigError
from tests.unit.impl.bookie.test_bookie import make_config


def test_layout_is_bookkeepers() -> None:
    layout = layout_from_config(make_config())
    assert layout.journal_dir == "/bk/journal/current"
    assert layout.ledger_dirs == ("/bk/ledgers0/current", "/bk/ledgers1/current")
    assert layout.index_dir == "/bk/ledgers0/current/bkref-index"


def test_several_journal_dirs_are_refused_with_a_clear_error() -> None:
    config = load_config(None, "", ["journalDirectories=/j0,/j1", "ledgerDirectories=/l"])
    with pytest.raises(ConfigError, match="exactly one journal directory"):
        layout_from_config(config)


def test_ensure_durable_dir_fsyncs_each_new_parent() -> None:
    disk = SimDisk()
    assert ensure_durable_dir(disk, "/a/b/c")
    assert not ensure_durable_dir(disk, "/a/b/c")
    disk.crash(LoseUnsynced())
    assert disk.is_dir("/a/b/c")


def test_every_directory_of_the_layout_is_listed() -> None:
    layout = layout_from_config(make_config())
    assert layout.directories() == (
        layout.journal_dir,
        *layout.ledger_dirs,
        layout.index_dir,
    )
    assert all(CURRENT_DIR in directory.split("/") for directory in layout.directories())


def _unsynced_layout() -> tuple[SimDisk, list[str]]:
    """A durable layout holding one file per directory whose bytes were never fsynced, as a
    killed process leaves them (the page cache still holds them)."""
    disk = SimDisk()
    layout = layout_from_config(make_config())
    paths = []
    for directory in layout.directories():
        ensure_durable_dir(disk, directory)
        path = join(directory, "left-by-the-previous-run")
        handle = disk.open(path, create=True)
        handle.pwrite(0, b"bytes never fsynced")
        handle.close()
        paths.append(path)
    return disk, paths


def test_sync_previous_run_makes_what_it_reads_durable() -> None:
    disk, paths = _unsynced_layout()
    assert sync_previous_run(disk, layout_from_config(make_config())) == len(paths)
    disk.crash(LoseUnsynced())
    for path in paths:
        assert disk.read_file(path) == b"bytes never fsynced", path


def test_without_sync_previous_run_a_crash_takes_those_bytes() -> None:
    # What the step is for (the refinement test's finding): the same files, not synced, are
    # gone after a power cut although a new process could read them.
    disk, paths = _unsynced_layout()
    disk.crash(LoseUnsynced())
    assert not any(disk.exists(path) and disk.read_file(path) for path in paths)


def test_sync_previous_run_skips_missing_directories() -> None:
    assert sync_previous_run(SimDisk(), layout_from_config(make_config())) == 0
