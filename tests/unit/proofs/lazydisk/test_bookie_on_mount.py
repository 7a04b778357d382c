"""bkref's adapter, as a separate process, on the lazy disk: what `bkref conform --lazy-disk`
does to a bookie. It starts on the mount (its directory locks work: a second adapter on the
same directories is refused), acknowledges adds, is SIGKILLed with adds still in flight, the
machine loses power (the plan drops what was not fsynced), and after a restart on what
survived every acknowledged add reads back with its bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from proofs.lazydisk.mount import LazyDisk
from spec.crash import CrashPlan, KeepPrefix, LoseUnsynced, TornWrite
from tests.unit.impl.server.fakes import add, b64
from tests.unit.proofs.cli.test_adapter import AdapterProcess


def _payload(entry: int) -> bytes:
    size = 70_000 if entry % 5 == 0 else 1 + entry * 13
    return bytes((entry + i) % 256 for i in range(size))


@pytest.mark.parametrize(
    "make_plan",
    [
        lambda n: LoseUnsynced(),
        lambda n: TornWrite(n // 2, 3),
        lambda n: KeepPrefix(max(0, n - 1)),
    ],
    ids=["lose-unsynced", "torn-write", "keep-prefix"],
)
def test_acknowledged_adds_survive_kill_and_power_loss(
    lazy: LazyDisk, tmp_path: Path, make_plan: Callable[[int], CrashPlan]
) -> None:
    mount = Path(lazy.mountpoint)
    settings = (
        f"journalDirectories={mount / 'journal'}",
        f"ledgerDirectories={mount / 'ledgers'}",
    )
    acknowledged: set[tuple[int, int]] = set()
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        with AdapterProcess(tmp_path, *settings) as second:
            assert second.wait() != 0
            assert "locked by another" in second.stderr()
        request = 0
        for ledger in (3, 4):
            for entry in range(12):
                request += 1
                adapter.send(add(request, ledger, entry, _payload(entry)))
        sent = {index + 1: (3 + index // 12, index % 12) for index in range(request)}
        for _ in range(request):
            response = adapter.receive()
            assert response["ok"], response
            acknowledged.add(sent[int(str(response["id"]))])
        # More adds in flight when the process dies: whatever of them was acknowledged counts.
        for entry in range(12, 30):
            request += 1
            sent[request] = (5, entry)
            adapter.send(add(request, 5, entry, _payload(entry)))
        adapter.child.kill()
        adapter.child.wait(20)
        for response in adapter.rest():
            if response.get("ok"):
                acknowledged.add(sent[int(str(response["id"]))])
    lazy.kill()
    unsynced = lazy.unsynced_operations()
    assert unsynced > 0, "the entry logs' writes wait for a checkpoint: some must be pending"
    lazy.power_loss(make_plan(unsynced))
    with AdapterProcess(tmp_path, *settings) as adapter:
        adapter.ready()
        for number, (ledger, entry) in enumerate(sorted(acknowledged), 1):
            response = adapter.call({"id": number, "op": "read", "ledger": ledger, "entry": entry})
            assert response.get("data") == b64(_payload(entry)), (ledger, entry, response)
        assert adapter.call({"id": 0, "op": "shutdown"}) == {"id": 0, "ok": True}
        assert adapter.wait() == 0, adapter.stderr()
    assert len(acknowledged) >= 24
