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
    entry_log = [line for line in lines if line.startswith("  entry-log (flushEntrylogBytes 0): ")]
    bookie = [line for line in lines if line.startswith("  bookie: crash point")]
    assert entry_log and bookie
    # Each progress line says what the checks did so far, not only how many states.
    last = entry_log[-2]  # the last progress line, before the "done" line
    match = re.search(
        r"(\d+) recovered and checked \((\d+) durable entries read back intact\)", last
    )
    assert match is not None, last
    assert int(match.group(2)) > 0  # forced entries were read back by the end of the run
    match = re.search(
        r"(\d+) recovered and checked \((\d+) restarts with lastMark checked, (\d+) entries "
        r"read back, (\d+) fence and wrong-key probes\)",
        bookie[-1],
    )
    assert match is not None, bookie[-1]
    assert match.group(1) == match.group(2)  # one restart judged per recovered state
    assert int(match.group(3)) > 0 and int(match.group(4)) > 0
    assert any(line.startswith("  bookie done: ") for line in lines)
    block = lines[lines.index("summary (seed 3):") :]
    assert [line.split(":")[0] for line in block[1:3]] == ["  entry-log", "  bookie"]
    assert "crashed the entry logger (8 adds over 2 ledgers" in block[1]
    assert "held: durability of forced entries (property 1)" in block[1]
    assert "crashed the whole bookie (6 adds" in block[2] and "3 auth" in block[2]
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
    assert len(lines) == 4 and lines[0] == "summary (seed 3):"
    assert lines[1].startswith("  entry-log: crashed ") and lines[2].startswith("  bookie: ")
    assert lines[3].startswith("PASS: ")


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


POINT_3 = ["--point", "3"]


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
        (
            ["--target", "entry-log", "--manager", "all", "--flush-entrylog-bytes", "0", *POINT_3],
            "give --manager single, per-ledger or slots",
        ),
    ],
)
def test_bad_re_run_arguments_exit_2(
    extra: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crash-check", *SMALL, *extra]) == 2
    assert complaint in capsys.readouterr().err


PER_LEDGER = ["--manager", "per-ledger", "--entries", "8", "--ledgers", "3", "--seed", "3"]


def test_a_per_ledger_run_names_its_manager_in_every_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crash-check", "--target", "entry-log", "--flush-entrylog-bytes", "0", *PER_LEDGER]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("crash-check entry-log per-ledger: seed 3, 8 adds over 3 ledgers")
    assert "manager per-ledger (an active log per ledger" in lines[0]
    assert "new ledgers after recovery each get a new log of their own" in lines[0]
    assert lines[1].startswith("  entry-log per-ledger (flushEntrylogBytes 0): the workload wrote ")
    block = lines[lines.index("summary (seed 3):") :]
    assert block[1].startswith("  entry-log per-ledger: crashed the entry logger (8 adds over 3")
    assert "manager per-ledger (an active log per ledger" in block[1]
    assert "no preallocation" in block[1]
    summary = lines[-1]
    assert summary.startswith("PASS: ") and "0 failures; entry-log manager per-ledger." in summary
    assert "entry-log per-ledger " in summary


def test_the_default_manager_is_single_and_all_runs_the_three(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crash-check", "--target", "entry-log", "--flush-entrylog-bytes", "0", "--quiet"]
    assert main([*argv, *SMALL]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "manager single (one active log" in lines[1]
    assert "entry-log manager single." in lines[-1]
    assert main([*argv, *SMALL, "--manager", "all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[1:4]] == [
        "  entry-log",
        "  entry-log per-ledger",
        "  entry-log slots",
    ]
    assert "0 failures; entry-log managers single, per-ledger and slots." in lines[-1]


def test_point_re_runs_a_per_ledger_state(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["crash-check", "--target", "entry-log", "--flush-entrylog-bytes", "0", *PER_LEDGER]
    assert main([*argv, "--point", "40", "--plan", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("crash-check entry-log per-ledger: seed 3, 8 adds over 3 ledgers")
    assert "manager per-ledger" in out[0] and "crash point 40 (before a " in out[0]
    assert out[5].startswith("    added one entry to each of 3 new ledgers: each went to a log")
    assert out[5].endswith(": ok") and out[-1] == "PASS: 1 crash state(s) re-run, 0 failed"


def test_help_documents_the_manager(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["crash-check", "--help"])
    out = capsys.readouterr().out
    assert "--manager {single,per-ledger,slots,all}" in out
    assert "--manager: which entry-log manager" in out
    assert "maximumNumberOfActiveEntryLogs 2" in out
    with pytest.raises(SystemExit) as exited:
        main(["crash-check", "--manager", "both"])
    assert exited.value.code == 2
    assert "invalid choice: 'both'" in capsys.readouterr().err


SLOTS = ["--manager", "slots", "--entries", "8", "--ledgers", "3", "--seed", "3"]


def test_a_slots_run_names_its_manager_and_re_runs_a_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["crash-check", "--target", "entry-log", "--flush-entrylog-bytes", "0", *SLOTS]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("crash-check entry-log slots: seed 3, 8 adds over 3 ledgers")
    assert "manager slots (bkref's entryLogSlotsPerLedgerDir=1" in lines[0]
    assert lines[1].startswith("  entry-log slots (flushEntrylogBytes 0): the workload wrote ")
    assert "0 failures; entry-log manager slots." in lines[-1]
    assert main([*argv, "--point", "20", "--plan", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "crash point 20 (before a " in out[0]
    assert out[5].startswith("    added one entry to each of 3 new ledgers: each went to a log")
    assert out[5].endswith(": ok") and out[-1] == "PASS: 1 crash state(s) re-run, 0 failed"
