"""``bkref check-trace TRACE``: replay a recorded trace against the model and the properties.

A trace (spec/trace.md) records one history of a bookie. This command decides whether a
correct bookie could have produced it, step by step, exactly as the refinement harness
judges a live run: the replay is proofs/harness/replay.py, over the harness's own judge
(proofs/harness/judge.py: ``BookieModel.step``, ``compare`` with the recorded state, the
properties of spec/properties.md, the invariants). It stops at the first step that fails
and prints it with the steps leading to it, in words.

This module is the command only: its arguments, its exit codes, and the steps in words
(:func:`describe_op` through :data:`DESCRIBERS`, one entry per operation, checked against
the operation registry of spec/operations.py at import; :func:`describe_step`,
:func:`context_lines`), which ``bkref explain`` (proofs/cli/explain.py) shares.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from impl.limits import LIMITS
from proofs.cli.input_file import InputError, read_input, read_stdin
from proofs.harness.replay import ReplayError, Verdict, plural, replay_trace
from spec.errors import TraceError
from spec.operations import (
    Add,
    AdvanceClock,
    CheckDirs,
    Checkpoint,
    CheckpointFlush,
    CheckpointPersist,
    CompactCopy,
    CompactFlush,
    CompactIndex,
    Crash,
    Delete,
    DiskFull,
    DiskWritable,
    FailFsync,
    FailRead,
    FailWrite,
    Fence,
    Gc,
    GcBegin,
    JournalAck,
    JournalForce,
    JournalSync,
    JournalWrite,
    Operation,
    Preallocate,
    Read,
    Restart,
    Rotate,
    Shutdown,
    WriteClose,
    answered_later,
    require_complete,
)
from spec.trace import Step, Trace, read_trace_bytes

#: The trace is one a correct bookie could have produced.
EXIT_OK = 0
#: A step diverges from the model, or breaks a property.
EXIT_DIVERGED = 1
#: The input is not a trace, cannot be read, or describes a history the model cannot run.
EXIT_UNUSABLE = 2

#: Steps shown before the failing one, unless ``--context`` says otherwise.
DEFAULT_CONTEXT_STEPS = 8
#: Hex digits of a master key shown in a step's description.
KEY_SHOWN_HEX_MAX = 16

EPILOG = f"""\
TRACE is a trace file (spec/trace.md, JSON lines), or - to read it from stdin.

exit codes:
  {EXIT_OK}  every step agrees with the model and keeps the properties of spec/properties.md
  {EXIT_DIVERGED}  a step diverges from the model or breaks a property: it is printed with the steps
     leading to it (tell the story with: bkref explain TRACE --from N --to M)
  {EXIT_UNUSABLE}  TRACE cannot be read, is not a valid trace, or holds a history the model
     cannot run
"""


# --- steps in words -------------------------------------------------------------------------


def describe_op(op: Operation) -> str:
    """The operation in a few words: ``add 1:3 (100 bytes, key 6b)``."""
    return DESCRIBERS[type(op)](op)


def _add(op: Add) -> str:
    return f"add {op.ledger}:{op.entry} ({len(op.data)} bytes, key {_key(op.key)})"


def _read(op: Read) -> str:
    return f"read {op.ledger}:{op.entry}"


def _fence(op: Fence) -> str:
    return f"fence ledger {op.ledger} (key {_key(op.key)})"


def _write_close(op: WriteClose) -> str:
    return f"write-close ledger {op.ledger} (key {_key(op.key)})"


def _delete(op: Delete) -> str:
    return f"delete ledger {op.ledger}"


def _crash(op: Crash) -> str:
    return f"crash: {op.plan.describe()}"


def _name(op: Operation) -> str:
    """An operation without fields, by its name: ``journal force``."""
    return op.name.replace("_", " ")


def _disk_full(op: DiskFull) -> str:
    return f"disk full: {op.where.replace('_', ' ')}"


def _advance_clock(op: AdvanceClock) -> str:
    return f"the clock moves on {op.seconds} s"


def _gc(op: Gc | GcBegin) -> str:
    """A GC cycle, ``gc (forced)`` when forced."""
    return f"{_name(op)} (forced)" if op.force else _name(op)


def _aimed(op: FailFsync | FailWrite | FailRead) -> str:
    """A fault armed against a kind of file: ``fail fsync (journal)``."""
    return f"{_name(op)} ({op.file.replace('_', ' ')})"


#: Every operation in a few words, checked against the registry at import.
DESCRIBERS: Mapping[type[Any], Callable[[Any], str]] = require_complete(
    {
        Add: _add,
        Read: _read,
        Fence: _fence,
        WriteClose: _write_close,
        Delete: _delete,
        Checkpoint: _name,
        JournalForce: _name,
        JournalWrite: _name,
        JournalSync: _name,
        JournalAck: _name,
        CheckpointFlush: _name,
        CheckpointPersist: _name,
        Rotate: _name,
        Preallocate: _name,
        CheckDirs: _name,
        Gc: _gc,
        GcBegin: _gc,
        CompactCopy: _name,
        CompactFlush: _name,
        CompactIndex: _name,
        Crash: _crash,
        Restart: _name,
        Shutdown: _name,
        DiskFull: _disk_full,
        DiskWritable: _name,
        AdvanceClock: _advance_clock,
        FailFsync: _aimed,
        FailWrite: _aimed,
        FailRead: _aimed,
    },
    "check-trace's describers (proofs/cli/check_trace.py DESCRIBERS)",
)

#: What an ack acknowledges, for every operation answered later: (ledger, entry), or
#: (ledger, None) when the operation is about a whole ledger.
ACK_TARGETS: Mapping[type[Any], Callable[[Any], tuple[int, int | None]]] = require_complete(
    {Add: lambda op: (op.ledger, op.entry), Fence: lambda op: (op.ledger, None)},
    "check-trace's ack targets (proofs/cli/check_trace.py ACK_TARGETS)",
    among=answered_later,
)


def _key(key: bytes) -> str:
    text = key.hex()
    if not text:
        return "(empty)"
    return text if len(text) <= KEY_SHOWN_HEX_MAX else text[:KEY_SHOWN_HEX_MAX] + "..."


def describe_step(step: Step, steps: Sequence[Step]) -> str:
    """One line: the operation, its answer, and the acks that arrived while it ran
    (``steps`` is the whole trace, to name the acknowledged operations):
    ``journal force -> ok; acks: steps 0-4 (add 1:0-4)``."""
    text = f"{describe_op(step.op)} -> {step.result.describe()}"
    done = [c.step for c in step.completed if c.error is None]
    if done:
        noun = "step" if len(done) == 1 else "steps"
        ops = [steps[i].op for i in done]
        text += f"; acks: {noun} {number_ranges(sorted(done))} ({_targets(ops)})"
    for failed in (c for c in step.completed if c.error is not None):
        target = describe_op(steps[failed.step].op).split(" (", 1)[0]
        text += f"; ack of step {failed.step} ({target}) failed: {failed.error}"
    for fault in step.faults:
        text += f"; fault fired: {fault.describe()}"
    return text


def _targets(ops: Sequence[Operation]) -> str:
    """Acknowledged adds and fences, compactly: ``add 1:0-4, 2:0; fence 3`` (in
    ACK_TARGETS's order)."""
    parts = []
    for cls, target in ACK_TARGETS.items():
        pairs = [target(op) for op in ops if type(op) is cls]
        if not pairs:
            continue
        entries: dict[int, list[int]] = {}
        for ledger, entry in pairs:
            if entry is not None:
                entries.setdefault(ledger, []).append(entry)
        if entries:
            text = ", ".join(
                f"{ledger}:{number_ranges(sorted(set(ids)))}"
                for ledger, ids in sorted(entries.items())
            )
        else:
            text = number_ranges(sorted({ledger for ledger, _ in pairs}))
        parts.append(f"{cls.name} {text}")
    return "; ".join(parts)


def number_ranges(numbers: Sequence[int]) -> str:
    """Sorted distinct numbers as runs: ``[0, 1, 2, 4]`` -> ``0-2, 4``."""
    assert list(numbers) == sorted(set(numbers)), numbers
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def context_lines(steps: Sequence[Step], failing: int, context_steps: int) -> list[str]:
    """The steps leading to step ``failing`` and that step, one line each, numbered."""
    assert 0 <= failing < len(steps), (failing, len(steps))
    assert context_steps >= 0, context_steps
    first = max(0, failing - context_steps)
    width = len(str(failing))
    return [
        f"{'>' if i == failing else ' '} {i:>{width}}  {describe_step(steps[i], steps)}"
        for i in range(first, failing + 1)
    ]


# --- the command ----------------------------------------------------------------------------


def load_trace(path: str) -> tuple[str, Trace]:
    """The trace's name for messages and the trace, from a file or (``-``) stdin. Raises
    ReplayError when it cannot be read and TraceError when it is not a valid trace."""
    what = "a trace file (spec/trace.md), or - for stdin"
    most, field = LIMITS.trace_file_max_bytes, "trace_file_max_bytes"
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            data = read_stdin(what=what, max_bytes=most, field=field)
        else:
            data = read_input(path, what=what, max_bytes=most, field=field)
    except InputError as exc:
        raise ReplayError(f"cannot read it: {exc}") from None
    return name, read_trace_bytes(data, name)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref check-trace``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("trace", metavar="TRACE", help="a trace file, or - for stdin")
    parser.add_argument(
        "--context",
        metavar="K",
        type=whole_number,
        default=DEFAULT_CONTEXT_STEPS,
        help=f"steps shown before a failing one (default {DEFAULT_CONTEXT_STEPS})",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON object")


def whole_number(text: str) -> int:
    """An argparse type: a whole number, 0 or more (a step count, a step number)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (steps count from 0), got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    """Check ``args.trace``; print the verdict; return the exit code (see EPILOG)."""
    path: str = args.trace
    try:
        name, trace = load_trace(path)
        verdict = replay_trace(trace)
    except (TraceError, ReplayError) as exc:
        if args.json:
            print(json.dumps({"trace": path, "ok": False, "error": str(exc)}))
        print(f"bkref check-trace: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if args.json:
        text = json.dumps(verdict_json(name, verdict, args.context))
    else:
        text = "\n".join(format_verdict(name, verdict, args.context))
    try:
        print(text, flush=True)
    except BrokenPipeError:
        silence_stdout()
    return EXIT_OK if verdict.ok else EXIT_DIVERGED


def silence_stdout() -> None:
    """The reader of stdout went away (``| head``): send the rest, and the flush at exit,
    to /dev/null instead of ending in a BrokenPipeError traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def format_verdict(name: str, verdict: Verdict, context_steps: int) -> list[str]:
    """The text report: one line when the trace is valid; else the failure and its context."""
    failure = verdict.failure
    if failure is None:
        return [f"{name}: ok: {verdict.summary().describe()}; every step agrees with the model"]
    steps = verdict.trace.steps
    first = max(0, failure.step - context_steps)
    shown = failure.step - first
    lines = [f"{name}: {failure.describe()}", ""]
    lines.append(f"the {plural(shown, 'step', 'steps')} leading to it, and the step:")
    lines += ["  " + line for line in context_lines(steps, failure.step, context_steps)]
    lines += ["", f"the story: bkref explain {name} --from {first} --to {failure.step}"]
    return lines


def verdict_json(name: str, verdict: Verdict, context_steps: int) -> dict[str, Any]:
    """The verdict as one JSON object (for CI)."""
    summary = verdict.summary()
    document: dict[str, Any] = {
        "trace": name,
        "ok": verdict.ok,
        "summary": attrs.asdict(summary),
        "failure": None,
    }
    failure = verdict.failure
    if failure is not None:
        steps = verdict.trace.steps
        first = max(0, failure.step - context_steps)
        document["failure"] = {
            **attrs.asdict(failure),
            "context": [
                {"step": i, "text": describe_step(steps[i], steps)}
                for i in range(first, failure.step + 1)
            ],
        }
    return document
