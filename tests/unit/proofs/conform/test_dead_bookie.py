"""``bkref conform`` against a bookie that stops answering, and stopped by a signal (issue 26,
"Also"): a bookie that writes its ready line and then never answers took about 20 minutes
for the quick profile (a 30 s timeout per scenario, and shrinking re-ran the silent bookie
dozens of times), and SIGTERM to ``bkref conform`` left the bookie under test running.

The bookies are tiny fake ones (Python one-liners): one writes a valid version-2 ready line
and sleeps; one also answers a ``shutdown`` request, and nothing else. Each writes its pid
into its data directory, so the test can see that none is left running.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofs.conform.runner import lazy_disk_unavailable
from tests.paths import ROOT

READY = (
    '{"id":null,"ok":true,"event":"ready","version":2,"max_data_bytes":1000,'
    '"max_key_bytes":64,"max_line_bytes":100000,"bookie":"fake","ops":[],'
    '"state":"none","answers":"either"}'
)
#: Writes its ready line and its pid, then sleeps: alive, never answering.
SILENT = (
    "import os,sys,time; "
    "open(os.path.join(os.environ['BKREF_DATA_DIR'],'pid'),'w').write(str(os.getpid())); "
    f"print({READY!r}, flush=True); time.sleep(3600)"
)
#: Answers a shutdown (then exits), and nothing else.
SHUTDOWN_ONLY = (
    "import json,os,sys; "
    "open(os.path.join(os.environ['BKREF_DATA_DIR'],'pid'),'w').write(str(os.getpid())); "
    f"print({READY!r}, flush=True)\n"
    "for line in sys.stdin:\n"
    "    request = json.loads(line)\n"
    "    if request.get('op') == 'shutdown':\n"
    "        print(json.dumps({'id': request['id'], 'ok': True}), flush=True); sys.exit(0)\n"
)


def adapter(script: str) -> str:
    return shlex.join([sys.executable, "-c", script])


def conform(tmp_path: Path, script: str, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "proofs.cli.main", "conform", "--adapter", adapter(script)]
    argv += ["--seed", "1", "--work-dir", str(tmp_path / "work"), *extra]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def bookie_pids(tmp_path: Path) -> list[int]:
    return [int(path.read_text()) for path in (tmp_path / "work").rglob("pid") if path.read_text()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
    return " Z " not in status  # a zombie is dead


def test_a_bookie_that_answers_nothing_after_its_ready_line_is_found_at_once(
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    run = conform(tmp_path, SILENT, "--response-timeout", "2")
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 2, err
    assert "answered nothing" in err, err
    assert time.monotonic() - began < 60
    assert not any(alive(pid) for pid in bookie_pids(tmp_path))


def test_a_bookie_that_stops_answering_is_not_shrunk_nor_waited_for_again(
    tmp_path: Path,
) -> None:
    """Scenario 0 times out once; no shrinking re-runs, and the other scenarios are not run
    (each would wait the timeout out again)."""
    began = time.monotonic()
    run = conform(tmp_path, SHUTDOWN_ONLY, "--response-timeout", "2")
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    assert "no response within 2 s" in err, err
    assert "scenario(s) not run" in err, err
    assert "shrinking" not in err, err
    assert time.monotonic() - began < 60
    assert not any(alive(pid) for pid in bookie_pids(tmp_path))


def _stop_while_a_scenario_waits(tmp_path: Path, signum: int, *extra: str) -> str:
    run = conform(tmp_path, SHUTDOWN_ONLY, "--response-timeout", "60", *extra)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((tmp_path / "work").glob("scenario-*/*/pid")):
        time.sleep(0.2)  # scenario 0's bookie (the first, which only says hello, is gone)
    pids = bookie_pids(tmp_path)
    assert pids, "no scenario started"
    time.sleep(0.5)
    run.send_signal(signum)
    _out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert f"stopped by {signal.Signals(signum).name}" in err, err
    time.sleep(0.2)
    assert not any(alive(pid) for pid in pids), "a bookie under test outlived bkref conform"
    return err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_to_conform_kills_the_bookie_under_test(tmp_path: Path, signum: int) -> None:
    _stop_while_a_scenario_waits(tmp_path, signum)


@pytest.mark.skipif(lazy_disk_unavailable() is not None, reason=str(lazy_disk_unavailable()))
def test_a_signal_to_conform_unmounts_the_lazy_disk(tmp_path: Path) -> None:
    _stop_while_a_scenario_waits(tmp_path, signal.SIGTERM, "--lazy-disk")
    mounts = Path("/proc/mounts").read_text()
    assert str(tmp_path / "work") not in mounts, mounts


def test_a_line_that_never_ends_is_cut_not_held_in_memory(tmp_path: Path) -> None:
    """The bookie's standard output is input too: a line longer than the bound is refused as
    a line (the runner fails it: not JSON), and nothing more is read."""
    from proofs.conform.process import EOF, BookieProcess, wait_ready

    endless = (
        f"import sys,time; print({READY!r}, flush=True); "
        "[sys.stdout.write('x' * 4096) or sys.stdout.flush() for _ in range(10**6)]"
    )
    data = tmp_path / "data"
    data.mkdir()
    process = BookieProcess(
        adapter(endless), str(data), str(tmp_path / "stderr"), line_max_bytes=100_000
    )
    try:
        assert wait_ready(process, 30).startswith(b'{"id":null')
        assert process.take(30) == b"<a line longer than 100000 bytes>\n"
        assert process.take(30) == EOF
    finally:
        process.kill()
