"""What a conformance run found, in one shape for every report (the terminal summary, JUnit
XML, the HTML report, the pytest plugin).

Why a module of its own: the runner (proofs/conform/runner.py) fills these and the reports
(proofs/conform/report.py, proofs/conform/pytest_plugin.py) only read them, so a report can be
tested on a hand-built run without starting any bookie.
"""

from __future__ import annotations

from collections import Counter

import attrs

#: Verdicts of one scenario: every step judged and allowed; a step the model or a property
#: refused; the scenario could not be carried out (the bookie did not start, broke the
#: protocol's framing, or the model cannot run the history).
VERDICTS = ("pass", "fail", "error")
#: What a run checks, each a row of the reports: the model's refinement check (answers, acks
#: and state agree with the model) and the properties of spec/properties.md.
CHECKS = ("refinement", "durability", "fence", "auth", "resurrection", "progress")
#: Exit statuses of ``bkref conform``.
EXIT_PASS = 0
EXIT_DIVERGENCE = 1
EXIT_CANNOT_RUN = 2


@attrs.frozen
class Capabilities:
    """What a bookie says it supports (spec/adapter.md, "Capabilities"), read from its ready
    line. A version 1 bookie states nothing: it is held to the core ops, no state, and
    either answer profile."""

    version: int
    #: The optional ops it supports, of ``checkpoint``, ``gc``, ``inspect``, ``write_close``.
    ops: frozenset[str]
    #: How much state ``inspect`` gives: ``full``, ``protocol`` or ``none`` (spec/profile.py).
    state: str
    #: Where it answers as bkref or as BookKeeper where they differ: ``bkref``,
    #: ``bookkeeper`` or ``either``.
    answers: str
    #: Its journal and ledger directories when its files are in BookKeeper's format (the
    #: format level), else empty.
    journal_dirs: tuple[str, ...] = ()
    ledger_dirs: tuple[str, ...] = ()
    #: Free text naming the bookie, from the ready line (empty in version 1).
    bookie: str = ""
    #: The configuration the ready line declares (``config``: key, value pairs by
    #: impl/config/keys.py's names), which the model judges the bookie with, over the
    #: ``--set`` pairs of the adapter command.
    config: tuple[tuple[str, str], ...] = ()

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels it is checked at: protocol always; structural when ``inspect`` gives
        state; format when it names BookKeeper-format directories."""
        levels = ["protocol"]
        if "inspect" in self.ops and self.state != "none":
            levels.append("structural")
        if self.ledger_dirs:
            levels.append("format")
        return tuple(levels)


@attrs.frozen
class Cell:
    """One cell of the coverage matrix: an operation, where a crash met it, and the crash
    plan. ``point`` is ``none`` (no crash while it ran), ``idle`` (a crash after it was
    answered, nothing in flight) or ``in_flight`` (a crash while it was unanswered); ``plan``
    is ``none``, ``kill`` (SIGKILL, the page cache kept) or a power-loss plan's name
    (``lose_unsynced``, ``keep_prefix``, ``torn_write``, ``keep_subset``, ``keep_all``)."""

    operation: str
    point: str
    plan: str


@attrs.frozen
class Failure:
    """Why a scenario failed or could not run."""

    #: ``divergence`` (the model refused an answer or a state), ``property`` (``prop`` broken),
    #: ``capability`` (the bookie broke a claim of its ready line), ``format`` (its files,
    #: read by bkref's readers, lack what it acknowledged) or ``error`` (could not run).
    kind: str
    message: str
    #: The check of :data:`CHECKS` it fails (``refinement`` for a divergence, a capability
    #: or format failure); None for an error.
    check: str | None = None
    #: The failing step of the shrunk trace.
    step: int | None = None
    #: The shrunk failing trace (spec/trace.md), replayable by ``bkref check-trace`` and
    #: ``bkref explain``; None when none was written.
    trace_path: str | None = None
    #: The failing trace told step by step (``bkref explain``'s lines).
    told: tuple[str, ...] = ()
    #: The shell command that runs this scenario again.
    reproduce: str = ""
    #: The last lines the bookie wrote on standard error.
    stderr_tail: str = ""
    #: Steps of the scenario before and after shrinking.
    steps_before_shrink: int = 0
    steps_after_shrink: int = 0
    #: The whole, unshrunk trace, and its steps that lead to the failure (those naming the
    #: failing step's ledger, and the crashes and restarts), told one a line: why the
    #: workload sent what it sent, which the shrunk trace may no longer show.
    unshrunk_path: str | None = None
    context: tuple[str, ...] = ()
    #: The kit itself failed (the model could not follow the history): never the bookie's
    #: fault; the trace is kept all the same.
    kit_error: bool = False


@attrs.frozen
class ScenarioResult:
    """One scenario, derived from (seed, index) alone."""

    index: int
    verdict: str = attrs.field(validator=attrs.validators.in_(VERDICTS))
    steps: int
    #: SIGKILLs and power losses injected.
    crashes: int
    power_losses: int
    #: Acknowledged adds whose durability the model checked, and reads it judged.
    adds_acknowledged: int
    reads_checked: int
    seconds: float
    cells: frozenset[Cell] = frozenset()
    failure: Failure | None = None
    #: What the judged steps observed (proofs/harness/promises.py): (promise, the plan of
    #: the last crash before it, how many steps).
    promises: tuple[tuple[str, str, int], ...] = ()


@attrs.frozen
class RunResult:
    """A whole ``bkref conform`` run."""

    adapter: str
    profile: str
    seed: int
    lazy_disk: bool
    capabilities: Capabilities | None
    scenarios: tuple[ScenarioResult, ...]
    seconds: float
    #: Set when the bookie could not be run at all (exit 2): why, with its stderr.
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.error is not None or any(s.verdict == "error" for s in self.scenarios):
            return (
                EXIT_CANNOT_RUN
                if not any(s.verdict == "fail" for s in self.scenarios)
                else EXIT_DIVERGENCE
            )
        return EXIT_DIVERGENCE if any(s.verdict == "fail" for s in self.scenarios) else EXIT_PASS

    def promises(self) -> Counter[tuple[str, str]]:
        """Observations of each promise after each plan, over every scenario."""
        counts: Counter[tuple[str, str]] = Counter()
        for scenario in self.scenarios:
            for promise, plan, n in scenario.promises:
                counts[(promise, plan)] += n
        return counts

    def plans(self) -> tuple[str, ...]:
        """The crash plans this run could have observed promises after: before any crash,
        SIGKILL, and with the lazy disk every power-loss plan."""
        from proofs.harness.promises import PLANS

        return PLANS if self.lazy_disk else PLANS[:2]

    def failed(self, check: str) -> tuple[ScenarioResult, ...]:
        """The scenarios that failed ``check``."""
        return tuple(
            s for s in self.scenarios if s.failure is not None and s.failure.check == check
        )
