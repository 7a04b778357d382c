"""What a campaign found, in one shape for every report: the rows folded into aggregates
(totals, probe and cell counts, a throughput timeline, the failing rows), per pass and over
the whole campaign, with the verdict and the exit status.

Spec pages: docs/campaign.md ("Verdict and exit status", "Coverage").

Why it is shaped so: the same aggregates are computed two ways, by Spark over the Parquet
dataset (proofs/campaign/spark.py, for campaigns too big for one process's memory) and here
in plain Python over row records (:func:`aggregate`, for the plain-loop baseline and for
tests), and tests/unit/proofs/campaign/ checks that both agree on the same rows. The reports
(proofs/campaign/report.py) read a :class:`CampaignSummary` and nothing else, so each is
tested on hand-built summaries.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from proofs.campaign.coverage import ProbeStatus, minimum, missed_cells, probes_for
from proofs.harness.promises import PLANS, Observation, gaps, promise_counts

#: Exit statuses of ``bkref campaign``.
EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
EXIT_COVERAGE = 3
#: Failing rows kept in a summary (the dataset has them all).
FAILURES_KEPT = 50
#: Points of the throughput timeline, at most.
TIMELINE_POINTS = 60


@attrs.frozen
class Totals:
    """Sums over rows."""

    scenarios: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    steps: int = 0
    rules: int = 0
    crashes: int = 0
    crash_states: int = 0
    restarts: int = 0
    adds_acked: int = 0
    reads: int = 0
    seconds: float = 0.0
    shrink_seconds: float = 0.0

    def plus(self, other: Totals) -> Totals:
        mine, theirs = attrs.astuple(self), attrs.astuple(other)
        return Totals(*(a + b for a, b in zip(mine, theirs, strict=True)))


#: The Totals field each row column is summed into (a verdict is counted instead).
SUMMED = ("steps", "rules", "crashes", "crash_states", "restarts", "adds_acked", "reads")


@attrs.frozen
class Aggregates:
    """The rows of one pass (or of a whole campaign), folded."""

    totals: Totals = Totals()
    probes: Mapping[str, int] = attrs.field(factory=dict)
    cells: Mapping[str, int] = attrs.field(factory=dict)
    #: Promises observed: "promise/plan" -> count (proofs/harness/promises.py).
    promises: Mapping[str, int] = attrs.field(factory=dict)
    #: Bucket number -> (scenarios, steps, crash states) finished in it.
    timeline: Mapping[int, tuple[int, int, int]] = attrs.field(factory=dict)
    #: The rows whose verdict is not ``pass`` (at most FAILURES_KEPT, lowest pass and index
    #: first), as records (proofs.campaign.scenario.ScenarioRow.to_record).
    failures: tuple[Mapping[str, Any], ...] = ()
    commits: tuple[str, ...] = ()
    #: The Python workers (host:pid) that ran the rows.
    workers: tuple[str, ...] = ()

    def plus(self, other: Aggregates) -> Aggregates:
        timeline: dict[int, tuple[int, int, int]] = dict(self.timeline)
        for bucket, counts in other.timeline.items():
            old = timeline.get(bucket, (0, 0, 0))
            timeline[bucket] = (old[0] + counts[0], old[1] + counts[1], old[2] + counts[2])
        return Aggregates(
            totals=self.totals.plus(other.totals),
            probes=_sum_maps((self.probes, other.probes)),
            cells=_sum_maps((self.cells, other.cells)),
            promises=_sum_maps((self.promises, other.promises)),
            timeline=timeline,
            failures=_first_failures((*self.failures, *other.failures)),
            commits=tuple(sorted({*self.commits, *other.commits})),
            workers=tuple(sorted({*self.workers, *other.workers})),
        )


def _sum_maps(maps: Iterable[Mapping[str, int]]) -> dict[str, int]:
    out: collections.Counter[str] = collections.Counter()
    for counts in maps:
        out.update(counts)
    return dict(out)


def _first_failures(records: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    ordered = sorted(records, key=lambda r: (r["pass_number"], r["index"]))
    return tuple(ordered[:FAILURES_KEPT])


def finished_at(record: Mapping[str, Any]) -> float:
    """When a row's scenario finished (its run and its shrinking)."""
    return float(record["started_at"] + record["seconds"] + record["shrink_seconds"])


def bucket_of(when: float, start: float, bucket_seconds: float) -> int:
    return max(0, math.floor((when - start) / bucket_seconds))


def aggregate(
    records: Iterable[Mapping[str, Any]], *, start: float, bucket_seconds: float
) -> Aggregates:
    """Fold row records (ScenarioRow.to_record) into Aggregates, in plain Python."""
    sums = dict.fromkeys(SUMMED, 0)
    verdicts: collections.Counter[str] = collections.Counter()
    seconds = shrink_seconds = 0.0
    probes: collections.Counter[str] = collections.Counter()
    cells: collections.Counter[str] = collections.Counter()
    promises: collections.Counter[str] = collections.Counter()
    timeline: dict[int, list[int]] = {}
    failures: list[Mapping[str, Any]] = []
    commits: set[str] = set()
    workers: set[str] = set()
    for record in records:
        verdicts[record["verdict"]] += 1
        for name in SUMMED:
            sums[name] += int(record[name])
        seconds += float(record["seconds"])
        shrink_seconds += float(record["shrink_seconds"])
        probes.update(record["probes"])
        cells.update(record["coverage"])
        promises.update(record["promises"])
        bucket = timeline.setdefault(
            bucket_of(finished_at(record), start, bucket_seconds), [0, 0, 0]
        )
        bucket[0] += 1
        bucket[1] += int(record["steps"])
        bucket[2] += int(record["crash_states"])
        if record["verdict"] != "pass":
            failures.append(record)
        commits.add(record["commit"])
        workers.add(record["worker"])
    totals = Totals(
        scenarios=sum(verdicts.values()),
        passed=verdicts["pass"],
        failed=verdicts["fail"],
        errors=verdicts["error"],
        seconds=seconds,
        shrink_seconds=shrink_seconds,
        **sums,
    )
    return Aggregates(
        totals=totals,
        probes=dict(probes),
        cells=dict(cells),
        promises=dict(promises),
        timeline={k: (v[0], v[1], v[2]) for k, v in timeline.items()},
        failures=_first_failures(failures),
        commits=tuple(sorted(commits)),
        workers=tuple(sorted(workers)),
    )


def timeline_bucket_seconds(wall_seconds: float) -> float:
    """The width of a timeline bucket for a run of ``wall_seconds``: at most TIMELINE_POINTS
    buckets, none under a second."""
    return max(1.0, wall_seconds / TIMELINE_POINTS)


@attrs.frozen
class PassReport:
    """One pass of a campaign: its aggregates, what it favoured and what it closed."""

    number: int
    aggregates: Aggregates
    wall_seconds: float
    #: What the pass favoured, in words (empty for the first pass, or an unsteered one).
    focus: str = ""
    #: The probes and cells it aimed at (those the passes before it missed), and of those
    #: the ones the campaign has met once it ran.
    aimed_probes: tuple[str, ...] = ()
    aimed_cells: tuple[str, ...] = ()
    closed_probes: tuple[str, ...] = ()
    closed_cells: tuple[str, ...] = ()


@attrs.frozen
class Settings:
    """How the campaign was asked for (what the report's header shows)."""

    seed: int
    scenarios: int
    steps: int
    master: str
    bookie: str
    variant: str = ""
    lazy_disk: bool = False
    out_dir: str = ""
    #: Whether the workload's probes apply (an in-process campaign; an adapter's scenarios
    #: record none).
    probes_apply: bool = True
    #: The entry-log manager of an in-process campaign (``--manager``): which probes apply.
    manager: str = "single"


@attrs.frozen
class CampaignSummary:
    """A whole campaign."""

    settings: Settings
    passes: tuple[PassReport, ...]
    started_at: float
    wall_seconds: float
    #: Seconds Spark took to start (0 without Spark).
    spark_start_seconds: float = 0.0
    #: Parallel slots the cluster offered.
    cores: int = 1
    commit: str = ""
    #: The width of a timeline bucket (Aggregates.timeline), in seconds.
    bucket_seconds: float = 1.0

    @property
    def all(self) -> Aggregates:
        total = Aggregates()
        for one in self.passes:
            total = total.plus(one.aggregates)
        return total

    @property
    def probes(self) -> tuple[ProbeStatus, ...]:
        """Every probe with its count over the campaign and its minimum for the rules the
        campaign ran; empty when probes do not apply."""
        if not self.settings.probes_apply:
            return ()
        everything = self.all
        return tuple(
            ProbeStatus(
                name, everything.probes.get(name, 0), minimum(probe, everything.totals.rules)
            )
            for name, probe in probes_for(self.settings.manager).items()
        )

    @property
    def missed_probes(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.probes if not p.met)

    @property
    def missed_cells(self) -> tuple[str, ...]:
        """Expected cells never reached (in-process campaigns only)."""
        if not self.settings.probes_apply:
            return ()
        return missed_cells(self.all.cells, self.settings.manager)

    @property
    def promise_plans(self) -> tuple[str, ...]:
        """The crash plans the campaign's scenarios could observe promises after: before
        any crash, SIGKILL, and every power-loss plan for the in-process bookie (the
        simulated disk) or an adapter's on the lazy disk."""
        s = self.settings
        return PLANS if s.probes_apply or s.lazy_disk else PLANS[:2]

    @property
    def promise_gaps(self) -> tuple[Observation, ...]:
        """The (promise, plan) pairs no step of the campaign observed (proofs/harness/
        promises.py): not checked, whatever the verdict."""
        return tuple(gaps(promise_counts(dict(self.all.promises)), self.promise_plans))

    @property
    def foreign_commits(self) -> tuple[str, ...]:
        """Commits of rows that differ from the driver's: code the campaign did not mean to
        run (a cluster's workers with another bkref installed)."""
        return tuple(c for c in self.all.commits if self.commit and c != self.commit)

    @property
    def verdict(self) -> str:
        """``fail`` if any scenario failed, else ``error`` if any could not be judged or a
        row came from other code, else ``pass``."""
        totals = self.all.totals
        if totals.failed:
            return "fail"
        if totals.errors or self.foreign_commits:
            return "error"
        return "pass"

    @property
    def coverage_met(self) -> bool:
        return not self.missed_probes

    @property
    def exit_code(self) -> int:
        verdict = self.verdict
        if verdict == "fail":
            return EXIT_FAIL
        if verdict == "error":
            return EXIT_ERROR
        return EXIT_PASS if self.coverage_met else EXIT_COVERAGE


def failure_trace_name(record: Mapping[str, Any]) -> str:
    """The file a failing row's shrunk trace is written to, under the output directory."""
    return f"failures/pass{record['pass_number']}-scenario{record['index']}.jsonl"


def closed(aimed: Sequence[str], still_missed: Sequence[str]) -> tuple[str, ...]:
    """Of ``aimed``, those no longer missed."""
    left = set(still_missed)
    return tuple(name for name in aimed if name not in left)
