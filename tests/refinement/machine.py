"""The stateful refinement test's machine: Hypothesis draws the rules of the refinement
workload (proofs/harness/workload.py: every operation, background step and fault, with the
biases its docstring explains) and the harness (proofs/harness/refinement.py) compares
bkref's Bookie with the model after each step. A failure shrinks to a minimal rule sequence.

The machine is built from the workload's rule table: one Hypothesis rule per workload rule,
with the same name, a precondition of the same name, and for each argument the strategy
:func:`strategy` builds from the rule's draw description (the very strategies this test drew
before the rules moved to proofs/, so its examples, coverage counts and quality catches did
not move). The verification campaign (proofs/campaign/) draws the same rules from a seeded
random source instead.

The machine class is built by :func:`machine_for` so that tests/quality can run the same
rules against a known-bad variant of the bookie (an ``opener`` that builds the variant).
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from impl.bookie.bookie import Bookie
from proofs.harness import workload as wl
from proofs.harness.workload import KNOBS, PRODUCERS, STRETCH_MAX, WALL_CLOCKS, Workload

__all__ = [
    "COVERAGE",
    "PRODUCERS",
    "STRETCH_MAX",
    "fixed_profile",
    "machine_for",
    "stable_draws",
    "strategy",
]

#: How often each situation was seen in this process, by its event text (Hypothesis's own
#: statistics are for reading; tests/refinement/test_coverage.py asserts minimum counts of the
#: rare situations from these).
COVERAGE: collections.Counter[str] = collections.Counter()


def _seen(text: str) -> None:
    """Record a situation: a Hypothesis event (``--hypothesis-show-statistics``) and a count
    in COVERAGE."""
    event(text)
    COVERAGE[text] += 1


def strategy(draw: wl.Draw) -> st.SearchStrategy[Any]:
    """The Hypothesis strategy of a workload draw description."""
    if isinstance(draw, wl.Just):
        return st.just(draw.value)
    if isinstance(draw, wl.Ints):
        return st.integers(draw.low, draw.high)
    if isinstance(draw, wl.Sampled):
        return st.sampled_from(draw.values)
    if isinstance(draw, wl.Bools):
        return st.booleans()
    if isinstance(draw, wl.Binary):
        return st.binary(min_size=draw.min_size, max_size=draw.max_size)
    if isinstance(draw, wl.OneOf):
        return st.one_of(*(strategy(option) for option in draw.options))
    if isinstance(draw, wl.Mapped):
        return strategy(draw.inner).map(draw.function)
    if isinstance(draw, wl.Builds):
        return st.builds(draw.target, *(strategy(arg) for arg in draw.args))
    if isinstance(draw, wl.FrozenSets):
        return st.frozensets(strategy(draw.element), max_size=draw.max_size)
    if isinstance(draw, wl.Lists):
        return st.lists(strategy(draw.element), max_size=draw.max_size)
    return st.fixed_dictionaries({name: strategy(field) for name, field in draw.fields})


def fixed_profile(examples: int, steps: int) -> settings:
    """A profile that runs the same examples on every run (derandomized, no database, no
    shrinking, no health check): for measurements and quality catches, whose counts must
    not move between runs."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=True,
        database=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


@contextlib.contextmanager
def stable_draws() -> Iterator[None]:
    """Run a fixed profile with Hypothesis's pool of local constants empty. Hypothesis seeds
    about one draw in twenty with constants it collects from every local module loaded (its
    ``_get_local_constants``), so a derandomized run drew other examples whenever any source
    file of bkref changed, or another test module had been imported first: quality catches
    and coverage counts moved with unrelated edits. With the pool empty the draws depend on
    the strategies and the profile alone. This reaches into Hypothesis's internals; on a
    version without that function it does nothing (and the runs are as sensitive as before)."""
    from hypothesis.internal.conjecture import providers

    original = getattr(providers, "_get_local_constants", None)
    if original is None:
        yield
        return
    empty = providers.Constants()  # type: ignore[attr-defined]  # internal, untyped export
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()


def _hypothesis_rule(spec: wl.Rule) -> Callable[..., None]:
    """The Hypothesis rule that runs the workload's rule ``spec``."""
    method = getattr(Workload, spec.name)
    when = wl.WHEN[spec.when]

    def run(self: Workload, **drawn: Any) -> None:
        method(self, **drawn)

    run.__name__ = spec.name
    run.__qualname__ = f"RefinementMachine.{spec.name}"
    run.__doc__ = method.__doc__
    strategies = {name: strategy(draw) for name, draw in spec.args}
    # The drawn names cannot be target/targets, so this is rule's plain overload.
    make_rule: Callable[..., Callable[[Callable[..., None]], Callable[..., None]]] = rule
    return precondition(when)(make_rule(**strategies)(run))


def machine_for(
    opener: Callable[..., Bookie] = Bookie.open, *, stretch_max: int = STRETCH_MAX
) -> type[RuleBasedStateMachine]:
    """A state machine class whose bookie is built by ``opener`` (Bookie.open, or a
    variant's); its healthy stretches hold 4 to ``stretch_max`` adds."""

    class RefinementMachine(Workload, RuleBasedStateMachine):
        def __init__(self) -> None:
            RuleBasedStateMachine.__init__(self)
            Workload.__init__(self, opener, stretch_max=stretch_max, seen=_seen)

        @initialize(drawn=strategy(KNOBS), wall_ms=strategy(WALL_CLOCKS))
        def configure(self, drawn: dict[str, str], wall_ms: int) -> None:
            """Draw this example's knobs and start its bookie with them."""
            Workload.configure(self, drawn, wall_ms)

        @invariant()
        def the_judged_state_is_the_bookies_and_the_judge_is_consistent(self) -> None:
            self.check_between_rules()

    for spec in wl.rules(stretch_max):
        setattr(RefinementMachine, spec.name, _hypothesis_rule(spec))
    return RefinementMachine


def machine_with(
    fixed: Mapping[str, str], opener: Callable[..., Bookie] = Bookie.open, **kwargs: Any
) -> type[RuleBasedStateMachine]:
    """:func:`machine_for`'s machine with ``fixed`` settings over the drawn knobs in every
    run (e.g. entryLogPerLedgerEnabled), and the write-close and clock rules when they choose
    many active logs. A subclass, so that machine_for's own source, which Hypothesis's
    derandomized draws hash, stays as it is."""
    base: Any = machine_for(opener, **kwargs)

    class FixedSettingsMachine(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.fixed = dict(fixed)

    if wl.many_active_logs(fixed):
        for rule_ in wl.MANY_LOG_RULES:
            setattr(FixedSettingsMachine, rule_.name, _hypothesis_rule(rule_))
    return FixedSettingsMachine
