"""Hand-built conformance runs for the report tests: a pass, a failure with its told trace,
a scenario that could not be carried out, a version 1 bookie, and a bookie that never
started. Built by hand so each report is tested without starting any bookie (the runner has
its own tests)."""

from __future__ import annotations

import attrs

from proofs.conform.results import Capabilities, Cell, Failure, RunResult, ScenarioResult

ADAPTER = "./mybookie --data {data_dir}"

V2 = Capabilities(
    version=2,
    ops=frozenset({"checkpoint", "inspect"}),
    state="protocol",
    answers="bookkeeper",
    journal_dirs=("/abs/journal",),
    ledger_dirs=("/abs/ledgers",),
    bookie="mybookie 0.3",
)
V1 = Capabilities(version=1, ops=frozenset(), state="none", answers="either")

#: Untrusted text as a bookie might write it: markup, an entity, a NUL and colour codes.
HOSTILE_STDERR = (
    "starting mybookie\n"
    "<script>alert('owned')</script>\n"
    "\x1b[31mpanic:\x1b[0m index & journal disagree\x00\n"
)

TOLD = (
    "traces/scenario-3.jsonl: 5 steps recorded by bkref conform",
    "telling every step; after each step, '=' lines say what the model holds now",
    "step 0  add 1:0 (13 bytes, key c0ffee) -> ok",
    "  - add 1:0 acknowledged: durable, a crash can no longer lose it",
    "  = durable: ledger 1 entry 0",
    "step 1  crash (power loss, plan lose_unsynced)",
    "  - every byte not fsynced is gone",
    "step 2  restart -> ok",
    "step 3  read 1:0 -> no_entry",
    "  ! divergence: the model says 1:0 is durable (acknowledged at step 0); the bookie "
    "answered no_entry <b>bold</b>",
)


def cells(*names: tuple[str, str, str]) -> frozenset[Cell]:
    return frozenset(Cell(*n) for n in names)


LAZY_CELLS = cells(
    ("add", "none", "none"),
    ("add", "in_flight", "kill"),
    ("read", "none", "none"),
    ("fence", "idle", "lose_unsynced"),
)
KILL_CELLS = cells(("add", "none", "none"), ("add", "in_flight", "kill"), ("read", "idle", "kill"))


def passing(index: int, reached: frozenset[Cell] = LAZY_CELLS) -> ScenarioResult:
    return ScenarioResult(
        index=index,
        verdict="pass",
        steps=40,
        crashes=2,
        power_losses=1,
        adds_acknowledged=17,
        reads_checked=9,
        seconds=1.25,
        cells=reached,
    )


DURABILITY_FAILURE = Failure(
    kind="property",
    message="an acknowledged add is lost: 1:0 answered no_entry after a power loss <i>",
    check="durability",
    step=3,
    trace_path="/tmp/report/traces/scenario-3.jsonl",
    told=TOLD,
    reproduce=(
        "bkref conform --adapter './mybookie --data {data_dir}' --seed 42 --scenario 3 "
        "--lazy-disk --profile quick"
    ),
    stderr_tail=HOSTILE_STDERR,
    steps_before_shrink=41,
    steps_after_shrink=5,
)

FAILED = ScenarioResult(
    index=3,
    verdict="fail",
    steps=41,
    crashes=2,
    power_losses=2,
    adds_acknowledged=11,
    reads_checked=4,
    seconds=2.5,
    cells=cells(("add", "none", "none"), ("read", "idle", "keep_prefix")),
    failure=DURABILITY_FAILURE,
)

ERRORED = ScenarioResult(
    index=4,
    verdict="error",
    steps=7,
    crashes=0,
    power_losses=0,
    adds_acknowledged=2,
    reads_checked=0,
    seconds=30.0,
    failure=Failure(
        kind="error",
        message="no answer to request 7 (read 1:3) within 10 s; the bookie is stuck",
        reproduce="bkref conform --adapter './mybookie --data {data_dir}' --seed 42 --scenario 4",
        stderr_tail="waiting on lock\n",
    ),
)


def pass_run() -> RunResult:
    return RunResult(
        adapter=ADAPTER,
        profile="quick",
        seed=42,
        lazy_disk=True,
        capabilities=V2,
        scenarios=(passing(0), passing(1), passing(2)),
        seconds=4.0,
    )


def fail_run() -> RunResult:
    return RunResult(
        adapter=ADAPTER,
        profile="quick",
        seed=42,
        lazy_disk=True,
        capabilities=V2,
        scenarios=(passing(0), passing(1), passing(2), FAILED, ERRORED),
        seconds=40.0,
    )


def error_run() -> RunResult:
    return RunResult(
        adapter=ADAPTER,
        profile="standard",
        seed=7,
        lazy_disk=False,
        capabilities=V2,
        scenarios=(passing(0, KILL_CELLS), ERRORED),
        seconds=33.0,
    )


def v1_run() -> RunResult:
    return RunResult(
        adapter="node bookie.js {data_dir}",
        profile="quick",
        seed=5,
        lazy_disk=False,
        capabilities=V1,
        scenarios=(passing(0, KILL_CELLS), passing(1, KILL_CELLS)),
        seconds=2.0,
    )


def cannot_run() -> RunResult:
    return RunResult(
        adapter="./missing {data_dir}",
        profile="quick",
        seed=1,
        lazy_disk=False,
        capabilities=None,
        scenarios=(),
        seconds=0.1,
        error="the bookie exited with status 127 before its ready line\nstderr:\n"
        "sh: ./missing: not found <&>\x1b[0m",
    )


def stopped_run() -> RunResult:
    """The bookie stopped starting after one scenario passed."""
    return attrs.evolve(
        pass_run(),
        scenarios=(passing(0),),
        error="the bookie exited with status 1 before its ready line: disk full",
    )
