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

import contextlib
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

from proofs.cli.record import config_pairs
from proofs.conform.capabilities import CapabilityError, parse_ready
from proofs.conform.process import (
    DEFAULT_START_TIMEOUT_S,
    BookieProcess,
    CannotRun,
    hello,
    no_response,
)
from proofs.conform.results import Capabilities, Failure, RunResult, ScenarioResult
from proofs.conform.scenario import (
    PROFILES,
    Action,
    Scenario,
    generate,
)
from proofs.conform.session import (
    DEFAULT_RESPONSE_TIMEOUT_S,
    Execution,
    Session,
    check_of,
)
from proofs.harness.replay import Replay, ReplayError, Verdict, summarize
from proofs.harness.shrink import delta_debug
from spec.errors import BkrefError, TraceError
from spec.ids import EntryId, LedgerId
from spec.operations import Crash, Read, Restart
from spec.trace import Trace, read_trace

__all__ = ["DEFAULT_SHRINK_RUNS", "CannotRun", "Conformance", "LazyDiskUnavailable"]

#: Re-runs a shrink may spend (``--shrink-runs``).
DEFAULT_SHRINK_RUNS = 60


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
        session = Session(self, caps, scenario, scenario_dir)
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
                    check=check_of(model.prop),
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
