"""tests/conformance/c/bookie.c, the C bookie, spoken to directly through a pipe.

Why: when ``bkref conform`` fails the C bookie, these tell a bookie bug from a kit bug. They
check it as a client sees it, without the kit's model: the ready line, the worked example
of spec/adapter.md, pipelining with real group commits, kill -9 and restart (acknowledged
adds, fences, keys and deletes hold), recovery of torn tails and interrupted meta
replacements, and each deliberate bug shown to be really there (through the pipe, or by the
order of system calls under strace). The malformed-request table, bkref's parser as the
oracle of drawn lines, the bounds, end of input and shutdown are in test_pipe_protocol.py,
for every bookie written elsewhere. Skipped, with the reason, when no C compiler is
installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.cbookie import BUGS, c_bookie_argv, c_bookie_command, c_unavailable
from tests.conformance.pipe_client import KEY, PipeBookie, add, b64, check_worked_example, op, read

C_MISSING = c_unavailable()
pytestmark = pytest.mark.skipif(C_MISSING is not None, reason=C_MISSING or "")

TIMEOUT_S = 20.0
U63 = 2**63 - 1


class Bookie(PipeBookie):
    """bookie.c as a child on a data directory (tests/conformance/pipe_client.py)."""

    def __init__(self, data_dir: Path, *bugs: str, argv: list[str] | None = None) -> None:
        super().__init__(data_dir, argv or c_bookie_argv(str(data_dir), *bugs), timeout_s=TIMEOUT_S)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def bookie(data_dir: Path) -> Iterator[Bookie]:
    with Bookie(data_dir) as running:
        running.ready()
        yield running


def error(response: dict[str, object]) -> object:
    return response.get("error")


# --- the command, the arguments and the ready line ---------------------------------------------


def test_the_command_has_the_data_dir_placeholder_and_the_bug_flags() -> None:
    command = c_bookie_command("stale-cache", "forget-fences")
    assert "{data_dir}" in command
    assert command.endswith("--bug stale-cache --bug forget-fences")
    with pytest.raises(ValueError, match="no bug"):
        c_bookie_command("lose-everything")


def test_the_ready_line_is_exact(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        assert bookie.raw() == (
            b'{"id":null,"ok":true,"event":"ready","version":2,"max_data_bytes":5242364,'
            b'"max_key_bytes":1024,"max_line_bytes":41955304,"bookie":"cbookie 0.1",'
            b'"ops":["inspect"],"state":"protocol","answers":"bookkeeper"}\n'
        )
        assert bookie.close() == 0


def test_the_data_dir_may_come_from_the_environment(tmp_path: Path) -> None:
    binary = c_bookie_argv("x")[0]
    env = {**os.environ, "BKREF_DATA_DIR": str(tmp_path / "env")}
    done = subprocess.run(
        [binary], input=add(1, 1, 0).encode() + b"\n", capture_output=True, env=env,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[1]) == {"id": 1, "ok": True}
    assert (tmp_path / "env" / "ledgers" / "1.dat").stat().st_size > 0


def test_bad_arguments_exit_2_and_an_unusable_dir_exits_1_with_one_line(tmp_path: Path) -> None:
    binary = c_bookie_argv("x")[0]
    for argv in (
        [binary, str(tmp_path), "--bug", "nope"],
        [binary, str(tmp_path), "--verbose"],
        [binary, str(tmp_path), "another"],
        [binary, str(tmp_path), "--bug"],
    ):
        done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT_S)
        assert done.returncode == 2 and done.stdout == b"", done
        assert done.stderr.count(b"\n") == 1, done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run([binary, str(blocker / "data")], capture_output=True, timeout=TIMEOUT_S)
    assert done.returncode == 1 and done.stdout == b"", done
    assert done.stderr.count(b"\n") == 1, done.stderr


def test_a_second_bookie_on_the_same_directory_is_refused(bookie: Bookie) -> None:
    done = subprocess.run(
        c_bookie_argv(str(bookie.data_dir)), capture_output=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 1 and done.stdout == b"", done
    assert b"lock" in done.stderr


# --- the worked example of spec/adapter.md -----------------------------------------------------


def test_the_worked_example(data_dir: Path) -> None:
    check_worked_example(lambda: Bookie(data_dir), ["gc", "checkpoint", "write_close"])


# --- pipelining and group commit ------------------------------------------------------------------


def _stats(stderr: str) -> tuple[int, int, int]:
    found = re.search(r"(\d+) adds, .* in (\d+) batches; (\d+) file syncs", stderr)
    assert found is not None, stderr
    adds, batches, syncs = map(int, found.groups())
    return adds, batches, syncs


def test_pipelined_adds_share_group_commits(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        count = 600
        answers = bookie.ask(*(add(i, 1 + i % 4, i, bytes([i % 256]) * 100) for i in range(count)))
        assert all(a == {"id": i, "ok": True} for i, a in answers.items()), answers
        reads = bookie.ask(*(read(10000 + i, 1 + i % 4, i) for i in range(0, count, 7)))
        for k, a in reads.items():
            assert a["data"] == b64(bytes([(int(str(k)) - 10000) % 256]) * 100), a
        assert bookie.close() == 0
    adds, batches, syncs = _stats(bookie.stderr())
    assert adds == count
    assert batches < count // 10, "adds read in one turn share one round of syncs"
    assert syncs < count // 2


def test_it_keeps_reading_while_the_client_does_not_read_its_answers(data_dir: Path) -> None:
    """Flow control: 3000 reads of a 64 KiB entry (about 260 MB of answers) written before
    any answer is read; the bookie neither deadlocks nor drops one."""
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0, b"y" * 65536)) == {"id": 1, "ok": True}
        bookie.send(*(read(i, 1, 0) for i in range(2, 3002)))
        answers = bookie.responses(3000)
        assert all(a["data"] == b64(b"y" * 65536) for a in answers.values())
        assert bookie.close() == 0


# --- crashes: what was acknowledged holds ------------------------------------------------------


def test_an_acknowledged_add_reads_back_after_kill_9(data_dir: Path) -> None:
    acked: dict[tuple[int, int], bytes] = {}
    with Bookie(data_dir) as bookie:
        bookie.ready()
        bookie.send(*(add(i, 1 + i % 3, i, f"entry {i}".encode() * (i % 7)) for i in range(300)))
        for _ in range(150):
            answer = bookie.receive()
            assert answer.get("ok"), answer
            i = int(str(answer["id"]))
            acked[(1 + i % 3, i)] = f"entry {i}".encode() * (i % 7)
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        ids = list(acked)
        answers = bookie.ask(*(read(n, ledger, entry) for n, (ledger, entry) in enumerate(ids)))
        for n, key in enumerate(ids):
            assert answers[n]["data"] == b64(acked[key]), key
        assert bookie.close() == 0


def test_a_fence_refuses_a_later_add_also_in_flight_and_after_kill_9(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 5, 0)) == {"id": 1, "ok": True}
        # The add is written while the fence is still in flight (one write, one batch).
        answers = bookie.ask(op(2, "fence", ledger=5, key=KEY), add(3, 5, 1))
        assert answers[2] == {"id": 2, "ok": True}
        assert error(answers[3]) == "fenced"
        # A fence creates a ledger it does not know, with its key.
        assert bookie.one(op(4, "fence", ledger=6, key="aa")) == {"id": 4, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert error(bookie.one(add(1, 5, 1))) == "fenced"
        assert error(bookie.one(add(2, 6, 0, key="aa"))) == "fenced"
        assert error(bookie.one(op(3, "fence", ledger=6, key="bb"))) == "unauthorized"
        state = bookie.one(op(4, "inspect"))["state"]
        assert isinstance(state, dict)
        assert state["ledgers"] == [
            {"ledger_id": 5, "last_entry": 0, "fenced": True},
            {"ledger_id": 6, "last_entry": None, "fenced": True},
        ]
        assert bookie.close() == 0


def test_a_wrong_key_is_refused_also_after_kill_9(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 3, 0, key="c0ffee")) == {"id": 1, "ok": True}
        assert error(bookie.one(add(2, 3, 1, key="c0ffef"))) == "unauthorized"
        assert error(bookie.one(add(3, 3, 1, key=""))) == "unauthorized"
        assert error(bookie.one(op(4, "fence", ledger=3, key="00"))) == "unauthorized"
        assert bookie.one(read(5, 3, 0))["data"] == b64(b"x")
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert error(bookie.one(add(1, 3, 1, key="0badc0de"))) == "unauthorized"
        assert bookie.one(add(2, 3, 1, key="C0FFEE")) == {"id": 2, "ok": True}
        assert bookie.one(op(3, "fence", ledger=3, key=KEY)) == {"id": 3, "ok": True}
        assert bookie.close() == 0


def test_a_delete_answers_no_ledger_after_kill_9(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 3, 0)) == {"id": 1, "ok": True}
        assert bookie.one(read(2, 3, 0))["ok"] is True
        # An add of the ledger still in flight when the delete is carried out goes with it.
        answers = bookie.ask(add(3, 3, 1), op(4, "delete", ledger=3))
        assert error(answers[3]) == "no_ledger"
        assert answers[4] == {"id": 4, "ok": True}
        assert error(bookie.one(read(5, 3, 0))) == "no_ledger"
        assert bookie.one(op(6, "delete", ledger=12345)) == {"id": 6, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert error(bookie.one(read(1, 3, 0))) == "no_ledger"
        state = bookie.one(op(2, "inspect"))["state"]
        assert state == {
            "entry_logs": [],
            "least_unflushed_log_id": 0,
            "last_mark": {"journal_id": 0, "offset": 0},
            "journal_mark": {"journal_id": 0, "offset": 0},
            "current_log_id": None,
            "ledgers": [],
            "fenced_ledgers": [],
            "deleted_ledgers": [3, 12345],
            "compaction_files": [],
        }
        # BookKeeper's answers: an add of a deleted ledger creates it again, empty, with its
        # own key; that too holds across a crash.
        assert bookie.one(add(3, 3, 7, b"again", key="bb")) == {"id": 3, "ok": True}
        assert error(bookie.one(read(4, 3, 0))) == "no_entry"
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(read(1, 3, 7))["data"] == b64(b"again")
        assert error(bookie.one(read(2, 3, 0))) == "no_entry"
        assert error(bookie.one(add(3, 3, 8, key=KEY))) == "unauthorized"
        state = bookie.one(op(4, "inspect"))["state"]
        assert isinstance(state, dict)
        assert state["deleted_ledgers"] == [12345]
        assert state["ledgers"] == [{"ledger_id": 3, "last_entry": 7, "fenced": False}]
        assert bookie.close() == 0


# --- recovery of what a crash can leave -------------------------------------------------------


def _record(entry: int, data: bytes) -> bytes:
    head = struct.pack("<IIQ", 0x31524243, len(data), entry)
    return head + struct.pack("<I", zlib.crc32(head + data)) + data


def test_a_torn_tail_is_cut_durably_at_start(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.ask(add(1, 1, 0, b"kept"), add(2, 1, 1, b"kept too"))[2]["ok"]
        bookie.kill9()
    dat = data_dir / "ledgers" / "1.dat"
    good = dat.read_bytes()
    assert good == _record(0, b"kept") + _record(1, b"kept too")  # the documented format
    whole = _record(2, b"torn" * 100)
    for torn in (whole[:10], whole[:-50], whole[:-1] + b"\0", b"\0" * 4096):
        dat.write_bytes(good + torn)
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 1)) == {"id": 1, "ok": True, "data": b64(b"kept too")}
            assert error(bookie.one(read(2, 1, 2))) == "no_entry"
            assert bookie.one(add(3, 1, 3, b"after")) == {"id": 3, "ok": True}
            bookie.kill9()
        assert "cut a torn tail" in bookie.stderr()
        assert dat.read_bytes() == good + _record(3, b"after")
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 3))["data"] == b64(b"after")
            assert bookie.close() == 0
        dat.write_bytes(good)


def test_recovery_removes_what_was_never_acknowledged(data_dir: Path) -> None:
    """A .dat without a meta file (its first add's meta rename was lost), a meta file left
    unfenced without a record (its first add's record was lost), a temp meta file (a
    replacement interrupted before its rename): none of them was acknowledged."""
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0)) == {"id": 1, "ok": True}
        assert bookie.one(add(2, 2, 0)) == {"id": 2, "ok": True}
        assert bookie.one(add(3, 4, 0)) == {"id": 3, "ok": True}
        bookie.kill9()
    ledgers = data_dir / "ledgers"
    (ledgers / "1.meta").unlink()
    (ledgers / "2.dat").write_bytes(b"")
    (ledgers / "4.meta.tmp").write_bytes(b"half a meta")
    (ledgers / "notes.txt").write_text("not the bookie's")
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert error(bookie.one(read(1, 1, 0))) == "no_ledger"
        assert error(bookie.one(read(2, 2, 0))) == "no_ledger"
        assert bookie.one(read(3, 4, 0))["ok"] is True
        assert bookie.close() == 0
    assert sorted(p.name for p in ledgers.iterdir()) == ["4.dat", "4.meta", "notes.txt"]


# --- the bugs, shown directly -------------------------------------------------------------------


def test_every_bug_is_shown_directly() -> None:
    shown = {"stale-cache", "serve-torn-tail", "forget-fences", "ignore-key"}
    shown |= {"admit-while-fencing", "lose-last-acked", "ack-before-fsync", "delete-before-fsync"}
    assert shown == set(BUGS)


@pytest.mark.parametrize("bug", [None, "stale-cache"])
def test_stale_cache_serves_a_deleted_ledgers_entries(tmp_path: Path, bug: str | None) -> None:
    with Bookie(tmp_path / "data", *((bug,) if bug else ())) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0, b"old")) == {"id": 1, "ok": True}
        assert bookie.one(op(2, "delete", ledger=1)) == {"id": 2, "ok": True}
        got = bookie.one(read(3, 1, 0))
        assert got.get("data") == (b64(b"old") if bug else None), got
        # Created again (BookKeeper's answers): the old entry shows through the cache.
        assert bookie.one(add(4, 1, 1, b"new")) == {"id": 4, "ok": True}
        assert bookie.one(read(5, 1, 0)).get("error") == (None if bug else "no_entry")
        bookie.kill9()
    with Bookie(tmp_path / "data", *((bug,) if bug else ())) as bookie:
        bookie.ready()
        assert error(bookie.one(read(1, 1, 0))) == "no_entry"  # a restart empties the cache
        assert bookie.close() == 0


@pytest.mark.parametrize("bug", [None, "serve-torn-tail"])
def test_serve_torn_tail_serves_the_bytes_of_a_torn_record(tmp_path: Path, bug: str | None) -> None:
    data_dir = tmp_path / "data"
    bugs = (bug,) if bug else ()
    with Bookie(data_dir, *bugs) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0, b"whole")) == {"id": 1, "ok": True}
        bookie.kill9()
    dat = data_dir / "ledgers" / "1.dat"
    dat.write_bytes(dat.read_bytes() + _record(1, b"A" * 1000)[:600])  # a write torn at 600
    with Bookie(data_dir, *bugs) as bookie:
        bookie.ready()
        got = bookie.one(read(1, 1, 1))
        if bug:
            assert got["data"] == b64(b"A" * (600 - 20)), got
        else:
            assert error(got) == "no_entry"
        assert bookie.close() == 0


@pytest.mark.parametrize("bug", [None, "forget-fences"])
def test_forget_fences_undoes_a_fence_at_restart(tmp_path: Path, bug: str | None) -> None:
    bugs = (bug,) if bug else ()
    with Bookie(tmp_path / "data", *bugs) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 5, 0))["ok"]
        assert bookie.one(op(2, "fence", ledger=5, key=KEY)) == {"id": 2, "ok": True}
        assert error(bookie.one(add(3, 5, 1))) == "fenced"  # within the run: fenced
        bookie.kill9()
    with Bookie(tmp_path / "data", *bugs) as bookie:
        bookie.ready()
        assert error(bookie.one(add(1, 5, 1))) == (None if bug else "fenced")
        assert bookie.close() == 0


@pytest.mark.parametrize("bug", [None, "ignore-key"])
def test_ignore_key_accepts_an_add_with_a_wrong_key(tmp_path: Path, bug: str | None) -> None:
    with Bookie(tmp_path / "data", *((bug,) if bug else ())) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 5, 0))["ok"]
        assert error(bookie.one(add(2, 5, 1, key="0bad"))) == (None if bug else "unauthorized")
        assert error(bookie.one(op(3, "fence", ledger=5, key="0bad"))) == "unauthorized"
        assert bookie.close() == 0


@pytest.mark.parametrize("bug", [None, "admit-while-fencing"])
def test_admit_while_fencing_acks_an_add_behind_a_fence_in_flight(
    tmp_path: Path, bug: str | None
) -> None:
    with Bookie(tmp_path / "data", *((bug,) if bug else ())) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 5, 0))["ok"]
        answers = bookie.ask(op(2, "fence", ledger=5, key=KEY), add(3, 5, 1))
        assert answers[2] == {"id": 2, "ok": True}
        assert error(answers[3]) == (None if bug else "fenced")
        assert error(bookie.one(add(4, 5, 2))) == "fenced"  # once the fence is durable
        assert bookie.close() == 0


@pytest.mark.parametrize("bug", [None, "lose-last-acked"])
def test_lose_last_acked_loses_each_ledgers_last_add_at_restart(
    tmp_path: Path, bug: str | None
) -> None:
    bugs = (bug,) if bug else ()
    with Bookie(tmp_path / "data", *bugs) as bookie:
        bookie.ready()
        assert bookie.ask(add(1, 1, 0), add(2, 1, 1), add(3, 2, 0), add(4, 2, 1))[4]["ok"]
        bookie.kill9()
    with Bookie(tmp_path / "data", *bugs) as bookie:
        bookie.ready()
        answers = bookie.ask(read(1, 1, 0), read(2, 1, 1), read(3, 2, 1))
        assert answers[1]["ok"] is True
        assert error(answers[2]) == ("no_entry" if bug else None)
        assert error(answers[3]) == ("no_entry" if bug else None)
        assert bookie.close() == 0


def _working_strace() -> str | None:
    """strace, if it is installed and may trace here (containers often forbid ptrace)."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    try:
        done = subprocess.run([strace, "-o", os.devnull, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return strace if done.returncode == 0 else None


STRACE = _working_strace()
CALLS = "trace=pwrite64,fdatasync,fsync,unlinkat,renameat,write"


def _traced(tmp_path: Path, bug: str | None, lines: list[str]) -> list[str]:
    """The bookie's system calls (paths of descriptors shown) while it serves ``lines`` one
    at a time; ends with a clean shutdown."""
    data_dir = tmp_path / "data"
    trace = tmp_path / "strace.txt"
    argv = [str(STRACE), "-f", "-y", "-qq", "-e", CALLS, "-o", str(trace)]
    argv += c_bookie_argv(str(data_dir), *((bug,) if bug else ()))
    with Bookie(data_dir, argv=argv) as bookie:
        bookie.ready()
        for line in lines:
            assert bookie.one(line)["ok"] is True
        assert bookie.close() == 0
    return trace.read_text().splitlines()


def _ack_index(calls: list[str], rid: int) -> int:
    """The index of the write of the answer to request ``rid``."""
    pattern = re.compile(r'write\(1<[^>]*>, "\{\\"id\\":' + str(rid) + ",")
    return next(i for i, c in enumerate(calls) if pattern.search(c))


@pytest.mark.skipif(STRACE is None, reason="strace is not installed or may not trace here")
@pytest.mark.parametrize("bug", [None, "ack-before-fsync"])
def test_ack_before_fsync_answers_an_add_before_its_fdatasync(
    tmp_path: Path, bug: str | None
) -> None:
    calls = _traced(tmp_path, bug, [add(i, 1, i) for i in range(1, 6)])
    for rid in range(1, 6):
        ack = _ack_index(calls, rid)
        written = max(i for i in range(ack) if re.search(r"pwrite64\(\d+<[^>]*/1\.dat>", calls[i]))
        synced = any(re.search(r"fdatasync\(\d+<[^>]*/1\.dat>", c) for c in calls[written:ack])
        assert synced is (bug is None), (rid, calls[written : ack + 1])


@pytest.mark.skipif(STRACE is None, reason="strace is not installed or may not trace here")
@pytest.mark.parametrize("bug", [None, "delete-before-fsync"])
def test_delete_before_fsync_answers_a_delete_before_it_is_durable(
    tmp_path: Path, bug: str | None
) -> None:
    calls = _traced(tmp_path, bug, [add(1, 1, 0), op(2, "delete", ledger=1)])
    ack = _ack_index(calls, 2)
    unlinked = max(i for i in range(ack) if re.search(r'unlinkat\(.*"1\.dat"', calls[i]))
    listed = max(i for i in range(ack) if re.search(r"pwrite64\(\d+<[^>]*/deleted>", calls[i]))
    list_synced = any(re.search(r"fdatasync\(\d+<[^>]*/deleted>", c) for c in calls[listed:ack])
    dir_synced = any(re.search(r"fsync\(\d+<[^>]*/ledgers>", c) for c in calls[unlinked:ack])
    assert list_synced is dir_synced is (bug is None), calls[listed : ack + 1]
