"""kill -9 of ``bkref adapter`` right after a burst of acknowledged adds (issue 3, item 9, on
real files; spec/properties.md properties 1 and 2).

A client pipelines a burst of adds across several ledgers with a fence in the middle, reads
responses until the fence and enough adds are acknowledged, and SIGKILLs the process at once,
with adds still in flight. Started again on the same directories, the adapter must return
every acknowledged add with the same bytes, keep the fenced ledger fenced (an add to it gets
``fenced``), and not hold any add that was refused as fenced before the crash.

What this cannot show: loss of data the kernel had not written to the device (a kill -9
leaves the page cache intact; the simulated disk's crash plans cover power loss, see
proofs/crash/bookie_check.py).
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
import signal
import threading
from pathlib import Path

import attrs
import pytest

from tests.unit.impl.server.fakes import KEY, add
from tests.unit.proofs.cli.test_adapter import READ_TIMEOUT_S, AdapterProcess, dirs

LEDGERS = 5
#: Which of a burst's ledgers is fenced (its offset from the burst's base).
FENCED = 3
FENCE_ID = 1_000_000


@attrs.frozen
class Burst:
    """Adds with ids 0.. to ledgers ``base .. base + LEDGERS - 1``, and a fence of ledger
    ``base + FENCED`` (id FENCE_ID) after ``fence_after`` of them."""

    adds: int
    base: int
    seed: int
    fence_after: int

    @property
    def fenced_ledger(self) -> int:
        return self.base + FENCED

    def where(self, request_id: int) -> tuple[int, int]:
        """(ledger, entry) of the add with this id."""
        return self.base + request_id % LEDGERS, request_id // LEDGERS

    def requests(self) -> tuple[list[dict[str, object]], dict[int, bytes]]:
        """The requests in order, and the data of each add by id."""
        rng = random.Random(self.seed)
        requests: list[dict[str, object]] = []
        data: dict[int, bytes] = {}
        for i in range(self.adds):
            if i == self.fence_after:
                fence = {"id": FENCE_ID, "op": "fence", "ledger": self.fenced_ledger}
                requests.append(fence | {"key": KEY.hex()})
            data[i] = rng.randbytes(rng.randint(0, 1500))
            requests.append(add(i, *self.where(i), data[i]))
        return requests, data


def _send_until_killed(adapter: AdapterProcess, requests: list[dict[str, object]]) -> None:
    # The kill may land while requests are still being written.
    with contextlib.suppress(BrokenPipeError):
        adapter.send(*requests)


def crash_and_check(tmp_path: Path, burst: Burst, acked_before_kill: int) -> int:
    """One round; returns how many adds were acknowledged before the kill."""
    settings = (*dirs(tmp_path), "logSizeLimit=65536", "journalMaxGroupWaitMSec=1")
    requests, data = burst.requests()
    where = burst.where
    acked: set[int] = set()
    refused_fenced: set[int] = set()
    with AdapterProcess(tmp_path, *settings, args=("--seed", str(burst.seed))) as adapter:
        adapter.ready()
        writer = threading.Thread(target=_send_until_killed, args=(adapter, requests))
        writer.start()
        fenced = False
        while not (fenced and len(acked) >= acked_before_kill):
            response = adapter.receive()
            request_id = response["id"]
            assert isinstance(request_id, int), response
            if request_id == FENCE_ID:
                assert response == {"id": FENCE_ID, "ok": True}
                fenced = True
            elif response["ok"]:
                acked.add(request_id)
            else:
                assert response["error"] == "fenced", response
                refused_fenced.add(request_id)
        os.kill(adapter.child.pid, signal.SIGKILL)
        assert adapter.wait() == -signal.SIGKILL
        writer.join(READ_TIMEOUT_S)
    # Refused adds are those to the fenced ledger written after the fence, and no add to it
    # written after the fence was acknowledged.
    assert all(where(i)[0] == burst.fenced_ledger for i in refused_fenced)
    assert all(i >= burst.fence_after for i in refused_fenced)
    assert all(i < burst.fence_after for i in acked if where(i)[0] == burst.fenced_ledger)
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        reads = sorted(acked | refused_fenced)
        adapter.send(
            *({"id": i, "op": "read", "ledger": where(i)[0], "entry": where(i)[1]} for i in reads)
        )
        answers: dict[object, dict[str, object]] = {}
        for _ in reads:
            response = adapter.receive()
            answers[response["id"]] = response
        for i in acked:
            assert answers[i] == {"id": i, "ok": True, "data": base64.b64encode(data[i]).decode()}
        for i in refused_fenced:
            assert answers[i]["error"] == "no_entry", answers[i]
        late = adapter.call(add(2 * FENCE_ID, burst.fenced_ledger, 10**6, b"after the crash"))
        assert late["error"] == "fenced", late
        wrong = {"id": 2 * FENCE_ID + 1, "op": "fence", "ledger": burst.fenced_ledger, "key": "00"}
        assert adapter.call(wrong)["error"] == "unauthorized"
        adapter.close_stdin()
        assert adapter.wait() == 0
    return len(acked)


def test_acknowledged_adds_and_fence_survive_kill_9(tmp_path: Path) -> None:
    acked = crash_and_check(
        tmp_path, Burst(adds=500, base=0, seed=1, fence_after=250), acked_before_kill=200
    )
    assert acked >= 200


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_kill_9_at_many_points(tmp_path: Path, seed: int) -> None:
    # The kill lands after a different number of acknowledgements each time, and each round
    # crashes the directories the previous round left (recovery of a recovered bookie).
    for round_ in range(3):
        fence_after = 100 + 500 * round_ + 37 * seed
        burst = Burst(adds=2000, base=10 * round_, seed=seed, fence_after=fence_after)
        crash_and_check(tmp_path, burst, acked_before_kill=fence_after + 50 * seed)
