"""How well the conformance kit judges bookies written apart from bkref (issue 25): the
scenarios to the first catch of each seeded bug, and false verdicts on the correct bookies.

Run: ``.venv/bin/python -m tests.bench.bench_outsiders catches [BOOKIE ...]`` and
``... false-verdicts --scenarios N [--lazy-disk] [BOOKIE ...]``.

- ``catches``: for each bookie of tests/conformance/bookies.py and each of its bugs, quick
  scenarios (seed 1, 2, ... up to ``--seeds``, scenario by scenario, not shrunk) until the
  first that fails, then standard ones if the quick ones missed it; prints the scenarios run
  to it, the check that failed and the rule the divergence names. A bug only a power loss
  can show runs with the lazy disk.
- ``false-verdicts``: a campaign on embedded Spark (``bkref campaign --adapter``) of N
  standard-sized scenarios (80 requests, 3 crashes) against each correct bookie; prints the
  scenarios, the ones that failed (a false verdict: the bookie is correct) and the ones that
  could not be judged, per 1,000, and the promises no scenario observed after a plan.

Not a timed benchmark: the counts are what matter (they are the same on every machine for
the same code and bookie, up to the bookie's own timing).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proofs.conform.runner import Conformance
from tests.conformance.bookies import BOOKIES, Outsider

#: Bugs a SIGKILL cannot show (the page cache survives it): run on the lazy disk.
POWER_LOSS_BUGS = frozenset(
    {"ack-before-fsync", "delete-before-fsync", "serve-torn-tail", "unsynced-recovery"}
)
RULE = re.compile(r"\[(R-[A-Z-]+)\]")


def catches(bookies: list[Outsider], seeds: int) -> None:
    print(f"{'bookie':<8} {'bug':<20} {'disk':<5} {'to catch':>9}  check / rule")
    for bookie in bookies:
        if bookie.unavailable() is not None:
            print(f"{bookie.name:<8} skipped: {bookie.unavailable()}")
            continue
        for bug in bookie.bugs:
            lazy = bug in POWER_LOSS_BUGS
            run, what, started = 0, "missed", time.monotonic()
            with tempfile.TemporaryDirectory() as work:
                # Quick scenarios first; a bug they miss, standard ones (3 crashes each).
                for profile, seed in [("quick", s) for s in range(1, seeds + 1)] + [
                    ("standard", s) for s in range(1, seeds + 1)
                ]:
                    if profile == "standard" and what != "missed":
                        break
                    runner = Conformance(
                        bookie.command(bug),
                        seed=seed,
                        profile=profile,
                        lazy_disk=lazy,
                        work_dir=work,
                        shrink=False,
                    )
                    for index in range(runner.scenario_count()):
                        run += 1
                        result = runner.run_one(index)
                        if result.verdict == "fail" and result.failure is not None:
                            rule = RULE.search(result.failure.message)
                            what = f"{result.failure.check} / {rule.group(1) if rule else '-'}"
                            if profile == "standard":
                                what += " (standard)"
                            break
                    else:
                        continue
                    break
            seconds = time.monotonic() - started
            shown = str(run) if what != "missed" else f">{run}"
            disk = "lazy" if lazy else "kill"
            print(f"{bookie.name:<8} {bug:<20} {disk:<5} {shown:>9}  {what} ({seconds:.0f} s)")
            sys.stdout.flush()


def false_verdicts(bookies: list[Outsider], scenarios: int, lazy: bool, seed: int) -> None:
    for bookie in bookies:
        if bookie.unavailable() is not None:
            print(f"{bookie.name}: skipped: {bookie.unavailable()}")
            continue
        out = Path(tempfile.mkdtemp(prefix=f"bkref-false-{bookie.name}-"))
        args = [
            sys.executable, "-m", "proofs.cli.main", "campaign", "--adapter", bookie.command(),
            "--scenarios", str(scenarios), "--steps", "80", "--seed", str(seed),
            "--second-pass", "0", "--out", str(out / "campaign"),
        ]  # fmt: skip
        if lazy:
            args.append("--lazy-disk")
        started = time.monotonic()
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        summary_path = out / "campaign" / "summary.json"
        if not summary_path.exists():
            print(f"{bookie.name}: the campaign did not run (exit {done.returncode}):")
            print(done.stderr[-2000:])
            continue
        summary = json.loads(summary_path.read_text())
        totals = summary["totals"]
        failed, errors, total = totals["failed"], totals["errors"], totals["scenarios"]
        gaps = summary.get("promise_gaps", [])
        print(
            f"{bookie.name:<8} {'lazy' if lazy else 'kill'}: {total} scenarios, {failed} false "
            f"verdicts ({1000 * failed / max(1, total):.2f} per 1,000), {errors} not judged, "
            f"{seconds:.0f} s; promise gaps: {', '.join(gaps) or 'none'}; output {out}"
        )
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("catches")
    one.add_argument("bookies", nargs="*")
    one.add_argument("--seeds", type=int, default=5)
    two = sub.add_parser("false-verdicts")
    two.add_argument("bookies", nargs="*")
    two.add_argument("--scenarios", type=int, default=5000)
    two.add_argument("--lazy-disk", action="store_true")
    two.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    chosen = [b for b in BOOKIES if not args.bookies or b.name in args.bookies]
    if args.what == "catches":
        catches(chosen, args.seeds)
    else:
        false_verdicts(chosen, args.scenarios, args.lazy_disk, args.seed)


if __name__ == "__main__":
    main()
