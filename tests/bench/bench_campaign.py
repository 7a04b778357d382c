"""The campaign on Spark: scenarios/s and crash states/s on local[1] and local[2] in the same
run, Spark's overhead per scenario against the same scenarios in a plain loop, a standalone
cluster's figures, and (``--quality``) how many scenarios each known-bad variant takes.

Run: ``.venv/bin/python -m tests.bench.bench_campaign [--scenarios N] [--steps K] [--seed S]
[--no-cluster] [--quality] [--rates N]``.

Each Spark run is ``bkref campaign`` in a process of its own (its Spark start-up included in
its wall time and reported apart), with ``--second-pass 0`` so every run does the same
scenarios (seed S, indices 0 to N-1), which the plain loop runs one after the other in this
process with ``run_scenario`` (no Spark, no JVM). Throughput is of the pass alone (the
scenarios' job, from its first task to its last row written), so Spark's start-up and the
final aggregation are shown on their own lines:

- plain loop: scenarios/s, steps/s and crash states/s on one core;
- local[1] and local[2]: the same, and the speed-up of local[2] over local[1] (the target:
  at least 1.6x on 2 cores);
- Spark's overhead per scenario: (local[1]'s pass time - the plain loop's time) / N, the cost
  of a task's scheduling, the Python worker and the Parquet write, per scenario;
- standalone: a master and a 2-core worker started from the pyspark installation
  (tests/spark_cluster.py), the same campaign with ``--master spark://...``.

``--rates N`` runs N scenarios in a plain loop and prints each probe's rate per 1,000 rules
and the cells reached (docs/benchmarks.md "Campaign coverage rates"; the minimums of
proofs/campaign/coverage.py are a third of these). ``--quality`` prints, per Bookie-subclass
variant of tests/quality/refinement_variants.py, the first scenario of seed 1 that fails it
(tests/quality/test_campaign_catches.py holds the budgets).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from proofs.campaign.coverage import PROBES, collapsed, expected_cells
from proofs.campaign.scenario import DEFAULT_STEPS, ScenarioSpec, run_scenario
from tests.paths import ROOT
from tests.spark_cluster import standalone


def plain_loop(scenarios: int, steps: int, seed: int) -> dict[str, float]:
    began = time.perf_counter()
    totals = collections.Counter[str]()
    for index in range(scenarios):
        row = run_scenario(ScenarioSpec(seed=seed, index=index, steps=steps))
        assert row.verdict == "pass", (index, row.message)
        totals.update({"steps": row.steps, "crash_states": row.crash_states})
    seconds = time.perf_counter() - began
    return {"seconds": seconds, **totals}


def spark_run(master: str, scenarios: int, steps: int, seed: int, out: Path) -> dict[str, Any]:
    bkref = str(Path(sys.executable).with_name("bkref"))
    command = [bkref, "campaign", "--master", master, "--scenarios", str(scenarios)]
    command += ["--steps", str(steps), "--seed", str(seed), "--second-pass", "0"]
    command += ["--out", str(out)]
    began = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=7200,
    )
    wall = time.perf_counter() - began
    if done.returncode not in (0, 3):
        raise SystemExit(f"{master}: exit {done.returncode}\n{done.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    (first,) = summary["passes"]
    return {
        "wall": wall,
        "pass_seconds": first["wall_seconds"],
        "spark_start": summary["spark_start_seconds"],
        "steps": first["totals"]["steps"],
        "crash_states": first["totals"]["crash_states"],
        "cores": summary["cores"],
    }


def _line(name: str, scenarios: int, seconds: float, steps: float, states: float) -> str:
    return (
        f"| {name} | {scenarios / seconds:.2f} | {steps / seconds:,.0f} | "
        f"{states / seconds:,.0f} | {seconds:.1f} s |"
    )


def throughput(args: argparse.Namespace) -> None:
    n, k, seed = args.scenarios, args.steps, args.seed
    print(f"{n} scenarios of {k} steps, seed {seed}; load average {os.getloadavg()[0]:.2f}")
    loop = plain_loop(n, k, seed)
    with tempfile.TemporaryDirectory(prefix="bench-campaign-") as work:
        root = Path(work)
        one = spark_run("local[1]", n, k, seed, root / "one")
        two = spark_run("local[2]", n, k, seed, root / "two")
        cluster = None
        if not args.no_cluster:
            with standalone(root / "cluster", cores=2) as running:
                cluster = spark_run(running.url, n, k, seed, root / "standalone")
    print("| run | scenarios/s | steps/s | crash states/s | time (of the pass) |")
    print("| --- | --- | --- | --- | --- |")
    print(_line("plain loop", n, loop["seconds"], loop["steps"], loop["crash_states"]))
    for name, run in (("local[1]", one), ("local[2]", two), ("standalone, 2 cores", cluster)):
        if run is not None:
            print(_line(name, n, run["pass_seconds"], run["steps"], run["crash_states"]))
    print(f"speed-up local[2] over local[1]: {one['pass_seconds'] / two['pass_seconds']:.2f}x")
    overhead_ms = 1000 * (one["pass_seconds"] - loop["seconds"]) / n
    print(f"Spark's overhead per scenario (local[1] - plain loop): {overhead_ms:.1f} ms")
    for name, run in (("local[1]", one), ("local[2]", two), ("standalone", cluster)):
        if run is not None:
            print(
                f"{name}: whole command {run['wall']:.1f} s, Spark start-up "
                f"{run['spark_start']:.1f} s, pass {run['pass_seconds']:.1f} s"
            )
    per_core_hour = 3600 * n / loop["seconds"]
    print(f"scenarios per core per hour (plain loop): {per_core_hour:,.0f}")


def rates(count: int, steps: int, seed: int) -> None:
    probes = collections.Counter[str]()
    cells = collections.Counter[str]()
    rules = failed = 0
    began = time.perf_counter()
    for index in range(count):
        row = run_scenario(ScenarioSpec(seed=seed, index=index, steps=steps))
        failed += row.verdict != "pass"
        if row.verdict != "pass":
            print(f"scenario {index}: {row.verdict}: {row.message}")
        probes.update(row.probes)
        cells.update(row.coverage)
        rules += row.rules
    seconds = time.perf_counter() - began
    print(f"{count} scenarios, {rules} rules, {failed} not passed, {seconds:.0f} s")
    print("| probe | per 1,000 rules | minimum set |")
    print("| --- | --- | --- |")
    for name, probe in PROBES.items():
        print(f"| {name} | {1000 * probes[name] / rules:.2f} | {probe.per_1000_rules} |")
    reached = collapsed(cells)
    hits = [reached.get(cell, 0) for cell in expected_cells()]
    print(f"expected cells reached: {sum(h > 0 for h in hits)} of {len(hits)}, fewest {min(hits)}")


def quality(limit: int) -> None:
    from impl.bookie.bookie import Bookie
    from tests.quality import refinement_variants

    names = sorted(
        name
        for name, cls in inspect.getmembers(refinement_variants, inspect.isclass)
        if issubclass(cls, Bookie) and cls is not Bookie and not name.startswith("_")
    )
    print("| variant | first failing scenario (of seed 1) | seconds | message |")
    print("| --- | --- | --- | --- |")
    for name in names:
        began = time.perf_counter()
        found = "not caught"
        message = ""
        for index in range(limit):
            variant = f"tests.quality.refinement_variants:{name}"
            spec = ScenarioSpec(seed=1, index=index, steps=400, variant=variant)
            row = run_scenario(spec, shrink_runs=0)
            if row.verdict != "pass":
                found, message = str(index), (row.message or "")[:70]
                break
        print(f"| {name} | {found} | {time.perf_counter() - began:.1f} | {message} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=400)
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--quality", type=int, metavar="LIMIT", default=0)
    parser.add_argument("--rates", type=int, metavar="N", default=0)
    args = parser.parse_args()
    if args.quality:
        quality(args.quality)
    elif args.rates:
        rates(args.rates, args.steps, args.seed)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
