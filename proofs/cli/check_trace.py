"""``bkref check-trace TRACE``: replay a recorded trace against the model and the properties.

A trace (spec/trace.md) records one history of a bookie: every step with what the bookie
answered, the acks that arrived, and the abstract state where the recorder captured it. It
may come from the refinement harness (proofs/harness/refinement.py writes one when a check fails) or
from a run of another implementation through its adapter (spec/adapter.md). This command
decides whether a correct bookie could have produced it, step by step, exactly as the
harness does: ``BookieModel.step`` with the step's answer and acks, then ``compare`` with
the recorded state (when there is one and the bookie is up), then the properties of
spec/properties.md (spec/properties.py ``PropertyMonitor``). It stops at the first step that fails
and prints it with the steps leading to it, in words.

The replay (:class:`Replay`, :func:`replay_trace`) is shared with ``bkref explain``
(proofs/cli/explain.py) and the tests; it never raises for what a trace holds: a divergence or a
violation is a :class:`Failure` in the verdict, and a trace the model cannot run at all (a
request while the bookie is down, a configuration it cannot take, a history outside what
the model covers) raises :class:`ReplayError`.

Not verified here: the trace's form (spec/trace.py ``read_trace`` checks it before the
replay), and the first state-carrying step's marks: the harness compares the bookie's state
before its first step too, which a trace does not record, so the first recorded state is
adopted as the harness adopts the state after a restart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from models.bookie.bookie import BookieModel, Divergence, ModelConfig, ModelUsageError
from spec.errors import BkrefError, TraceError
from spec.operations import Add, Crash, Delete, Fence, Operation, Read, Restart
from spec.properties import PropertyMonitor, Violation
from spec.trace import Step, Trace, TraceHeader, read_trace_bytes

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


class ReplayError(BkrefError):
    """The model cannot run a trace: a bug of the trace's scenario (a request while the
    bookie is down, a crash while it is down), a configuration the model cannot take, or a
    history beyond what the model covers. Not a verdict on the bookie."""


@attrs.frozen
class Failure:
    """The first step the model or a property refuses. ``kind`` is ``divergence`` (the
    model does not allow the answer or the state) or ``property`` (``prop`` is broken)."""

    step: int
    op: str
    kind: str = attrs.field(validator=attrs.validators.in_(("divergence", "property")))
    message: str
    prop: str | None = None

    def describe(self) -> str:
        if self.kind == "property":
            return f"step {self.step} ({self.op}) breaks property {self.prop}: {self.message}"
        return f"step {self.step} ({self.op}) diverges from the model: {self.message}"


@attrs.frozen
class StepReport:
    """One replayed step: what the model said it means, and the failure it caused, if any."""

    step: Step
    notes: tuple[str, ...]
    failure: Failure | None = None


@attrs.frozen
class Summary:
    """Counts over the replayed steps, for the one-line verdict."""

    steps: int
    adds_acknowledged: int
    crashes: int
    restarts: int

    def describe(self) -> str:
        return (
            f"{self.steps} steps, {self.adds_acknowledged} adds acknowledged, "
            f"{_plural(self.crashes, 'crash', 'crashes')}, "
            f"{_plural(self.restarts, 'restart', 'restarts')}"
        )


@attrs.frozen
class Verdict:
    """The replay of a trace: one report per replayed step (the failing one last)."""

    trace: Trace
    reports: tuple[StepReport, ...]

    @property
    def failure(self) -> Failure | None:
        return self.reports[-1].failure if self.reports else None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> Summary:
        return summarize([report.step for report in self.reports])


# --- the replay -----------------------------------------------------------------------------


class Replay:
    """The model and the property monitor, fed a trace one step at a time (the harness's
    loop without the implementation). After a failure no further step is taken."""

    def __init__(self, header: TraceHeader) -> None:
        try:
            config = ModelConfig.from_settings(dict(header.config))
            self.model = BookieModel(config)
        except ModelUsageError as exc:
            raise ReplayError(f"the trace's configuration: {exc}") from None
        except AssertionError as exc:
            raise ReplayError(
                f"the model cannot run the trace's configuration ({exc or 'an assertion'}); "
                "logSizeLimit must be more than the 1024-byte entry log header"
            ) from None
        self.monitor = PropertyMonitor()
        self.failure: Failure | None = None
        self.taken = 0

    def advance(self, step: Step) -> StepReport:
        """Replay ``step`` (the next one); raises ReplayError when the model cannot run it."""
        assert self.failure is None, "the replay stopped at a failure"
        assert step.index == self.taken, (step.index, self.taken)
        self.taken += 1
        op = step.op
        try:
            notes = self.model.step(step.index, op, step.result, step.completed)
            if step.state is not None and self.model.up:
                notes += self.model.compare(step.index, step.state, op.name)
        except Divergence as exc:
            self.failure = Failure(step.index, op.name, "divergence", exc.message)
            return StepReport(step, (), self.failure)
        except ModelUsageError as exc:
            raise ReplayError(_usage(step, str(exc))) from None
        except Exception as exc:  # a model assertion: no traceback for user input
            raise ReplayError(_model_broke(step, exc)) from None
        violations = self._observe(step)
        if violations:
            first = violations[0]
            message = "; ".join(v.message for v in violations if v.prop == first.prop)
            self.failure = Failure(step.index, op.name, "property", message, first.prop)
        return StepReport(step, tuple(notes), self.failure)

    def _observe(self, step: Step) -> list[Violation]:
        try:
            violations = self.monitor.observe(step)
            self.model.check_invariants()
        except Exception as exc:
            raise ReplayError(_model_broke(step, exc)) from None
        return violations

    def check_invariants(self) -> None:
        assert self.taken >= 0, self.taken
        assert self.failure is None or self.failure.step == self.taken - 1, self.failure
        self.model.check_invariants()
        self.monitor.check_invariants()


def _usage(step: Step, message: str) -> str:
    prefix = f"step {step.index}: "
    text = message[len(prefix) :] if message.startswith(prefix) else message
    return (
        f"step {step.index} ({step.op.name}): the model cannot run this history: {text}. "
        "Fix the scenario that recorded the trace"
    )


def _model_broke(step: Step, exc: Exception) -> str:
    detail = str(exc) or "no message"
    return (
        f"step {step.index} ({step.op.name}): the model cannot follow this history "
        f"({type(exc).__name__}: {detail}); it is outside what the model covers (an entry "
        "added twice, say) or a bug of the model: report it with the trace"
    )


def replay_trace(trace: Trace) -> Verdict:
    """Replay every step of ``trace`` until the first failure; raises ReplayError."""
    replay = Replay(trace.header)
    reports: list[StepReport] = []
    for step in trace.steps:
        report = replay.advance(step)
        reports.append(report)
        if report.failure is not None:
            break
    return Verdict(trace, tuple(reports))


def summarize(steps: Sequence[Step]) -> Summary:
    """How many steps, acknowledged adds, crashes and restarts ``steps`` hold."""
    adds = {step.index for step in steps if isinstance(step.op, Add)}
    acknowledged = {step.index for step in steps if step.index in adds and step.result.ok}
    for step in steps:
        acknowledged.update(
            done.step for done in step.completed if done.error is None and done.step in adds
        )
    return Summary(
        steps=len(steps),
        adds_acknowledged=len(acknowledged),
        crashes=sum(isinstance(step.op, Crash) for step in steps),
        restarts=sum(isinstance(step.op, Restart) and step.result.ok for step in steps),
    )


# --- steps in words -------------------------------------------------------------------------


def describe_op(op: Operation) -> str:
    """The operation in a few words: ``add 1:3 (100 bytes, key 6b)``."""
    if isinstance(op, Add):
        return f"add {op.ledger}:{op.entry} ({len(op.data)} bytes, key {_key(op.key)})"
    if isinstance(op, Read):
        return f"read {op.ledger}:{op.entry}"
    if isinstance(op, Fence):
        return f"fence ledger {op.ledger} (key {_key(op.key)})"
    if isinstance(op, Delete):
        return f"delete ledger {op.ledger}"
    if isinstance(op, Crash):
        return f"crash: {op.plan.describe()}"
    return op.name.replace("_", " ")


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
    return text


def _targets(ops: Sequence[Operation]) -> str:
    """Acknowledged adds and fences, compactly: ``add 1:0-4, 2:0; fence 3``."""
    entries: dict[int, list[int]] = {}
    fences: list[int] = []
    for op in ops:
        if isinstance(op, Add):
            entries.setdefault(op.ledger, []).append(op.entry)
        elif isinstance(op, Fence):
            fences.append(op.ledger)
    parts = []
    if entries:
        adds = ", ".join(
            f"{ledger}:{number_ranges(sorted(set(ids)))}" for ledger, ids in sorted(entries.items())
        )
        parts.append(f"add {adds}")
    if fences:
        parts.append(f"fence {number_ranges(sorted(set(fences)))}")
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


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


# --- the command ----------------------------------------------------------------------------


def load_trace(path: str) -> tuple[str, Trace]:
    """The trace's name for messages and the trace, from a file or (``-``) stdin. Raises
    ReplayError when it cannot be read and TraceError when it is not a valid trace."""
    if path == "-":
        name = "<stdin>"
        data = sys.stdin.buffer.read()
    else:
        name = path
        try:
            with open(path, "rb") as source:
                data = source.read()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ReplayError(
                f"cannot read {path}: {reason}; give the path of a trace file "
                "(spec/trace.md) or - for stdin"
            ) from None
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
    lines.append(f"the {_plural(shown, 'step', 'steps')} leading to it, and the step:")
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
