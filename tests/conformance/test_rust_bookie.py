"""tests/conformance/rust/bookie.rs: the Rust bookie, through a pipe.

Why: rsbookie is a test of the conformance kit, so when the kit and rsbookie disagree it must
be clear which one is wrong. These tests hold the bookie to spec/adapter.md directly, as a
client sees it, without the kit's model: the ready line, the worked example, pipelining and
group commit, kill -9 and restart, its recovery at every crash point of its snapshot switch,
and each deliberate bug shown to be really there. The malformed-request table, bkref's own
parser as the oracle of drawn lines, the bounds, end of input and shutdown are in
test_pipe_protocol.py, for every bookie written elsewhere. Skipped, with the reason, without
rustc.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import rsbookie
from tests.conformance.pipe_client import KEY, PipeBookie, add, b64, check_worked_example, op, read
from tests.conformance.rsbookie import (
    BUGS,
    BuildError,
    rs_bookie_argv,
    rs_bookie_binary,
    rs_bookie_command,
    rs_unavailable,
)
from tests.paths import ROOT

RUSTC_MISSING = rs_unavailable()
pytestmark = pytest.mark.skipif(RUSTC_MISSING is not None, reason=RUSTC_MISSING or "")

TIMEOUT_S = 30.0
U63 = 2**63 - 1


#: An add of 4 MB to a ledger of its own: parsing it keeps the bookie's main thread busy while
#: its reader thread queues the lines written after it, so those land in one batch (group
#: commit takes every request already waiting).
BUSY_ID = 424242
BUSY = add(BUSY_ID, 999, 0, b"\x5a" * 4_000_000)


@pytest.fixture(scope="module")
def binary() -> Path:
    try:
        return rs_bookie_binary()
    except BuildError as exc:
        pytest.fail(str(exc))


class Bookie(PipeBookie):
    """bookie.rs as a child on a data directory (tests/conformance/pipe_client.py)."""

    def __init__(
        self,
        data_dir: Path,
        *bugs: str,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_dir, argv or rs_bookie_argv(str(data_dir), *bugs), env=env, timeout_s=TIMEOUT_S
        )


@pytest.fixture
def data_dir(tmp_path: Path, binary: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def bookie(data_dir: Path) -> Iterator[Bookie]:
    with Bookie(data_dir) as running:
        running.ready()
        yield running


def files(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name != "lock")


# --- the command and the ready line -------------------------------------------------------


def test_the_command_has_the_data_dir_placeholder_and_the_bug_flags(binary: Path) -> None:
    command = rs_bookie_command("stale-cache", "forget-fences")
    assert command.startswith(str(binary)) and "{data_dir}" in command
    assert command.endswith("--bug stale-cache --bug forget-fences")
    with pytest.raises(ValueError, match="no bug"):
        rs_bookie_command("lose-everything")


def test_a_compile_error_is_a_build_error_with_the_compilers_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "bookie.rs"
    broken.write_text("fn main() { let x: u8 = ; }\n")
    monkeypatch.setattr(rsbookie, "RS_BOOKIE_SOURCE", broken)
    before = set(rsbookie.cache_dir().iterdir())
    with pytest.raises(BuildError, match=r"could not compile(.|\n)*error"):
        rsbookie.rs_bookie_binary()
    assert set(rsbookie.cache_dir().iterdir()) == before, "no binary and no build left behind"


def test_the_ready_line_is_version_2_with_exactly_its_capabilities(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        assert bookie.raw() == (
            b'{"id":null,"ok":true,"event":"ready","version":2,"max_data_bytes":5242364,'
            b'"max_key_bytes":1024,"max_line_bytes":41955304,"bookie":"rsbookie 0.1",'
            b'"ops":["checkpoint"],"state":"none","answers":"bkref"}\n'
        )
        assert bookie.close() == 0


def test_the_data_dir_may_come_from_the_environment(tmp_path: Path, binary: Path) -> None:
    env = {**os.environ, "BKREF_DATA_DIR": str(tmp_path / "env")}
    done = subprocess.run(
        [str(binary)], input=add(1, 1, 0).encode() + b"\n", capture_output=True, env=env,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[1]) == {"id": 1, "ok": True}
    assert (tmp_path / "env" / "wal-0").stat().st_size > 0


def test_bad_arguments_and_an_unusable_dir_exit_with_one_line(tmp_path: Path, binary: Path) -> None:
    for argv, status, said in (
        ([str(tmp_path), "--bug", "nope"], 2, b"--bug needs one of"),
        ([str(tmp_path), "--frobnicate"], 2, b"unknown option"),
        ([str(tmp_path), str(tmp_path)], 2, b"one data directory"),
    ):
        done = subprocess.run([str(binary), *argv], capture_output=True, timeout=TIMEOUT_S)
        assert done.returncode == status and done.stdout == b"", done
        assert said in done.stderr and done.stderr.count(b"\n") == 1, done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run(
        [str(binary), str(blocker / "data")], capture_output=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 1 and done.stdout == b"", done
    assert b"cannot recover" in done.stderr and done.stderr.count(b"\n") == 1


def test_a_second_bookie_on_the_same_directory_is_refused(bookie: Bookie, binary: Path) -> None:
    done = subprocess.run(
        [str(binary), str(bookie.data_dir)], capture_output=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 1 and done.stdout == b"", done
    assert b"another process holds its lock" in done.stderr


# --- the worked example of spec/adapter.md --------------------------------------------------


def test_the_worked_example(data_dir: Path) -> None:
    check_worked_example(lambda: Bookie(data_dir), ["gc"])


def test_the_ops_it_does_not_claim_answer_unsupported_and_do_nothing(bookie: Bookie) -> None:
    assert bookie.one(add(1, 1, 0)) == {"id": 1, "ok": True}
    for rid, line in enumerate(
        (op(0, "inspect"), op(0, "gc", force=False), op(0, "write_close", ledger=1, key=KEY)), 2
    ):
        answer = bookie.one(line.replace('"id": 0', f'"id": {rid}'))
        assert (answer["id"], answer["error"]) == (rid, "unsupported")
    assert bookie.one(add(9, 1, 1)) == {"id": 9, "ok": True}  # write_close closed nothing


# --- pipelining and group commit ------------------------------------------------------------


def _stats(stderr: str) -> dict[str, int]:
    found = re.search(
        r"(\d+) records in (\d+) writes, (\d+) fdatasyncs; (\d+) acks before their fdatasync; "
        r"(\d+) deletes answered before their fdatasync; (\d+) snapshots",
        stderr,
    )
    assert found is not None, stderr
    names = ("records", "writes", "syncs", "early_acks", "early_deletes", "snapshots")
    return dict(zip(names, map(int, found.groups()), strict=True))


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
    stats = _stats(bookie.stderr())
    assert stats["records"] == count
    assert stats["writes"] == stats["syncs"] < count // 10, stats


def test_a_fence_refuses_adds_written_while_it_is_in_flight(bookie: Bookie) -> None:
    assert bookie.one(add(1, 4, 0)) == {"id": 1, "ok": True}
    answers = bookie.ask(BUSY, op(2, "fence", ledger=4, key=KEY), add(3, 4, 1))
    assert answers[2] == {"id": 2, "ok": True}
    assert answers[3]["error"] == "fenced"


def test_delete_is_durable_and_refuses_adds_in_flight(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 3, 0)) == {"id": 1, "ok": True}
        answers = bookie.ask(BUSY, add(2, 3, 1), op(3, "delete", ledger=3), add(4, 3, 2))
        assert answers[2]["error"] == "no_ledger", "in flight when its ledger was deleted"
        assert answers[3] == {"id": 3, "ok": True}
        assert answers[4]["error"] == "no_ledger", "a deleted ledger is never written again"
        assert bookie.one(op(5, "fence", ledger=3, key=KEY))["error"] == "no_ledger"
        assert bookie.one(op(6, "delete", ledger=12345)) == {"id": 6, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(read(1, 3, 0))["error"] == "no_ledger"
        assert bookie.one(add(2, 12345, 0))["error"] == "no_ledger"
        assert bookie.one(op(3, "checkpoint")) == {"id": 3, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:  # and from the snapshot
        bookie.ready()
        assert bookie.one(read(1, 3, 0))["error"] == "no_ledger"
        assert bookie.one(add(2, 12345, 0))["error"] == "no_ledger"
        assert bookie.close() == 0


# --- crashes -----------------------------------------------------------------------------------


def test_kill_9_keeps_acked_adds_fences_keys_and_deletes(data_dir: Path) -> None:
    acked: dict[tuple[int, int], bytes] = {}
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 9, 0, b"gone")) == {"id": 1, "ok": True}
        assert bookie.one(op(2, "delete", ledger=9)) == {"id": 2, "ok": True}
        bookie.send(*(add(i, 1 + i % 3, i, f"entry {i}".encode() * (i % 7)) for i in range(300)))
        bookie.send(op(1000, "fence", ledger=3, key=KEY))
        for _ in range(150):
            answer = bookie.receive()
            if answer.get("ok") and answer["id"] != 1000:
                i = int(str(answer["id"]))
                acked[(1 + i % 3, i)] = f"entry {i}".encode() * (i % 7)
        bookie.kill9()
    assert len(acked) >= 100
    with Bookie(data_dir) as bookie:
        bookie.ready()
        ids = list(acked)
        answers = bookie.ask(*(read(n, ledger, entry) for n, (ledger, entry) in enumerate(ids)))
        for n, key in enumerate(ids):
            assert answers[n]["data"] == b64(acked[key]), key
        assert bookie.one(read(4999, 9, 0))["error"] == "no_ledger"
        assert bookie.one(op(5000, "fence", ledger=2, key=KEY)) == {"id": 5000, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 2, 9999))["error"] == "fenced"
        assert bookie.one(add(2, 1, 9999, key="0bad"))["error"] == "unauthorized"
        assert bookie.one(op(3, "fence", ledger=1, key="0bad"))["error"] == "unauthorized"
        assert bookie.one(read(4, 9, 0))["error"] == "no_ledger"
        assert bookie.close() == 0


def test_checkpoint_switches_generation_and_recovery_uses_snapshot_and_wal(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.ask(add(1, 1, 0, b"before"), op(2, "fence", ledger=5, key="aa"))[2]["ok"]
        assert files(data_dir) == ["wal-0"]
        assert bookie.one(op(3, "checkpoint")) == {"id": 3, "ok": True}
        assert files(data_dir) == ["snapshot-1", "wal-1"]
        assert (data_dir / "wal-1").stat().st_size == 0
        assert bookie.one(add(4, 1, 1, b"after")) == {"id": 4, "ok": True}
        bookie.kill9()
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.one(read(1, 1, 0))["data"] == b64(b"before")
        assert bookie.one(read(2, 1, 1))["data"] == b64(b"after")
        assert bookie.one(add(3, 5, 0, key="aa"))["error"] == "fenced"
        assert bookie.one(add(4, 5, 0, key="bb"))["error"] == "unauthorized"
        assert bookie.close() == 0
    assert "recovered generation 1" in bookie.stderr()


def test_the_wal_past_its_bound_takes_a_snapshot_by_itself(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        for i in range(8):
            assert bookie.one(add(i, 1, i, bytes([i]) * 100_000)) == {"id": i, "ok": True}
        assert bookie.close() == 0
    assert _stats(bookie.stderr())["snapshots"] >= 1
    with Bookie(data_dir) as bookie:
        bookie.ready()
        for i in range(8):
            assert bookie.one(read(i, 1, i))["data"] == b64(bytes([i]) * 100_000)
        assert bookie.close() == 0


def _two_generations(tmp_path: Path) -> dict[str, bytes]:
    """The files of each step of a snapshot switch: wal-0 with add 1:0 (generation 0), then
    snapshot-1 with it and wal-1 with add 1:1 (generation 1)."""
    work = tmp_path / "gen"
    with Bookie(work) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0, b"zero")) == {"id": 1, "ok": True}
        bookie.kill9()
    saved = {"wal-0": (work / "wal-0").read_bytes()}
    with Bookie(work) as bookie:
        bookie.ready()
        assert bookie.one(op(1, "checkpoint")) == {"id": 1, "ok": True}
        assert bookie.one(add(2, 1, 1, b"one")) == {"id": 2, "ok": True}
        bookie.kill9()
    saved["snapshot-1"] = (work / "snapshot-1").read_bytes()
    saved["wal-1"] = (work / "wal-1").read_bytes()
    return saved


@pytest.mark.parametrize(
    ("layout", "readable", "left"),
    [
        # Crash while writing the new snapshot: generation 0 stands, the .tmp goes.
        ({"wal-0": "wal-0", "snapshot-1.tmp": "snapshot-1/2"}, ["zero"], ["wal-0"]),
        ({"wal-0": "wal-0", "snapshot-1.tmp": "snapshot-1"}, ["zero"], ["wal-0"]),
        # Renamed, no new WAL yet: generation 1, its WAL created, the old one removed.
        ({"wal-0": "wal-0", "snapshot-1": "snapshot-1"}, ["zero"], ["snapshot-1", "wal-1"]),
        # New WAL in use, the old generation not yet removed.
        (
            {"wal-0": "wal-0", "snapshot-1": "snapshot-1", "wal-1": "wal-1"},
            ["zero", "one"],
            ["snapshot-1", "wal-1"],
        ),
        # An empty WAL of a generation whose snapshot never became durable.
        ({"wal-0": "wal-0", "wal-1": ""}, ["zero"], ["wal-0"]),
    ],
    ids=["tmp-torn", "tmp-whole", "renamed", "switched", "empty-next-wal"],
)
def test_every_crash_point_of_the_snapshot_switch_recovers(
    tmp_path: Path, binary: Path, layout: dict[str, str], readable: list[str], left: list[str]
) -> None:
    saved = _two_generations(tmp_path)
    target = tmp_path / "data"
    target.mkdir()
    for name, source in layout.items():
        if source.endswith("/2"):
            whole = saved[source[:-2]]
            content = whole[: len(whole) // 2]
        else:
            content = saved[source] if source else b""
        (target / name).write_bytes(content)
    with Bookie(target) as bookie:
        bookie.ready()
        for entry, text in enumerate(["zero", "one"]):
            answer = bookie.one(read(entry, 1, entry))
            if text in readable:
                assert answer["data"] == b64(text.encode()), answer
            else:
                assert answer["error"] == "no_entry", answer
        assert files(target) == left
        assert bookie.close() == 0


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ({"snapshot-1": "damaged", "wal-1": "wal-1"}, b"snapshot-1 is damaged"),
        ({"snapshot-1": "snapshot-1", "wal-1": "wal-1", "wal-2": "wal-1"}, b"wal-2 holds"),
    ],
    ids=["damaged-snapshot", "records-past-the-snapshot"],
)
def test_what_no_crash_can_leave_stops_the_start(
    tmp_path: Path, binary: Path, layout: dict[str, str], said: bytes
) -> None:
    """Rather than fall back past acknowledged records, or ignore them."""
    saved = _two_generations(tmp_path)
    target = tmp_path / "data"
    target.mkdir()
    for name, source in layout.items():
        if source == "damaged":
            snapshot = bytearray(saved["snapshot-1"])
            snapshot[20] ^= 0xFF
            content = bytes(snapshot)
        else:
            content = saved[source]
        (target / name).write_bytes(content)
    done = subprocess.run([str(binary), str(target)], capture_output=True, timeout=TIMEOUT_S)
    assert done.returncode == 1 and done.stdout == b"", done
    assert said in done.stderr and done.stderr.count(b"\n") == 1, done.stderr


def _last_record(wal: bytes) -> bytes:
    """The WAL's last record (each is a u32 body length, a u32 checksum, the body)."""
    start = offset = 0
    while offset < len(wal):
        start = offset
        offset += 8 + int.from_bytes(wal[offset : offset + 4], "little")
    assert offset == len(wal)
    return wal[start:]


def _torn_tails(good: bytes) -> list[bytes]:
    """What a crash may leave after the last whole record: part of a header, a length
    promising more than is there, a whole record whose bytes are garbage, zeros."""
    last = _last_record(good)
    return [
        good + last[:5],
        good + last[:20],
        good + last[:-1] + bytes([last[-1] ^ 1]),
        good + b"\0" * 4096,
    ]


def test_a_torn_tail_is_cut_at_start_and_the_cut_is_durable(data_dir: Path) -> None:
    with Bookie(data_dir) as bookie:
        bookie.ready()
        assert bookie.ask(add(1, 1, 0, b"kept"), add(2, 1, 1, b"kept too"))[2]["ok"]
        bookie.kill9()
    wal = data_dir / "wal-0"
    good = wal.read_bytes()
    for torn in _torn_tails(good):
        wal.write_bytes(torn)
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 1)) == {"id": 1, "ok": True, "data": b64(b"kept too")}
            assert bookie.one(read(2, 1, 2))["error"] == "no_entry"
            assert wal.stat().st_size == len(good)
            assert bookie.one(add(3, 1, 2, b"after")) == {"id": 3, "ok": True}
            bookie.kill9()
        assert "cut a torn tail" in bookie.stderr()
        with Bookie(data_dir) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 2))["data"] == b64(b"after")
            assert bookie.close() == 0
        wal.write_bytes(good)


# --- the bugs, shown directly --------------------------------------------------------------


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


def _syscalls(trace: Path) -> list[str]:
    """The fdatasync, WAL write (a write to any fd but 1 and 2) and write(1) of an ok answer,
    in order."""
    order = []
    for line in trace.read_text().splitlines():
        if re.search(r"\bfdatasync\(", line):
            order.append("sync")
        elif re.search(r'\bwrite\(1, "\{\\"id\\":-?\d+,\\"ok\\":true', line):
            order.append("ack")
        elif re.search(r"\bwrite\((?![12],)\d+,", line):
            order.append("log")
    return order


@pytest.mark.parametrize("bug", [None, "ack-before-fsync"])
def test_ack_before_fsync_acknowledges_adds_before_their_fdatasync(
    tmp_path: Path, binary: Path, bug: str | None
) -> None:
    """The bookie's own count, and (where strace works) the order of its system calls:
    without the bug every ack follows the fdatasync of its write; with it, none does."""
    data_path = tmp_path / "data"
    bugs = (bug,) if bug else ()
    strace = _working_strace()
    trace = tmp_path / "strace.txt"
    argv = rs_bookie_argv(str(data_path), *bugs)
    if strace is not None:
        argv = [strace, "-f", "-qq", "-e", "trace=fdatasync,write", "-o", str(trace), *argv]
    with Bookie(data_path, argv=argv) as bookie:
        bookie.ready()
        for i in range(5):
            assert bookie.one(add(i, 1, i)) == {"id": i, "ok": True}
        assert bookie.close() == 0
    assert _stats(bookie.stderr())["early_acks"] == (5 if bug else 0)
    if strace is None:
        return
    order = _syscalls(trace)
    acks = [i for i, call in enumerate(order) if call == "ack"]
    assert len(acks) == 5, order
    unsynced = [
        i for i in acks if order[max(j for j in range(i) if order[j] in ("log", "sync"))] == "log"
    ]
    if bug is None:
        assert not unsynced, f"every ack follows the fdatasync of its write: {order}"
    else:
        assert unsynced == acks, f"each add is acked right after its write: {order}"


@pytest.mark.parametrize("bug", [None, "delete-before-fsync"])
def test_delete_before_fsync_answers_a_delete_before_its_fdatasync(
    data_dir: Path, bug: str | None
) -> None:
    with Bookie(data_dir, *((bug,) if bug else ())) as bookie:
        bookie.ready()
        assert bookie.one(add(1, 1, 0)) == {"id": 1, "ok": True}
        assert bookie.one(op(2, "delete", ledger=1)) == {"id": 2, "ok": True}
        assert bookie.one(read(3, 1, 0))["error"] == "no_ledger"
        assert bookie.close() == 0
    stats = _stats(bookie.stderr())
    assert stats["early_deletes"] == (1 if bug else 0)
    assert stats["syncs"] == (1 if bug else 2)


def test_stale_cache_serves_a_deleted_ledgers_cached_entries(tmp_path: Path, binary: Path) -> None:
    for bug, want in ((None, "no_ledger"), ("stale-cache", None)):
        with Bookie(tmp_path / f"data-{bug}", *((bug,) if bug else ())) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 1, 0, b"cached")) == {"id": 1, "ok": True}
            assert bookie.one(add(2, 1, 1, b"not cached")) == {"id": 2, "ok": True}
            assert bookie.one(read(3, 1, 0))["data"] == b64(b"cached")
            # An add over an entry invalidates it, with or without the bug.
            assert bookie.one(add(4, 1, 0, b"again")) == {"id": 4, "ok": True}
            assert bookie.one(read(5, 1, 0))["data"] == b64(b"again")
            assert bookie.one(op(6, "delete", ledger=1)) == {"id": 6, "ok": True}
            assert bookie.one(read(7, 1, 0)).get("error") == want, bug
            assert bookie.one(read(8, 1, 1))["error"] == "no_ledger", "never cached"
            bookie.kill9()
        with Bookie(tmp_path / f"data-{bug}", *((bug,) if bug else ())) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 0))["error"] == "no_ledger", "the cache went"
            assert bookie.close() == 0


def test_serve_torn_tail_serves_a_partial_last_record(tmp_path: Path, binary: Path) -> None:
    payload = bytes(range(256)) * 4
    for bug in (None, "serve-torn-tail"):
        data_path = tmp_path / f"data-{bug}"
        bugs = (bug,) if bug else ()
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 1, 0, b"first")) == {"id": 1, "ok": True}
            assert bookie.one(add(2, 1, 1, payload)) == {"id": 2, "ok": True}
            bookie.kill9()
        wal = data_path / "wal-0"
        good = wal.read_bytes()
        wal.write_bytes(good[:-100])  # the last record cut short, as a torn write leaves it
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            answer = bookie.one(read(1, 1, 1))
            if bug is None:
                assert answer["error"] == "no_entry"
            else:
                assert answer["data"] == b64(payload[:-100]), "a partial record's bytes"
            assert bookie.close() == 0
        wal.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))  # whole, one byte wrong
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            answer = bookie.one(read(1, 1, 1))
            if bug is None:
                assert answer["error"] == "no_entry"
            else:
                assert answer["data"] == b64(payload[:-1] + bytes([payload[-1] ^ 0xFF]))
            assert bookie.close() == 0


@pytest.mark.parametrize("checkpoint", [False, True], ids=["from-the-wal", "from-a-snapshot"])
def test_forget_fences_undoes_a_fence_at_restart(
    tmp_path: Path, binary: Path, checkpoint: bool
) -> None:
    for bug, want in ((None, "fenced"), ("forget-fences", None)):
        data_path = tmp_path / f"data-{bug}"
        bugs = (bug,) if bug else ()
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 5, 0))["ok"]
            assert bookie.one(op(2, "fence", ledger=5, key=KEY)) == {"id": 2, "ok": True}
            assert bookie.one(add(3, 5, 1))["error"] == "fenced"  # within the run: fenced
            if checkpoint:
                assert bookie.one(op(4, "checkpoint")) == {"id": 4, "ok": True}
            bookie.kill9()
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 5, 1)).get("error") == want, bug
            assert bookie.close() == 0


def test_ignore_key_accepts_an_add_with_a_wrong_key(tmp_path: Path, binary: Path) -> None:
    for bug, want in ((None, "unauthorized"), ("ignore-key", None)):
        with Bookie(tmp_path / f"data-{bug}", *((bug,) if bug else ())) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 1, 0)) == {"id": 1, "ok": True}
            assert bookie.one(add(2, 1, 1, key="0bad")).get("error") == want, bug
            # The fence path still checks the key.
            assert bookie.one(op(3, "fence", ledger=1, key="0bad"))["error"] == "unauthorized"
            assert bookie.close() == 0


def test_admit_while_fencing_acknowledges_an_add_behind_a_fence_in_flight(
    tmp_path: Path, binary: Path
) -> None:
    for bug, want in ((None, "fenced"), ("admit-while-fencing", None)):
        with Bookie(tmp_path / f"data-{bug}", *((bug,) if bug else ())) as bookie:
            bookie.ready()
            assert bookie.one(add(1, 4, 0)) == {"id": 1, "ok": True}
            answers = bookie.ask(BUSY, op(2, "fence", ledger=4, key=KEY), add(3, 4, 1))
            assert answers[2] == {"id": 2, "ok": True}
            assert answers[3].get("error") == want, bug
            # Once the fence is durable, both refuse.
            assert bookie.one(add(4, 4, 2))["error"] == "fenced"
            assert bookie.close() == 0


def test_lose_last_acked_loses_the_last_acknowledged_add_at_restart(
    tmp_path: Path, binary: Path
) -> None:
    for bug in (None, "lose-last-acked"):
        data_path = tmp_path / f"data-{bug}"
        bugs = (bug,) if bug else ()
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            for i in range(3):
                assert bookie.one(add(i, 1, i, b"acked %d" % i)) == {"id": i, "ok": True}
            bookie.kill9()
        with Bookie(data_path, *bugs) as bookie:
            bookie.ready()
            assert bookie.one(read(1, 1, 1))["data"] == b64(b"acked 1")
            last = bookie.one(read(2, 1, 2))
            if bug is None:
                assert last["data"] == b64(b"acked 2")
            else:
                assert last["error"] == "no_entry"
            assert bookie.close() == 0


def test_every_bug_has_a_test() -> None:
    assert set(BUGS) == {
        "ack-before-fsync",
        "delete-before-fsync",
        "stale-cache",
        "serve-torn-tail",
        "forget-fences",
        "ignore-key",
        "admit-while-fencing",
        "lose-last-acked",
    }


# --- recorded by bkref record, judged by bkref check-trace ------------------------------------


def _bkref(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", *args],
        capture_output=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip


def test_a_recorded_run_passes_check_trace(tmp_path: Path, binary: Path) -> None:
    trace = tmp_path / "rs.jsonl"
    argv = [
        sys.executable, "-m", "proofs.cli.main", "record", "--trace", str(trace),
        "--profile", "acks=async,state=none,answers=bkref",
        "--", *rs_bookie_argv(str(tmp_path / "data")),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Bookie(tmp_path / "data", argv=argv, env=env) as rec:
        rec.ready()
        answers = rec.ask(*(add(i, 1 + i % 2, i // 2, f"d{i}".encode()) for i in range(20)))
        assert all(a["ok"] for a in answers.values())
        assert rec.one(read(100, 1, 50))["error"] == "no_entry"
        assert rec.one(op(101, "fence", ledger=2, key=KEY)) == {"id": 101, "ok": True}
        assert rec.one(add(102, 2, 50))["error"] == "fenced"
        assert rec.one(op(103, "checkpoint")) == {"id": 103, "ok": True}
        assert rec.one(op(104, "delete", ledger=1)) == {"id": 104, "ok": True}
        assert rec.one(read(105, 1, 0))["error"] == "no_ledger"
        assert rec.close() == 0
    done = _bkref("check-trace", str(trace))
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
