"""The replay of a recorded trace against the model and the properties: the refinement
harness's loop without the implementation.

A trace (spec/trace.md) records one history of a bookie: every step with what the bookie
answered, the acks that arrived, and the abstract state where the recorder captured it. It
may come from the refinement harness (proofs/harness/refinement.py writes one when a check
fails) or from a run of another implementation through its adapter (spec/adapter.md). The
replay decides whether a correct bookie could have produced it, step by step, with the
harness's own judge (proofs/harness/judge.py: the model's step and compare, the properties
of spec/properties.md, the invariants), and stops at the first step that fails.

The replay (:class:`Replay`, :func:`replay_trace`) serves ``bkref check-trace``
(proofs/cli/check_trace.py), ``bkref explain`` (proofs/cli/explain.py) and the tests; it never
raises for what a trace holds: a divergence or a violation is a :class:`ReplayFailure` in the
verdict, and a trace the model cannot run at all (a request while the bookie is down, a
configuration it cannot take, a history outside what the model covers) raises
:class:`ReplayError`.

The trace's header chooses the profile it is judged with (spec/profile.py: how acks arrive,
how much of the state is judged, which answers are allowed where BookKeeper and bkref
differ); the model and the property monitor both take it.

Not verified here: the trace's form (spec/trace.py ``read_trace`` checks it before the
replay), and the first recorded marks: journal ids are the bookie's own (BookKeeper's are
timestamps), so the model learns the marks from the first state and holds the later ones to
how marks must move. The entry logs, ledgers and deletions are predicted from the start: the
first run of a trace starts on empty directories.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from impl.config.config import load_config
from models.bookie.bookie import BookieModel, ModelConfig, ModelUsageError
from proofs.harness.judge import Judge, Judgement
from spec.errors import BkrefError, ConfigError
from spec.operations import Add, Crash, Restart
from spec.properties import PropertyMonitor
from spec.trace import Step, Trace, TraceHeader


class ReplayError(BkrefError):
    """The model cannot run a trace: a bug of the trace's scenario (a request while the
    bookie is down, a crash while it is down), a configuration the model cannot take, or a
    history beyond what the model covers. Not a verdict on the bookie."""


@attrs.frozen
class ReplayFailure:
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

    @classmethod
    def of(cls, step: Step, judgement: Judgement) -> ReplayFailure | None:
        """The failure of a judged step, or None: a divergence, else the first broken
        property with every message of that property."""
        if judgement.divergence is not None:
            divergence = judgement.divergence
            tag = f" [{divergence.rule}]" if divergence.rule else ""
            return cls(step.index, step.op.name, "divergence", divergence.message + tag)
        if not judgement.violations:
            return None
        first = judgement.violations[0]
        message = "; ".join(v.message for v in judgement.violations if v.prop == first.prop)
        return cls(step.index, step.op.name, "property", message, first.prop)


@attrs.frozen
class StepReport:
    """One replayed step: what the model said it means, and the failure it caused, if any."""

    step: Step
    notes: tuple[str, ...]
    failure: ReplayFailure | None = None


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
            f"{plural(self.crashes, 'crash', 'crashes')}, "
            f"{plural(self.restarts, 'restart', 'restarts')}"
        )


@attrs.frozen
class Verdict:
    """The replay of a trace: one report per replayed step (the failing one last)."""

    trace: Trace
    reports: tuple[StepReport, ...]

    @property
    def failure(self) -> ReplayFailure | None:
        return self.reports[-1].failure if self.reports else None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> Summary:
        return summarize([report.step for report in self.reports])


# --- the replay -----------------------------------------------------------------------------


def _check_config_keys(header: TraceHeader) -> None:
    """Read the header's configuration as a bookie reads its own (impl/config/config.py):
    an unknown or misspelt key, or a value bkref refuses (as the adapter would refuse it),
    is an unusable trace, not a run judged with default limits (issue 26). Values the model
    takes are checked by the model first, in its own words."""
    # One line per key: a line break inside a value is written as the properties escape.
    lines = [
        f"{key}=" + value.replace("\r", "\\r").replace("\n", "\\n") for key, value in header.config
    ]
    try:
        load_config("\n".join(lines) + "\n", "the trace header's config", [])
    except ConfigError as exc:
        raise ReplayError(f"the trace's configuration: {exc}") from None


class Replay:
    """The judge (model and property monitor) fed a trace one step at a time. After a
    failure no further step is taken."""

    def __init__(self, header: TraceHeader) -> None:
        try:
            config = ModelConfig.from_settings(dict(header.config), header.profile)
            model = BookieModel(config)
        except ModelUsageError as exc:
            raise ReplayError(f"the trace's configuration: {exc}") from None
        except AssertionError as exc:
            raise ReplayError(
                f"the model cannot run the trace's configuration ({_first_line(exc)}); "
                "logSizeLimit must be more than the 1024-byte entry log header"
            ) from None
        _check_config_keys(header)
        self.judge = Judge(model, PropertyMonitor(header.profile))
        self.model = model
        self.monitor = self.judge.monitor
        self.failure: ReplayFailure | None = None
        self.taken = 0

    def advance(self, step: Step) -> StepReport:
        """Replay ``step`` (the next one); raises ReplayError when the model cannot run it."""
        assert self.failure is None, "the replay stopped at a failure"
        assert step.index == self.taken, (step.index, self.taken)
        self.taken += 1
        try:
            judgement = self.judge.judge(step)
        except ModelUsageError as exc:
            raise ReplayError(_usage(step, str(exc))) from None
        except Exception as exc:  # a model assertion: no traceback for user input
            raise ReplayError(_model_broke(step, exc)) from None
        self.failure = ReplayFailure.of(step, judgement)
        return StepReport(step, judgement.notes, self.failure)

    def check_invariants(self) -> None:
        assert self.taken >= 0, self.taken
        assert self.failure is None or self.failure.step == self.taken - 1, self.failure
        assert self.judge.judged == self.taken, (self.judge.judged, self.taken)
        self.judge.check_invariants()


def _usage(step: Step, message: str) -> str:
    prefix = f"step {step.index}: "
    text = message[len(prefix) :] if message.startswith(prefix) else message
    return (
        f"step {step.index} ({step.op.name}): the model cannot run this history: {text}. "
        "Fix the scenario that recorded the trace"
    )


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message: under pytest's assertion rewriting (bkref's
    pytest plugin has every bkref module rewritten) an assertion's message grows the failed
    expression on further lines, and an error message here is one line."""
    lines = str(exc).splitlines()
    return lines[0] if lines else "an assertion"


def _model_broke(step: Step, exc: Exception) -> str:
    detail = str(exc).splitlines()[0] if str(exc) else "no message"
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


def plural(count: int, one: str, many: str) -> str:
    """``1 crash``, ``2 crashes``."""
    return f"{count} {one if count == 1 else many}"
