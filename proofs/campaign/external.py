"""Campaign scenarios against a bookie in another process: any bookie that speaks the adapter
protocol (spec/adapter.md), in any language, checked by the conformance runner
(proofs/conform/runner.py) one scenario per row.

Spec pages: spec/adapter.md, docs/conformance.md (what a scenario does to the bookie),
docs/campaign.md ("Other bookies").

Why it is shaped so: the conformance kit already derives a scenario from (seed, index)
alone, kills the bookie (and with the lazy disk cuts its power), judges every answer with the
model and shrinks a failure; a campaign only runs many of its scenarios in parallel, each in
a new temporary directory of the executor that runs it, sized by ``--steps`` (requests per
scenario, with a crash per 25 requests), and turns each result into a row of the same schema
as the in-process scenarios'. The adapter command must run on every executor.

Not covered: the workload's probes (the in-process harness records them; a bookie behind a
pipe shows only its answers), so an adapter campaign's coverage is its cells alone.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import attrs

from proofs.campaign.scenario import ScenarioRow, commit
from proofs.conform.capabilities import CapabilityError
from proofs.conform.results import ScenarioResult
from proofs.conform.runner import CannotRun, Conformance, LazyDiskUnavailable

#: Requests per crash in an adapter scenario.
REQUESTS_PER_CRASH = 25


@attrs.frozen
class AdapterSpec:
    """One scenario of the conformance kit, sized by ``steps`` requests."""

    adapter: str
    seed: int
    index: int
    steps: int
    lazy_disk: bool = False
    pass_number: int = 1

    @property
    def size(self) -> tuple[int, int]:
        return self.steps, max(1, self.steps // REQUESTS_PER_CRASH)

    @property
    def replay_command(self) -> str:
        words = ["bkref", "replay", "--adapter", self.adapter, "--seed", str(self.seed)]
        words += ["--index", str(self.index), "--steps", str(self.steps)]
        if self.lazy_disk:
            words.append("--lazy-disk")
        return shlex.join(words)


def conformance(spec: AdapterSpec, work_dir: str, shrink_runs: int) -> Conformance:
    return Conformance(
        spec.adapter,
        seed=spec.seed,
        lazy_disk=spec.lazy_disk,
        work_dir=work_dir,
        shrink=shrink_runs > 0,
        shrink_runs=max(1, shrink_runs),
        size=spec.size,
    )


def run_adapter_scenario(spec: AdapterSpec, *, shrink_runs: int) -> ScenarioRow:
    """Run and judge one scenario against the bookie; never raises for what the bookie does
    (a bookie that cannot start is an ``error`` row with its stderr)."""
    work_dir = tempfile.mkdtemp(prefix="bkref-campaign-")
    started_at = time.time()
    began = time.perf_counter()
    try:
        runner = conformance(spec, work_dir, shrink_runs)
        try:
            result = runner.run_one(spec.index)
            actions = len(runner.scenario(spec.index).actions)
        except (CannotRun, CapabilityError, LazyDiskUnavailable) as exc:
            return _error_row(spec, str(exc), started_at, time.perf_counter() - began)
        trace = None
        failure = result.failure
        if failure is not None and failure.trace_path:
            trace = _read(failure.trace_path)
        return _row(spec, result, actions, trace, started_at, time.perf_counter() - began)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _row(
    spec: AdapterSpec,
    result: ScenarioResult,
    actions: int,
    trace: str | None,
    started_at: float,
    seconds: float,
) -> ScenarioRow:
    failure = result.failure
    message = None
    if failure is not None:
        message = failure.message
        if failure.stderr_tail:
            message += f"\nthe bookie's stderr:\n{failure.stderr_tail}"
    return ScenarioRow(
        pass_number=spec.pass_number,
        seed=spec.seed,
        index=spec.index,
        steps_asked=spec.steps,
        rules=actions,
        focus="",
        variant="",
        bookie=spec.adapter,
        steps=result.steps,
        crashes=result.crashes,
        crash_states=result.crashes,
        restarts=result.crashes,
        adds_acked=result.adds_acknowledged,
        reads=result.reads_checked,
        verdict=result.verdict,
        failure_kind=None if failure is None else failure.kind,
        message=message,
        failing_step=None if failure is None else failure.step,
        trace=trace,
        steps_before_shrink=None if failure is None else failure.steps_before_shrink or None,
        message_before_shrink=message,
        coverage={f"{c.operation}/{c.point}/{c.plan}/none": 1 for c in result.cells},
        probes={},
        promises={f"{promise}/{plan}": n for promise, plan, n in result.promises},
        started_at=started_at,
        seconds=seconds,
        shrink_seconds=0.0,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        commit=commit(),
        replay=spec.replay_command,
    )


def _error_row(spec: AdapterSpec, why: str, started_at: float, seconds: float) -> ScenarioRow:
    result = ScenarioResult(
        index=spec.index,
        verdict="error",
        steps=0,
        crashes=0,
        power_losses=0,
        adds_acknowledged=0,
        reads_checked=0,
        seconds=seconds,
    )
    row = _row(spec, result, 0, None, started_at, seconds)
    return attrs.evolve(row, failure_kind="error", message=why)


# --- what a Spark task is handed ----------------------------------------------------------


def item_of(spec: AdapterSpec, shrink_runs: int) -> tuple[Any, ...]:
    return (
        spec.adapter,
        spec.seed,
        spec.index,
        spec.steps,
        spec.lazy_disk,
        spec.pass_number,
        shrink_runs,
    )


def run_item(item: Sequence[Any]) -> dict[str, Any]:
    adapter, seed, index, steps, lazy_disk, pass_number, shrink_runs = item
    spec = AdapterSpec(adapter, seed, index, steps, lazy_disk, pass_number)
    return run_adapter_scenario(spec, shrink_runs=shrink_runs).to_record()


@functools.cache
def adapter_problem(adapter: str) -> str | None:
    """Why ``adapter`` cannot run here (its first word is not a program), or None; checked
    on the driver before a job starts."""
    try:
        words = shlex.split(adapter)
    except ValueError as exc:
        return f"--adapter {adapter!r}: {exc}"
    if not words:
        return "--adapter is empty"
    program = words[0].replace("{data_dir}", "x")
    if os.sep in program:
        if not os.access(program, os.X_OK):
            return f"--adapter: {program} is not an executable file"
        return None
    if shutil.which(program) is None:
        return f"--adapter: {program} is not on PATH"
    return None
