"""The conformance runner: seeded scenarios against an external bookie, judged by the model.

Spec pages: spec/adapter.md (the protocol and its capabilities), spec/trace.md ("Recorded by
bkref record": how lines become steps), spec/profile.py (how a trace is judged),
spec/properties.md (what is checked), docs/conformance.md (the guide).

Why it is shaped so:

- One scenario is one fresh bookie history: a NEW EMPTY data directory, the bookie started
  on it, the scenario's actions (proofs/conform/scenario.py) carried out, crashes and
  restarts included, and a clean ``shutdown`` at the end. The lines are fed, in the order the
  runner sees them, to the same :class:`proofs.cli.record.Recorder` that ``bkref record``
  uses, so a scenario's trace is exactly what ``bkref record`` would have written for the
  same conversation, except that each crash step carries the real plan (``KillProcess`` for a
  SIGKILL, the drawn plan for a power loss) instead of ``unknown``, and a forced ``gc`` is a
  step. The trace's header profile is (acks async, the claimed state, the claimed answers):
  the model judges only what the bookie claims (spec/profile.py).
- The judge is the model's replay (proofs/harness/replay.py), the one ``bkref check-trace``
  runs, so a failing trace the runner writes fails ``check-trace`` the same way.
- Beyond the model: the capability claims (a claimed op must not answer ``unsupported``; one
  unclaimed optional op per scenario must), the framing (a line that is not JSON, an answer to
  an id not in flight, an answer that never comes: every wait has a timeout), and the format
  level (after the final clean shutdown, a copy of the claimed BookKeeper-format directories
  opened with bkref's engine must hold every acknowledged add of a ledger never deleted).
- A failure is shrunk (delta debugging over the actions, re-running the bookie each time)
  and its trace written where ``bkref check-trace`` and ``bkref explain`` replay it.

Not checked: timing (a slow bookie passes if it answers within the response timeout), and
what a bookie does with a request this runner never sends (malformed lines: spec/adapter.md's
own tests cover bkref's; another bookie's strictness is its business).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from proofs.cli.record import Recorder, config_pairs
from proofs.conform.capabilities import CapabilityError, parse_ready
from proofs.conform.process import (
    DEFAULT_START_TIMEOUT_S,
    EOF,
    EXIT_TIMEOUT_S,
    NO_RESPONSE,
    BookieProcess,
    CannotRun,
    hello,
    no_response,
    wait_ready,
)
from proofs.conform.results import CHECKS, Capabilities, Cell, Failure, RunResult, ScenarioResult
from proofs.conform.scenario import (
    PROFILES,
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
    generate,
)
from proofs.harness.promises import PLAN_NAMES
from proofs.harness.replay import Replay, ReplayError, Verdict, summarize
from proofs.harness.shrink import delta_debug
from spec.crash import (
    CrashPlan,
    KillProcess,
)
from spec.errors import BkrefError, TraceError
from spec.ids import EntryId, LedgerId
from spec.operations import OK, Crash, Read, Restart
from spec.profile import Profile
from spec.strict_json import STRICT_DECODER
from spec.trace import Step as TraceStep
from spec.trace import Trace, TraceHeader, encode_header, encode_step, read_trace

__all__ = ["DEFAULT_SHRINK_RUNS", "CannotRun", "Conformance", "LazyDiskUnavailable"]

#: How long a power loss with requests in flight waits for the bookie to reach its fsync.
FSYNC_WAIT_S = 0.1
#: Re-runs a shrink may spend (``--shrink-runs``).
DEFAULT_SHRINK_RUNS = 60
#: How long the runner waits for an answer (and for a stopping bookie to exit).
DEFAULT_RESPONSE_TIMEOUT_S = 30.0
#: Optional ops whose claim the runner holds a bookie to.
SYNC_OPS = frozenset({"read", "delete", "checkpoint", "gc", "inspect", "shutdown", "probe"})


class LazyDiskUnavailable(BkrefError):
    """``--lazy-disk`` was asked for where a FUSE mount cannot be made: the message says what
    to install."""


def lazy_disk_unavailable() -> str | None:
    """Why the lazy disk cannot be used here, or None."""
    from proofs.lazydisk.mount import fuse_unavailable  # not at import: FUSE costs a start

    why: str | None = fuse_unavailable()
    return why


def reproduce_command(adapter: str, seed: int, index: int, profile: str, lazy_disk: bool) -> str:
    """The command line that runs scenario ``index`` again."""
    words = ["bkref", "conform", "--adapter", adapter, "--seed", str(seed)]
    words += ["--scenario", str(index), "--profile", profile]
    if lazy_disk:
        words.append("--lazy-disk")
    return shlex.join(words)


def _check_of(prop: str | None) -> str:
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


class _Session:
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
        header = TraceHeader(
            config=conf.header_config(self.data_dir),
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


def _same(got: Failure, wanted: Failure) -> bool:
    """Whether a shrink candidate fails the same way: the same kind and check, and (for the
    model's failures) at a step of the same operation, so shrinking does not drift to
    another failure of the same class."""
    op = re.compile(r"^step \d+ \((\w+)\)")
    found, expected = op.match(got.message), op.match(wanted.message)
    same_op = (found and found.group(1)) == (expected and expected.group(1))
    return (got.kind, got.check) == (wanted.kind, wanted.check) and same_op


class Conformance:
    """``bkref conform``'s engine (see the module docstring)."""

    def __init__(
        self,
        adapter: str,
        *,
        profile: str = "quick",
        seed: int,
        lazy_disk: bool = False,
        report_dir: str | None = None,
        work_dir: str | None = None,
        progress: Callable[[str], None] | None = None,
        shrink: bool = True,
        shrink_runs: int = DEFAULT_SHRINK_RUNS,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        response_timeout: float = DEFAULT_RESPONSE_TIMEOUT_S,
        size: tuple[int, int] | None = None,
    ) -> None:
        """``size``: (requests, crashes) of every scenario instead of the profile's
        (proofs/conform/scenario.py generate)."""
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
        self.adapter = adapter
        self.profile = profile
        self.seed = seed
        self.lazy_disk = lazy_disk
        self.report_dir = report_dir
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="bkref-conform-")
        self.progress = progress or (lambda _line: None)
        self.shrink = shrink
        self.shrink_runs = shrink_runs
        self.start_timeout = start_timeout
        self.response_timeout = response_timeout
        self.size = size
        self._caps: Capabilities | None = None
        self._runs = 0

    # -- the bookie's claims

    def capabilities(self) -> Capabilities:
        """Start the bookie once on a scratch directory, read its ready line, shut it down.
        Raises CannotRun (with its stderr) or CapabilityError."""
        if self._caps is not None:
            return self._caps
        scratch = tempfile.mkdtemp(prefix="hello-", dir=self._ensure_work_dir())
        data_dir = os.path.join(scratch, "data")
        os.mkdir(data_dir)
        process = BookieProcess(self.adapter, data_dir, os.path.join(scratch, "stderr.log"))
        try:
            line = hello(process, self.start_timeout, self.response_timeout)
            caps = parse_ready(line)
        finally:
            process.reap_group()
            if process.child.poll() is None:
                process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
        self._caps = caps
        return caps

    def scenario_count(self) -> int:
        return PROFILES[self.profile][0]

    def scenario(self, index: int) -> Scenario:
        return generate(
            self.seed,
            index,
            profile=self.profile,
            capabilities=self.capabilities(),
            lazy_disk=self.lazy_disk,
            size=self.size,
        )

    def header_config(self, data_dir: str) -> tuple[tuple[str, str], ...]:
        """The trace header's configuration: the ``--set KEY=VALUE`` pairs of the adapter
        command (bkref's adapter takes them; the model reads logSizeLimit and the GC
        settings from them), with ``{data_dir}`` filled in."""
        try:
            words = [w.replace("{data_dir}", data_dir) for w in shlex.split(self.adapter)]
            return config_pairs(words, ())
        except Exception:
            return ()

    def _ensure_work_dir(self) -> str:
        os.makedirs(self.work_dir, exist_ok=True)
        return self.work_dir

    # -- scenarios

    def run_one(self, index: int) -> ScenarioResult:
        """Run scenario ``index`` (shrunk on failure); never raises for what the bookie
        does (CannotRun when it cannot start at all)."""
        started = time.monotonic()
        scenario = self.scenario(index)
        outcome = self._attempt(scenario)
        result, execution, trace = outcome
        if result.failure is not None and result.verdict == "fail":
            failure = self._finish_failure(scenario, result.failure, execution, trace)
            result = attrs.evolve(result, failure=failure)
        elif result.failure is not None:
            kept = None
            if result.failure.kit_error and len(execution.lines) > 1:
                # The kit's own failure: keep the trace that shows it (never shrunk: the
                # bookie is not at fault), for the report the message asks for.
                kept = self._write_trace(index, execution.lines)
            failure = attrs.evolve(
                result.failure,
                reproduce=reproduce_command(
                    self.adapter, self.seed, index, self.profile, self.lazy_disk
                ),
                trace_path=kept,
            )
            result = attrs.evolve(result, failure=failure)
        return attrs.evolve(result, seconds=time.monotonic() - started)

    def run_once(self, index: int) -> tuple[ScenarioResult, Trace | None]:
        """Run scenario ``index`` once, not shrunk: its result and its whole trace (None when
        the bookie left none: it did not start). ``bkref replay --adapter`` prints it."""
        result, _, trace = self._attempt(self.scenario(index))
        return result, trace

    def _attempt(self, scenario: Scenario) -> tuple[ScenarioResult, Execution, Trace | None]:
        """Carry out and judge ``scenario`` once."""
        self._runs += 1
        scenario_dir = os.path.join(
            self._ensure_work_dir(), f"scenario-{scenario.index}-run-{self._runs}"
        )
        os.makedirs(scenario_dir)
        data_dir = os.path.join(scenario_dir, "data")
        os.mkdir(data_dir)
        caps = self.capabilities()
        session = _Session(self, caps, scenario, scenario_dir)
        lazy = self._mount(data_dir)
        session.lazy = lazy
        try:
            execution = session.run()
            format_failure = None
            if execution.clean_end and execution.failure is None and caps.ledger_dirs:
                format_failure = self._format_check(execution, scenario_dir)
        except CannotRun as exc:
            execution = session.out
            execution.failure = Failure(
                kind="error", message=exc.reason, stderr_tail=exc.stderr_tail
            )
            format_failure = None
        finally:
            if lazy is not None:
                with contextlib.suppress(Exception):
                    lazy.unmount()
        result, trace = self._judge(scenario, execution, format_failure)
        if result.verdict == "pass":
            shutil.rmtree(scenario_dir, ignore_errors=True)
        return result, execution, trace

    def _mount(self, data_dir: str) -> Any:
        if not self.lazy_disk:
            return None
        why = lazy_disk_unavailable()
        if why is not None:
            raise LazyDiskUnavailable(f"--lazy-disk cannot be used here: {why}")
        from proofs.lazydisk.mount import LazyDisk

        lazy = LazyDisk(data_dir)
        try:
            lazy.mount()
        except (BkrefError, OSError) as exc:
            raise LazyDiskUnavailable(f"--lazy-disk: cannot mount {data_dir}: {exc}") from None
        return lazy

    def _judge(
        self, scenario: Scenario, execution: Execution, format_failure: Failure | None
    ) -> tuple[ScenarioResult, Trace | None]:
        trace: Trace | None = None
        failure = execution.failure
        promises: Counter[tuple[str, str]] = Counter()
        reads = 0
        acked = 0
        steps = len(execution.lines) - 1
        try:
            trace = read_trace(execution.lines, f"scenario {scenario.index}")
            verdict, promises = judge_observing(trace)
            judged = [report.step for report in verdict.reports]
            reads = sum(isinstance(step.op, Read) and not step.result.crashed for step in judged)
            acked = summarize(judged).adds_acknowledged
            # The runner's own capability and error findings stand; a framing or progress
            # failure gives way to the model's, whose trace is the evidence.
            if verdict.failure is not None and (
                failure is None or failure.kind not in ("error", "capability")
            ):
                model = verdict.failure
                failure = Failure(
                    kind=model.kind,
                    message=model.describe(),
                    check=_check_of(model.prop),
                    step=model.step,
                    stderr_tail=execution.stderr_tail,
                )
        except (TraceError, ReplayError) as exc:
            if failure is None:
                failure = Failure(
                    kind="error",
                    message=f"bkref conform cannot judge this scenario: a bug of the kit, not "
                    f"of the bookie (report it with the trace below and the seed): {exc}",
                    stderr_tail=execution.stderr_tail,
                    kit_error=True,
                )
        if failure is None:
            failure = format_failure
        if failure is not None and not failure.stderr_tail:
            failure = attrs.evolve(failure, stderr_tail=execution.stderr_tail)
        verdict_name = "pass" if failure is None else "error" if failure.kind == "error" else "fail"
        result = ScenarioResult(
            promises=tuple(sorted((p, plan, n) for (p, plan), n in promises.items())),
            index=scenario.index,
            verdict=verdict_name,
            steps=steps,
            crashes=execution.crashes,
            power_losses=execution.power_losses,
            adds_acknowledged=acked,
            reads_checked=reads,
            seconds=0.0,
            cells=frozenset(execution.cells),
            failure=failure,
        )
        return result, trace

    # -- the format level

    def _format_check(self, execution: Execution, scenario_dir: str) -> Failure | None:
        """Open a copy of the claimed BookKeeper-format directories with bkref's engine and
        read back every acknowledged add of a ledger no delete was sent for."""
        from impl.bookie.bookie import Bookie
        from impl.clock import SystemClock
        from impl.config.config import load_config
        from impl.fs.os_backend import OsFileSystem

        journals, ledgers = execution.format_dirs
        copy_root = os.path.join(scenario_dir, "format-copy")
        copies: list[list[str]] = [[], []]
        try:
            for group, dirs in enumerate((journals, ledgers)):
                for i, source in enumerate(dirs):
                    target = os.path.join(copy_root, f"{'jl'[group]}{i}")
                    shutil.copytree(source, target)
                    # The copy is at another path: its bkref stamp (if any) names the
                    # original, so it is opened as BookKeeper files (spec/format/identity.md).
                    stamp = os.path.join(target, "current", "bkref-identity")
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(stamp)
                    copies[group].append(target)
            config = load_config(
                None,
                "bkref conform (format level)",
                [
                    f"journalDirectories={','.join(copies[0])}",
                    f"ledgerDirectories={','.join(copies[1])}",
                ],
            )
            bookie = Bookie.open(
                OsFileSystem(),
                config,
                clock=SystemClock(),
                rng=random.Random(0),
                write_bookkeeper_dirs=True,
            )
        except (OSError, BkrefError) as exc:
            return Failure(
                kind="format",
                message=f"bkref's engine cannot open a copy of the bookie's format directories "
                f"{list(journals)} {list(ledgers)}: {exc}",
                check="refinement",
            )
        try:
            for (ledger, entry), data in sorted(execution.acked.items()):
                if ledger in execution.deleted:
                    continue
                try:
                    found = bookie.read_entry(LedgerId(ledger), EntryId(entry))
                except BkrefError as exc:
                    return Failure(
                        kind="format",
                        message=f"ledger {ledger} entry {entry} was acknowledged, but bkref's "
                        f"readers do not find it in the bookie's files: {exc}",
                        check="durability",
                    )
                if found != data:
                    return Failure(
                        kind="format",
                        message=f"ledger {ledger} entry {entry}: bkref's readers find "
                        f"{len(found)} bytes in the bookie's files, not the {len(data)} "
                        "acknowledged",
                        check="durability",
                    )
        finally:
            with contextlib.suppress(Exception):
                bookie.shutdown()
            shutil.rmtree(copy_root, ignore_errors=True)
        return None

    # -- failures

    def _finish_failure(
        self, scenario: Scenario, failure: Failure, execution: Execution, trace: Trace | None
    ) -> Failure:
        before = len(execution.lines) - 1
        whole = self._write_trace(scenario.index, execution.lines, suffix="-unshrunk")
        context = failure_context(trace, failure.step) if trace is not None else []
        if self.shrink and not no_response(failure.message):  # a re-run waits it out again
            scenario, failure, execution, trace = self._shrink(scenario, failure, execution, trace)
        path = self._write_trace(scenario.index, execution.lines)
        told = tell(trace) if trace is not None else []
        return attrs.evolve(
            failure,
            trace_path=path,
            told=tuple(told),
            reproduce=reproduce_command(
                self.adapter, self.seed, scenario.index, self.profile, self.lazy_disk
            ),
            steps_before_shrink=before,
            steps_after_shrink=len(execution.lines) - 1,
            unshrunk_path=whole,
            context=tuple(context),
        )

    def _shrink(
        self, scenario: Scenario, failure: Failure, execution: Execution, trace: Trace | None
    ) -> tuple[Scenario, Failure, Execution, Trace | None]:
        """Delta debugging over the actions (proofs/harness/shrink.py), keeping a candidate
        that fails with the same kind and check."""
        self.progress(f"scenario {scenario.index}: shrinking {len(scenario.actions)} actions")
        best = (scenario, failure, execution, trace)

        def fails(candidate: list[Action]) -> list[Action] | None:
            nonlocal best
            shrunk = scenario.with_actions(tuple(candidate))
            result, run, run_trace = self._attempt(shrunk)
            got = result.failure
            if result.verdict != "fail" or got is None or not _same(got, failure):
                return None
            best = (shrunk, got, run, run_trace)
            return candidate

        actions, spent = delta_debug(scenario.actions, fails, self.shrink_runs)
        self.progress(
            f"scenario {scenario.index}: shrunk to {len(actions)} actions ({spent} re-runs)"
        )
        return best

    def _write_trace(self, index: int, lines: Sequence[str], suffix: str = "") -> str:
        directory = os.path.join(self.report_dir or self._ensure_work_dir(), "traces")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"scenario-{index}{suffix}.jsonl")
        with open(path, "w", encoding="ascii") as out:
            out.write("\n".join(lines) + "\n")
        return path

    # -- the run

    def run(self, indices: Sequence[int] | None = None) -> RunResult:
        """Every scenario of the profile (or ``indices``). A bookie that cannot start, a
        capability error or a lazy disk that cannot mount is a RunResult with ``error``."""
        started = time.monotonic()
        results: list[ScenarioResult] = []
        try:
            caps = self.capabilities()
        except (CannotRun, CapabilityError, LazyDiskUnavailable) as exc:
            return self._result(None, results, started, str(exc))
        self.progress(
            f"bookie: {caps.bookie or 'version 1 (no capabilities)'}; levels "
            f"{', '.join(caps.levels)}; ops {', '.join(sorted(caps.ops)) or 'core only'}; "
            f"answers {caps.answers}"
        )
        chosen = list(indices) if indices is not None else list(range(self.scenario_count()))
        for index in chosen:
            try:
                result = self.run_one(index)
            except (CannotRun, LazyDiskUnavailable) as exc:
                return self._result(caps, results, started, str(exc))
            results.append(result)
            self.progress(describe_result(result, len(chosen)))
            if result.failure is not None and no_response(result.failure.message):
                left = len(chosen) - len(results)
                if left:  # each would wait the response timeout out on a silent bookie
                    self.progress(f"the bookie stopped answering: {left} scenario(s) not run")
                break
        return self._result(caps, results, started, None)

    def _result(
        self,
        caps: Capabilities | None,
        results: list[ScenarioResult],
        started: float,
        error: str | None,
    ) -> RunResult:
        return RunResult(
            adapter=self.adapter,
            profile=self.profile,
            seed=self.seed,
            lazy_disk=self.lazy_disk,
            capabilities=caps,
            scenarios=tuple(results),
            seconds=time.monotonic() - started,
            error=error,
        )


def describe_result(result: ScenarioResult, total: int) -> str:
    """One line of the terminal summary per scenario."""
    crashes = f"{result.crashes} crash(es)"
    if result.power_losses:
        crashes += f" ({result.power_losses} power loss(es))"
    line = (
        f"scenario {result.index + 1}/{total} (#{result.index}): {result.verdict.upper()} "
        f"{result.steps} steps, {crashes}, {result.adds_acknowledged} acked adds checked, "
        f"{result.reads_checked} reads, {result.seconds:.1f} s"
    )
    if result.failure is not None:
        line += f"\n  {result.failure.kind}: {result.failure.message}"
    return line


def judge_observing(trace: Trace) -> tuple[Verdict, Counter[tuple[str, str]]]:
    """``replay_trace``, with the promises each step observed on the way
    (proofs/harness/promises.py); raises ReplayError."""
    replay = Replay(trace.header)
    reports = []
    for step in trace.steps:
        report = replay.advance(step)
        reports.append(report)
        if report.failure is not None:
            break
    return Verdict(trace, tuple(reports)), replay.judge.promises.counts


#: Lines of the unshrunk history shown beside a failure (the last ones before it).
CONTEXT_LINES_MAX = 30


def failure_context(trace: Trace, failing: int | None) -> list[str]:
    """The steps of the unshrunk ``trace`` that lead to the failing step: those naming its
    ledger, the crashes and restarts, and the failing step itself, one line each
    (``bkref check-trace``'s words), the last CONTEXT_LINES_MAX of them."""
    if failing is None or not 0 <= failing < len(trace.steps):
        return []
    from proofs.cli.check_trace import describe_step

    ledger = getattr(trace.steps[failing].op, "ledger", None)
    lines = []
    for step in trace.steps[: failing + 1]:
        named = getattr(step.op, "ledger", None)
        acks = any(
            getattr(trace.steps[done.step].op, "ledger", None) == ledger
            for done in step.completed
            if done.step < len(trace.steps)
        )
        if named == ledger or acks or isinstance(step.op, Crash | Restart):
            marker = ">" if step.index == failing else " "
            lines.append(f"{marker}{step.index:5d}  {describe_step(step, trace.steps)}")
    return lines[-CONTEXT_LINES_MAX:]


def tell(trace: Trace) -> list[str]:
    """``bkref explain``'s telling of ``trace`` (every step, up to the failure)."""
    from proofs.cli.explain import Story, header_lines

    if not trace.steps:
        return []
    lines = header_lines("trace", trace, 0, len(trace.steps) - 1)
    try:
        replay = Replay(trace.header)
        story = Story(trace, show_state=False)
        for step in trace.steps:
            report = replay.advance(step)
            lines += story.tell(report, replay.model)
            if report.failure is not None:
                break
    except ReplayError as exc:
        lines.append(f"the model cannot run the rest: {exc}")
    return lines
