"""Durable adds per second, beside a raw fdatasync loop, in the same run on the same disk.

Run: ``.venv/bin/python -m tests.bench.bench_bookie [--adds N] [--wait-ms MS]``.

- raw baseline: a loop of ``os.write`` of B records (1 KiB entry + 20 bytes of framing each)
  and one ``os.fdatasync``, for B = 1 and B = 64: records/s is what the disk gives a perfect
  group commit of that batch size.
- in process: ``Bookie`` + ``BookieDriver`` on real files, a client thread keeping 1 or 64
  adds outstanding (a new add as soon as one is acknowledged); acknowledged adds/s.
- through the adapter: ``bkref adapter`` as a child process, the client pipelining JSON
  lines with 1 or 64 outstanding; acknowledged adds/s.

journalMaxGroupWaitMSec defaults to 0 here (flush as soon as anything is queued), as in the
BookKeeper reference figures in the issue; pass --wait-ms 2 for BookKeeper's default.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

from impl.bookie.bookie import Ack, Bookie
from impl.bookie.driver import BookieDriver
from impl.clock import SystemClock
from impl.config.config import ServerConfig, load_config
from impl.fs.os_backend import OsFileSystem
from spec.ids import EntryId, LedgerId

ENTRY_BYTES = 1024
KEY = b"bench-key"
#: A run that waits this long for an acknowledgement has failed.
TIMEOUT_S = 120.0
#: Adds made (and acknowledged) before the clock starts, in process: they create the first
#: entry log and the preallocated next one, which the raw loop's file has no equivalent of.
WARMUP_ADDS = 256


def raw_fdatasync_loop(directory: str, batch: int, records: int) -> float:
    """Records/s for write-B-records-then-fdatasync, on a file in ``directory``."""
    record = bytes(4 + 16 + ENTRY_BYTES)
    chunk = record * batch
    fd = os.open(os.path.join(directory, "raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        start = time.perf_counter()
        done = 0
        while done < records:
            os.write(fd, chunk)
            os.fdatasync(fd)
            done += batch
        return done / (time.perf_counter() - start)
    finally:
        os.close(fd)


def bench_config(root: str, wait_ms: int) -> ServerConfig:
    return load_config(
        None,
        "bench",
        [
            f"journalDirectories={root}/journal",
            f"ledgerDirectories={root}/ledgers",
            f"journalMaxGroupWaitMSec={wait_ms}",
        ],
    )


def in_process(root: str, outstanding: int, adds: int, wait_ms: int) -> float:
    """Acknowledged adds/s with ``outstanding`` adds in flight, in process.

    The client is kept cheap so that it measures the bookie, not itself: a C-level token
    queue (``queue.SimpleQueue``) holds one token per free slot; an add takes a token, its
    Ack's callback gives it back. So exactly ``outstanding`` adds are in flight, a new one
    goes out as soon as one is acknowledged, and the run ends when every token is back,
    i.e. when every add was acknowledged (a failed Ack is counted and fails the run).
    WARMUP_ADDS adds, acknowledged before the clock starts, are not counted.
    """
    config = bench_config(root, wait_ms)
    bookie = Bookie.open(OsFileSystem(), config, clock=SystemClock(), rng=random.Random(0))
    driver = BookieDriver(bookie, SystemClock(), config)
    driver.start()
    tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
    for _ in range(outstanding):
        tokens.put(None)
    failures: list[Ack] = []
    data = random.Random(1).randbytes(ENTRY_BYTES)
    ledgers = [LedgerId(1 + ledger) for ledger in range(8)]

    def on_ack(ack: Ack) -> None:
        if ack.error is not None:
            failures.append(ack)
        tokens.put(None)

    add, take = bookie.add_entry, tokens.get

    def run(first: int, count: int) -> None:
        for entry in range(first, first + count):
            take(True, TIMEOUT_S)
            add(ledgers[entry % 8], EntryId(entry // 8), KEY, data).add_done_callback(on_ack)
        for _ in range(outstanding):
            take(True, TIMEOUT_S)  # every add acknowledged

    try:
        run(0, WARMUP_ADDS)  # untimed: the first entry log, the preallocated one, the caches
        for _ in range(outstanding):
            tokens.put(None)
        start = time.perf_counter()
        run(WARMUP_ADDS, adds)
        elapsed = time.perf_counter() - start
        assert not failures, [ack.error for ack in failures[:3]]
        return adds / elapsed
    finally:
        driver.stop()
        bookie.shutdown()


#: One add request, filled in with (id, ledger, entry); key and data are the same in every
#: add. Written as a client library would write it: compact JSON, one object a line.
ADD_LINE = b'{"id":%d,"op":"add","ledger":%d,"entry":%d,"key":"%s","data":"%s"}\n'
#: One acknowledgement of an add, as the adapter writes it.
ACK = re.compile(rb'\{"id":(-?[0-9]+),"ok":true\}\n')


def through_adapter(root: str, outstanding: int, adds: int, wait_ms: int) -> float:
    """Acknowledged adds/s with ``outstanding`` requests in flight through the stdio adapter.

    The client must cost less than the adapter, or it measures itself (issue 12: the first
    client, a json.dumps and a flush per request gated by a threading.Semaphore, a json.loads
    per response, spent more of the two cores than the adapter did). So, as an asynchronous
    client library does: the reader thread reads whatever responses have arrived in one
    ``os.read``, checks every one of them (each must be exactly an ``ok`` answer, and every
    id is answered once), and hands the number answered to the writer in one token; the
    writer then sends that many new requests, each a JSON line of its own, in one
    ``os.write``. So exactly ``outstanding`` adds are in flight, a new one goes out as soon
    as the writer sees an answer, and the adapter parses one request per line as always.
    """
    args = [
        sys.executable, "-m", "proofs.cli.main", "adapter",
        "--set", f"journalDirectories={root}/journal",
        "--set", f"ledgerDirectories={root}/ledgers",
        "--set", f"journalMaxGroupWaitMSec={wait_ms}",
    ]  # fmt: skip
    child = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
    )
    assert child.stdin is not None and child.stdout is not None
    out_fd, in_fd = child.stdin.fileno(), child.stdout.fileno()
    try:
        pending = b""
        while b"\n" not in pending:
            piece = os.read(in_fd, 65536)
            assert piece, "the adapter ended before its ready line"
            pending += piece
        ready_line, pending = pending.split(b"\n", 1)
        assert json.loads(ready_line).get("event") == "ready", ready_line
        data = base64.b64encode(random.Random(1).randbytes(ENTRY_BYTES))
        key = KEY.hex().encode()
        answered: queue.SimpleQueue[int] = queue.SimpleQueue()
        errors: list[bytes] = []
        seen = bytearray(adds)

        def reader(rest: bytes) -> None:
            count = 0
            while count < adds:
                piece = os.read(in_fd, 1 << 20)
                if not piece:
                    errors.append(b"the adapter closed its output")
                    answered.put(adds)
                    return
                rest += piece
                cut = rest.rfind(b"\n") + 1
                lines, rest = rest[:cut], rest[cut:]
                ids = [int(found) for found in ACK.findall(lines)]
                if len(ids) != lines.count(b"\n"):
                    errors.append(lines[:300])
                for request_id in ids:
                    if not 0 <= request_id < adds or seen[request_id]:
                        errors.append(b"id %d answered twice or unknown" % request_id)
                    else:
                        seen[request_id] = 1
                count += lines.count(b"\n")
                answered.put(lines.count(b"\n"))

        def send(first: int, count: int) -> None:
            lines = b"".join(
                ADD_LINE % (entry, 1 + entry % 8, entry // 8, key, data)
                for entry in range(first, first + count)
            )
            view = memoryview(lines)
            while view:
                view = view[os.write(out_fd, view) :]

        thread = threading.Thread(target=reader, args=(pending,))
        start = time.perf_counter()
        thread.start()
        sent = min(outstanding, adds)
        send(0, sent)
        while sent < adds:
            count = min(answered.get(True, TIMEOUT_S), adds - sent)
            send(sent, count)
            sent += count
        thread.join(TIMEOUT_S)
        elapsed = time.perf_counter() - start
        assert not errors, errors[:3]
        assert all(seen), "some adds were not answered"
        os.write(out_fd, b'{"id":-1,"op":"shutdown"}\n')
        child.stdin.close()
        child.wait(30)
        return adds / elapsed
    finally:
        if child.poll() is None:
            child.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=4000, help="adds per run at 64 outstanding")
    parser.add_argument("--wait-ms", type=int, default=0, help="journalMaxGroupWaitMSec")
    parser.add_argument(
        "--outstanding", default="1,64", help="comma-separated numbers of adds in flight"
    )
    parser.add_argument("--runs", type=int, default=1, help="repeat every measurement")
    args = parser.parse_args()
    counts = [int(word) for word in args.outstanding.split(",")]
    for outstanding in [count for count in counts for _ in range(args.runs)]:
        adds = args.adds if outstanding > 1 else max(200, args.adds // 10)
        with tempfile.TemporaryDirectory(dir=".") as root:
            raw = raw_fdatasync_loop(root, outstanding, adds)
        with tempfile.TemporaryDirectory(dir=".") as root:
            ours = in_process(root, outstanding, adds, args.wait_ms)
        with tempfile.TemporaryDirectory(dir=".") as root:
            adapter = through_adapter(root, outstanding, adds, args.wait_ms)
        print(
            f"{outstanding:>2} outstanding, {adds} adds of 1 KiB: raw batch-{outstanding} "
            f"{raw:8.0f}/s | in process {ours:8.0f}/s ({ours / raw:.2f}x) | "
            f"adapter {adapter:8.0f}/s ({adapter / raw:.2f}x)"
        )


if __name__ == "__main__":
    main()
