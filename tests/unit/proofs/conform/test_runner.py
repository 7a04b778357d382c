"""The runner against bkref's own adapter, and against bookies with a flaw (fake_bookie.py:
bkref's adapter behind a relay that lies): each flaw is caught, a failure is shrunk and its
trace replays with ``bkref check-trace`` to the same failure; a bookie that cannot start is
exit 2 with its stderr shown. Every subprocess has a timeout: no test can hang."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from proofs.conform.results import EXIT_CANNOT_RUN, EXIT_DIVERGENCE, EXIT_PASS
from proofs.conform.runner import Conformance, lazy_disk_unavailable
from proofs.conform.scenario import GcAction
from proofs.conform.targets import bkref_adapter_command

FAKE = str(Path(__file__).with_name("fake_bookie.py"))
CLI_TIMEOUT_S = 240


def fake(mode: str) -> str:
    return shlex.join([sys.executable, FAKE, mode]) + " {data_dir} -- " + bkref_adapter_command()


def conform(*args: str, timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "conform", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def test_bkref_adapter_passes_two_scenarios(tmp_path: Path) -> None:
    runner = Conformance(bkref_adapter_command(), seed=3, work_dir=str(tmp_path))
    run = runner.run([0, 1])
    assert run.error is None
    assert [s.verdict for s in run.scenarios] == ["pass", "pass"], run.scenarios
    assert run.exit_code == EXIT_PASS
    assert sum(s.adds_acknowledged for s in run.scenarios) > 0
    assert sum(s.crashes for s in run.scenarios) == 4
    assert run.capabilities is not None and "structural" in run.capabilities.levels


def test_bkref_adapter_passes_the_quick_profile(tmp_path: Path) -> None:
    """The whole quick profile through the command line, as CI runs it against bkref (about
    15-25 s alone; slower on a machine shared by several test runs)."""
    done = conform("--adapter", bkref_adapter_command(), "--seed", "4", "--work-dir", str(tmp_path))
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "12 scenarios" in done.stderr


@pytest.mark.slow
def test_bkref_adapter_passes_the_standard_profile(tmp_path: Path) -> None:
    """50 scenarios of 80 requests and 3 crashes each: about 70 s alone (-m slow)."""
    done = conform(
        "--adapter", bkref_adapter_command(), "--profile", "standard", "--seed", "1",
        "--work-dir", str(tmp_path), timeout_s=1200,
    )  # fmt: skip
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    assert "50 scenarios" in done.stderr


def test_a_bookie_that_cannot_start_is_exit_2_with_its_stderr(tmp_path: Path) -> None:
    done = conform("--adapter", fake("cannot-start"), "--seed", "1", "--work-dir", str(tmp_path))
    assert done.returncode == EXIT_CANNOT_RUN
    assert "disk on fire" in done.stderr
    assert "exit status 3" in done.stderr


def test_a_missing_program_is_exit_2(tmp_path: Path) -> None:
    done = conform("--adapter", str(tmp_path / "nope") + " {data_dir}", "--seed", "1")
    assert done.returncode == EXIT_CANNOT_RUN
    assert "cannot start" in done.stderr


def test_a_wrong_read_is_caught_shrunk_and_replayed(tmp_path: Path) -> None:
    report = tmp_path / "report"
    done = conform(
        "--adapter",
        fake("wrong-read"),
        "--seed",
        "2",
        "--scenario",
        "0",
        "--scenario",
        "1",
        "--report",
        str(report),
        "--work-dir",
        str(tmp_path / "work"),
        "--shrink-runs",
        "40",
    )
    assert done.returncode == EXIT_DIVERGENCE, done.stderr[-3000:]
    traces = sorted(
        t for t in (report / "traces").glob("scenario-*.jsonl") if "unshrunk" not in t.name
    )
    assert traces, done.stderr[-3000:]
    # The unshrunk trace is kept beside it, and the steps that led to the failure told.
    assert (report / "traces" / traces[0].name.replace(".jsonl", "-unshrunk.jsonl")).exists()
    assert "unshrunk:" in done.stderr
    trace = traces[0]
    assert f"bkref check-trace {trace}" in done.stderr
    assert "--seed 2 --scenario" in done.stderr
    check = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "check-trace", str(trace)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert check.returncode == 1
    assert "read" in check.stdout and "diverges from the model" in check.stdout
    explain = subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "explain", str(trace)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert explain.returncode == 1 and "DIVERGENCE" in explain.stdout


def test_shrinking_makes_the_trace_smaller(tmp_path: Path) -> None:
    runner = Conformance(fake("wrong-read"), seed=2, work_dir=str(tmp_path), shrink_runs=40)
    for index in range(runner.scenario_count()):
        result = runner.run_one(index)
        if result.verdict != "pass":
            break
    assert result.verdict == "fail"
    failure = result.failure
    assert failure is not None and failure.trace_path is not None
    assert failure.kind == "divergence" and failure.check == "refinement"
    assert failure.steps_after_shrink < failure.steps_before_shrink
    assert Path(failure.trace_path).read_text().count("\n") == failure.steps_after_shrink + 1
    assert any("DIVERGENCE" in line for line in failure.told)
    assert failure.reproduce.startswith("bkref conform --adapter ")


def test_an_acknowledged_add_lost_after_a_restart_is_caught(tmp_path: Path) -> None:
    runner = Conformance(fake("lose-after-restart"), seed=5, work_dir=str(tmp_path), shrink=False)
    run = runner.run(range(4))
    failed = [s for s in run.scenarios if s.verdict == "fail"]
    assert failed, [s.verdict for s in run.scenarios]
    assert run.exit_code == EXIT_DIVERGENCE


def _scenarios_with_gc(runner: Conformance) -> list[int]:
    return [
        i
        for i in range(runner.scenario_count())
        if any(isinstance(a, GcAction) for a in runner.scenario(i).actions)
    ][:2]


def test_a_capability_lie_is_caught(tmp_path: Path) -> None:
    runner = Conformance(fake("lie-gc"), seed=1, work_dir=str(tmp_path), shrink=False)
    indices = _scenarios_with_gc(runner)
    assert indices
    run = runner.run(indices[:1])
    failure = run.scenarios[0].failure
    assert failure is not None and failure.kind == "capability", run.scenarios
    assert "'gc'" in failure.message and "unsupported" in failure.message


def test_files_not_where_the_ready_line_says_fail_the_format_level(tmp_path: Path) -> None:
    runner = Conformance(fake("format-elsewhere"), seed=3, work_dir=str(tmp_path), shrink=False)
    assert "format" in runner.capabilities().levels
    run = runner.run([0])
    failure = run.scenarios[0].failure
    assert run.exit_code == EXIT_DIVERGENCE, run.scenarios
    assert failure is not None and failure.kind == "format", failure
    assert failure.check == "durability"
    assert "bkref's readers do not find it" in failure.message


def test_the_ready_line_s_config_tells_the_model_the_entry_log_manager(tmp_path: Path) -> None:
    """spec/adapter.md, "Capabilities", ``config``: a bookie whose settings the runner cannot
    read from its command (here an entry log per ledger, set inside the fake) is judged by
    its own manager's layout rules when its ready line declares them, and as a single log,
    wrongly, when it does not."""
    declared = Conformance(fake("per-ledger-declared"), seed=3, work_dir=str(tmp_path / "d"))
    run = declared.run([0, 1])
    assert [s.verdict for s in run.scenarios] == ["pass", "pass"], run.scenarios
    assert run.capabilities is not None
    assert ("entryLogPerLedgerEnabled", "true") in run.capabilities.config
    undeclared = Conformance(
        fake("per-ledger-undeclared"), seed=3, work_dir=str(tmp_path / "u"), shrink=False
    )
    failure = undeclared.run([0, 1]).scenarios[0].failure
    assert failure is not None and "[R-LOG-ACTIVE]" in failure.message, failure


def test_an_unclaimed_op_must_be_refused(tmp_path: Path) -> None:
    runner = Conformance(fake("hide-gc"), seed=1, work_dir=str(tmp_path), shrink=False)
    run = runner.run([0])
    failure = run.scenarios[0].failure
    assert failure is not None and failure.kind == "capability", run.scenarios
    assert "does not list 'gc'" in failure.message


def test_a_hanging_bookie_is_a_failure_not_a_hang(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(  # it answers the runner's first hello (a shutdown), then hangs
        "import json,sys,time\n"
        'print(json.dumps({"id":None,"ok":True,"event":"ready","version":1,'
        '"max_data_bytes":100000,"max_key_bytes":1024,"max_line_bytes":1000000}),flush=True)\n'
        "request = json.loads(sys.stdin.readline())\n"
        "if request['op'] == 'shutdown':\n"
        "    print(json.dumps({'id': request['id'], 'ok': True}), flush=True); sys.exit(0)\n"
        "time.sleep(600)\n"
    )
    runner = Conformance(
        shlex.join([sys.executable, str(script)]),
        seed=1,
        work_dir=str(tmp_path / "w"),
        shrink=False,
        response_timeout=2,
        start_timeout=20,
    )
    result = runner.run_one(0)
    assert result.verdict == "fail"
    assert result.failure is not None and result.failure.check == "progress"
    assert "no response within 2 s" in result.failure.message


def test_a_bookie_writing_garbage_on_stdout_fails(tmp_path: Path) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(
        "import json,sys\n"
        'print(json.dumps({"id":None,"ok":True,"event":"ready","version":1,'
        '"max_data_bytes":100000,"max_key_bytes":1024,"max_line_bytes":1000000}),flush=True)\n'
        "for line in sys.stdin:\n"
        "    request = json.loads(line)\n"
        "    if request['op'] == 'shutdown':\n"
        "        print(json.dumps({'id': request['id'], 'ok': True}), flush=True); sys.exit(0)\n"
        "    print('starting the journal...', flush=True)\n"
    )
    runner = Conformance(
        shlex.join([sys.executable, str(script)]),
        seed=1,
        work_dir=str(tmp_path / "w"),
        shrink=False,
        response_timeout=10,
    )
    result = runner.run_one(0)
    assert result.verdict == "fail" and result.failure is not None
    assert "not a JSON object" in result.failure.message


@pytest.mark.parametrize("bad", ["--profile=huge"])
def test_usage_errors(bad: str) -> None:
    done = conform("--adapter", "x", bad)
    assert done.returncode == 2


@pytest.mark.skipif(lazy_disk_unavailable() is not None, reason=str(lazy_disk_unavailable()))
def test_bkref_adapter_passes_power_losses_on_the_lazy_disk(tmp_path: Path) -> None:
    runner = Conformance(bkref_adapter_command(), seed=1, work_dir=str(tmp_path), lazy_disk=True)
    run = runner.run([0, 3])
    assert [s.verdict for s in run.scenarios] == ["pass", "pass"], run.scenarios
    assert sum(s.power_losses for s in run.scenarios) > 0


def test_lazy_disk_unavailable_is_exit_2_or_works(tmp_path: Path) -> None:
    why = lazy_disk_unavailable()
    done = conform(
        "--adapter",
        bkref_adapter_command(),
        "--seed",
        "1",
        "--scenario",
        "0",
        "--lazy-disk",
        "--work-dir",
        str(tmp_path),
    )
    if why is None:
        assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    else:
        assert done.returncode == EXIT_CANNOT_RUN
        assert "install" in done.stderr
