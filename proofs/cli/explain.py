"""``bkref explain TRACE [--from N] [--to N] [--state]``: tell a trace step by step, in words.

The teaching tool of issue 4 (docs/walkthrough.md is built on its output). It replays a
trace (spec/trace.md) against the model exactly as ``bkref check-trace`` does (the shared
:class:`proofs.harness.replay.Replay`, over the refinement harness's judge) and, for each
step, tells:

- what the step did and what it answered, and the acks that arrived while it ran;
- what the model says it means (its notes: what is written, what is queued for the journal,
  what a crash now may lose, what a crash left possible, what recovery resolved);
- what is durable now and what is not yet, from the model's ledgers (``durable``: an
  acknowledged add survives any crash; ``pending``: accepted, no ack, a crash now may lose
  it; after a crash, ``unknown``: pending at the crash, survival not yet seen);
- for a bookie whose trace claims state ``full`` (bkref's own, or one that writes
  BookKeeper's formats), the entry logs as the model has them (bytes written per ledger, how
  much is fsynced), how many acks since the last checkpoint rely on the journal alone, and
  what recovery did to lastMark. For any other bookie the story speaks only of what a
  client can see (acknowledged, durable, fenced, the ledger's key), in spec/adapter.md's
  terms: it has no journal or entry logs to tell of;
- with ``--state``, the abstract state the implementation recorded after the step.

A divergence or a broken property is told as such (what the implementation did, what the
model allows) and ends the story with exit code 1; input errors exit 2 as in check-trace.
Every step is replayed (the model must see them all); ``--from``/``--to`` only choose which
are told, and the replay stops after ``--to``. What a step of each operation means to the
story beyond the model's notes (it checkpoints, it starts or ends a run, it is a recovery)
is one table, :data:`TELLINGS`, checked against the operation registry (spec/operations.py)
at import.

Not verified: the rendering is of the model's state, which after each step agrees with the
implementation's recorded state on what spec/state.py compares; the entry-log bytes shown
are the model's, and after a restart or during a fault they are the recorded layout's.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from models.bookie.bookie import BookieModel
from models.index.ledger_index import Sure
from proofs.cli.check_trace import (
    EXIT_DIVERGED,
    EXIT_OK,
    EXIT_UNUSABLE,
    describe_step,
    load_trace,
    number_ranges,
    silence_stdout,
    whole_number,
)
from proofs.harness.replay import Replay, ReplayError, StepReport, summarize
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
    Preallocate,
    Read,
    Restart,
    Rotate,
    Shutdown,
    WriteClose,
    require_complete,
    spec_of,
)
from spec.state import AbstractState, Mark
from spec.trace import Step, Trace

#: The text is folded at this many columns.
TEXT_WIDTH = 100
#: Entry logs shown per step (the newest; older ones are counted).
LOGS_SHOWN_MAX = 4

EPILOG = f"""\
TRACE is a trace file (spec/trace.md, JSON lines), or - to read it from stdin. Every step is
replayed against the model; --from and --to choose the steps told (numbered as in the trace).

exit codes:
  {EXIT_OK}  the steps told (and all before them) agree with the model and the properties
  {EXIT_DIVERGED}  a step diverges from the model or breaks a property: the story ends there
  {EXIT_UNUSABLE}  TRACE cannot be read, is not a valid trace, or holds a history the model
     cannot run
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref explain``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("trace", metavar="TRACE", help="a trace file, or - for stdin")
    parser.add_argument(
        "--from", dest="first", metavar="N", type=whole_number, default=0, help="first step told"
    )
    parser.add_argument(
        "--to", dest="last", metavar="N", type=whole_number, default=None, help="last step told"
    )
    parser.add_argument(
        "--state", action="store_true", help="show the recorded abstract state after each step"
    )


def run(args: argparse.Namespace) -> int:
    """Tell ``args.trace``; return the exit code (see EPILOG)."""
    try:
        name, trace = load_trace(args.trace)
        last = _last_step(trace, args.first, args.last)
        replay = Replay(trace.header)
    except (TraceError, ReplayError) as exc:
        print(f"bkref explain: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    _say(header_lines(name, trace, args.first, last))
    story = Story(trace, show_state=args.state)
    for step in trace.steps[: last + 1]:
        try:
            report = replay.advance(step)
        except ReplayError as exc:
            print(f"bkref explain: {exc}", file=sys.stderr)
            return EXIT_UNUSABLE
        lines = story.tell(report, replay.model)
        story.check_invariants()
        if step.index >= args.first or report.failure is not None:
            _say(lines)
        if report.failure is not None:
            return EXIT_DIVERGED
    summary = summarize(trace.steps[: last + 1])
    _say(["", f"steps 0-{last} agree with the model: {summary.describe()}"])
    return EXIT_OK


def _say(lines: Sequence[str]) -> None:
    """Print ``lines``. When the reader stops reading (``| head``) the story goes on into
    /dev/null, so that the exit code is still the verdict's."""
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:
        silence_stdout()


def _last_step(trace: Trace, first: int, last: int | None) -> int:
    """The last step to tell; ReplayError when the range is not in the trace."""
    count = len(trace.steps)
    if count == 0:
        raise ReplayError("the trace has no steps, only its header: nothing to explain")
    if first >= count:
        raise ReplayError(f"--from {first}: the trace has steps 0 to {count - 1}")
    chosen = count - 1 if last is None else min(last, count - 1)
    if chosen < first:
        raise ReplayError(f"--to {chosen} is before --from {first}: nothing to tell")
    return chosen


def header_lines(name: str, trace: Trace, first: int, last: int) -> list[str]:
    config = ", ".join(f"{key}={value}" for key, value in trace.header.config) or "defaults"
    told = "every step" if (first, last) == (0, len(trace.steps) - 1) else f"steps {first}-{last}"
    return [
        *_wrap(f"{name}: {len(trace.steps)} steps recorded by {trace.header.source}", "", "  "),
        *_wrap(f"configuration: {config}", "", "  "),
        f"telling {told}; after each step, '=' lines say what the model holds now",
    ]


# --- one step -------------------------------------------------------------------------------


class Story:
    """What the teller remembers between steps: the last recorded state and the acks since
    the last checkpoint (the model's notes say the rest)."""

    def __init__(self, trace: Trace, *, show_state: bool) -> None:
        self.steps = trace.steps
        self.show_state = show_state
        self.last_state: AbstractState | None = None
        #: Acks (adds and fences) since the last checkpoint, clean shutdown or recovery.
        self.journal_only_acks = 0
        #: The bookie was last stopped by an ok shutdown (its checkpoint moved lastMark
        #: after the last recorded state).
        self.clean_stop = False

    def tell(self, report: StepReport, model: BookieModel) -> list[str]:
        """The step in words, after the model took it."""
        step = report.step
        lines = _wrap(f"step {step.index}  {describe_step(step, self.steps)}", "", "    ")
        failure = report.failure
        if failure is not None:
            what = "does something the model does not allow"
            if failure.kind == "property":
                what = f"breaks property {failure.prop}"
            lines += _wrap(f"DIVERGENCE: here the implementation {what}:", "  ** ", "     ")
            lines += _wrap(failure.message, "     ", "     ")
            return lines
        self._count_acks(step)
        restart = self._restart_note(step) if model.internals else []
        lines += _notes([*report.notes, *restart])
        lines += _wrap(durability_text(model), "  = ", "    ")
        if model.up and model.internals:
            lines += _wrap(logs_text(model), "  = ", "    ")
            if self.journal_only_acks:
                lines += _wrap(
                    f"journal only: {self.journal_only_acks} ack(s) since the last checkpoint "
                    "are durable through the journal alone (a restart replays them)",
                    "  = ",
                    "    ",
                )
        if self.show_state:
            lines += _wrap(state_text(step.state), "  state: ", "    ")
        if step.state is not None and not step.result.crashed:
            self.last_state = step.state
        telling = TELLINGS[type(step.op)]
        if telling.run_edge:
            self.clean_stop = telling.clean_stop and step.result.ok
        return lines

    def check_invariants(self) -> None:
        assert self.journal_only_acks >= 0, self.journal_only_acks
        # After a clean shutdown nothing relies on the journal alone: its checkpoint covers all.
        assert not (self.clean_stop and self.journal_only_acks), self.journal_only_acks

    def _count_acks(self, step: Step) -> None:
        ok = step.result.ok
        if TELLINGS[type(step.op)].settles_journal and ok:
            self.journal_only_acks = 0
            return
        acked = sum(done.error is None for done in step.completed)
        own = spec_of(step.op).answered_later and ok
        self.journal_only_acks += acked + own

    def _restart_note(self, step: Step) -> list[str]:
        """What recovery did to lastMark (from the recorded states)."""
        state, before = step.state, self.last_state
        if not TELLINGS[type(step.op)].recovers or state is None or not step.result.ok:
            return []
        if self.clean_stop or step.result.replayed == 0:
            return [
                f"lastMark is {_mark(state.last_mark)}: nothing after it needed replay"
                + (" (the clean shutdown's checkpoint had persisted it)" if self.clean_stop else "")
            ]
        if before is None or before.last_mark == state.last_mark:
            return [f"recovery left lastMark at {_mark(state.last_mark)}"]
        return [
            f"recovery moved lastMark from {_mark(before.last_mark)} to "
            f"{_mark(state.last_mark)}: it replayed the journal after the old mark and "
            "persisted where replay ended, so the next restart does not replay it again"
        ]


@attrs.frozen
class Telling:
    """What a step of one operation means to the story beyond the model's notes.

    - ``settles_journal``: after an ok one nothing relies on the journal alone (a checkpoint,
      a recovery, a clean shutdown's checkpoint);
    - ``run_edge``: it starts or ends a run, so it settles whether the bookie was last
      stopped cleanly; ``clean_stop``: an ok one is a clean stop;
    - ``recovers``: an ok one is a recovery, and its note says what it did to lastMark.
    """

    settles_journal: bool = False
    run_edge: bool = False
    clean_stop: bool = False
    recovers: bool = False


#: Every operation's telling, checked against the registry at import.
TELLINGS: Mapping[type[Any], Telling] = require_complete(
    {
        Add: Telling(),
        Read: Telling(),
        Fence: Telling(),
        WriteClose: Telling(),
        Delete: Telling(),
        Checkpoint: Telling(settles_journal=True),
        JournalForce: Telling(),
        JournalWrite: Telling(),
        JournalSync: Telling(),
        JournalAck: Telling(),
        CheckpointFlush: Telling(),
        CheckpointPersist: Telling(),
        Rotate: Telling(),
        Preallocate: Telling(),
        CheckDirs: Telling(),
        Gc: Telling(),
        GcBegin: Telling(),
        CompactCopy: Telling(),
        CompactFlush: Telling(),
        CompactIndex: Telling(),
        Crash: Telling(run_edge=True),
        Restart: Telling(settles_journal=True, run_edge=True, recovers=True),
        Shutdown: Telling(settles_journal=True, run_edge=True, clean_stop=True),
        DiskFull: Telling(),
        DiskWritable: Telling(),
        AdvanceClock: Telling(),
        FailFsync: Telling(),
        FailWrite: Telling(),
        FailRead: Telling(),
    },
    "explain's tellings (proofs/cli/explain.py TELLINGS)",
)


def durability_text(model: BookieModel) -> str:
    """What survives a crash now and what may not: ``durable: ledger 1 entries 0-4; pending
    (a crash now may lose them): ledger 1 entry 5; fenced: 3``."""
    durable: dict[int, list[int]] = {}
    pending: dict[int, list[int]] = {}
    unknown: dict[int, list[int]] = {}
    failed: dict[int, list[int]] = {}
    by_sure = {
        Sure.DURABLE: durable,
        Sure.PENDING: pending,
        Sure.MAYBE: unknown,
        Sure.FAILED: failed,
    }
    fences: dict[str, list[int]] = {}
    deletions: dict[str, list[int]] = {}
    for ledger_id, ledger in sorted(model.ledgers.ledgers.items()):
        for entry_id, entry in sorted(ledger.entries.items()):
            by_sure[entry.sure].setdefault(ledger_id, []).append(entry_id)
        fence = model.ledgers.fence_state(ledger_id)
        if fence is not None:
            fences.setdefault(fence, []).append(ledger_id)
        deletion = model.ledgers.deletion_state(ledger_id)
        if deletion is not None:
            deletions.setdefault(deletion, []).append(ledger_id)
    parts = [f"durable: {_entries(durable) or 'nothing yet'}"]
    if pending:
        parts.append(f"pending (no ack; a crash now may lose them): {_entries(pending)}")
    if unknown:
        parts.append(f"unknown (pending at a crash; not yet seen): {_entries(unknown)}")
    if failed:
        parts.append(f"failed (io_error: may or may not have been kept): {_entries(failed)}")
    labels = (
        ("fenced", "fenced"),
        ("fence pending", "fence pending"),
        ("fence unknown", "fence unknown"),
        ("fence failed", "fence failed (may or may not be in effect)"),
    )
    parts += [f"{label}: {number_ranges(fences[key])}" for key, label in labels if key in fences]
    for label in ("deleted", "maybe deleted"):
        if label in deletions:
            parts.append(f"{label}: {number_ranges(deletions[label])}")
    if not model.up:
        parts.insert(0, f"bookie {'stopped' if model.status == 'stopped' else 'down'}")
    return "; ".join(parts)


def logs_text(model: BookieModel) -> str:
    """The entry logs as the model has them: ``log 2 active: ledger 1 240 bytes, none
    fsynced``; a flushed log's bytes are all fsynced."""
    logs = [model.logs.logs[log_id] for log_id in sorted(model.logs.logs)]
    if not logs:
        return "entry logs: none yet (the first add of a run creates one)"
    shown = logs[-LOGS_SHOWN_MAX:]
    parts = []
    for log in shown:
        ledgers = []
        for ledger_id, written in sorted(log.written.items()):
            synced = log.durable.get(ledger_id, 0)
            if log.state == "flushed" or synced == written:
                fsynced = "" if log.state == "flushed" else ", fsynced"
            else:
                fsynced = ", none fsynced" if synced == 0 else f", {synced} fsynced"
            ledgers.append(f"ledger {ledger_id} {written} bytes{fsynced}")
        parts.append(f"log {log.log_id} {log.state}: {'; '.join(ledgers) or 'empty'}")
    earlier = [log.log_id for log in logs[: len(logs) - len(shown)]]
    prefix = f"logs {number_ranges(earlier)} not shown; " if earlier else ""
    relaxed = " (followed, not predicted: a fault is in effect)" if model.logs.relaxed else ""
    return f"entry logs{relaxed}: {prefix}" + " | ".join(parts)


def state_text(state: AbstractState | None) -> str:
    """The recorded abstract state, compactly."""
    if state is None:
        return "not recorded (the bookie is down, or the step was cut short by a crash)"
    logs = ", ".join(
        f"{view.log_id} {view.state} {{{', '.join(f'{k}: {v}' for k, v in view.ledger_bytes)}}}"
        for view in state.entry_logs
    )
    ledgers = ", ".join(
        f"{view.ledger_id} (last {view.last_entry}{', fenced' if view.fenced else ''})"
        for view in state.ledgers
    )
    deleted = number_ranges(sorted(state.deleted_ledgers)) or "none"
    return (
        f"logs [{logs}]; current log {state.current_log_id}; leastUnflushedLogId "
        f"{state.least_unflushed_log_id}; lastMark {_mark(state.last_mark)}; journal mark "
        f"{_mark(state.journal_mark)}; ledgers [{ledgers}]; deleted {deleted}"
    )


# --- small pure helpers ---------------------------------------------------------------------


def _entries(by_ledger: dict[int, list[int]]) -> str:
    """``ledger 1 entries 0-4, 7; ledger 2 entry 0``."""
    parts = []
    for ledger_id, entry_ids in sorted(by_ledger.items()):
        noun = "entry" if len(entry_ids) == 1 else "entries"
        parts.append(f"ledger {ledger_id} {noun} {number_ranges(entry_ids)}")
    return "; ".join(parts)


def _mark(mark: Mark) -> str:
    return f"(journal {mark[0]}, offset {mark[1]})"


def _notes(notes: Sequence[str]) -> list[str]:
    """The model's notes as bullets; the notes after one ending in ``:`` (a crash's list of
    possible outcomes) are its sub-bullets."""
    lines: list[str] = []
    nested = False
    for note in notes:
        if nested:
            lines += _wrap(note, "      . ", "        ")
        else:
            lines += _wrap(note, "  - ", "    ")
        nested = nested or note.endswith(":")
    return lines


def _wrap(text: str, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=TEXT_WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def told_steps(lines: Iterable[str]) -> list[int]:
    """The step numbers told in explain's output (for tests and docs checks)."""
    found = []
    for line in lines:
        if line.startswith("step "):
            found.append(int(line.split()[1]))
    return found
