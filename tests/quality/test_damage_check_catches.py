"""The damage check finds these bugs: each known-bad variant of damage detection must fail
``bkref damage-check`` (proofs/damage/), in the CI budget.

Each test swaps one decision recovery and ``bkref inspect`` share for its variant from
tests/quality/damage_variants.py (in every module that calls it, so inspect keeps agreeing
with recovery: the catch must come from the oracle's refuse-or-lose-nothing rule, not from a
disagreement), runs the CI slice of the check, and requires violations of the expected
kind. The unchanged implementation passes the same run
(tests/unit/proofs/damage/test_damage_check.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from impl.bookie import recovery
from impl.journal import replay
from proofs.cli import inspect_dir, inspect_journal
from proofs.damage.check import DamageReport, describe_failure, replay_kept, run_damage_check
from tests.paths import ROOT
from tests.quality import damage_variants

KEPT = ROOT / "tests" / "unit" / "data" / "damage"


def _run(seed: int = 1) -> DamageReport:
    """The CI slice of tests/unit/proofs/damage/test_damage_check.py."""
    return run_damage_check(seed=seed, states=8, damages=200, inspect=True)


def _messages(report: DamageReport) -> str:
    return "\n".join(describe_failure(failure) for failure in report.failures)


def _patch_judge_stop(monkeypatch: pytest.MonkeyPatch, variant: Callable[..., object]) -> None:
    monkeypatch.setattr(replay, "judge_stop", variant)
    monkeypatch.setattr(inspect_journal, "judge_stop", variant)


def test_catches_a_headerless_journal_read_as_version_1(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_judge_stop(monkeypatch, damage_variants.judge_stop_reading_a_headerless_journal_as_v1)
    report = _run()
    assert report.failures, "a journal whose header was zeroed lost its adds unnoticed"
    assert "answered no_entry" in _messages(report) or "answered no_ledger" in _messages(report)
    assert all("inspect" not in "; ".join(f.verdict.problems) for f in report.failures)


def test_the_kept_regression_directories_catch_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_judge_stop(monkeypatch, damage_variants.judge_stop_reading_a_headerless_journal_as_v1)
    kept = sorted(path for path in KEPT.iterdir() if path.name.startswith("j19-"))
    assert kept
    for directory in kept:
        assert replay_kept(str(directory)).verdict == "violation", directory.name


def test_catches_a_survey_without_the_later_group_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_judge_stop(monkeypatch, damage_variants.judge_stop_without_the_later_group_rule)
    report = _run()
    assert report.failures, "a zeroed group with synced groups after it lost its adds unnoticed"
    assert "acknowledged add" in _messages(report)


def _patch_indexed_log_damage(
    monkeypatch: pytest.MonkeyPatch, variant: Callable[..., object]
) -> None:
    monkeypatch.setattr(recovery, "indexed_log_damage", variant)
    monkeypatch.setattr(inspect_dir, "indexed_log_damage", variant)


def test_catches_a_log_cut_inside_its_last_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_indexed_log_damage(monkeypatch, damage_variants.indexed_log_damage_reading_no_size_field)
    report = _run()
    assert report.failures, "a log cut inside its last indexed entry started unnoticed"
    assert "answered io_error after damage a start must refuse" in _messages(report)


def test_catches_a_log_id_in_two_directories(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_indexed_log_damage(monkeypatch, damage_variants.indexed_log_damage_taking_the_first_copy)
    report = _run()
    assert report.failures, "a log copied into a second ledger directory started unnoticed"
    assert "copy " in _messages(report)


def test_paths_exist() -> None:
    assert isinstance(KEPT, Path) and KEPT.is_dir()
