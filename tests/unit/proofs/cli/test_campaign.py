"""``bkref campaign``, ``bkref replay`` and ``bkref check-traces`` refuse bad input before
anything starts (no JVM, nothing written): each mistake is one line that says what to do,
and exit status 2. The runs themselves are tests/unit/proofs/campaign/test_spark.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from proofs.cli.main import main


@pytest.mark.parametrize(
    ("argv", "told"),
    [
        (["campaign", "--scenarios", "5", "--second-pass", "5"], "--second-pass 5: between 0"),
        (["campaign", "--lazy-disk"], "--lazy-disk is for a bookie behind --adapter"),
        (["campaign", "--adapter", "/no/such/bookie {data_dir}"], "is not an executable file"),
        (["campaign", "--adapter", "no-such-program-xyz"], "is not on PATH"),
        (["campaign", "--variant", "nocolon"], "give it as MODULE:NAME"),
        (["campaign", "--variant", "impl.bookie.bookie:Nope"], "has no Nope"),
        (
            ["campaign", "--adapter", "true", "--variant", "impl.bookie.bookie:Bookie"],
            "not with --adapter",
        ),
        (["campaign", "--adapter", "true", "--manager", "per-ledger"], "not with --adapter"),
    ],
)
def test_campaign_mistakes_are_told_before_anything_starts(
    argv: list[str], told: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "never"
    assert main([*argv, "--out", str(out)]) == 2
    assert told in capsys.readouterr().err
    assert not out.exists()


def test_an_output_directory_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "scenarios").mkdir()
    assert main(["campaign", "--out", str(used)]) == 2
    assert "exists and is not an empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in used.iterdir()) == ["scenarios"]


@pytest.mark.parametrize(
    ("argv", "told"),
    [
        (["replay", "--seed", "1", "--index", "0", "--focus", "rules=nope"], "no rule named nope"),
        (["replay", "--seed", "1", "--index", "0", "--lazy-disk"], "behind --adapter"),
        (["replay", "--seed", "1", "--index", "0", "--steps", "0"], "--steps must be at least 1"),
        (
            [
                "replay",
                "--seed",
                "1",
                "--index",
                "0",
                "--adapter",
                "true",
                "--manager",
                "per-ledger",
            ],
            "not with --adapter",
        ),
        (["check-traces", "/no/such/dir"], "is not a directory"),
    ],
)
def test_replay_and_check_traces_mistakes_are_told(
    argv: list[str], told: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert told in capsys.readouterr().err


def test_check_traces_of_a_directory_with_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert main(["check-traces", str(tmp_path)]) == 2
    assert "nothing to check" in capsys.readouterr().err


def test_replay_prints_a_passing_scenario_s_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spec.trace import read_trace

    trace = tmp_path / "t.jsonl"
    assert (
        main(["replay", "--seed", "3", "--index", "1", "--steps", "60", "--trace", str(trace)]) == 0
    )
    err = capsys.readouterr().err
    assert "scenario 1 of seed 3: PASS" in err
    assert len(read_trace(trace.read_text().splitlines()).steps) >= 60
