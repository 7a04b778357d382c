"""The directory bullets of issue 10 through real processes and real files: two ``bkref
adapter`` processes on one set of directories (the second exits 1 before any ready line, the
first keeps serving), a reordered and an added ledger directory refused by the adapter and
accepted by ``bkref dirs accept``, and a BookKeeper bookie's directory with and without
``--write-bookkeeper-dirs``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import proofs.cli.main as cli
from impl.fs.os_backend import OsFileSystem
from proofs.cli.adapter import EXIT_FAILED
from spec.errors import FsLocked
from tests.paths import ROOT
from tests.unit.impl.server.fakes import KEY, add, b64
from tests.unit.proofs.cli.test_adapter import AdapterProcess


def settings(tmp_path: Path, *ledgers: str) -> tuple[str, str]:
    return (
        f"journalDirectories={tmp_path / 'journal'}",
        f"ledgerDirectories={','.join(str(tmp_path / name) for name in ledgers)}",
    )


def fence(request_id: int, ledger: int) -> dict[str, object]:
    return {"id": request_id, "op": "fence", "ledger": ledger, "key": KEY.hex()}


def read(request_id: int, ledger: int, entry: int) -> dict[str, object]:
    return {"id": request_id, "op": "read", "ledger": ledger, "entry": entry}


def refused_before_ready(tmp_path: Path, *given: str, args: tuple[str, ...] = ()) -> str:
    """Run the adapter; it must exit 1 with no stdout line at all. Returns its stderr."""
    with AdapterProcess(tmp_path, *given, args=args) as second:
        assert second.wait() == EXIT_FAILED, second.stderr()
        assert second.rest() == []  # not even a ready line
        return second.stderr()


def test_a_second_adapter_on_the_same_directories_exits_1_before_ready(tmp_path: Path) -> None:
    given = settings(tmp_path, "ledgers0", "ledgers1")
    with AdapterProcess(tmp_path, *given) as first:
        first.ready()
        assert first.call(add(1, 1, 0, b"before"))["ok"] is True
        stderr = refused_before_ready(tmp_path, *given)
        assert "locked by another bkref process" in stderr
        assert stderr.strip().splitlines()[-1].startswith("bkref adapter: cannot start")
        # The first keeps serving, and what it acknowledged is whole.
        assert first.call(add(2, 1, 1, b"after"))["ok"] is True
        response = first.call(read(3, 1, 0))
        assert response["ok"] is True and response["data"] == b64(b"before")
        first.close_stdin()
        assert first.wait() == 0


def test_one_shared_ledger_directory_is_enough_to_be_refused(tmp_path: Path) -> None:
    with AdapterProcess(tmp_path, *settings(tmp_path, "ledgers0")) as first:
        first.ready()
        other = (
            f"journalDirectories={tmp_path / 'journal2'}",
            f"ledgerDirectories={tmp_path / 'ledgers0'}",
        )
        assert "locked" in refused_before_ready(tmp_path, *other)
        first.close_stdin()
        assert first.wait() == 0


def run_bkref(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_reordered_and_added_directories_are_refused_then_accepted(tmp_path: Path) -> None:
    given = settings(tmp_path, "ledgers0", "ledgers1")
    with AdapterProcess(tmp_path, *given) as first:
        first.ready()
        assert first.call(add(1, 7, 0, b"entry"))["ok"] is True
        assert first.call(fence(2, 7))["ok"] is True
        first.close_stdin()
        assert first.wait() == 0
    changed = settings(tmp_path, "ledgers2", "ledgers1", "ledgers0")
    stderr = refused_before_ready(tmp_path, *changed)
    assert "do not match their bkref identity stamps" in stderr
    command = stderr[stderr.index("`bkref dirs accept") + 1 :].split("`")[0]
    assert command.split()[:3] == ["bkref", "dirs", "accept"]
    dry = run_bkref(*command.split()[1:], "--dry-run")
    assert dry.returncode == 0 and "dry run: no stamp was written" in dry.stdout, dry
    assert "do not match" in refused_before_ready(tmp_path, *changed)
    accepted = run_bkref(*command.split()[1:])
    assert accepted.returncode == 0, accepted.stderr
    assert "change: ledger directory" in accepted.stdout
    assert f"the ledger index stays in {tmp_path / 'ledgers0'}" in accepted.stdout
    with AdapterProcess(tmp_path, *changed) as second:
        second.ready()
        response = second.call(read(1, 7, 0))
        assert response["ok"] is True and response["data"] == b64(b"entry")
        assert second.call(add(2, 7, 1, b"x"))["error"] == "fenced"
        second.close_stdin()
        assert second.wait() == 0
    again = run_bkref(*command.split()[1:])
    assert again.returncode == 0 and "nothing to accept" in again.stdout


def test_accept_refuses_to_drop_a_directory_holding_the_index(tmp_path: Path) -> None:
    given = settings(tmp_path, "ledgers0", "ledgers1")
    with AdapterProcess(tmp_path, *given) as first:
        first.ready()
        first.close_stdin()
        assert first.wait() == 0
    dropped = settings(tmp_path, "ledgers1")
    result = run_bkref("dirs", "accept", "--set", dropped[0], "--set", dropped[1])
    assert result.returncode == 1
    assert "holds (or held) the ledger index" in result.stderr
    assert "no stamp was written" in result.stderr


def bookkeeper_directory(tmp_path: Path) -> tuple[str, str]:
    for name in ("journal", "ledgers0"):
        (tmp_path / name / "current").mkdir(parents=True)
        (tmp_path / name / "current" / "VERSION").write_text("4\nbookieHost: h:3181\n")
    return settings(tmp_path, "ledgers0")


def test_a_bookkeeper_directory_needs_the_write_flag(tmp_path: Path) -> None:
    given = bookkeeper_directory(tmp_path)
    before = sorted(p.name for p in (tmp_path / "ledgers0" / "current").iterdir())
    stderr = refused_before_ready(tmp_path, *given)
    assert "a BookKeeper bookie's directory" in stderr
    assert "`bkref import`" in stderr and "--write-bookkeeper-dirs" in stderr
    assert sorted(p.name for p in (tmp_path / "ledgers0" / "current").iterdir()) == before
    with AdapterProcess(tmp_path, *given, args=("--write-bookkeeper-dirs",)) as flagged:
        flagged.ready()
        flagged.close_stdin()
        assert flagged.wait() == 0
        assert "writing into a BookKeeper bookie's directories" in flagged.stderr()


def test_the_os_backend_lock_excludes_a_second_holder_until_released(tmp_path: Path) -> None:
    fs = OsFileSystem()
    held = fs.lock_dir(str(tmp_path))
    with pytest.raises(FsLocked):
        fs.lock_dir(str(tmp_path))
    held.release()
    held.release()  # idempotent
    fs.lock_dir(str(tmp_path)).release()
    assert list(tmp_path.iterdir()) == []  # no lock file


def test_dirs_is_in_the_command_table() -> None:
    assert "dirs" in {name for name, _, _ in cli.COMMANDS}
