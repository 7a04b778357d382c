"""A bookie with a deliberate flaw, for the runner's tests: bkref's own adapter behind a
relay that changes what it says. Written for tests/unit/proofs/conform/test_runner.py.

Usage: python fake_bookie.py MODE DATA_DIR -- ADAPTER ARGV...

Modes:
- ``relay``: changes nothing (the relay itself must pass);
- ``wrong-read``: every ok read of an entry other than 0 answers its data with the first
  byte flipped (the model must refuse it);
- ``lose-after-restart``: after a restart (a marker file in DATA_DIR says one happened),
  every read of entry 0 answers ``no_entry`` -- an acknowledged add lost;
- ``lie-gc``: the ready line claims ``gc`` and every ``gc`` request is answered
  ``unsupported``;
- ``hide-gc``: the ready line does not list ``gc``, but ``gc`` still works (a v2 bookie
  must answer what it does not list with ``unsupported``);
- ``format-elsewhere``: the ready line's ``format`` names empty directories under
  DATA_DIR/elsewhere instead of the adapter's own (its files are not where it says);
- ``cannot-start``: writes a reason on stderr and exits 3 before any ready line;
- ``per-ledger-declared``: runs the adapter with an entry log per ledger (settings the
  runner cannot see in the command) and says so in the ready line's ``config``;
- ``per-ledger-undeclared``: the same without saying so.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading

#: The settings of the per-ledger modes.
PER_LEDGER = {"entryLogPerLedgerEnabled": "true", "maximumNumberOfActiveEntryLogs": "2"}


def main() -> int:
    mode, data_dir = sys.argv[1], sys.argv[2]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    if mode == "cannot-start":
        print("fake bookie: cannot open the journal: disk on fire", file=sys.stderr, flush=True)
        return 3
    marker = os.path.join(data_dir, "fake-started")
    restarted = os.path.exists(marker)
    with open(marker, "a"):
        pass
    if mode.startswith("per-ledger-"):
        for key, value in PER_LEDGER.items():
            argv += ["--set", f"{key}={value}"]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    ops: dict[int, dict[str, object]] = {}
    lock = threading.Lock()
    out = sys.stdout.buffer

    def emit(document: dict[str, object]) -> None:
        with lock:
            out.write(json.dumps(document, separators=(",", ":")).encode() + b"\n")
            out.flush()

    def relay_out() -> None:
        assert child.stdout is not None
        first = True
        for raw in child.stdout:
            document = json.loads(raw)
            if first:
                first = False
                if mode == "lie-gc" and "gc" not in document.get("ops", []):
                    document["ops"] = sorted([*document.get("ops", []), "gc"])
                if mode == "hide-gc":
                    document["ops"] = [op for op in document.get("ops", []) if op != "gc"]
                if mode == "per-ledger-declared":
                    document["config"] = dict(PER_LEDGER)
                if mode == "format-elsewhere":
                    elsewhere = os.path.join(os.path.abspath(data_dir), "elsewhere")
                    dirs = [os.path.join(elsewhere, name) for name in ("journal", "ledgers")]
                    for path in dirs:
                        os.makedirs(path, exist_ok=True)
                    document["format"] = {"journal_dirs": dirs[:1], "ledger_dirs": dirs[1:]}
                emit(document)
                continue
            with lock:
                request = ops.pop(document.get("id"), None)
            if request is not None and request["op"] == "read" and document.get("ok"):
                if mode == "wrong-read" and request["entry"] != 0:
                    data = bytearray(base64.b64decode(str(document["data"])))
                    if data:
                        data[0] ^= 0xFF
                    else:
                        data = bytearray(b"x")
                    document["data"] = base64.b64encode(bytes(data)).decode()
                if mode == "lose-after-restart" and restarted and request["entry"] == 0:
                    document = {
                        "id": document["id"],
                        "ok": False,
                        "error": "no_entry",
                        "message": "fake bookie: lost",
                    }
            emit(document)

    thread = threading.Thread(target=relay_out)
    thread.start()
    for raw in sys.stdin.buffer:
        request = json.loads(raw)
        if mode == "lie-gc" and request.get("op") == "gc":
            emit(
                {
                    "id": request["id"],
                    "ok": False,
                    "error": "unsupported",
                    "message": "fake bookie: no gc after all",
                }
            )
            continue
        with lock:
            ops[request["id"]] = request
        child.stdin.write(raw)
        child.stdin.flush()
    child.stdin.close()
    code = child.wait()
    thread.join()
    return code


if __name__ == "__main__":
    sys.exit(main())
