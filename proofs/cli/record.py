"""``bkref record --trace FILE -- CMD ...``: record a run of any adapter as a trace.

Why: ``bkref check-trace`` judges a trace (spec/trace.md) against the model, but until now
traces came only from the in-process harness. This command sits between a client and any
bookie that speaks the adapter protocol (spec/adapter.md: ``bkref adapter``, or another
implementation) and writes what passes through as a trace, so that a run of another bookie,
kill -9 and restarts included, can be checked against the model later.

The relay: CMD is started as a child. The client's stdin goes to the child's stdin and the
child's stdout to stdout, byte for byte, line by line, flushed per line; the child inherits
stderr. The exit status is the child's (128 + the signal if a signal ended it).

The mapping (spec/trace.md, "Recorded by bkref record", says the same):

- Each well-formed request whose op is ``add``, ``read``, ``fence``, ``write_close``,
  ``delete``, ``checkpoint``, ``gc`` or ``shutdown`` (the operations of spec/operations.py with an
  ``adapter_op``) is one step, numbered in the order requests pass through the recorder.
  ``inspect`` is not a step: its ``state`` (without ``fenced_ledgers``,
  ``compaction_files`` and each log's ``ledgers``) becomes the state of the latest step. A
  ``gc`` is a step too, and an ok answer's statistics (compaction, logs_deleted,
  logs_compacted, entries_moved, bytes_reclaimed) are its result; an ok answer without them
  is recorded as ``io_error`` (the model could not judge what the cycle did).
  A ``write_close`` is a step when the ready line lists it in ``ops``; to a bookie that does
  not (it answers ``unsupported``, doing nothing) it is relayed, not recorded. Malformed
  requests (spec/adapter.md "Malformed requests", judged by the protocol's own parser with
  the limits of the ready line, and ids still in flight) and responses with id null are
  relayed, not recorded.
- Synchronous requests (read, write_close, delete, checkpoint, gc, inspect, shutdown: the
  adapter answers
  them before it reads the next request) are held: the next client line is not relayed
  before their response came (or the child ended), so the trace's order is the bookie's.
  Adds and fences are not held (a group commit needs many in flight). Client lines are also
  held until the child's ready line.
- The window of step k runs from its request until the next recorded request (or the end).
  Responses to earlier adds and fences arriving in it are step k's ``completed`` (arrival
  order). An add or fence answered in its own window gets that answer as its result; else
  its result is ``pending`` and its answer is a completion of a later step. So step k is
  written when step k+1 starts, or at the end. A request is counted as started just before
  it is written to the child, so an ack that crosses it is attributed to the later step:
  later is always safe (it claims durability from a later point, never an earlier one).
  A response arriving after an inspect's state was attached to step k drops that state: it
  predates the ack, and the ack order is kept exact rather than the state.
- A synchronous step whose response never came (the child ended) is ``crashed``.
- The start: the first run on a FILE that is missing or empty writes the header (the
  current version, the profile, the source, the ``--set`` pairs of CMD plus ``--config``).
  A later run reads FILE (which must be of the current version: steps of two versions
  cannot share a file), continues its numbering, and first appends a ``crash`` step with
  plan ``unknown`` (unless the previous run ended with an ok ``shutdown``), then a
  ``restart`` step, ok when the child's ready line arrives, ``io_error`` if the child ends
  before it. Adds left pending by an earlier run are never completed.
- The end: at the end of the client's input the child's stdin is closed; if the child then
  exits 0 (the adapter's clean shutdown), a ``shutdown`` step with result ok is written,
  whose completions are the responses written after the end of input. If the child ends any
  other way there is no shutdown step (the next start records a crash). SIGTERM and SIGINT
  are forwarded to the child; what was recorded is written when it ends.

Not handled: a client that reuses an id before it read the id's response (the protocol
forbids it; the recorder may then disagree with the bookie about which request an answer
belongs to), and a child that keeps its stdout open after it exits (through a grandchild).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import functools
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import IO, Any

import attrs

from impl.limits import LIMITS
from impl.server.protocol import Rejection, Request, RequestBounds, parse_request
from proofs.cli.input_file import InputError, read_input
from spec.crash import Unknown
from spec.errors import TraceError
from spec.operations import (
    CRASHED,
    ERROR_CODES,
    OK,
    PENDING,
    REGISTRY,
    Completion,
    Crash,
    GcReport,
    Operation,
    OperationSpec,
    Restart,
    Result,
    Shutdown,
    failed,
)
from spec.profile import ADAPTER_PROFILE, CHOICES, Profile
from spec.state import AbstractState
from spec.strict_json import STRICT_DECODER
from spec.trace import (
    GC_FIELDS,
    TRACE_VERSION,
    Step,
    TraceHeader,
    encode_header,
    encode_step,
    read_trace_bytes,
)
from spec.trace import state_from_json as trace_state_from_json

#: Usage errors: no command, FILE not a trace, FILE not writable, a bad option.
EXIT_USAGE = 2
#: CMD cannot be started (as a shell says for a command not found).
EXIT_NO_COMMAND = 127
#: Added to a signal's number when a signal ended the child (as a shell does).
SIGNAL_EXIT_BASE = 128

PREFIX = "bkref record: "

#: The adapter ops that are steps, and the declaration each becomes (spec/operations.py):
#: every op of spec/operations.py with an adapter_op.
STEP_OPS: dict[str, OperationSpec] = {
    spec.adapter_op: spec for spec in REGISTRY.values() if spec.adapter_op is not None
}
#: Not a step: its state goes to the latest step.
INSPECT_OP = "inspect"
#: A step only with a bookie whose ready line lists it (spec/protocol/write_close.md).
WRITE_CLOSE_OP = "write_close"
#: Requests answered before the adapter reads the next one (spec/adapter.md, "Request ids
#: and pipelining"); the recorder holds the next client line until they are answered.
SYNCHRONOUS_OPS = frozenset(
    {name for name, spec in STEP_OPS.items() if not spec.answered_later} | {INSPECT_OP}
)
#: Fields of the adapter's inspect state that the trace's state does not have.
EXTRA_STATE_FIELDS = ("fenced_ledgers", "compaction_files")
EXTRA_LOG_FIELDS = ("ledgers",)
#: Read size of the relays.
CHUNK_BYTES = 1 << 16

EPILOG = f"""\
FILE is a trace (spec/trace.md). The first run on a missing or empty FILE writes its header;
a later run appends a crash step (unless the last run ended with a clean shutdown) and a
restart step, and continues the numbering. The mapping of requests and responses to steps
is in proofs/cli/record.py and spec/trace.md.

exit codes:
  the child's exit status (128+N if signal N ended it)
  {EXIT_USAGE}    no command after --, FILE is not a trace or cannot be written, a bad option
  {EXIT_NO_COMMAND}  the command cannot be started
"""


class UsageError(Exception):
    """A usage error: the message is one line for stderr; the exit status is EXIT_USAGE."""


# --- the mapping, without threads -------------------------------------------------------------


@attrs.define
class _OpenStep:
    """The latest step: its window is open until the next recorded request, or the end."""

    index: int
    op: Operation
    result: Result | None = None
    completed: list[Completion] = attrs.Factory(list)
    state: AbstractState | None = None


#: What an id in flight stands for: a step's index, an inspect, or nothing recorded.
_INSPECT = -1
_UNRECORDED = -2


def adapter_state(obj: object, where: str) -> AbstractState:
    """The trace's state of an adapter's ``inspect`` state (spec/adapter.md): the same
    fields without fenced_ledgers, compaction_files and each log's ledgers. Raises
    TraceError when the rest does not read as a trace state."""
    if isinstance(obj, dict):
        obj = {k: v for k, v in obj.items() if k not in EXTRA_STATE_FIELDS}
        logs = obj.get("entry_logs")
        if isinstance(logs, list):
            obj["entry_logs"] = [
                {k: v for k, v in log.items() if k not in EXTRA_LOG_FIELDS}
                if isinstance(log, dict)
                else log
                for log in logs
            ]
    return trace_state_from_json(obj, where)


def _operation(spec: OperationSpec, request: Request) -> Operation:
    """The trace operation of a parsed request (the fields have the same names)."""
    op: Operation = spec.cls(**{name: getattr(request, name) for name in spec.fields})
    return op


class Recorder:
    """The mapping of the module docstring, fed the lines in the order they pass through the
    recorder: :meth:`request` before a client line is relayed, :meth:`response` before a
    child line is relayed, :meth:`end_of_input` when the client's input ends, :meth:`finish`
    when the child has ended. Each step line is handed to ``write`` (without its newline);
    ``say`` gets recorder messages for stderr. Not thread-safe: the caller holds a lock."""

    def __init__(
        self,
        write: Callable[[str], None],
        say: Callable[[str], None],
        *,
        first_index: int = 0,
        restart: bool = False,
        crash: bool = False,
    ) -> None:
        self._write = write
        self._say = say
        self._next_index = first_index
        self._open: _OpenStep | None = None
        self._in_flight: dict[int, int] = {}
        self._pending: set[int] = set()
        self._after_eof: list[tuple[int, Result]] | None = None
        self.bounds: RequestBounds | None = None
        self.shutdown_requested = False
        self.ready = False
        #: The optional ops the ready line lists (spec/adapter.md, "Capabilities").
        self.claimed_ops: frozenset[str] = frozenset()
        self.finished = False
        if crash:
            self._emit(Step(self._take_index(), Crash(Unknown()), OK))
        if restart:
            self._open = _OpenStep(self._take_index(), Restart())

    # -- requests

    def request(self, line: bytes) -> int | None:
        """A client line is about to be relayed. Returns the id to hold the next line for
        (a synchronous request), or None."""
        if self.shutdown_requested or self.finished:
            return None  # the adapter reads no further line, or the child has ended
        text = line.rstrip(b"\n").rstrip(b"\r")
        if not text.strip():
            return None
        bounds = self.bounds or RequestBounds(data_max_bytes=len(text))
        parsed = parse_request(text, bounds)
        if isinstance(parsed, Rejection):
            if parsed.id is not None and parsed.id not in self._in_flight:
                self._in_flight[parsed.id] = _UNRECORDED
            return None
        if parsed.id in self._in_flight:
            return None  # answered bad_request with id null (spec/adapter.md)
        name = parsed.op.value
        spec = STEP_OPS.get(name)
        if name == WRITE_CLOSE_OP and WRITE_CLOSE_OP not in self.claimed_ops:
            self._in_flight[parsed.id] = _UNRECORDED  # answered unsupported: no step
            return None
        if spec is None:
            self._in_flight[parsed.id] = _INSPECT if name == INSPECT_OP else _UNRECORDED
            return parsed.id if name in SYNCHRONOUS_OPS else None
        self._close_open()
        index = self._take_index()
        self._open = _OpenStep(index, _operation(spec, parsed))
        self._in_flight[parsed.id] = index
        if isinstance(self._open.op, Shutdown):
            self.shutdown_requested = True
        return parsed.id if name in SYNCHRONOUS_OPS else None

    def answered(self, request_id: int) -> bool:
        """Whether the response of this request came."""
        return request_id not in self._in_flight

    def end_of_input(self) -> None:
        """The client's input ended: responses from now on belong to the shutdown step, if
        the child then shuts down cleanly (unless a shutdown request was recorded)."""
        if not self.shutdown_requested and self._after_eof is None:
            self._after_eof = []

    # -- responses

    def response(self, line: bytes) -> None:
        """A child line is about to be relayed."""
        try:
            document = STRICT_DECODER.decode(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            self._say(f"the child wrote a line that is not JSON: {line[:80]!r}")
            return
        if not isinstance(document, dict):
            self._say(f"the child wrote a line that is not a JSON object: {line[:80]!r}")
            return
        if not self.ready:
            if document.get("event") == "ready":
                self._on_ready(document)
            return
        request_id = document.get("id")
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            return  # id null: a malformed request's answer, not recorded
        target = self._in_flight.pop(request_id, None)
        if target is None or target == _UNRECORDED:
            return
        if target == _INSPECT:
            self._on_inspect(request_id, document)
            return
        result = self._result(request_id, target, document)
        if self._after_eof is not None:
            self._after_eof.append((target, result))
        else:
            self._apply(target, result)

    def _on_ready(self, document: dict[str, Any]) -> None:
        self.ready = True
        ops = document.get("ops")
        if isinstance(ops, list):
            self.claimed_ops = frozenset(op for op in ops if isinstance(op, str))
        data_max, key_max = document.get("max_data_bytes"), document.get("max_key_bytes")
        if isinstance(data_max, int) and isinstance(key_max, int) and min(data_max, key_max) >= 0:
            self.bounds = RequestBounds(data_max_bytes=data_max, key_max_bytes=key_max)
        else:
            self._say("the ready line has no max_data_bytes/max_key_bytes; no size limits")
            self.bounds = RequestBounds(data_max_bytes=2**62, key_max_bytes=2**62)
        if self._open is not None and isinstance(self._open.op, Restart):
            self._open.result = OK

    def _on_inspect(self, request_id: int, document: dict[str, Any]) -> None:
        if document.get("ok") is not True:
            return
        try:
            state = adapter_state(document.get("state"), f"inspect response {request_id}")
        except TraceError as exc:
            self._say(f"the state is not recorded: {exc}")
            return
        if self._open is not None and self._after_eof is None:
            self._open.state = state

    def _result(self, request_id: int, target: int, document: dict[str, Any]) -> Result:
        """The Result of a response to step ``target``."""
        if document.get("ok") is True:
            op = self._op_of(target)
            if op is not None and op.name == "gc":
                return self._gc_result(request_id, document)
            if op is None or op.name != "read":
                return OK
            data = document.get("data")
            try:
                if not isinstance(data, str):
                    raise ValueError("no data")
                return Result(data=base64.b64decode(data.encode("ascii"), validate=True))
            except (ValueError, binascii.Error, UnicodeEncodeError):
                self._say(f"response {request_id}: an ok read without base64 data; io_error")
                return failed("io_error")
        code = document.get("error")
        if not isinstance(code, str) or code not in ERROR_CODES:
            self._say(f"response {request_id}: unknown error code {code!r}; recorded as io_error")
            return failed("io_error")
        return failed(code)

    def _gc_result(self, request_id: int, document: dict[str, Any]) -> Result:
        """The Result of an ok ``gc`` answer: its statistics, or io_error without them."""
        kind = document.get("compaction")
        counts = [document.get(name) for name in GC_FIELDS[1:]]
        problem = None
        if not isinstance(kind, str):
            problem = "no compaction kind"
        elif not all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
            problem = f"{', '.join(GC_FIELDS[1:])} must be integers"
        else:
            try:
                report = GcReport(kind, *counts)  # type: ignore[arg-type]
            except ValueError as exc:
                problem = str(exc)
            else:
                return Result(gc=report)
        self._say(f"response {request_id}: an ok gc without its statistics ({problem}); io_error")
        return failed("io_error")

    def _op_of(self, index: int) -> Operation | None:
        return self._open.op if self._open is not None and self._open.index == index else None

    def _apply(self, target: int, result: Result) -> None:
        """The answer of step ``target`` arrived in the open step's window."""
        open_ = self._open
        assert open_ is not None, target
        if open_.index == target and open_.result is None:
            open_.result = result
        elif target in self._pending:
            self._pending.remove(target)
            open_.completed.append(Completion(target, result.error))
        else:
            self._say(f"a second answer for step {target} is not recorded")
            return
        open_.state = None  # it predates this answer

    # -- the end

    def finish(self, exit_code: int) -> None:
        """The child has ended with ``exit_code`` (negative: killed by a signal). Writes the
        open step, and the shutdown step after a clean end of input."""
        assert not self.finished
        self.finished = True
        after_eof = self._after_eof or []
        if self._after_eof is not None and exit_code == 0:
            self._close_open()
            completed = []
            for target, result in after_eof:
                if target in self._pending:
                    self._pending.remove(target)
                    completed.append(Completion(target, result.error))
            self._emit(Step(self._take_index(), Shutdown(), OK, tuple(completed)))
        else:
            self._after_eof = None
            for target, result in after_eof:
                self._apply(target, result)
            self._close_open()

    # -- steps

    def _take_index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _close_open(self) -> None:
        open_ = self._open
        if open_ is None:
            return
        self._open = None
        result = open_.result
        if result is None:
            if REGISTRY[type(open_.op)].answered_later:
                result = PENDING
            elif isinstance(open_.op, Restart):
                result = failed("io_error")  # the child ended before its ready line
            else:
                result = CRASHED
        if result.pending:
            self._pending.add(open_.index)
        self._emit(Step(open_.index, open_.op, result, tuple(open_.completed), open_.state))

    def _emit(self, step: Step) -> None:
        self._write(encode_step(step))


# --- the relay ----------------------------------------------------------------------------------


def _lines(fd: int) -> Iterator[bytes]:
    """The lines of a file descriptor, each with its newline (the last may lack it). Raw
    reads: no buffered object whose lock a blocked thread could hold at exit."""
    pieces: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except OSError:
            chunk = b""
        if not chunk:
            if pieces:
                yield b"".join(pieces)
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            pieces.append(chunk[start : end + 1])
            yield b"".join(pieces)
            pieces = []
            start = end + 1
        if start < len(chunk):
            pieces.append(chunk[start:])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Session:
    """One run: the child, the two relay threads and the recorder, under one condition."""

    def __init__(
        self, recorder: Recorder, child: subprocess.Popen[bytes], client_in: int, client_out: int
    ) -> None:
        self.recorder = recorder
        self.child = child
        self.client_in = client_in
        self.client_out = client_out
        self.cond = threading.Condition()
        self.child_done = False

    def _wait(self, ready: Callable[[], bool]) -> None:
        with self.cond:
            self.cond.wait_for(lambda: ready() or self.child_done)

    def pump_requests(self) -> None:
        """Client -> child, holding lines as the module docstring says."""
        stdin = self.child.stdin
        assert stdin is not None
        broken = False
        for line in _lines(self.client_in):
            self._wait(lambda: self.recorder.ready)
            with self.cond:
                # A line the child can no longer read is relayed (to nowhere), not recorded.
                gone = self.child_done or not self.recorder.ready
                hold = None if gone else self.recorder.request(line)
            if not broken:
                try:
                    stdin.write(line)
                    stdin.flush()
                except OSError:
                    broken = True  # the child is gone; its end is recorded by the main thread
            if hold is not None:
                self._wait(functools.partial(self.recorder.answered, hold))
        with self.cond:
            self.recorder.end_of_input()
        with contextlib.suppress(OSError):
            stdin.close()

    def pump_responses(self) -> None:
        """Child -> client; keeps reading after the client went away, so the child never
        blocks on a full pipe."""
        stdout = self.child.stdout
        assert stdout is not None
        client_gone = False
        for line in _lines(stdout.fileno()):
            with self.cond:
                self.recorder.response(line)
                self.cond.notify_all()
            if not client_gone:
                try:
                    _write_all(self.client_out, line)
                except BrokenPipeError:
                    client_gone = True  # the client stopped reading: nothing to say
                except OSError as exc:  # a full disk, an I/O error: say it once
                    client_gone = True
                    print(
                        f"bkref record: cannot write the bookie's responses to standard output "
                        f"({exc.strerror or exc}); recording goes on, the responses are dropped",
                        file=sys.stderr,
                        flush=True,
                    )
        with self.cond:
            self.child_done = True
            self.cond.notify_all()

    def run(self) -> int:
        """Relay until the child ends; record the end; the child's exit status."""
        threading.Thread(target=self.pump_requests, name="record-in", daemon=True).start()
        out = threading.Thread(target=self.pump_responses, name="record-out")
        out.start()
        code = self.child.wait()
        out.join()
        with self.cond:
            self.child_done = True
            self.cond.notify_all()
            self.recorder.finish(code)
        return SIGNAL_EXIT_BASE - code if code < 0 else code


# --- the command --------------------------------------------------------------------------------


def parse_profile(text: str) -> Profile:
    """``acks=async,state=full,answers=either`` (any subset; the rest from ADAPTER_PROFILE)."""
    chosen = attrs.asdict(ADAPTER_PROFILE)
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or name not in CHOICES or value not in CHOICES[name]:
            options = "; ".join(f"{n}: {', '.join(c)}" for n, c in CHOICES.items())
            raise UsageError(f"--profile: bad item {item!r} (NAME=VALUE, {options})")
        chosen[name] = value
    return Profile(**chosen)


def config_pairs(command: Sequence[str], extra: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The header's config: the ``--set KEY=VALUE`` pairs of the command, then ``extra``
    (--config); the last value of a key wins, in the order keys first appear."""
    found: list[str] = []
    for i, arg in enumerate(command):
        if arg == "--set" and i + 1 < len(command):
            found.append(command[i + 1])
        elif arg.startswith("--set="):
            found.append(arg[len("--set=") :])
    pairs: dict[str, str] = {}
    for item in (*found, *extra):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"a configuration pair must be KEY=VALUE, got {item!r}")
        pairs[key] = value
    return tuple(pairs.items())


@attrs.frozen
class Start:
    """What FILE says about the run to come: the header to write (first run) or the step
    to continue from and whether the previous run ended cleanly."""

    header: TraceHeader | None
    next_index: int
    clean: bool
    needs_newline: bool


def read_start(path: str, header: TraceHeader) -> Start:
    """Read FILE (UsageError if it is not a trace or cannot be read)."""
    if not os.path.lexists(path):
        return Start(header, 0, True, False)
    try:  # bounded, and never waiting for ever on a FIFO (proofs/cli/input_file.py)
        data = read_input(
            path,
            what="a trace file to append the run to (spec/trace.md)",
            max_bytes=LIMITS.trace_file_max_bytes,
            field="trace_file_max_bytes",
        )
    except InputError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not data.strip():
        return Start(header, 0, True, False)
    try:
        trace = read_trace_bytes(data, path)
    except TraceError as exc:
        raise UsageError(f"{exc}; give a trace file to append to, or a new file") from None
    if trace.header.version != TRACE_VERSION:
        raise UsageError(
            f"{path} is a version {trace.header.version} trace and this bkref records version "
            f"{TRACE_VERSION}; record into a new file"
        )
    steps = trace.steps
    last = steps[-1] if steps else None
    clean = last is not None and isinstance(last.op, Shutdown) and last.result.ok
    return Start(None, len(steps), clean, not data.endswith(b"\n"))


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``bkref record``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Run CMD (a bookie speaking the adapter protocol, spec/adapter.md), relay stdin and "
        "stdout unchanged, and record the run as a trace (spec/trace.md) in FILE."
    )
    parser.epilog = EPILOG
    parser.add_argument("--trace", metavar="FILE", required=True, help="the trace to write")
    parser.add_argument(
        "--profile",
        metavar="SPEC",
        default="",
        help="the header's profile, e.g. acks=async,state=full,answers=either "
        "(default: those, spec/profile.py ADAPTER_PROFILE)",
    )
    parser.add_argument(
        "--config",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a configuration pair for the header, besides CMD's --set pairs (repeatable)",
    )
    parser.add_argument("--source", metavar="TEXT", help="the header's source")
    parser.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="-- CMD [ARGS...]",
        help="the bookie's adapter command, after --",
    )


def say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Record one run; the child's exit status (see EPILOG)."""
    command: list[str] = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    try:
        if not command:
            raise UsageError("no command: give it after --, e.g. -- bkref adapter --set ...")
        source = args.source if args.source is not None else "bkref record: " + shlex.join(command)
        header = TraceHeader(
            config=config_pairs(command, args.config),
            source=source,
            profile=parse_profile(args.profile),
        )
        start = read_start(args.trace, header)
        try:
            trace_file = open(args.trace, "a", encoding="ascii")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise UsageError(f"cannot write {args.trace}: {exc.strerror or exc}") from None
    except UsageError as exc:
        say(str(exc))
        return EXIT_USAGE
    with trace_file:
        return _record(args.trace, trace_file, command, start)


def _record(path: str, trace_file: IO[str], command: list[str], start: Start) -> int:
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as exc:
        say(f"cannot start {shlex.join(command)}: {exc.strerror or exc}")
        return EXIT_NO_COMMAND

    def write(line: str) -> None:
        trace_file.write(line + "\n")
        trace_file.flush()

    if start.needs_newline:
        trace_file.write("\n")
    if start.header is not None:
        write(encode_header(start.header))
    later = start.header is None
    say(f"started pid {child.pid}: {shlex.join(command)}; recording to {path}")
    recorder = Recorder(
        write, say, first_index=start.next_index, restart=later, crash=later and not start.clean
    )
    session = Session(recorder, child, sys.stdin.fileno(), sys.stdout.fileno())
    sys.stdout.flush()
    return _with_signals_forwarded(child, session.run)


def _with_signals_forwarded(child: subprocess.Popen[bytes], body: Callable[[], int]) -> int:
    """Run ``body`` with SIGTERM and SIGINT forwarded to the child (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return body()

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return body()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
