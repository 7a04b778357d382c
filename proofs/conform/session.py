"""One conformance scenario carried out against a live bookie: the requests written, the
answers read (every wait with a timeout), crashes (SIGKILL, or a power loss on the lazy
disk), restarts, the claimed capabilities held, and every line fed to the recorder, so the
scenario's trace is what ``bkref record`` would write (proofs/conform/runner.py's docstring
says why).

Why a module of its own (split from proofs/conform/runner.py, past 1,000 lines): the runner
decides which scenarios to run, judges, shrinks and reports; this is the conversation with
one bookie process, which the runner starts once per attempt.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from proofs.cli.record import Recorder
from proofs.conform.capabilities import CapabilityError, parse_ready
from proofs.conform.process import (
    EOF,
    EXIT_TIMEOUT_S,
    NO_RESPONSE,
    BookieProcess,
    CannotRun,
    wait_ready,
)
from proofs.conform.results import CHECKS, Capabilities, Cell, Failure
from proofs.conform.scenario import (
    Action,
    AddAction,
    CheckpointAction,
    DeleteAction,
    FenceAction,
    GcAction,
    InspectAction,
    KillAction,
    PowerLossAction,
    ProbeAction,
    ReadAction,
    Scenario,
    Settle,
    TornTail,
    WriteCloseAction,
)
from proofs.harness.promises import PLAN_NAMES
from spec.crash import (
    CrashPlan,
    KillProcess,
)
from spec.errors import BkrefError
from spec.operations import OK, Crash
from spec.profile import Profile
from spec.strict_json import STRICT_DECODER
from spec.trace import Step as TraceStep
from spec.trace import TraceHeader, encode_header, encode_step

if TYPE_CHECKING:
    from proofs.conform.runner import Conformance

#: How long a power loss with requests in flight waits for the bookie to reach its fsync.
FSYNC_WAIT_S = 0.1
#: How long the runner waits for an answer (and for a stopping bookie to exit).
DEFAULT_RESPONSE_TIMEOUT_S = 30.0
#: Optional ops whose claim the runner holds a bookie to.
SYNC_OPS = frozenset(
    {"read", "write_close", "delete", "checkpoint", "gc", "inspect", "shutdown", "probe"}
)


def check_of(prop: str | None) -> str:
    return prop if prop in CHECKS and prop is not None else "refinement"


def _request(request_id: int, action: Action) -> dict[str, object]:
    """The wire request of an action (spec/adapter.md "Operations")."""
    if isinstance(action, AddAction):
        return {
            "id": request_id,
            "op": "add",
            "ledger": action.ledger,
            "entry": action.entry,
            "key": action.key.hex(),
            "data": base64.b64encode(action.data).decode("ascii"),
        }
    if isinstance(action, FenceAction):
        return {"id": request_id, "op": "fence", "ledger": action.ledger, "key": action.key.hex()}
    if isinstance(action, WriteCloseAction):
        return {
            "id": request_id,
            "op": "write_close",
            "ledger": action.ledger,
            "key": action.key.hex(),
        }
    if isinstance(action, ReadAction):
        return {"id": request_id, "op": "read", "ledger": action.ledger, "entry": action.entry}
    if isinstance(action, DeleteAction):
        return {"id": request_id, "op": "delete", "ledger": action.ledger}
    if isinstance(action, GcAction):
        return {"id": request_id, "op": "gc", "force": True}
    if isinstance(action, CheckpointAction | InspectAction):
        return {"id": request_id, "op": action.op}
    if isinstance(action, ProbeAction):
        probe: dict[str, object] = {"id": request_id, "op": action.probe}
        return probe | ({"force": True} if action.probe == "gc" else {})
    raise AssertionError(action)


class _Stop(Exception):
    """The scenario cannot go on: ``failure`` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@attrs.define
class _Flight:
    op: str
    action: Action | None


@attrs.define
class Execution:
    """What carrying out a scenario produced: its trace's lines (header first), counts, and
    the failure the runner itself saw (capability, framing, progress), if any."""

    lines: list[str]
    crashes: int = 0
    power_losses: int = 0
    #: Power losses that fell while the bookie was in an fsync (the lazy disk held it).
    fsync_held: int = 0
    cells: set[Cell] = attrs.Factory(set)
    failure: Failure | None = None
    stderr_tail: str = ""
    #: (ledger, entry) -> data of every add answered ok; ledgers a delete was sent for.
    acked: dict[tuple[int, int], bytes] = attrs.Factory(dict)
    deleted: set[int] = attrs.Factory(set)
    #: The directories the last ready line claimed in BookKeeper's format.
    format_dirs: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    clean_end: bool = False


class Session:
    """Carries out one scenario against one data directory."""

    def __init__(
        self, conf: Conformance, caps: Capabilities, scenario: Scenario, scenario_dir: str
    ) -> None:
        self.conf = conf
        self.caps = caps
        self.scenario = scenario
        self.dir = scenario_dir
        self.data_dir = os.path.join(scenario_dir, "data")
        self.stderr_path = os.path.join(scenario_dir, "stderr.log")
        # The ready line's config over the adapter command's --set pairs: what the model
        # judges this bookie's layout and GC with (its entry-log manager among them).
        config = dict(conf.header_config(self.data_dir)) | dict(caps.config)
        header = TraceHeader(
            config=tuple(config.items()),
            source=f"bkref conform: {scenario.describe()} of {conf.adapter}",
            profile=Profile(acks="async", state=caps.state, answers=caps.answers),
        )
        self.out = Execution([encode_header(header)])
        self.recorder: Recorder | None = None
        self.process: BookieProcess | None = None
        self.next_id = 1
        self.in_flight: dict[int, _Flight] = {}
        self.last_op: str | None = None
        self.lazy: Any = None

    # -- the steps' lines

    def _write(self, line: str) -> None:
        self.out.lines.append(line)

    def _say(self, _line: str) -> None:
        """The recorder's remarks; the runner's own checks say the same with more context."""

    @property
    def _next_index(self) -> int:
        return len(self.out.lines) - 1

    # -- starting and stopping

    def start(self, *, first: bool) -> None:
        self.recorder = Recorder(
            self._write, self._say, first_index=self._next_index, restart=not first
        )
        self.process = BookieProcess(self.conf.adapter, self.data_dir, self.stderr_path)
        try:
            line = wait_ready(self.process, self.conf.start_timeout)
        except CannotRun as exc:
            self.recorder.finish(-9)
            if first:
                raise
            raise _Stop(self._failure("progress", f"after a crash, {exc.reason}")) from None
        self.recorder.response(line)
        try:
            caps = parse_ready(line)
        except CapabilityError as exc:
            raise _Stop(self._failure("capability", f"after a restart: {exc}")) from None
        claims = (caps.version, caps.ops, caps.state, caps.answers)
        if claims != (self.caps.version, self.caps.ops, self.caps.state, self.caps.answers):
            raise _Stop(
                self._failure(
                    "capability",
                    f"the ready line's claims changed: first {self.caps.ops} state "
                    f"{self.caps.state} answers {self.caps.answers}, now {caps.ops} state "
                    f"{caps.state} answers {caps.answers}",
                )
            )
        self.out.format_dirs = (caps.journal_dirs, caps.ledger_dirs)

    def _failure(self, kind: str, message: str, check: str | None = "refinement") -> Failure:
        tail = self.process.stderr_tail() if self.process is not None else ""
        if kind == "progress":
            kind, check = "property", "progress"
        return Failure(kind=kind, message=message, check=check, stderr_tail=tail)

    def abandon(self) -> None:
        """Kill whatever runs (after a failure) and close the open step."""
        if self.process is not None:
            code = self.process.kill()
            self._drain_after_end()
            if self.recorder is not None and not self.recorder.finished:
                self.recorder.finish(code)
            self.process.reap_group()
            self.out.stderr_tail = self.process.stderr_tail()
            self.process = None

    def _drain_after_end(self) -> None:
        """Feed the lines the bookie wrote before it ended."""
        assert self.process is not None
        for line in self.process.take_now():
            if line == EOF:
                return
            with contextlib.suppress(_Stop):
                self._response(line)

    # -- requests and responses

    def send(self, action: Action) -> None:
        assert self.process is not None and self.recorder is not None
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps(_request(request_id, action), separators=(",", ":")).encode() + b"\n"
        if isinstance(action, DeleteAction):
            # Every add answered before the delete is sent: an ack the runner reads only
            # after it sent the delete is recorded in the delete's window (spec/trace.md),
            # which claims the add was answered ok after its ledger was deleted.
            self.settle()
        self._pump_ready()
        if not isinstance(action, ProbeAction):
            self.recorder.request(line)
        self.in_flight[request_id] = _Flight(action.op, action)
        if isinstance(action, DeleteAction):
            self.out.deleted.add(action.ledger)
        self.out.cells.add(Cell(action.op, "none", "none"))
        self.last_op = action.op
        if not self.process.send(line):
            self._ended_unasked()
        if action.op in SYNC_OPS:
            self._wait(lambda: request_id not in self.in_flight, f"the answer to {action.op}")
        if isinstance(action, GcAction) and self._inspects and self.caps.state == "full":
            # The new logs of a compaction are placed by the next state, before any new log
            # (models/bookie/bookie.py ``_place_compacted``): a rotation between the two,
            # with the bookie preallocating on its own, leaves which took which id open.
            self.send(InspectAction())

    def _pump_ready(self) -> None:
        assert self.process is not None
        for line in self.process.take_now():
            if line == EOF:
                self._ended_unasked()
            self._response(line)

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.conf.response_timeout
        while not done():
            line = self.process.take(deadline - time.monotonic())
            if line is None:
                waiting = ", ".join(f"{f.op} (id {i})" for i, f in sorted(self.in_flight.items()))
                raise _Stop(
                    self._failure(
                        "progress",
                        f"{NO_RESPONSE} {self.conf.response_timeout:g} s waiting for "
                        f"{what}; in flight: {waiting or 'nothing'}",
                    )
                )
            if line == EOF:
                self._ended_unasked()
            self._response(line)

    def _ended_unasked(self) -> None:
        assert self.process is not None
        code = self.process.wait_exit(5)
        raise _Stop(
            self._failure(
                "progress",
                f"the bookie ended on its own (exit status {code}) with "
                f"{len(self.in_flight)} request(s) in flight; see its standard error",
            )
        )

    def _response(self, line: bytes) -> None:
        assert self.recorder is not None
        try:
            document = STRICT_DECODER.decode(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            document = None
        if not isinstance(document, dict):
            raise _Stop(
                self._failure(
                    "divergence",
                    f"the bookie wrote a line that is not a JSON object on standard output: "
                    f"{line[:120]!r} (logs go to standard error, spec/adapter.md Framing)",
                )
            )
        request_id = document.get("id")
        flight = self.in_flight.pop(request_id, None) if isinstance(request_id, int) else None
        if flight is None:
            raise _Stop(
                self._failure(
                    "divergence",
                    f"the bookie answered id {request_id!r}, which is not in flight "
                    f"(the runner sends only well-formed requests, each answered once): "
                    f"{line[:120]!r}",
                )
            )
        self.recorder.response(line)
        ok = document.get("ok") is True
        error = document.get("error")
        if flight.op == "probe":
            assert isinstance(flight.action, ProbeAction)
            if ok or error != "unsupported":
                raise _Stop(
                    self._failure(
                        "capability",
                        f"the ready line does not list {flight.action.probe!r} in ops, so it "
                        f"must be answered unsupported (nothing done); it was answered "
                        f"{'ok' if ok else error!r}",
                    )
                )
            return
        if error == "unsupported" and flight.op in self.caps.ops:
            raise _Stop(
                self._failure(
                    "capability",
                    f"the ready line lists {flight.op!r} in ops, but the bookie answered it "
                    f"unsupported: {document.get('message', '')!s:.200}",
                )
            )
        if ok and isinstance(flight.action, AddAction):
            action = flight.action
            self.out.acked[(action.ledger, action.entry)] = action.data

    def settle(self) -> None:
        self._wait(lambda: not self.in_flight, "every request in flight to be answered")

    # -- crashes

    def crash(self, action: KillAction | PowerLossAction) -> None:
        assert self.process is not None and self.recorder is not None
        if action.idle:
            self.settle()
        if self._inspects and self.caps.state == "full":
            # The layout before the crash (which entry logs exist, what they hold): the
            # model predicts what recovery may do from it. Only for the full state: an
            # inspect may make everything before it durable (the JavaScript bookie's does),
            # which would hide what a power loss is there to find. The runner's own look:
            # the crash still meets the operation before it (the coverage cell's).
            before = self.last_op
            self.send(InspectAction())
            self.last_op = before
        drawn = action.plan if isinstance(action, PowerLossAction) else KillProcess()
        name = "torn_write" if isinstance(drawn, TornTail) else PLAN_NAMES[type(drawn)]
        held = False
        if self.lazy is not None and isinstance(action, PowerLossAction) and self.in_flight:
            # The power goes while the bookie is in its fsync, if it gets there soon: its
            # group is written and not durable (where a torn last record comes from).
            self.lazy.hold_fsyncs()
            held = self.lazy.wait_for_fsync(FSYNC_WAIT_S)
        if self.in_flight:
            for flight in self.in_flight.values():
                self.out.cells.add(Cell(flight.op, "in_flight", name))
        elif self.last_op is not None:
            self.out.cells.add(Cell(self.last_op, "idle", name))
        lazy = self.lazy
        # A process blocked in a held fsync exits only once the fsync is failed.
        code = self.process.kill(
            then=(lambda: lazy.release_fsyncs(fail=True)) if lazy is not None else lambda: None
        )
        self._drain_after_end()
        self.recorder.finish(code)
        self.process.reap_group()
        self.in_flight.clear()
        self.out.fsync_held += held
        plan: CrashPlan = KillProcess() if isinstance(drawn, TornTail) else drawn
        if self.lazy is not None:
            if isinstance(drawn, TornTail):
                # Resolved once the bookie is dead: its pending writes are final.
                plan = drawn.resolve(self.lazy.unsynced_writes(), self.lazy.unsynced_operations())
            try:
                if isinstance(action, PowerLossAction):
                    self.lazy.power_loss(plan)
                else:
                    self.lazy.kill()
            except (BkrefError, OSError) as exc:
                raise _Stop(
                    Failure(kind="error", message=f"the lazy disk failed at a crash: {exc}")
                ) from None
        self._write(encode_step(TraceStep(self._next_index, Crash(plan), OK)))
        self.out.crashes += 1
        self.out.power_losses += isinstance(action, PowerLossAction)
        self.start(first=False)
        if self._inspects:
            # The restart step's state: what recovery kept is judged against the crash's
            # outcomes there, before a later request changes it (as the refinement
            # harness does after every restart).
            self.send(InspectAction())

    @property
    def _inspects(self) -> bool:
        return "inspect" in self.caps.ops and self.caps.state != "none"

    # -- the end

    def shutdown(self) -> None:
        """The final clean shutdown: every answer, then the shutdown's, then exit 0."""
        assert self.process is not None and self.recorder is not None
        self.settle()
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"id": request_id, "op": "shutdown"}).encode() + b"\n"
        self.recorder.request(line)
        self.in_flight[request_id] = _Flight("shutdown", None)
        if not self.process.send(line):
            self._ended_unasked()
        self._wait(lambda: request_id not in self.in_flight, "the answer to shutdown")
        process = self.process
        process.close_stdin()  # a bookie behind a relay may read until the end of input
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while (line_ := process.take(deadline - time.monotonic())) not in (EOF, None):
            assert line_ is not None
            self._response(line_)
        code = process.wait_exit(max(0.1, deadline - time.monotonic()))
        if code is None:
            raise _Stop(
                self._failure(
                    "progress", f"the bookie did not exit within {EXIT_TIMEOUT_S:g} s of shutdown"
                )
            )
        self.recorder.finish(code)
        process.reap_group()
        self.out.stderr_tail = process.stderr_tail()
        self.process = None
        self.out.clean_end = code == 0
        if code != 0:
            raise _Stop(
                self._failure("progress", f"the bookie exited with status {code} after shutdown")
            )

    def run(self) -> Execution:
        self.start(first=True)
        try:
            for action in self.scenario.actions:
                if isinstance(action, Settle):
                    self.settle()
                elif isinstance(action, KillAction | PowerLossAction):
                    self.crash(action)
                else:
                    self.send(action)
            self.shutdown()
        except _Stop as stop:
            self.out.failure = stop.failure
            self.abandon()
        return self.out
