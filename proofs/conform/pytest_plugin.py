"""``pytest --bkref-adapter CMD``: the conformance kit inside an implementer's own test suite
(docs/conformance.md, "In your own test suite").

Spec pages: spec/adapter.md (what CMD must speak), spec/properties.md (what each scenario
checks).

Registered as the pytest11 entry point ``bkref`` (pyproject.toml), so installing bkref is
enough. Given ``--bkref-adapter``, the session gains one test item per scenario of the
profile, ``bkref-conform::scenario[<index>]``, each running
``proofs.conform.runner.Conformance.run_one(index)``; a failing scenario fails its item with
the same text the JUnit report carries (what broke, the trace told step by step, the trace
file, the replay and reproduce commands, the bookie's stderr tail). At the end the terminal
gets the run's verdict (:func:`proofs.conform.report.terminal_summary`) and, with
``--bkref-report DIR``, the JUnit XML and HTML reports are written there.

Why it is shaped so:

- Installed as an entry point it loads in every pytest session, bkref's own suite included.
  Without ``--bkref-adapter`` it adds only its options: the runner, the model and the
  reports are imported inside the functions that need them, never at import.
- Scenarios are items, not one big test, so pytest's own selection works on them (``-k
  "scenario[3]"``, ``--lf``, ``-x``), a CI system lists them one by one, and each failure
  stands alone. ``--bkref-scenarios 0,3-5`` selects without building the items at all.
- The scenarios are added beside the session's own top-level collectors (a wrapper of
  ``pytest_make_collect_report`` on the session), so pytest counts them as collected and
  ``--collect-only`` lists them.
- The bookie is started once, before the first scenario, to read its ready line
  (``Conformance.capabilities``). If it cannot start, that first item errors with its stderr,
  and every other item errors with the same message at once instead of waiting for the same
  start timeout again. The same holds when a scenario finds the bookie no longer starts, or
  the lazy disk cannot be mounted (the runner raises a BkrefError only then).
- :func:`make_conformance` is the one place the runner is built; the plugin's own tests
  replace it (monkeypatch) with a fake, so they run without any bookie.

Not built: running scenarios in parallel (pytest-xdist workers would each start their own
run; the summary and reports would be per worker).
"""

from __future__ import annotations

import importlib
import secrets
import time
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from proofs.conform.results import Capabilities, RunResult, ScenarioResult

#: The name of the collector that holds the scenarios; item ids are
#: ``bkref-conform::scenario[<index>]``.
COLLECTOR_NAME = "bkref-conform"
PROFILES = ("quick", "standard", "deep")


class ConformanceLike(Protocol):
    """What the plugin uses of ``proofs.conform.runner.Conformance``."""

    def capabilities(self) -> Capabilities: ...

    def scenario_count(self) -> int: ...

    def run_one(self, index: int) -> ScenarioResult: ...


def make_conformance(
    adapter: str, *, profile: str, seed: int, lazy_disk: bool, report_dir: str | None
) -> ConformanceLike:
    """The runner for this session. Imported here, not at the top, so a session without
    ``--bkref-adapter`` never loads it; the plugin's tests replace this function."""
    runner: Any = importlib.import_module("proofs.conform.runner")
    conformance: ConformanceLike = runner.Conformance(
        adapter, profile=profile, seed=seed, lazy_disk=lazy_disk, report_dir=report_dir
    )
    return conformance


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bkref", "bkref conformance kit (docs/conformance.md)")
    group.addoption(
        "--bkref-adapter",
        metavar="CMD",
        default=None,
        help="check the bookie started by CMD (an adapter-protocol command; {data_dir} is "
        "replaced by each run's data directory): one test item per scenario",
    )
    group.addoption(
        "--bkref-profile",
        choices=PROFILES,
        default="quick",
        help="how many and how long the scenarios are (default: quick)",
    )
    group.addoption(
        "--bkref-seed",
        type=int,
        default=None,
        metavar="S",
        help="the seed the scenarios are drawn from (default: random, shown in the header)",
    )
    group.addoption(
        "--bkref-lazy-disk",
        action="store_true",
        default=False,
        help="run the bookie on the FUSE lazy disk and inject power losses",
    )
    group.addoption(
        "--bkref-report",
        metavar="DIR",
        default=None,
        help="write junit.xml and report.html (and the failing traces) in DIR",
    )
    group.addoption(
        "--bkref-scenarios",
        metavar="LIST",
        default=None,
        help="only these scenarios, e.g. 0,3-5 (default: every scenario of the profile)",
    )


class _Run:
    """The session's conformance run: its options, the runner, what each scenario gave."""

    def __init__(self, config: pytest.Config) -> None:
        self.adapter: str = config.getoption("bkref_adapter")
        self.profile: str = config.getoption("bkref_profile")
        seed: int | None = config.getoption("bkref_seed")
        self.seed = seed if seed is not None else secrets.randbelow(2**31)
        self.lazy_disk: bool = config.getoption("bkref_lazy_disk")
        self.report_dir: str | None = config.getoption("bkref_report")
        self.selection: str | None = config.getoption("bkref_scenarios")
        if self.selection is not None:
            parse_selection(self.selection)  # a usage error before anything starts
        self.indices: list[int] = []
        self.started = time.monotonic()
        self.results: dict[int, ScenarioResult] = {}
        self.caps: Capabilities | None = None
        self.cannot_run: str | None = None
        self.run: RunResult | None = None
        self._conformance: ConformanceLike | None = None

    def conformance(self) -> ConformanceLike:
        if self._conformance is None:
            self._conformance = make_conformance(
                self.adapter,
                profile=self.profile,
                seed=self.seed,
                lazy_disk=self.lazy_disk,
                report_dir=self.report_dir,
            )
        return self._conformance

    def ensure_started(self) -> None:
        """Read the bookie's capabilities once; fail every item at once if it cannot run."""
        from spec.errors import BkrefError

        if self.caps is None and self.cannot_run is None:
            try:
                self.caps = self.conformance().capabilities()
            except BkrefError as e:
                self.cannot_run = str(e)
        if self.cannot_run is not None:
            pytest.fail(f"the bookie could not be run:\n{self.cannot_run}", pytrace=False)

    def choose(self) -> None:
        """The scenarios to run: all of the profile's, or those of ``--bkref-scenarios``
        (a usage error when one is not in the profile)."""
        count = self.conformance().scenario_count()
        if self.selection is None:
            self.indices = list(range(count))
            return
        chosen = parse_selection(self.selection)
        beyond = [i for i in chosen if i >= count]
        if beyond:
            raise pytest.UsageError(
                f"--bkref-scenarios {self.selection}: profile {self.profile} has scenarios "
                f"0 to {count - 1}; {beyond[0]} is not one of them"
            )
        self.indices = chosen

    def result(self) -> RunResult:
        from proofs.conform.results import RunResult

        return RunResult(
            adapter=self.adapter,
            profile=self.profile,
            seed=self.seed,
            lazy_disk=self.lazy_disk,
            capabilities=self.caps,
            scenarios=tuple(self.results[i] for i in sorted(self.results)),
            seconds=time.monotonic() - self.started,
            error=self.cannot_run,
        )


_RUN = pytest.StashKey[_Run]()


def parse_selection(text: str) -> list[int]:
    """``0,3-5`` as [0, 3, 4, 5]; a usage error names what is wrong."""
    chosen: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise pytest.UsageError(
                f"--bkref-scenarios {text}: {part.strip()!r} is not a scenario number or a "
                "range like 3-5"
            ) from None
        if low < 0 or high < low:
            raise pytest.UsageError(
                f"--bkref-scenarios {text}: {part.strip()!r} is not a range of scenario "
                "numbers (they start at 0, low-high)"
            )
        chosen.update(range(low, high + 1))
    return sorted(chosen)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("bkref_adapter") is not None:
        config.stash[_RUN] = _Run(config)


def pytest_report_header(config: pytest.Config) -> str | None:
    run = config.stash.get(_RUN, None)
    if run is None:
        return None
    return (
        f"bkref conform: adapter {run.adapter!r}, profile {run.profile}, seed {run.seed} "
        f"(again with --bkref-seed {run.seed}), lazy disk {'on' if run.lazy_disk else 'off'}"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    run = session.config.stash.get(_RUN, None)
    if run is not None:
        run.choose()


class ConformanceCollector(pytest.Collector):
    """The scenarios of the session's run, one item each."""

    def collect(self) -> list[ScenarioItem]:
        run = self.config.stash[_RUN]
        # The ids are given as strings, so they parse exactly as the ids pytest keeps in its
        # cache (``--lf`` compares the two).
        return [
            ScenarioItem.from_parent(
                self, name=f"scenario[{i}]", nodeid=f"{COLLECTOR_NAME}::scenario[{i}]", index=i
            )
            for i in run.indices
        ]


class ScenarioItem(pytest.Item):
    """One scenario: runs it, fails with its told trace."""

    def __init__(self, *, index: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index

    def setup(self) -> None:
        self.config.stash[_RUN].ensure_started()

    def runtest(self) -> None:
        from proofs.conform.report import failure_text
        from spec.errors import BkrefError

        run = self.config.stash[_RUN]
        try:
            result = run.conformance().run_one(self.index)
        except BkrefError as e:
            # The runner raises only when no scenario can run (the bookie no longer starts,
            # the lazy disk cannot be mounted): the items after this one fail at once.
            run.cannot_run = str(e)
            pytest.fail(f"the bookie could not be run:\n{e}", pytrace=False)
        run.results[self.index] = result
        if result.verdict != "pass":
            pytest.fail(failure_text(result), pytrace=False)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{COLLECTOR_NAME}::scenario[{self.index}]"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if isinstance(collector, pytest.Session) and _RUN in collector.config.stash and report.passed:
        report.result.append(
            ConformanceCollector.from_parent(collector, name=COLLECTOR_NAME, nodeid=COLLECTOR_NAME)
        )
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(_RUN, None)
    if run is None or (not run.results and run.cannot_run is None):
        return
    run.run = run.result()
    if run.report_dir is not None:
        from proofs.conform.report import write_reports

        write_reports(run.run, run.report_dir)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    run = terminalreporter.config.stash.get(_RUN, None)
    if run is None or run.run is None:
        return
    from proofs.conform.report import terminal_summary

    terminalreporter.write_sep("=", "bkref conform")
    for line in terminal_summary(run.run, run.report_dir).splitlines():
        terminalreporter.write_line(line)
