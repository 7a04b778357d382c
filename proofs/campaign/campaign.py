"""``bkref campaign``'s engine: two passes of seeded scenarios on Spark, the second steered
toward what the first missed, their rows written as Parquet, and the summary and reports.

Spec pages: docs/campaign.md (the guide), spec/properties.md (what every scenario checks).

Why it is shaped so:

- The scenarios are ``--scenarios N``: the first N - M (pass 1) drawn as the refinement test
  draws, the last M (pass 2, ``--second-pass M``, a fifth by default) favouring the rules and
  crash plans that reach the probes and cells pass 1 missed (proofs/campaign/coverage.py
  steer; unsteered when it missed nothing). Every scenario is (seed, index) and the options,
  so any row replays with ``bkref replay``.
- Spark is touched only through proofs/campaign/spark.py; this module decides what to run
  and folds what came back (:class:`proofs.campaign.summary.CampaignSummary`), and the
  reports (proofs/campaign/report.py) are written from the summary alone.
- The driver checks before Spark starts what it can check alone (the variant loads, the
  adapter's program exists, the output directory is new), so a mistake costs no JVM.
- Rows from another commit than the driver's (a cluster whose workers run other code) are
  an error: the campaign says so and which commits ran.

Not built: resuming an interrupted campaign (its rows so far stay in the dataset; a new run
starts anew), and more than two passes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import attrs

from proofs.campaign import external, scenario
from proofs.campaign.coverage import Target, missed_cells, probe_status, targets
from proofs.campaign.errors import CampaignError
from proofs.campaign.progress import ProgressLine
from proofs.campaign.rows import ROW_FIELDS
from proofs.campaign.scenario import Focus, ScenarioSpec
from proofs.campaign.summary import (
    Aggregates,
    CampaignSummary,
    PassReport,
    Settings,
    closed,
    failure_trace_name,
    timeline_bucket_seconds,
)
from proofs.harness.workload import STRETCH_MAX

#: The dataset's directory under the output directory.
DATASET = "scenarios"
#: The default share of a campaign's scenarios that the steered second pass runs.
SECOND_PASS_SHARE = 5


@attrs.frozen
class Request:
    """A campaign as asked for (the options of ``bkref campaign``)."""

    scenarios: int
    steps: int
    seed: int
    master: str
    out_dir: str
    second_pass: int
    shrink_runs: int = scenario.DEFAULT_SHRINK_RUNS
    stretch_max: int = STRETCH_MAX
    variant: str = ""
    adapter: str | None = None
    lazy_disk: bool = False
    #: The entry-log manager of bkref's in-process bookie (MANAGER_SETTINGS).
    manager: str = "single"

    @property
    def first_pass(self) -> int:
        return self.scenarios - self.second_pass

    @property
    def dataset(self) -> str:
        return os.path.join(self.out_dir, DATASET)


def default_second_pass(scenarios: int) -> int:
    """A fifth of the scenarios (none below ten)."""
    return scenarios // SECOND_PASS_SHARE if scenarios >= 10 else 0


def check_request(request: Request) -> None:
    """What can be checked before Spark starts; raises CampaignError."""
    if request.scenarios < 1:
        raise CampaignError("--scenarios must be at least 1")
    if not 0 <= request.second_pass < request.scenarios:
        raise CampaignError(
            f"--second-pass {request.second_pass}: between 0 and {request.scenarios - 1} "
            f"(it is part of --scenarios {request.scenarios})"
        )
    if request.steps < 1:
        raise CampaignError("--steps must be at least 1")
    if request.adapter is not None:
        if request.variant:
            raise CampaignError("--variant checks bkref's in-process bookie; not with --adapter")
        if request.manager != "single":
            raise CampaignError(
                "--manager chooses the entry-log manager of bkref's in-process bookie; not "
                "with --adapter (the bookie behind it has its own)"
            )
        problem = external.adapter_problem(request.adapter)
        if problem is not None:
            raise CampaignError(problem)
    else:
        if request.lazy_disk:
            raise CampaignError("--lazy-disk is for a bookie behind --adapter")
        scenario.load_opener(request.variant)


Say = Callable[[str], None]
#: A pass run: its number, its wall seconds, what it favoured, and the probes and cells it
#: aimed at.
PassPlan = tuple[int, float, str, tuple[str, ...], tuple[str, ...]]


class Campaign:
    """One campaign: :meth:`run` carries it out and returns its summary."""

    def __init__(self, request: Request, *, say: Say, progress: TextIO) -> None:
        check_request(request)
        self.request = request
        self.say = say
        self.progress = progress
        self.started_at = time.time()
        self.commit = scenario.commit()

    # -- items for the executors

    def _items(self, pass_number: int, first: int, count: int, aims: Sequence[Target]) -> list[Any]:
        """The items of a pass; scenario k of it aims at ``aims[k % len(aims)]``."""
        request = self.request
        items: list[Any] = []
        for index in range(first, first + count):
            aim = aims[(index - first) % len(aims)] if aims else None
            focus = Focus() if aim is None else Focus(aim.rules, aim.plans, aim.inside, aim.faults)
            if request.adapter is not None:
                spec = external.AdapterSpec(
                    request.adapter,
                    request.seed,
                    index,
                    request.steps,
                    request.lazy_disk,
                    pass_number,
                )
                items.append(external.item_of(spec, request.shrink_runs))
            else:
                scenario_spec = ScenarioSpec(
                    seed=request.seed,
                    index=index,
                    steps=request.steps,
                    focus=focus,
                    variant=request.variant,
                    stretch_max=request.stretch_max,
                    pass_number=pass_number,
                    manager=request.manager,
                )
                items.append(scenario.item_of(scenario_spec, request.shrink_runs))
        return items

    def _function(self) -> Callable[[Any], dict[str, Any]]:
        return external.run_item if self.request.adapter is not None else scenario.run_item

    # -- the run

    def run(self) -> CampaignSummary:
        from proofs.campaign import spark

        request = self.request
        self.say(f"starting Spark on {request.master} (its log: {request.out_dir}/spark.log)")
        began = time.monotonic()
        with spark.session(request.master, request.out_dir) as session:
            spark_start_s = time.monotonic() - began
            slots = spark.cores(session)
            self.say(f"Spark ready in {spark_start_s:.1f} s: {slots} parallel task slots")
            first = self._pass(session, 1, 0, request.first_pass, ())
            passes: list[PassPlan] = [(1, first, "", (), ())]
            if request.second_pass:
                so_far = spark.aggregate_pass(
                    spark.where_pass(spark.read(session, request.dataset), 1),
                    start=self.started_at,
                    bucket_seconds=timeline_bucket_seconds(time.time() - self.started_at),
                )
                aimed_probes, aimed_cells, aims = self._steering(so_far)
                second = self._pass(session, 2, request.first_pass, request.second_pass, aims)
                about = (
                    f"each scenario favours one of {len(aims)} target(s): the rules (and crash "
                    "plans) that reach a probe or cell pass 1 missed"
                    if aims
                    else ""
                )
                passes.append((2, second, about, aimed_probes, aimed_cells))
            wall_s = time.time() - self.started_at
            bucket_s = timeline_bucket_seconds(wall_s)
            frame = spark.read(session, request.dataset)
            reports = []
            for number, pass_wall_s, about, probes, cells in passes:
                aggregates = spark.aggregate_pass(
                    spark.where_pass(frame, number),
                    start=self.started_at,
                    bucket_seconds=bucket_s,
                )
                reports.append((number, aggregates, pass_wall_s, about, probes, cells))
        summary = self._summary(reports, wall_s, bucket_s, spark_start_s, slots)
        self._write_outputs(summary)
        return summary

    def _pass(
        self, session: Any, number: int, first: int, count: int, aims: Sequence[Target]
    ) -> float:
        """Run a pass's scenarios; its wall time in seconds (its rows are in the dataset)."""
        from proofs.campaign import spark

        request = self.request
        if count <= 0:
            return 0.0
        about = f", aimed at {len(aims)} missed probe(s) and cell(s)" if aims else ""
        self.say(f"pass {number}: {count:,} scenarios of {request.steps} steps{about}")
        line = ProgressLine(f"pass {number}", count, self.progress)
        began = time.monotonic()
        try:
            spark.run_job(
                session,
                self._items(number, first, count, aims),
                self._function(),
                ROW_FIELDS,
                request.dataset,
                progress=line.update,
            )
        finally:
            line.finish()
        return time.monotonic() - began

    def _steering(
        self, first: Aggregates
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Target, ...]]:
        """What pass 1 missed, and the targets that aim at it."""
        if self.request.adapter is not None:
            self.say("pass 2: an adapter records no probes; it runs unsteered")
            return (), (), ()
        manager = self.request.manager
        probes = tuple(
            p.name for p in probe_status(first.probes, first.totals.rules, manager) if not p.met
        )
        cells = missed_cells(first.cells, manager)
        if not probes and not cells:
            self.say("pass 1 met every probe and reached every expected cell: pass 2 unsteered")
            return (), (), ()
        self.say(
            f"pass 1 missed {len(probes)} probe(s) and {len(cells)} cell(s): each scenario of "
            "pass 2 aims at one of them"
        )
        return probes, cells, targets(probes, cells)

    def _summary(
        self,
        reports: Sequence[tuple[int, Aggregates, float, str, tuple[str, ...], tuple[str, ...]]],
        wall_s: float,
        bucket_s: float,
        spark_start_s: float,
        slots: int,
    ) -> CampaignSummary:
        request = self.request
        settings = Settings(
            seed=request.seed,
            scenarios=request.scenarios,
            steps=request.steps,
            master=request.master,
            bookie=request.adapter or "bkref in-process Bookie on the simulated disk",
            variant=request.variant,
            lazy_disk=request.lazy_disk,
            out_dir=request.out_dir,
            probes_apply=request.adapter is None,
            manager=request.manager,
        )
        passes = tuple(
            PassReport(number, aggregates, pass_wall_s, about, probes, cells)
            for number, aggregates, pass_wall_s, about, probes, cells in reports
        )
        summary = CampaignSummary(
            settings=settings,
            passes=passes,
            started_at=self.started_at,
            wall_seconds=wall_s,
            spark_start_seconds=spark_start_s,
            cores=slots,
            commit=self.commit,
            bucket_seconds=bucket_s,
        )
        still_probes, still_cells = summary.missed_probes, summary.missed_cells
        return attrs.evolve(
            summary,
            passes=tuple(
                attrs.evolve(
                    one,
                    closed_probes=closed(one.aimed_probes, still_probes),
                    closed_cells=closed(one.aimed_cells, still_cells),
                )
                for one in passes
            ),
        )

    def _write_outputs(self, summary: CampaignSummary) -> None:
        from proofs.campaign import report

        out = self.request.out_dir
        for record in summary.all.failures:
            if record.get("trace"):
                path = os.path.join(out, failure_trace_name(record))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(record["trace"])
        with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
            json.dump(report.to_json(summary), handle, indent=2, sort_keys=True)
            handle.write("\n")
        report.write_html(summary, os.path.join(out, "report.html"))
