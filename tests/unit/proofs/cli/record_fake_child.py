"""A fake bookie speaking the adapter protocol (spec/adapter.md), for the tests of
``bkref record`` (test_record.py): small and deterministic, so the tests decide when each
response is written.

Modes (argv[1]): ``eager`` answers adds and fences at once; ``lazy`` queues their answers
until a synchronous request, a ``write_close`` (which answers the queue, then
``unsupported``; a ``gc`` answers the queue, then GC_ANSWER) or the
end of input; ``noready`` exits 3 before its ready line; ``fail-at-eof`` answers the queue
at the end of input and exits 1; ``copy`` writes every input line, byte for byte, to the file
argv[2], and writes the odd output lines of RAW_OUTPUT. A read of ledger 666 kills the
process with SIGKILL (a crash with adds in flight).
"""

from __future__ import annotations

import json
import os
import signal
import sys

#: A gc's statistics: a cycle that did nothing.
GC_ANSWER = {
    "compaction": "none",
    "logs_deleted": 0,
    "logs_compacted": 0,
    "entries_moved": 0,
    "bytes_reclaimed": 0,
}
#: What ``copy`` writes after its ready line: spaces, a non-JSON line, an escape, no "\n".
RAW_OUTPUT = (
    b'{ "id" : null , "ok":false,"error":"bad_request","message":"x"}\n'
    b"not json\n"
    b'{"id":null,"ok":true,"m":"\\u00e9"}'
)
READY = (
    b'{"id":null,"ok":true,"event":"ready","version":1,"max_data_bytes":64,'
    b'"max_key_bytes":8,"max_line_bytes":9000}\n'
)
STATE = {
    "entry_logs": [{"log_id": 0, "state": "active", "ledgers": [7], "ledger_bytes": [[7, 25]]}],
    "least_unflushed_log_id": 0,
    "last_mark": {"journal_id": 0, "offset": 0},
    "journal_mark": {"journal_id": 1, "offset": 512},
    "current_log_id": 0,
    "ledgers": [{"ledger_id": 7, "last_entry": 0, "fenced": False}],
    "fenced_ledgers": [],
    "deleted_ledgers": [],
    "compaction_files": [],
}


def out(obj: dict[str, object]) -> None:
    sys.stdout.buffer.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def main() -> int:
    mode = sys.argv[1]
    if mode == "noready":
        return 3
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    if mode == "copy":
        sys.stdout.buffer.write(RAW_OUTPUT)
        sys.stdout.buffer.flush()
        with open(sys.argv[2], "wb") as copy:
            for line in sys.stdin.buffer:
                copy.write(line)
                copy.flush()
        return 0
    queued: list[dict[str, object]] = []
    store: dict[tuple[int, int], str] = {}
    fenced: set[int] = set()

    def flush() -> None:
        for obj in queued:
            out(obj)
        queued.clear()

    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
        except ValueError:
            out({"id": None, "ok": False, "error": "bad_request", "message": "not JSON"})
            continue
        rid, op = req.get("id"), req.get("op")
        if op in ("add", "fence"):
            answer: dict[str, object] = {"id": rid, "ok": True}
            if op == "fence":
                fenced.add(req["ledger"])
            elif req["ledger"] in fenced:
                answer = {"id": rid, "ok": False, "error": "fenced", "message": "fenced"}
            else:
                store[(req["ledger"], req["entry"])] = req["data"]
            if mode == "lazy" or mode == "fail-at-eof":
                queued.append(answer)
            else:
                out(answer)
        elif op == "read":
            if req["ledger"] == 666:
                os.kill(os.getpid(), signal.SIGKILL)
            flush()
            data = store.get((req["ledger"], req["entry"]))
            if data is None:
                out({"id": rid, "ok": False, "error": "no_entry", "message": "no entry"})
            else:
                out({"id": rid, "ok": True, "data": data})
        elif op in ("delete", "checkpoint"):
            flush()
            out({"id": rid, "ok": True})
        elif op == "inspect":
            out({"id": rid, "ok": True, "state": STATE})
        elif op == "write_close":
            flush()
            out({"id": rid, "ok": False, "error": "unsupported", "message": "no write_close"})
        elif op == "gc":
            flush()
            out({"id": rid, "ok": True, **GC_ANSWER})
        elif op == "shutdown":
            flush()
            out({"id": rid, "ok": True})
            return 0
        else:
            out({"id": rid, "ok": False, "error": "bad_request", "message": "unknown op"})
    flush()
    return 1 if mode == "fail-at-eof" else 0


if __name__ == "__main__":
    raise SystemExit(main())
