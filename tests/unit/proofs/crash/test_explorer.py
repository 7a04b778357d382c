"""The crash-state explorer: disk images, fingerprints, and the reuse of passing verdicts
(proofs/crash/explorer.py)."""

from __future__ import annotations

import pytest

from models.fs.simdisk import SimDisk
from proofs.crash import explorer
from proofs.crash.explorer import (
    CrashFailure,
    Report,
    copy_disk,
    disk_fingerprint,
    explore,
    plans_at,
    record_points,
)
from spec.crash import KeepPrefix, LoseUnsynced


def _disk() -> SimDisk:
    disk = SimDisk()
    disk.mkdir("/d")
    disk.fsync_dir("/")
    return disk


def _write_two_files(disk: SimDisk) -> None:
    for name in ("a", "b"):
        handle = disk.open(f"/d/{name}", create=True)
        handle.pwrite(0, name.encode() * 700)
        handle.close()
    disk.fsync_dir("/d")


def test_a_copy_is_independent_and_has_no_hook() -> None:
    disk = _disk()
    seen: list[str] = []
    disk.on_operation = seen.append
    copy = copy_disk(disk)
    assert disk.on_operation is not None and copy.on_operation is None
    copy.mkdir("/e")
    assert not disk.exists("/e") and seen == []


def test_fingerprints_tell_names_kinds_and_bytes_apart() -> None:
    disk = _disk()
    _write_two_files(disk)
    same = copy_disk(disk)
    assert disk_fingerprint(disk) == disk_fingerprint(same)
    other_bytes = copy_disk(disk)
    other_bytes.open("/d/a").pwrite(0, b"x")
    assert disk_fingerprint(other_bytes) != disk_fingerprint(disk)
    empty_dir = copy_disk(disk)
    empty_dir.mkdir("/d/empty")
    assert disk_fingerprint(empty_dir) != disk_fingerprint(disk)
    renamed = copy_disk(disk)
    renamed.rename("/d/a", "/d/c")
    assert disk_fingerprint(renamed) != disk_fingerprint(disk)


def test_points_are_images_each_access_a_fresh_disk() -> None:
    disk = _disk()
    points = record_points(disk, lambda: None, lambda: _write_two_files(disk))
    assert [p.op_kind for p in points][:2] == ["create", "pwrite"]
    first, again = points[-1].disk, points[-1].disk
    assert first is not again
    first.crash(LoseUnsynced())
    assert len(again.pending_operations()) > 0


def test_a_passing_disk_is_reused_and_a_failing_one_is_checked_for_every_plan() -> None:
    disk = _disk()
    points = record_points(disk, lambda: None, lambda: _write_two_files(disk))
    last = points[-1]  # before the directory fsync: many plans, several identical outcomes
    plans = list(plans_at(last.disk))
    calls: list[object] = []

    def passing(_crashed: SimDisk, _oracle: None) -> tuple[int, list[str]]:
        calls.append(None)
        return 1, []

    report = explore([last], passing)
    assert report.crash_states == len(plans)
    assert report.recovered_states == len(calls) < len(plans)  # identical disks reused
    report.check_invariants()

    def failing(_crashed: SimDisk, _oracle: None) -> tuple[int, list[str]]:
        return 1, ["bad"]

    report = explore([last], failing, command=lambda point, plan: f"rerun {point} {plan}")
    assert report.recovered_states == report.crash_states == len(plans)
    assert [f.plan for f in report.failures] == plans
    assert [f.command for f in report.failures] == [
        f"rerun {last.op_index} {i}" for i in range(len(plans))
    ]


def test_progress_lines_name_the_label_and_the_states(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(explorer, "PROGRESS_EVERY_S", -1.0)
    disk = _disk()
    points = record_points(disk, lambda: None, lambda: _write_two_files(disk))
    lines: list[str] = []
    report = explore(points, lambda _d, _o: (2, []), lines.append, label="target: ", items="reads")
    assert len(lines) == len(points)
    last = points[-1]
    assert lines[-1].startswith(
        f"  target: crash point {len(points)}/{len(points)} (before a {last.op_kind}): "
    )
    assert lines[-1].endswith(
        f"{report.crash_states} crash states, {report.recovered_states} recovered and checked "
        f"({2 * report.recovered_states} reads), 0 failures"
    )
    assert report.checks == {"reads": 2 * report.recovered_states}


def test_a_failure_says_how_to_see_it_again() -> None:
    class Saved:
        def save(self) -> str:
            return "/tmp/t.jsonl"

    assert CrashFailure(1, "fsync", KeepPrefix(1), "m").replay_lines() == []
    assert CrashFailure(1, "fsync", None, "m", command="bkref x").replay_lines() == [
        "re-run: bkref x"
    ]
    assert CrashFailure(1, "fsync", None, "m", trace=Saved()).replay_lines() == [
        "trace: /tmp/t.jsonl",
        "replay: bkref check-trace /tmp/t.jsonl",
        "explain: bkref explain /tmp/t.jsonl",
    ]


def test_reports_merge() -> None:
    one = Report(1, 10, 4, 7, [CrashFailure(0, "fsync", None, "a")])
    one.merge(Report(2, 5, 5, 1, []))
    assert (one.crash_points, one.crash_states, one.recovered_states, one.checked_items) == (
        3,
        15,
        9,
        8,
    )
    assert len(one.failures) == 1
    one.check_invariants()
    with pytest.raises(AssertionError):
        Report(1, 1, 2).check_invariants()
