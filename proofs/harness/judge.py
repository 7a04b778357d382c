"""The judging core: one step against the model and the properties, for the live refinement
harness and the trace replay alike.

A step (spec/trace.py ``Step``: the operation, what the bookie answered, the acks that
arrived meanwhile, and the abstract state when one was recorded) is judged the same way
wherever it comes from, so that a trace the harness wrote replays to the same verdict:

1. the model takes the step (models/bookie/bookie.py ``BookieModel.step``): Divergence when
   the answer or an ack is not one it allows;
2. when a state was recorded and the model has the bookie up, the model compares it
   (``BookieModel.compare``): Divergence when it differs from what the model allows;
3. the property monitor (spec/properties.py) takes the step: the violations it reveals;
4. the model's and the monitor's invariants are asserted.

On the way it counts the promises each step observed (proofs/harness/promises.py), which
campaigns and conformance runs report.

:class:`Judge` returns a :class:`Judgement`: the model's notes, or what failed (the first
divergence stops the judging of the step: the monitor does not see it). The callers decide
what a failure becomes: proofs/harness/refinement.py raises RefinementFailure with the trace
so far, proofs/harness/replay.py reports a ReplayFailure of the replay. A history the model cannot
run (spec: ``ModelUsageError``) and the model's own assertions propagate as they are.

Not here: running the step (the system under test, proofs/harness/refinement.py), the
implementation's invariants, the read-backs after a restart.
"""

from __future__ import annotations

import attrs

from models.bookie.bookie import BookieModel, Divergence
from proofs.harness.promises import PromiseCounter
from spec.properties import PropertyMonitor, Violation
from spec.trace import Step


@attrs.frozen
class Judgement:
    """What the judge made of one step: the model's notes (what the step means, in words),
    and at most one reason to fail: ``divergence`` (the model does not allow the answer or
    the state) or ``violations`` (the properties the step breaks, in the monitor's order)."""

    notes: tuple[str, ...] = ()
    divergence: Divergence | None = attrs.field(default=None, eq=False)
    violations: tuple[Violation, ...] = ()

    def __attrs_post_init__(self) -> None:
        assert self.divergence is None or not (self.violations or self.notes), self

    @property
    def ok(self) -> bool:
        return self.divergence is None and not self.violations


class Judge:
    """The model and the property monitor, fed one step at a time (see the module docstring).
    Steps must come in order, numbered 0, 1, 2, ..."""

    def __init__(self, model: BookieModel, monitor: PropertyMonitor) -> None:
        self.model = model
        self.monitor = monitor
        self.judged = 0
        #: The promises the judged steps observed (proofs/harness/promises.py).
        self.promises = PromiseCounter()

    def judge(self, step: Step, *, check_invariants: bool = True) -> Judgement:
        """Judge the next step. Raises ModelUsageError when the model cannot run it, and
        AssertionError when an invariant of the model or the monitor breaks
        (``check_invariants=False``: not checked after this step; a caller that skips them
        for a run of reads checks them after the last)."""
        assert step.index == self.judged, (step.index, self.judged)
        self.judged += 1
        op = step.op
        self.promises.before(self.model, op)
        try:
            notes = self.model.step(step.index, op, step.result, step.completed, step.faults)
            if step.state is not None and self.model.up:
                notes += self.model.compare(step.index, step.state, op.name)
        except Divergence as exc:
            return Judgement(divergence=exc)
        self.promises.after(self.model, op)
        violations = self.monitor.observe(step)
        if check_invariants:
            self.model.check_invariants()
            self.monitor.check_invariants()
        return Judgement(tuple(notes), violations=tuple(violations))

    def check_invariants(self) -> None:
        assert self.judged >= 0, self.judged
        self.model.check_invariants()
        self.monitor.check_invariants()
