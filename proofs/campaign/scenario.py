"""One scenario of a verification campaign: the refinement workload's rules
(proofs/harness/workload.py) drawn from (seed, index) alone, run against bkref's Bookie (or a
variant of it) on the simulated disk through the refinement harness, and turned into one row.

Spec pages: spec/properties.md (what every step is judged against), spec/trace.md (the
shrunk failing trace a row carries), docs/campaign.md ("Rows", the schema).

Why it is shaped so:

- A scenario is a pure function of its :class:`ScenarioSpec`: the random source is seeded
  with a string of everything the draws depend on (never ``hash()``, which changes between
  processes), the bookie runs on the simulated disk with a manual clock, and nothing else is
  read. So a row found on any Spark executor replays on a laptop with ``bkref replay --seed S
  --index I`` at the same commit (:attr:`ScenarioSpec.replay_command`, and the row's
  ``commit``), and tests/unit/proofs/campaign/ checks that two interpreters with different
  hash seeds draw the same trace.
- Rules are drawn as the Hypothesis test draws them (one of the rules whose precondition
  holds, then each argument), uniformly unless a :class:`Focus` favours some rules and crash
  plans (the campaign's second pass steers toward what its first pass missed).
- A failure is shrunk by delta debugging over the rules that ran (a rule whose precondition
  no longer holds is skipped), keeping a candidate only when it fails the same way: the same
  kind of problem at a step of the same operation (:func:`signature`).
- Verdicts: ``fail`` when the bookie under test is wrong (the model or a property refused a
  step, the bookie changed between steps, or the bookie's own code raised), ``error`` when
  the checker itself broke (an exception raised in models/, spec/ or proofs/): such a row
  says nothing about the bookie and is reported apart.

Not verified here: that a scenario's rules reach anything in particular (coverage is counted
per row, proofs/campaign/coverage.py, and judged over the whole campaign).
"""

from __future__ import annotations

import collections
import functools
import importlib
import os
import random
import re
import shlex
import socket
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from impl.bookie.bookie import Bookie
from proofs.campaign.coverage import cells_of
from proofs.campaign.errors import CampaignError
from proofs.harness.promises import promise_keys
from proofs.harness.refinement import MANAGER_SETTINGS, RefinementFailure
from proofs.harness.replay import ReplayError, replay_trace
from proofs.harness.shrink import delta_debug
from proofs.harness.workload import (
    FAULT_KINDS,
    KNOBS,
    PLAN_KINDS,
    STRETCH_MAX,
    WALL_CLOCKS,
    RandomDrawer,
    Rule,
    Steer,
    Workload,
    many_active_logs,
    rules,
)
from spec.operations import Add, Crash, Read, Restart, acknowledgements
from spec.trace import Step, Trace, TraceHeader, write_trace

#: The drawing scheme's version: part of every scenario's seed string, bumped whenever the
#: same (seed, index) would draw another scenario, so that an old row never replays as a
#: different one without saying so.
DRAWS_VERSION = 1
#: The trace steps a scenario runs to unless told (``--steps``): rules are drawn until the
#: trace holds at least this many steps (operations judged, the reads after each restart
#: included). A few times an example of the refinement test's fast profile, whose 50 rules
#: make about 300 steps: deeper histories, where losses that need a long past show.
DEFAULT_STEPS = 400
#: How much more likely a favoured rule is drawn than another.
FOCUS_WEIGHT = 16
#: Re-runs a failure's shrinking may spend.
DEFAULT_SHRINK_RUNS = 80
#: The verdicts of a row.
VERDICTS = ("pass", "fail", "error")
#: Where the checker's own code lives: an exception raised there is an ``error`` row.
CHECKER_PACKAGES = ("models", "spec", "proofs")


@attrs.frozen
class Focus:
    """What a scenario favours: rules drawn FOCUS_WEIGHT times as often, and (three draws in
    four, proofs/harness/workload.py Steer) crash plans of these kinds, crash points inside
    a step, and these injected faults (``op:file``)."""

    rules: frozenset[str] = frozenset()
    plans: frozenset[str] = frozenset()
    inside: bool = False
    faults: frozenset[str] = frozenset()

    @property
    def text(self) -> str:
        """The canonical text (empty for no focus), as ``rules=a,b;plans=c;inside;faults=d``."""
        parts = []
        if self.rules:
            parts.append("rules=" + ",".join(sorted(self.rules)))
        if self.plans:
            parts.append("plans=" + ",".join(sorted(self.plans)))
        if self.inside:
            parts.append("inside")
        if self.faults:
            parts.append("faults=" + ",".join(sorted(self.faults)))
        return ";".join(parts)

    @property
    def steer(self) -> Steer:
        return Steer(self.plans, self.inside, self.faults)

    @classmethod
    def parse(cls, text: str) -> Focus:
        """The focus ``text`` names; raises CampaignError naming what it does not know."""
        known = {
            "rules": {rule.name for rule in rules(many_logs=True)},
            "plans": set(PLAN_KINDS.values()),
            "faults": {f"{op}:{file}" for op, (_, files) in FAULT_KINDS.items() for file in files},
        }
        chosen: dict[str, frozenset[str]] = dict.fromkeys(known, frozenset())
        inside = False
        for part in filter(None, text.split(";")):
            if part == "inside":
                inside = True
                continue
            key, _, value = part.partition("=")
            if key not in known or not value:
                raise CampaignError(
                    f"focus {text!r}: {part!r} is not rules=NAME,..., plans=KIND,..., inside "
                    "or faults=OP:FILE,..."
                )
            names = frozenset(value.split(","))
            unknown = sorted(names - known[key])
            if unknown:
                raise CampaignError(f"focus {text!r}: no {key[:-1]} named {', '.join(unknown)}")
            chosen[key] = names
        return cls(chosen["rules"], chosen["plans"], inside, chosen["faults"])


@attrs.frozen
class ScenarioSpec:
    """Everything one scenario depends on. ``variant``: ``module:name`` of a Bookie subclass
    or opener to check instead of bkref's own Bookie (empty: bkref's); it does not change the
    draws, so the same scenario runs against both."""

    seed: int
    index: int
    steps: int = DEFAULT_STEPS
    focus: Focus = Focus()
    variant: str = ""
    stretch_max: int = STRETCH_MAX
    pass_number: int = 1
    #: The entry-log manager (MANAGER_SETTINGS, over the drawn knobs). A manager with many
    #: active logs adds the write-close and clock rules to the draws
    #: (proofs/harness/workload.py MANY_LOG_RULES): its scenarios are drawn from a rule table
    #: of their own, and their seed text says so (``+write_close+clock``), so an older row
    #: of such a scenario does not replay as a different one without saying so. The single
    #: log's draws are unchanged.
    manager: str = "single"

    def seed_text(self) -> str:
        rules = "+write_close+clock" if many_active_logs(MANAGER_SETTINGS[self.manager]) else ""
        return (
            f"bkref-campaign:{DRAWS_VERSION}{rules}:{self.seed}:{self.index}:{self.steps}:"
            f"{self.stretch_max}:{self.focus.text}"
        )

    def rng(self) -> random.Random:
        return random.Random(self.seed_text())

    @property
    def replay_command(self) -> str:
        """The command that runs this scenario again, locally, without Spark."""
        words = ["bkref", "replay", "--seed", str(self.seed), "--index", str(self.index)]
        if self.steps != DEFAULT_STEPS:
            words += ["--steps", str(self.steps)]
        if self.stretch_max != STRETCH_MAX:
            words += ["--stretch-max", str(self.stretch_max)]
        if self.focus.text:
            words += ["--focus", self.focus.text]
        if self.variant:
            words += ["--variant", self.variant]
        if self.manager != "single":
            words += ["--manager", self.manager]
        return shlex.join(words)


@attrs.frozen
class Call:
    """One rule that ran, with the arguments it was drawn."""

    rule: str
    args: tuple[tuple[str, Any], ...]


@attrs.frozen
class Problem:
    """Why a scenario did not pass. ``verdict`` is ``fail`` or ``error``; ``kind`` is
    ``refinement`` (the harness refused a step: the model, a property, the disk check),
    ``between_rules`` (the bookie changed between steps, or the model's invariants broke
    there), or ``exception`` (code raised: the bookie's for a fail, the checker's for an
    error)."""

    verdict: str
    kind: str
    message: str
    #: The failing step of the trace, when a step was judged and refused.
    step: int | None = None
    #: The model or a property refused the step: the trace alone fails ``bkref check-trace``
    #: the same way (proofs.harness.refinement.RefinementFailure ``replayable``).
    replayable: bool = False


@attrs.frozen
class Execution:
    """One run of a scenario: the rules that ran, the trace, and what went wrong."""

    knobs: tuple[tuple[str, str], ...]
    wall_ms: int
    calls: tuple[Call, ...]
    header: TraceHeader
    steps: tuple[Step, ...]
    problem: Problem | None
    probes: Mapping[str, int]
    shadow_crashes: int
    #: Promises observed: "promise/plan" -> count (proofs/harness/promises.py).
    promises: Mapping[str, int] = attrs.field(factory=dict)

    @property
    def trace(self) -> Trace:
        return Trace(self.header, self.steps)


@attrs.frozen
class ScenarioRow:
    """One row of a campaign's dataset (docs/campaign.md, "Rows": the Parquet schema is
    :data:`proofs.campaign.rows.ROW_FIELDS`)."""

    pass_number: int
    seed: int
    index: int
    steps_asked: int
    rules: int
    focus: str
    variant: str
    bookie: str
    steps: int
    crashes: int
    crash_states: int
    restarts: int
    adds_acked: int
    reads: int
    verdict: str = attrs.field(validator=attrs.validators.in_(VERDICTS))
    failure_kind: str | None
    message: str | None
    failing_step: int | None
    trace: str | None
    steps_before_shrink: int | None
    message_before_shrink: str | None
    coverage: Mapping[str, int]
    probes: Mapping[str, int]
    promises: Mapping[str, int]
    started_at: float
    seconds: float
    shrink_seconds: float
    worker: str
    commit: str
    replay: str

    def to_record(self) -> dict[str, Any]:
        """The row as plain values (maps as dicts), in field order."""
        record = attrs.asdict(self, recurse=False)
        record["coverage"] = dict(self.coverage)
        record["probes"] = dict(self.probes)
        record["promises"] = dict(self.promises)
        return record


# --- running ----------------------------------------------------------------------------


class BookieChanged(AssertionError):
    """The bookie's state moved between two rules, with nothing asked of it."""


NextCall = Callable[[Workload, Sequence[Rule]], Call | None]


def execute(
    opener: Callable[..., Bookie],
    stretch_max: int,
    knobs: Mapping[str, str],
    wall_ms: int,
    next_call: NextCall,
) -> Execution:
    """Run rules on a new workload until ``next_call`` gives None or something fails. The
    steps are the run's, or, when the harness refused a step, the trace it failed with (a
    shadow crash's failure carries the crash, the restart and the reads of the copy it
    crashed), so that the failure replays from the steps alone."""
    probes: collections.Counter[str] = collections.Counter()
    calls: list[Call] = []
    problem: Problem | None = None
    table = rules(stretch_max, many_logs=many_active_logs(knobs))
    work: Workload | None = None
    failed_trace: Trace | None = None
    try:
        work = Workload(opener, stretch_max=stretch_max, seen=lambda t: probes.update((t,)))
        work.configure(dict(knobs), wall_ms)
        while (call := next_call(work, table)) is not None:
            calls.append(call)
            getattr(work, call.rule)(**dict(call.args))
            _check_between_rules(work)
    except RefinementFailure as failure:
        failed_trace = failure.trace
        steps = failure.trace.steps
        step = len(steps) - 1 if steps else None
        problem = Problem("fail", "refinement", failure.message, step, failure.replayable)
    except BookieChanged as exc:
        problem = Problem("fail", "between_rules", str(exc))
    except Exception as exc:
        problem = _exception_problem(exc)
    header, steps = _steps_of(failed_trace, work, knobs)
    return Execution(
        knobs=tuple(sorted(knobs.items())),
        wall_ms=wall_ms,
        calls=tuple(calls),
        header=header,
        steps=tuple(steps),
        problem=problem,
        probes=dict(probes),
        shadow_crashes=0 if work is None else work.harness.shadow_crashes,
        promises={} if work is None else promise_keys(work.harness.judge.promises.counts),
    )


def _steps_of(
    failed_trace: Trace | None, work: Workload | None, knobs: Mapping[str, str]
) -> tuple[TraceHeader, tuple[Step, ...]]:
    """The steps a run leaves: the trace the harness failed with, else the run's own."""
    if failed_trace is not None:
        return failed_trace.header, failed_trace.steps
    if work is not None:
        return work.harness.header, tuple(work.harness.steps)
    # The bookie could not even be opened.
    return TraceHeader(config=tuple(sorted(knobs.items())), source="-"), ()


def _check_between_rules(work: Workload) -> None:
    try:
        work.check_between_rules()
    except AssertionError as exc:
        if type(exc) is AssertionError and "changed between steps" in str(exc):
            raise BookieChanged(str(exc)) from exc
        raise


def _exception_problem(exc: Exception) -> Problem:
    """An exception a rule raised: the checker's own (``error``) when the innermost frame in
    bkref's source tree is in models/, spec/ or proofs/, else the bookie's (``fail``: impl/,
    or a variant's code elsewhere)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = "?"
    verdict = "fail"
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_SOURCE_ROOT + os.sep):
            continue
        relative = os.path.relpath(path, _SOURCE_ROOT).replace(os.sep, "/")
        where = f"{relative}:{frame.lineno} {frame.name}"
        verdict = "error" if relative.split("/")[0] in CHECKER_PACKAGES else "fail"
        break
    first = (str(exc).splitlines() or [""])[0]
    message = f"{type(exc).__name__} in {where}: {first}"
    return Problem(verdict, "exception", message)


#: The directory holding bkref's packages (spec, impl, models, proofs).
_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def drawn_calls(spec: ScenarioSpec, drawer: RandomDrawer) -> NextCall:
    """The next-call function of a seeded scenario: rules until the trace holds
    ``spec.steps`` steps, each one of those whose precondition holds (a favoured one
    FOCUS_WEIGHT times as likely), its arguments drawn by ``drawer``."""
    drawn = [0]

    def next_call(work: Workload, table: Sequence[Rule]) -> Call | None:
        # At most as many rules as steps: a rule that runs nothing (an add at a boundary
        # with no room left) cannot keep a scenario going for ever.
        if len(work.harness.steps) >= spec.steps or drawn[0] >= spec.steps:
            return None
        enabled = [rule for rule in table if work.enabled(rule)]
        if not enabled:
            return None  # the bookie is down for good (a restart recovery refused)
        drawn[0] += 1
        weights = [FOCUS_WEIGHT if r.name in spec.focus.rules else 1 for r in enabled]
        rule = drawer.rng.choices(enabled, weights)[0]
        return Call(rule.name, tuple((name, drawer.draw(how)) for name, how in rule.args))

    return next_call


def recorded_calls(calls: Sequence[Call]) -> NextCall:
    """The next-call function that runs ``calls`` again, skipping a rule whose precondition
    does not hold (shrinking drops the rules that made it hold)."""
    todo: Iterator[Call] = iter(calls)
    by_name: dict[str, Rule] = {}

    def next_call(work: Workload, table: Sequence[Rule]) -> Call | None:
        if not by_name:
            by_name.update((rule.name, rule) for rule in table)
        for call in todo:
            if work.enabled(by_name[call.rule]):
                return call
        return None

    return next_call


def run_drawn(spec: ScenarioSpec, opener: Callable[..., Bookie] | None = None) -> Execution:
    """Draw and run ``spec`` once."""
    drawer = RandomDrawer(spec.rng(), spec.focus.steer)
    knobs = {**drawer.draw(KNOBS), **MANAGER_SETTINGS[spec.manager]}
    wall_ms = drawer.draw(WALL_CLOCKS)
    chosen = opener or load_opener(spec.variant)
    return execute(chosen, spec.stretch_max, knobs, wall_ms, drawn_calls(spec, drawer))


# --- shrinking ----------------------------------------------------------------------------

_STEP_OP = re.compile(r"step \d+ \((\w+)\)")
_PROPERTY = re.compile(r"property (\w+)")


def signature(problem: Problem) -> tuple[str, str, str, str]:
    """How a problem is told apart from another when shrinking: its verdict and kind, the
    operation of the first step its message names, and the property it names (if any)."""
    op = _STEP_OP.search(problem.message)
    prop = _PROPERTY.search(problem.message)
    head = problem.message.split(":", 1)[0] if problem.kind == "exception" else ""
    return (
        f"{problem.verdict}/{problem.kind}",
        op.group(1) if op else "",
        prop.group(1) if prop else "",
        head,
    )


def shrink(
    first: Execution, opener: Callable[..., Bookie], stretch_max: int, runs: int
) -> tuple[Execution, int]:
    """Delta debugging over ``first``'s rules (proofs/harness/shrink.py), keeping a
    candidate that fails the same way. Returns the smallest failing execution and the
    re-runs spent."""
    assert first.problem is not None, "only a failure is shrunk"
    wanted = signature(first.problem)
    best = [first]

    def fails(candidate: list[Call]) -> list[Call] | None:
        tried = execute(
            opener, stretch_max, dict(first.knobs), first.wall_ms, recorded_calls(candidate)
        )
        if tried.problem is None or signature(tried.problem) != wanted:
            return None
        best[0] = tried
        return list(tried.calls)

    _, spent = delta_debug(first.calls, fails, runs)
    return best[0], spent


# --- the row ------------------------------------------------------------------------------


def run_scenario(
    spec: ScenarioSpec,
    *,
    shrink_runs: int = DEFAULT_SHRINK_RUNS,
    opener: Callable[..., Bookie] | None = None,
) -> ScenarioRow:
    """Draw, run and judge ``spec`` (shrinking a failure); never raises for what the bookie
    or the checker does (an ``error`` row instead). Raises CampaignError when the variant
    cannot be loaded."""
    chosen = opener or load_opener(spec.variant)
    started_at = time.time()
    began = time.perf_counter()
    first = run_drawn(spec, chosen)
    seconds = time.perf_counter() - began
    shown, shrink_seconds = first, 0.0
    if first.problem is not None and first.problem.verdict == "fail" and shrink_runs > 0:
        began = time.perf_counter()
        shown, _ = shrink(first, chosen, spec.stretch_max, shrink_runs)
        shrink_seconds = time.perf_counter() - began
    row = row_of(spec, first, shown, started_at, seconds, shrink_seconds)
    unreplayed = record_problem(shown)
    if unreplayed is None:
        return row
    return attrs.evolve(row, verdict="error", failure_kind="record", message=unreplayed)


def record_problem(shown: Execution) -> str | None:
    """Why the failure a row records does not replay from its trace, or None. A failure the
    model or a property saw must fail ``bkref check-trace`` at the same step: a row whose
    trace replays otherwise is the campaign's own fault (an error row), not a finding
    anyone could reproduce."""
    problem = shown.problem
    if problem is None or not problem.replayable:
        return None
    try:
        failure = replay_trace(shown.trace).failure
    except ReplayError as exc:
        return f"the row's trace cannot be replayed ({exc}); the run failed: {problem.message}"
    if failure is not None and failure.step == problem.step:
        return None
    replayed = "passes" if failure is None else f"fails otherwise: {failure.describe()}"
    return f"the row's trace {replayed}; the run failed: {problem.message}"


def row_of(
    spec: ScenarioSpec,
    first: Execution,
    shown: Execution,
    started_at: float,
    seconds: float,
    shrink_seconds: float,
) -> ScenarioRow:
    """The row of a scenario whose run was ``first`` (its counts and coverage) and whose
    failure, if any, is shown by ``shown`` (the shrunk run)."""
    steps = first.steps
    problem = shown.problem if first.problem is not None else None
    failing = first.problem
    return ScenarioRow(
        pass_number=spec.pass_number,
        seed=spec.seed,
        index=spec.index,
        steps_asked=spec.steps,
        rules=len(first.calls),
        focus=spec.focus.text,
        variant=spec.variant,
        bookie=f"bkref in-process ({spec.variant or 'impl.bookie.bookie:Bookie'})",
        steps=len(steps),
        crashes=sum(isinstance(step.op, Crash) for step in steps),
        crash_states=sum(isinstance(step.op, Crash) for step in steps) + first.shadow_crashes,
        restarts=sum(isinstance(step.op, Restart) for step in steps),
        adds_acked=acked_adds(steps),
        reads=sum(isinstance(step.op, Read) for step in steps),
        verdict="pass" if failing is None else failing.verdict,
        failure_kind=None if failing is None else failing.kind,
        message=None if problem is None else problem.message,
        failing_step=None if problem is None else problem.step,
        trace=None if failing is None else write_trace(shown.trace),
        steps_before_shrink=None if failing is None else len(steps),
        message_before_shrink=None if failing is None else failing.message,
        coverage=cells_of(steps),
        probes=dict(first.probes),
        promises=dict(first.promises),
        started_at=started_at,
        seconds=seconds,
        shrink_seconds=shrink_seconds,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        commit=commit(),
        replay=spec.replay_command,
    )


def acked_adds(steps: Sequence[Step]) -> int:
    """Adds acknowledged in ``steps`` (spec/operations.py acknowledgements): each one the
    model then holds to property 1 through every later crash."""
    adds = {step.index for step in steps if isinstance(step.op, Add)}
    return len(
        {
            ack.step
            for step in steps
            for ack in acknowledgements(step.index, step.op, step.result, step.completed)
            if ack.error is None and ack.step in adds
        }
    )


# --- provenance and variants --------------------------------------------------------------


@functools.cache
def commit() -> str:
    """Which code ran: ``git:<sha>`` of the checkout bkref runs from (``+dirty`` when its
    tracked files differ from that commit), else ``bkref <version>`` of the installed
    package."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.exists(os.path.join(root, ".git")):
        try:
            sha = _git(root, "rev-parse", "HEAD")
            dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
            return f"git:{sha}{'+dirty' if dirty else ''}"
        except (OSError, subprocess.SubprocessError):
            pass
    from importlib import metadata

    try:
        return f"bkref {metadata.version('bkref')}"
    except metadata.PackageNotFoundError:
        return "bkref (unknown version)"


def _git(root: str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", root, *args], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.strip()


@functools.cache
def load_opener(variant: str) -> Callable[..., Bookie]:
    """The opener ``variant`` names: ``module:name`` of a Bookie subclass (its ``open``) or
    of a function that opens a bookie as Bookie.open does; empty for bkref's Bookie.
    Raises CampaignError when it cannot be imported or is neither."""
    if not variant:
        return Bookie.open
    module_name, _, attribute = variant.partition(":")
    if not module_name or not attribute:
        raise CampaignError(f"--variant {variant!r}: give it as MODULE:NAME")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CampaignError(
            f"--variant {variant!r}: cannot import {module_name}: {exc} (it must be importable "
            f"on every Spark executor: installed, or on PYTHONPATH)"
        ) from None
    found: Any = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise CampaignError(f"--variant {variant!r}: {module_name} has no {attribute}")
    if isinstance(found, type) and issubclass(found, Bookie):
        opener: Callable[..., Bookie] = found.open
        return opener
    if callable(found):
        return found  # type: ignore[no-any-return]
    raise CampaignError(
        f"--variant {variant!r}: {attribute} is neither a Bookie subclass nor an opener"
    )


# --- what a Spark task is handed ----------------------------------------------------------


def item_of(spec: ScenarioSpec, shrink_runs: int) -> tuple[Any, ...]:
    """A scenario as plain values, for a Spark task (:func:`run_item`)."""
    return (
        spec.seed,
        spec.index,
        spec.steps,
        spec.focus.text,
        spec.variant,
        spec.stretch_max,
        spec.pass_number,
        shrink_runs,
        spec.manager,
    )


def spec_of(item: Sequence[Any]) -> tuple[ScenarioSpec, int]:
    seed, index, steps, focus, variant, stretch_max, pass_number, shrink_runs, manager = item
    spec = ScenarioSpec(
        manager=manager,
        seed=seed,
        index=index,
        steps=steps,
        focus=Focus.parse(focus),
        variant=variant,
        stretch_max=stretch_max,
        pass_number=pass_number,
    )
    return spec, shrink_runs


def run_item(item: Sequence[Any]) -> dict[str, Any]:
    """Run the scenario of :func:`item_of`; its row as a record."""
    spec, shrink_runs = spec_of(item)
    return run_scenario(spec, shrink_runs=shrink_runs).to_record()
