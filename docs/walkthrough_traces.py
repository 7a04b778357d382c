"""Generate the traces that docs/walkthrough.md tells with ``bkref explain``.

Run from the repository root: ``python3 docs/walkthrough_traces.py`` (writes
docs/traces/add-to-durable.jsonl, docs/traces/crash-in-checkpoint.jsonl and
docs/traces/crash-in-compaction.jsonl), or give another directory as the only argument. Every
scenario runs through the refinement harness
(proofs/harness/refinement.py: bkref's Bookie on the simulated disk, checked against the model after
every step), so a trace is written only if the harness accepted every step.

tests/unit/proofs/cli/test_explain.py runs this in a temporary directory and checks that the traces
it makes tell the same story (operations, answers, acks) as the checked-in ones, and that the
step lines pasted in docs/walkthrough.md are what ``bkref explain`` prints today.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script from a checkout

from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement  # noqa: E402
from spec.crash import LoseUnsynced  # noqa: E402
from spec.operations import (  # noqa: E402
    Add,
    Checkpoint,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Crash,
    Delete,
    GcBegin,
    JournalForce,
    Operation,
    Read,
    Restart,
)
from spec.trace import Trace, write_trace  # noqa: E402

TRACES_DIR = ROOT / "docs" / "traces"
KEY = bytes.fromhex("c0ffee")
SOURCE = "docs/walkthrough_traces.py (refinement harness, in-process Bookie, simulated disk)"

#: Six entries of 100 bytes: with logSizeLimit=1400 three fit in a log (1024 header bytes +
#: 3 x 120), so the six fill logs 0 and 1 and the seventh opens log 2.
FILLER_BYTES = 100


def add_to_durable_ops() -> list[Operation]:
    """An add's path to durability, beside an add that only the journal holds and one that
    was never acknowledged."""
    return [
        Add(1, 0, KEY, b"hello, bookie"),
        JournalForce(),
        Checkpoint(),
        Add(1, 1, KEY, b"only in the journal"),
        JournalForce(),
        Add(1, 2, KEY, b"never acknowledged"),
        Crash(LoseUnsynced()),
        Restart(),
        Read(1, 0),
        Read(1, 1),
        Read(1, 2),
    ]


def checkpoint_ops() -> tuple[list[Operation], int]:
    """Adds over three entry logs, all but the last acknowledged, then a checkpoint (at the
    returned position) that the crash interrupts, recovery, and reads."""
    ops: list[Operation] = [Add(1, e, KEY, bytes([65 + e]) * FILLER_BYTES) for e in range(6)]
    ops += [JournalForce(), Add(1, 6, KEY, b"G" * FILLER_BYTES)]
    position = len(ops)
    ops += [Checkpoint(), Crash(LoseUnsynced()), Restart(), Read(1, 0), Read(1, 5), Read(1, 6)]
    return ops, position


def checkpoint_crash_point() -> int:
    """How many disk operations the checkpoint may issue before the machine dies: all of the
    entry-log flush and the index flush (up to and including the index's directory fsync),
    none of the lastMark writes. Found by running the same steps once with every operation
    counted, so the crash point follows the implementation if its operations change."""
    kinds = _operations_of(*checkpoint_ops())
    assert "fsync_dir" in kinds, kinds
    return kinds.index("fsync_dir") + 1


def _operations_of(ops: list[Operation], position: int) -> list[str]:
    """The kinds of the disk operations step ``position`` issues, after the steps before it,
    on an identical run."""
    sut = InProcessBookie(SMALL_SETTINGS)
    harness = Refinement(sut, SMALL_SETTINGS, probe_durable=False)
    harness.run_all(ops[:position])
    kinds: list[str] = []
    sut.disk.on_operation = kinds.append
    harness.run(ops[position])
    sut.disk.on_operation = None
    return kinds


def compaction_ops() -> tuple[list[Operation], int]:
    """Two ledgers share log 0; ledger 2 is deleted, a forced GC compacts log 0 into a new log,
    and the crash interrupts phase 3 (at the returned position); then recovery and reads."""
    ops: list[Operation] = [
        Add(1, 0, KEY, b"A" * FILLER_BYTES),
        Add(2, 0, KEY, b"B" * FILLER_BYTES),
        Add(1, 1, KEY, b"C" * FILLER_BYTES),
        Add(2, 1, KEY, b"D" * FILLER_BYTES),
        JournalForce(),
        Checkpoint(),
        Delete(2),
        GcBegin(force=True),
        CompactCopy(),
        CompactFlush(),
    ]
    position = len(ops)
    ops += [CompactIndex(), Crash(LoseUnsynced()), Restart(), Read(1, 0), Read(1, 1), Read(2, 0)]
    return ops, position


def compaction_crash_point() -> int:
    """How many disk operations phase 3 may issue before the machine dies: the hard link of
    the new log and the fsync of its directory, nothing of the index update. Counted on an
    identical run, as for the checkpoint."""
    kinds = _operations_of(*compaction_ops())
    assert kinds[:2] == ["link", "fsync_dir"], kinds
    return 2


def _run(ops: list[Operation], crash_at: dict[int, int]) -> Trace:
    # The story reads back by hand after the restart: no automatic read-back of every
    # durable entry, so the trace stays short.
    harness = Refinement(
        InProcessBookie(SMALL_SETTINGS), SMALL_SETTINGS, source=SOURCE, probe_durable=False
    )
    for position, op in enumerate(ops):
        harness.run(op, crash_after_ops=crash_at.get(position))
    return harness.trace()


def build_traces() -> dict[str, Trace]:
    """The walkthrough's traces by file name. Asserts the facts the walkthrough tells."""
    durable = _run(add_to_durable_ops(), {})
    reads = [step.result for step in durable.steps if isinstance(step.op, Read)]
    assert [r.data for r in reads[:2]] == [b"hello, bookie", b"only in the journal"], reads
    assert reads[2].error == "no_entry", reads[2]

    ops, position = checkpoint_ops()
    interrupted = _run(ops, {position: checkpoint_crash_point()})
    steps = interrupted.steps
    assert steps[position].result.crashed, "the crash must interrupt the checkpoint"
    replayed = steps[position + 2].result.replayed
    assert replayed, "lastMark had not moved: recovery replays the journal"

    ops, position = compaction_ops()
    compacted = _run(ops, {position: compaction_crash_point()})
    steps = compacted.steps
    assert steps[position].result.crashed, "the crash must interrupt phase 3"
    reads = [step.result for step in steps[position + 3 :]]
    assert [r.data for r in reads[:2]] == [b"A" * FILLER_BYTES, b"C" * FILLER_BYTES], reads
    assert reads[2].error == "no_ledger", reads[2]
    return {
        "add-to-durable.jsonl": durable,
        "crash-in-checkpoint.jsonl": interrupted,
        "crash-in-compaction.jsonl": compacted,
    }


def write_traces(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, trace in build_traces().items():
        path = directory / name
        path.write_text(write_trace(trace), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else TRACES_DIR
    for path in write_traces(directory):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
