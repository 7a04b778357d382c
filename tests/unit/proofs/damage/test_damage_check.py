"""The damage check (proofs/damage/): its generator does what each damage says, its oracle
tells a refusal, a loss and a traceback apart, the CI slice passes on bkref with inspect
held to recovery's verdict, and every kept regression directory passes.

What the check catches is measured in tests/quality/test_damage_check_catches.py (known-bad
variants of the damage detection); the slice below is the run those variants fail.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from impl.bookie.bookie import Bookie
from models.fs.simdisk import SimDisk
from proofs.cli.main import main
from proofs.crash.explorer import restore_disk
from proofs.damage.check import (
    DamageCheckError,
    crash_states,
    damage_workload,
    disk_of,
    opener,
    read_kept,
    replay_kept,
    run_damage_check,
)
from proofs.damage.generate import (
    KINDS,
    Damage,
    Duplicate,
    Flip,
    Generator,
    Older,
    Remove,
    Several,
    Swap,
    Truncate,
    Zero,
    damage_from_json,
    damage_to_json,
    file_kind,
)
from proofs.damage.oracle import (
    REFUSED,
    VERDICTS,
    VIOLATION,
    Acknowledged,
    group_starts,
    journal_payloads,
    judge,
)
from spec.errors import DamagedFile
from spec.operations import Delete
from tests.paths import TEST_DATA

KEPT = TEST_DATA / "damage"

# --- the generator -----------------------------------------------------------------------


def _disk() -> SimDisk:
    return disk_of(["/d"], {"/d/a.bin": bytes(range(200)), "/d/b.bin": b"xyz" * 10})


def test_each_damage_does_what_it_says() -> None:
    disk = _disk()
    Zero("/d/a.bin", 10, 5).apply(disk)
    assert disk.read_file("/d/a.bin")[8:17] == bytes([8, 9, 0, 0, 0, 0, 0, 15, 16])
    Truncate("/d/a.bin", 50).apply(disk)
    assert len(disk.read_file("/d/a.bin")) == 50
    Flip("/d/a.bin", 3, 0x10).apply(disk)
    assert disk.read_file("/d/a.bin")[3] == 3 ^ 0x10
    Swap("/d/a.bin", "/d/b.bin").apply(disk)
    assert disk.read_file("/d/a.bin") == b"xyz" * 10
    Duplicate("/d/a.bin", "/d/c.bin").apply(disk)
    assert disk.read_file("/d/c.bin") == b"xyz" * 10
    Older("/d/c.bin", b"old", 0).apply(disk)
    assert disk.read_file("/d/c.bin") == b"old"
    Remove("/d/c.bin").apply(disk)
    assert not disk.exists("/d/c.bin")
    Several((Remove("/d/a.bin"), Truncate("/d/b.bin", 0))).apply(disk)
    assert not disk.exists("/d/a.bin") and disk.read_file("/d/b.bin") == b""


def test_damage_is_durable_once_applied() -> None:
    """A crash between the damage and the start changes nothing: the damage is the disk's."""
    from spec.crash import LoseUnsynced

    disk = _disk()
    Zero("/d/a.bin", 0, 4).apply(disk)
    Duplicate("/d/b.bin", "/d/e.bin").apply(disk)
    disk.crash(LoseUnsynced())
    assert disk.read_file("/d/a.bin")[:5] == bytes([0, 0, 0, 0, 4])
    assert disk.read_file("/d/e.bin") == b"xyz" * 10


def test_every_damage_round_trips_through_json() -> None:
    damages: list[Damage] = [
        Zero("/p", 1, 2),
        Truncate("/p", 3),
        Flip("/p", 4, 8),
        Remove("/p"),
        Duplicate("/p", "/q"),
        Swap("/p", "/q"),
        Older("/p", b"\x00\x01old", 2),
        Several((Zero("/p", 0, 1), Older("/q", b"x", 1))),
    ]
    for damage in damages:
        assert damage_from_json(damage_to_json(damage)) == damage
    with pytest.raises(ValueError, match="not a damage"):
        damage_from_json({"kind": "melt"})


def test_the_generator_draws_every_kind_on_a_bookies_files() -> None:
    state = crash_states(1, 24, 2)[-1]
    files = restore_disk(state.image).current_snapshot()
    older = {path: [(0, data[: len(data) // 2])] for path, data in files.items()}
    generator = Generator(files, older, {}, random.Random(3))
    drawn = [generator.draw() for _ in range(400)]
    kinds = {damage.kind for damage in drawn}
    assert set(KINDS) | {"several"} <= kinds, kinds
    touched = {file_kind(path) for damage in drawn for path in damage.paths()}
    assert {"journal", "entry log", "index segment", "lastMark", "deleted-ledgers"} <= touched


def test_the_journal_walk_finds_payloads_and_group_starts() -> None:
    state = crash_states(1, 24, 2)[-1]
    files = restore_disk(state.image).current_snapshot()
    journal = max((p for p in files if p.endswith(".txn")), key=lambda p: len(files[p]))
    data = files[journal]
    payloads = journal_payloads(data)
    assert payloads and payloads[0][0] == 512 + 4
    assert all(start % 512 == 0 for start in group_starts(data))
    assert journal_payloads(b"not a journal") == [] and group_starts(b"") == []


# --- the oracle --------------------------------------------------------------------------


def test_the_workload_acknowledges_a_delete() -> None:
    ops = damage_workload(1, 24)
    assert any(isinstance(op, Delete) for op in ops)
    state = crash_states(1, 24, 2)[-1]
    assert state.acknowledged.deletes == frozenset({4})
    assert state.acknowledged.adds and state.acknowledged.fences == frozenset({3})


def _state() -> tuple[SimDisk, Acknowledged, dict[str, bytes]]:
    state = crash_states(1, 24, 2)[-1]
    disk = restore_disk(state.image)
    return disk, state.acknowledged, disk.current_snapshot()


def test_an_undamaged_state_is_intact() -> None:
    disk, acknowledged, files = _state()
    verdict = judge(opener(1), disk, Remove("/nothing"), acknowledged, files)
    assert verdict.verdict == "intact", verdict


def test_an_add_that_is_not_there_is_a_loss() -> None:
    disk, acknowledged, files = _state()
    more = Acknowledged(
        {**acknowledged.adds, (1, 999): b"never written"},
        acknowledged.fences,
        acknowledged.keys,
        acknowledged.deletes,
    )
    verdict = judge(opener(1), disk, Remove("/nothing"), more, files)
    assert verdict.verdict == VIOLATION
    assert "acknowledged add (1, 999) answered no_entry" in verdict.problems


def test_a_refusal_must_name_a_file_and_change_nothing() -> None:
    disk, acknowledged, files = _state()

    def refuses_vaguely(_disk: SimDisk) -> Bookie:
        raise DamagedFile("somewhere", None, "something is wrong", "ask someone")

    verdict = judge(refuses_vaguely, disk, Remove("/x"), acknowledged, files)
    assert verdict.verdict == VIOLATION and "names no file" in verdict.problems[0]

    journal = next(path for path, data in files.items() if path.endswith(".txn") and data)

    def refuses_after_writing(disk: SimDisk) -> Bookie:
        Truncate(journal, 0).apply(disk)
        raise DamagedFile(journal, 0, "cut", "restore it")

    verdict = judge(refuses_after_writing, disk, Remove("/x"), acknowledged, files)
    assert verdict.verdict == VIOLATION and "changed the files" in verdict.problems[0]


def test_a_traceback_is_a_violation() -> None:
    disk, acknowledged, files = _state()

    def crashes(_disk: SimDisk) -> Bookie:
        raise IndexError("list index out of range")

    verdict = judge(crashes, disk, Remove("/x"), acknowledged, files)
    assert verdict.verdict == VIOLATION and "IndexError" in verdict.problems[0]


def test_inspect_must_agree_with_recovery() -> None:
    disk, acknowledged, files = _state()
    verdict = judge(
        opener(1), disk, Remove("/x"), acknowledged, files, inspect=lambda _disk: ["damaged"]
    )
    assert verdict.verdict == VIOLATION and "recovery accepts, but inspect" in verdict.problems[0]


# --- the CI slice and the kept regressions -------------------------------------------------


def test_the_ci_slice_passes_with_every_verdict_reached() -> None:
    """The slice tests/quality/test_damage_check_catches.py runs its variants through."""
    report = run_damage_check(seed=1, states=8, damages=200, inspect=True)
    assert report.ok, [f.verdict.problems for f in report.failures]
    assert report.damages > 1600  # the aimed damage, then 200 drawn per state
    reached = {verdict for (_kind, verdict), count in report.cells.items() if count}
    assert {REFUSED, "intact", "detected at a read", "undetectable"} <= reached, reached
    assert set(reached) <= set(VERDICTS)


@pytest.mark.parametrize("manager", ["per-ledger", "slots"])
def test_a_slice_passes_with_many_active_logs(manager: str) -> None:
    report = run_damage_check(seed=2, states=4, damages=60, manager=manager, inspect=True)
    assert report.ok, [f.verdict.problems for f in report.failures]


def test_every_kept_regression_directory_passes() -> None:
    kept = sorted(path for path in KEPT.iterdir() if path.is_dir())
    assert kept, "no regression directory kept"
    for directory in kept:
        verdict = replay_kept(str(directory))
        assert verdict.verdict != VIOLATION, (directory.name, verdict)


def test_a_violation_is_kept_and_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from impl.bookie import recovery

    def never_checks(*_args: object, **_kwargs: object) -> None:
        return None

    # A start that does not check the logs the index names: a removed log is then met at
    # the read, a violation (rows e1, e2); the check keeps it, and it replays as one.
    monkeypatch.setattr(recovery, "indexed_log_damage", never_checks)
    report = run_damage_check(seed=1, states=3, damages=80, inspect=False, keep=str(tmp_path))
    assert report.failures and all(f.kept for f in report.failures)
    kept = read_kept(str(report.failures[0].kept))
    assert kept.damage == report.failures[0].damage
    assert replay_kept(str(report.failures[0].kept), inspect=False).verdict == VIOLATION
    monkeypatch.undo()
    assert replay_kept(str(report.failures[0].kept), inspect=False).verdict != VIOLATION


def test_a_directory_that_is_not_kept_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DamageCheckError, match="not a damage-check regression directory"):
        read_kept(str(tmp_path))


# --- the command -------------------------------------------------------------------------


def test_the_command_runs_and_says_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["damage-check", "--states", "2", "--damages", "10", "--no-inspect"]) == 0
    out = capsys.readouterr().out
    assert "crash state 0" in out and "damage-check seed 1, manager single" in out
    assert "PASS" in out


def test_the_command_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["damage-check", "--states", "1"]) == 2
    assert "--states must be at least 2" in capsys.readouterr().err
    assert main(["damage-check", "--replay", "/nonexistent"]) == 2


def test_the_command_replays_a_kept_directory(capsys: pytest.CaptureFixture[str]) -> None:
    directory = sorted(path for path in KEPT.iterdir() if path.is_dir())[0]
    assert main(["damage-check", "--replay", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "verdict: refused" in out
