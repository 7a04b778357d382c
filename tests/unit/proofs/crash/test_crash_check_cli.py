"""``bkref crash-check`` (proofs/cli/crash_check.py): what it prints while it works, its
summary, ``--quiet``, and the re-run of one entry-log crash state with ``--point``."""

from __future__ import annotations

import re

import pytest

from proofs.cli.main import main
from proofs.crash import explorer

SMALL = ["--entries", "8", "--ledgers", "2", "--adds", "6", "--seed", "3"]


def test_progress_lines_say_what_is_checked_and_a_summary_ends_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(explorer, "PROGRESS_EVERY_S", -1.0)  # a line at every crash point
    assert main(["crash-check", *SMALL]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if line.startswith("crash-check ")]
    assert [h.split(":")[0] for h in headers] == ["crash-check entry-log"] * 2 + [
        "crash-check bookie"
    ]
    assert "flushEntrylogBytes 0" in headers[0] and "flushEntrylogBytes 1536" in headers[1]
    assert "format validity (property 7)" in headers[0]
    assert "judged by the model" in headers[2] and "3 auth" in headers[2]
    assert any(line.startswith("  entry-log (flushEntrylogBytes 0): crash point") for line in lines)
    assert any(line.startswith("  bookie: crash point") for line in lines)
    assert any(line.startswith("  bookie done: ") for line in lines)
    summary = lines[-1]
    match = re.match(
        r"PASS: (\d+) crash states checked in [\d.]+ s \(\d+ states/s; (\d+) recovered", summary
    )
    assert match is not None, summary
    assert int(match.group(2)) <= int(match.group(1))
    assert "entry-log " in summary and "bookie " in summary and "0 failures" in summary


def test_quiet_prints_only_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crash-check", "--quiet", *SMALL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("PASS: ")


def test_point_re_runs_one_state_and_prints_what_it_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crash-check", "--target", "entry-log", "--flush-entrylog-bytes", "0", *SMALL]
    assert main([*argv, "--point", "20", "--plan", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("crash-check entry-log: seed 3, 8 adds over 2 ledgers")
    assert "crash point 20 (before a " in out[0] and "1 plan(s)" in out[0]
    assert out[1].startswith("  plan 1 (") and out[1].endswith(": ok")
    assert out[2] == "    opened a fresh entry logger on the recovered ledger directories"
    assert len(out) == 8 and out[-1] == "PASS: 1 crash state(s) re-run, 0 failed"


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--point", "3"], "--target entry-log"),
        (["--target", "entry-log", "--point", "3"], "--point needs --flush-entrylog-bytes"),
        (["--plan", "1"], "--plan needs --point"),
        (["--target", "entry-log", "--flush-entrylog-bytes", "-1"], "at least 0"),
        (
            ["--target", "entry-log", "--flush-entrylog-bytes", "0", "--point", "99999"],
            "does not exist",
        ),
    ],
)
def test_bad_re_run_arguments_exit_2(
    extra: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crash-check", *SMALL, *extra]) == 2
    assert complaint in capsys.readouterr().err
