"""Known-bad edits of a recorded trace, each a history no correct bookie can produce.

A trace recorded by ``bkref record`` (proofs/cli/record.py) from a correct bookie passes
``bkref check-trace``; each function here changes one thing in it the way a broken bookie
would have answered, and check-trace must then fail (tests/quality/test_trace_mutations.py).
They are pure functions over spec/trace.py values, so any recorded trace can be mutated, and
each raises NoSite when the trace has no place for its change (the test then fails instead
of checking nothing). Each returns the mutated trace and the first step that changed: the
divergence cannot be found earlier than that step.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from spec.operations import OK, Add, Fence, Read, Restart, Shutdown, failed
from spec.trace import Step, Trace


class NoSite(Exception):
    """The trace has no step where the mutation applies."""


@attrs.frozen
class Mutation:
    """A mutated trace, and the first step that differs from the original."""

    trace: Trace
    step: int


def _replace(trace: Trace, step: Step) -> Trace:
    steps = list(trace.steps)
    steps[step.index] = step
    return attrs.evolve(trace, steps=tuple(steps))


def _acked(trace: Trace, before: int) -> Iterator[int]:
    """The adds and fences acknowledged ok before step ``before``: an ok answer of their own,
    or an ok completion."""
    for step in trace.steps[:before]:
        if isinstance(step.op, Add | Fence) and step.result.ok:
            yield step.index
        yield from (c.step for c in step.completed if c.error is None)


def _restarts(trace: Trace) -> list[int]:
    return [s.index for s in trace.steps if isinstance(s.op, Restart) and s.result.ok]


def change_read_data(trace: Trace) -> Mutation:
    """A read returns other bytes than the add wrote."""
    for step in trace.steps:
        if isinstance(step.op, Read) and step.result.data is not None:
            wrong = attrs.evolve(step.result, data=step.result.data + b"!")
            return Mutation(_replace(trace, attrs.evolve(step, result=wrong)), step.index)
    raise NoSite("no ok read")


def drop_ack(trace: Trace) -> Mutation:
    """An add is never answered although the bookie later shut down cleanly (which answers
    every request in flight): its completion is removed."""
    shutdowns = [s.index for s in trace.steps if isinstance(s.op, Shutdown) and s.result.ok]
    if not shutdowns:
        raise NoSite("no clean shutdown")
    for step in trace.steps[: shutdowns[0] + 1]:
        for completion in step.completed:
            if isinstance(trace.steps[completion.step].op, Add) and completion.error is None:
                kept = tuple(c for c in step.completed if c != completion)
                return Mutation(_replace(trace, attrs.evolve(step, completed=kept)), step.index)
    raise NoSite("no completed add before a clean shutdown")


def forget_fence_after_restart(trace: Trace) -> Mutation:
    """After a restart, an add to a ledger whose fence was acknowledged before it is answered
    ok: the fence did not survive."""
    for restart in _restarts(trace):
        fenced = {
            op.ledger
            for op in (trace.steps[i].op for i in _acked(trace, restart))
            if isinstance(op, Fence)
        }
        for step in trace.steps[restart + 1 :]:
            if not (isinstance(step.op, Add) and step.op.ledger in fenced):
                continue
            if step.result.error == "fenced":
                return Mutation(_replace(trace, attrs.evolve(step, result=OK)), step.index)
            for later in trace.steps[step.index + 1 :]:
                for c in later.completed:
                    if c.step == step.index and c.error == "fenced":
                        done = tuple(
                            attrs.evolve(x, error=None) if x == c else x for x in later.completed
                        )
                        return Mutation(
                            _replace(trace, attrs.evolve(later, completed=done)), later.index
                        )
    raise NoSite("no add to a fenced ledger after a restart")


def lose_entry_after_restart(trace: Trace) -> Mutation:
    """After a restart, a read of an entry acknowledged before it answers no_entry."""
    for restart in _restarts(trace):
        acked = {
            (op.ledger, op.entry)
            for op in (trace.steps[i].op for i in _acked(trace, restart))
            if isinstance(op, Add)
        }
        for step in trace.steps[restart + 1 :]:
            op = step.op
            if (
                isinstance(op, Read)
                and step.result.data is not None
                and (op.ledger, op.entry) in acked
            ):
                missing = attrs.evolve(step, result=failed("no_entry"))
                return Mutation(_replace(trace, missing), step.index)
    raise NoSite("no read of an acknowledged entry after a restart")


def change_ledgers_map(trace: Trace) -> Mutation:
    """A sealed log's ledgers map lists one byte more of a ledger than the log holds (its
    records, and so every read and the bookie's ledger_bytes, are right): BookKeeper's garbage
    collector trusts the map, so a wrong one keeps or drops logs wrongly."""
    for step in trace.steps:
        state = step.state
        for view in (state.ledgers_maps or ()) if state is not None else ():
            if view.ledger_bytes:
                (ledger, size), *rest = view.ledger_bytes
                wrong = attrs.evolve(view, ledger_bytes=((ledger, size + 1), *rest))
                assert state is not None
                maps = tuple(wrong if v == view else v for v in state.ledgers_maps or ())
                changed = attrs.evolve(step, state=attrs.evolve(state, ledgers_maps=maps))
                return Mutation(_replace(trace, changed), step.index)
    raise NoSite("no state with a sealed log's readable ledgers map")


#: Every mutation, by name.
MUTATIONS = {
    "read_data_changed": change_read_data,
    "ack_dropped": drop_ack,
    "fence_forgotten_after_restart": forget_fence_after_restart,
    "entry_missing_after_restart": lose_entry_after_restart,
    "ledgers_map_changed": change_ledgers_map,
}
