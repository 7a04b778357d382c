"""``bkref check-trace`` (proofs/cli/check_trace.py): valid traces pass, altered ones fail at the
altered step, bad input exits 2 with one line.

The traces come from the real refinement harness (bkref's Bookie on the simulated disk with
SMALL_SETTINGS), so a valid trace here is one the harness accepted step by step; each
alteration changes one recorded answer, ack or state the way a buggy bookie would.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proofs.cli.main
import proofs.harness.replay
from proofs.cli.check_trace import (
    EXIT_DIVERGED,
    EXIT_OK,
    EXIT_UNUSABLE,
    context_lines,
    describe_step,
)
from proofs.harness.refinement import SMALL_SETTINGS, InProcessBookie, Refinement
from proofs.harness.replay import Replay, ReplayError, replay_trace, summarize
from spec.crash import KeepPrefix, LoseUnsynced
from spec.operations import (
    OK,
    PENDING,
    Add,
    Checkpoint,
    Crash,
    Fence,
    JournalForce,
    Operation,
    Read,
    Restart,
    Result,
    Rotate,
    Shutdown,
)
from spec.properties import PropertyMonitor, Violation
from spec.trace import Step, Trace, TraceHeader, write_trace
from tests.paths import ROOT

KEY = bytes.fromhex("c0ffee")

#: The steps of the base scenario the alterations below refer to.
FIRST_READ = 6  # read 1:2, ok
CHECKPOINT = 7
FORCE_OF_TWO = 10  # acknowledges the adds of steps 8 and 9
ADD_AFTER_FENCE = 13  # refused: fenced (the fence was acknowledged at step 12)
CRASH = 15


def base_ops() -> list[Operation]:
    """Adds that rotate, a force, a read, a checkpoint, more adds, a fence and an add it
    refuses, an unacknowledged add, a crash, recovery, reads, a clean stop and a restart."""
    ops: list[Operation] = [Add(1, e, KEY, bytes([e]) * 60) for e in range(5)]
    ops += [JournalForce(), Read(1, 2), Checkpoint()]
    ops += [Add(1, 5, KEY, b"five"), Add(2, 0, KEY, b"two"), JournalForce()]
    ops += [Fence(2, KEY), JournalForce(), Add(2, 1, KEY, b"late"), Add(1, 6, KEY, b"pending")]
    ops += [Crash(LoseUnsynced()), Restart(), Read(1, 4), Read(1, 5)]
    ops += [Shutdown(), Restart(), Read(2, 0)]
    return ops


def build_trace(ops: Sequence[Operation], crash_at: dict[int, int] | None = None) -> Trace:
    """Run ``ops`` through the refinement harness; ``crash_at`` maps an op's position to
    the ``crash_after_ops`` it runs with. The harness must accept the whole scenario."""
    harness = Refinement(
        InProcessBookie(SMALL_SETTINGS), SMALL_SETTINGS, source="test", probe_durable=False
    )
    for position, op in enumerate(ops):
        harness.run(op, crash_after_ops=(crash_at or {}).get(position))
    return harness.trace()


@pytest.fixture(scope="module")
def base_trace() -> Trace:
    trace = build_trace(base_ops())
    # The alterations below lean on these steps being what the scenario says.
    steps = trace.steps
    assert steps[FIRST_READ].op == Read(1, 2) and steps[FIRST_READ].result.data
    assert steps[CHECKPOINT].op == Checkpoint() and steps[CHECKPOINT].result.ok
    assert [c.step for c in steps[FORCE_OF_TWO].completed] == [8, 9]
    assert steps[ADD_AFTER_FENCE].result.error == "fenced"
    assert isinstance(steps[CRASH].op, Crash)
    return trace


def replace_step(trace: Trace, index: int, **changes: Any) -> Trace:
    steps = list(trace.steps)
    steps[index] = attrs.evolve(steps[index], **changes)
    return Trace(trace.header, tuple(steps))


def save(tmp_path: Path, trace: Trace, name: str = "trace.jsonl") -> str:
    path = tmp_path / name
    path.write_text(write_trace(trace), encoding="utf-8")
    return str(path)


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Run ``bkref ARGS`` in process (only this issue's commands are loaded, so another
    command's module under construction cannot break these tests)."""
    rows = tuple(row for row in proofs.cli.main.COMMANDS if row[0] in ("check-trace", "explain"))
    assert len(rows) == 2, "check-trace or explain is missing from proofs.cli.main.COMMANDS"
    monkeypatch.setattr(proofs.cli.main, "COMMANDS", rows)

    def call(*argv: str) -> tuple[int, str, str]:
        code = proofs.cli.main.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return call


# --- valid traces ---------------------------------------------------------------------------


def test_valid_trace_exits_0_with_a_one_line_summary(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    path = save(tmp_path, base_trace)
    code, out, err = cli("check-trace", path)
    assert (code, err) == (EXIT_OK, "")
    assert out.count("\n") == 1, out
    summary = summarize(base_trace.steps)
    assert summary.steps == 22 and summary.crashes == 1 and summary.restarts == 2
    assert summary.adds_acknowledged == 7  # 1:0-1:4, 1:5, 2:0
    assert f"{path}: ok: {summary.describe()}" in out


def test_replay_reports_every_step_with_the_models_notes(base_trace: Trace) -> None:
    verdict = replay_trace(base_trace)
    assert verdict.ok and verdict.failure is None
    assert [r.step for r in verdict.reports] == list(base_trace.steps)
    crash_notes = verdict.reports[CRASH].notes
    assert any("must survive" in note for note in crash_notes), crash_notes


def test_trace_from_stdin(
    base_trace: Trace,
    monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., tuple[int, str, str]],
) -> None:
    data = write_trace(base_trace).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = cli("check-trace", "-")
    assert code == EXIT_OK
    assert out.startswith("<stdin>: ok:")


def test_the_refinement_harness_and_the_replay_agree_on_a_crash_mid_checkpoint() -> None:
    ops: list[Operation] = [Add(1, e, KEY, b"x" * 80) for e in range(6)]
    ops += [JournalForce(), Add(1, 6, KEY, b"y"), Checkpoint(), Crash(KeepPrefix(1)), Restart()]
    trace = build_trace(ops, crash_at={8: 3})
    assert trace.steps[8].result.crashed
    assert replay_trace(trace).ok


# --- altered traces -------------------------------------------------------------------------


def _expect_failure(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path, trace: Trace, step: int
) -> str:
    code, out, err = cli("check-trace", save(tmp_path, trace))
    assert (code, err) == (EXIT_DIVERGED, ""), out
    first = out.splitlines()[0]
    assert f"step {step} (" in first, first
    failing = [line for line in out.splitlines() if line.lstrip().startswith(">")]
    assert len(failing) == 1 and failing[0].split()[1] == str(step), failing
    return first


def test_a_read_returning_other_bytes_fails_at_the_read(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    altered = replace_step(base_trace, FIRST_READ, result=Result(data=b"\xff" * 60))
    first = _expect_failure(cli, tmp_path, altered, FIRST_READ)
    assert "read 1:2 answered other bytes" in first


def test_a_dropped_ack_fails_at_the_force(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    force = base_trace.steps[FORCE_OF_TWO]
    altered = replace_step(base_trace, FORCE_OF_TWO, completed=force.completed[:1])
    first = _expect_failure(cli, tmp_path, altered, FORCE_OF_TWO)
    assert "expected exactly [8, 9]" in first


def test_a_last_mark_moving_backwards_fails_at_that_step(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    state = base_trace.steps[FORCE_OF_TWO].state
    assert state is not None and state.last_mark > (0, 0), "the checkpoint moved lastMark"
    lowered = attrs.evolve(state, last_mark=(0, 0))
    altered = replace_step(base_trace, FORCE_OF_TWO, state=lowered)
    first = _expect_failure(cli, tmp_path, altered, FORCE_OF_TWO)
    assert "lastMark moved backwards" in first


@pytest.mark.parametrize("answer", [PENDING, OK], ids=["pending", "ok"])
def test_an_add_accepted_after_the_fence_ack_fails_at_the_add(
    base_trace: Trace,
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    answer: Result,
) -> None:
    altered = replace_step(base_trace, ADD_AFTER_FENCE, result=answer)
    first = _expect_failure(cli, tmp_path, altered, ADD_AFTER_FENCE)
    assert "add 2:1 answered" in first and "allowed: fenced" in first


def test_context_shows_k_steps_before_the_failing_one(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    altered = replace_step(base_trace, FIRST_READ, result=Result(data=b""))
    code, out, _ = cli("check-trace", save(tmp_path, altered), "--context", "2")
    assert code == EXIT_DIVERGED
    assert "the 2 steps leading to it" in out
    numbered = [line for line in out.splitlines() if line.startswith("  ")]
    assert [int(line.lstrip(" >").split()[0]) for line in numbered] == [4, 5, 6], out
    assert f"bkref explain {tmp_path / 'trace.jsonl'} --from 4 --to 6" in out


def test_json_verdicts(
    base_trace: Trace, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, _ = cli("check-trace", save(tmp_path, base_trace, "good.jsonl"), "--json")
    good = json.loads(out)
    assert code == EXIT_OK and good["ok"] is True and good["failure"] is None
    assert good["summary"] == attrs.asdict(summarize(base_trace.steps))
    altered = replace_step(base_trace, FIRST_READ, result=Result(data=b"no"))
    code, out, _ = cli(
        "check-trace", save(tmp_path, altered, "bad.jsonl"), "--json", "--context", "1"
    )
    bad = json.loads(out)
    assert code == EXIT_DIVERGED and bad["ok"] is False
    assert bad["failure"]["step"] == FIRST_READ and bad["failure"]["kind"] == "divergence"
    assert [line["step"] for line in bad["failure"]["context"]] == [FIRST_READ - 1, FIRST_READ]


def test_a_property_violation_is_reported_as_such(
    base_trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model catches every alteration above first; this checks the property path itself.
    class Breaks(PropertyMonitor):
        def observe(self, step: Step) -> list[Violation]:
            found = super().observe(step)
            if step.index == 3:
                found.append(Violation("durability", 3, "made up for the test"))
            return found

    monkeypatch.setattr(proofs.harness.replay, "PropertyMonitor", Breaks)
    verdict = replay_trace(base_trace)
    assert verdict.failure is not None
    assert (verdict.failure.step, verdict.failure.kind) == (3, "property")
    assert verdict.failure.prop == "durability"
    assert len(verdict.reports) == 4
    assert "breaks property durability" in verdict.failure.describe()


# --- bad input ------------------------------------------------------------------------------


def _expect_unusable(cli: Callable[..., tuple[int, str, str]], *argv: str) -> str:
    code, out, err = cli(*argv)
    assert code == EXIT_UNUSABLE, (out, err)
    assert out == "" or "--json" in argv, out
    assert err.count("\n") == 1 and err.startswith("bkref check-trace: "), err
    assert "Traceback" not in err
    return err


def test_a_missing_file_exits_2(tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    err = _expect_unusable(cli, "check-trace", str(tmp_path / "nope.jsonl"))
    assert "cannot read" in err and "No such file" in err


def test_a_directory_exits_2(tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    assert "cannot read" in _expect_unusable(cli, "check-trace", str(tmp_path))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the trace is empty"),
        ("hello\n", "line 1"),
        ('{"bkref_trace": 9, "source": "x", "config": {}}\n', "line 1"),
        ("\xff", "not UTF-8"),
    ],
    ids=["empty", "not-json", "version", "not-utf8"],
)
def test_not_a_trace_exits_2(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]], text: str, expected: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(text.encode("latin-1"))
    assert expected in _expect_unusable(cli, "check-trace", str(path))


def test_json_error_is_one_object_and_one_stderr_line(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli("check-trace", str(tmp_path / "nope.jsonl"), "--json")
    assert code == EXIT_UNUSABLE
    assert json.loads(out)["ok"] is False and "cannot read" in json.loads(out)["error"]
    assert err.count("\n") == 1


def _trace(ops_results: Sequence[tuple[Operation, Result]], config: object = ()) -> Trace:
    header = TraceHeader(config=tuple(config), source="test")  # type: ignore[arg-type]
    steps = tuple(Step(i, op, result) for i, (op, result) in enumerate(ops_results))
    return Trace(header, steps)


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        (
            _trace([(Crash(LoseUnsynced()), OK), (Read(1, 0), Result(error="no_entry"))]),
            "read while the bookie is down",
        ),
        (_trace([(Restart(), OK)]), "restart while the bookie is up"),
        (
            _trace([(Rotate(), OK)], [("nettyMaxFrameSizeBytes", "516")]),
            "nettyMaxFrameSizeBytes must be above 516",
        ),
        (_trace([(Rotate(), OK)], [("logSizeLimit", "ten")]), "logSizeLimit must be an integer"),
        (_trace([(Rotate(), OK)], [("logSizeLimit", "100")]), "more than the 1024-byte"),
        # Issue 26: a typo was judged with the default limits, a refused key as if unset.
        (_trace([(Rotate(), OK)], [("fooBarBaz", "1")]), "unknown key 'fooBarBaz'"),
        (_trace([(Rotate(), OK)], [("logSizeLimt", "2048")]), "did you mean 'logSizeLimit'"),
        (
            _trace([(Rotate(), OK)], [("forceReadOnlyBookie", "true")]),
            "forceReadOnlyBookie",
        ),
    ],
    ids=[
        "down",
        "restart-up",
        "frame-too-small",
        "config-not-int",
        "config-too-small",
        "unknown-key",
        "misspelt-key",
        "refused-key",
    ],
)
def test_a_history_the_model_cannot_run_exits_2(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]], trace: Trace, expected: str
) -> None:
    assert expected in _expect_unusable(cli, "check-trace", save(tmp_path, trace))
    with pytest.raises(ReplayError):
        replay_trace(trace)


def test_bad_context_is_a_usage_error(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli("check-trace", str(tmp_path), "--context", "-1")
    assert exit_info.value.code == EXIT_UNUSABLE


# --- words ----------------------------------------------------------------------------------


def test_steps_in_words(base_trace: Trace) -> None:
    steps = base_trace.steps
    assert describe_step(steps[0], steps) == (
        "add 1:0 (60 bytes, key c0ffee) -> accepted, waiting for the journal"
    )
    assert describe_step(steps[12], steps) == "journal force -> ok; acks: step 11 (fence 2)"
    assert describe_step(steps[CRASH], steps) == "crash: lose every unsynced operation -> ok"
    lines = context_lines(steps, 12, 1)
    assert [line[0] for line in lines] == [" ", ">"], lines


# --- properties -----------------------------------------------------------------------------

_OPS = st.one_of(
    st.builds(lambda ledger, size: ("add", ledger, size), st.integers(1, 2), st.integers(0, 300)),
    st.builds(lambda ledger: ("read", ledger, 0), st.integers(1, 2)),
    st.sampled_from([("force",), ("checkpoint",), ("rotate",), ("fence",), ("crash",)]),
)


def _scenario(moves: Sequence[tuple[object, ...]]) -> list[Operation]:
    """Turn drawn moves into a scenario the model can run: entries numbered per ledger,
    reads of the ledger's first entry once it has one, a restart after every crash."""
    next_entry = {1: 0, 2: 0}
    ops: list[Operation] = []
    for move in moves:
        if move[0] == "add":
            ledger, size = int(str(move[1])), int(str(move[2]))
            ops.append(Add(ledger, next_entry[ledger], KEY, b"d" * size))
            next_entry[ledger] += 1
        elif move[0] == "read" and next_entry[int(str(move[1]))]:
            ops.append(Read(int(str(move[1])), 0))
        elif move[0] == "force":
            ops.append(JournalForce())
        elif move[0] == "checkpoint":
            ops.append(Checkpoint())
        elif move[0] == "rotate":
            ops.append(Rotate())
        elif move[0] == "fence":
            ops.append(Fence(2, KEY))
        elif move[0] == "crash":
            ops += [Crash(LoseUnsynced()), Restart()]
    return [*ops, Shutdown(), Restart()]


def _replays_and_catches_a_changed_read(
    moves: list[tuple[object, ...]], data: st.DataObject
) -> None:
    """A trace the harness accepted replays ok; one read's bytes changed fails at that read."""
    trace = build_trace(_scenario(moves))
    assert replay_trace(trace).ok
    reads = [s.index for s in trace.steps if isinstance(s.op, Read) and s.result.data]
    if not reads:
        return
    index = data.draw(st.sampled_from(reads))
    original = trace.steps[index].result.data
    assert original is not None
    altered = replace_step(trace, index, result=Result(data=original + b"!"))
    verdict = replay_trace(altered)
    assert verdict.failure is not None and verdict.failure.step == index


@settings(max_examples=20, deadline=None)
@given(st.lists(_OPS, max_size=14), st.data())
def test_harness_traces_replay_and_one_changed_read_is_caught(
    moves: list[tuple[object, ...]], data: st.DataObject
) -> None:
    _replays_and_catches_a_changed_read(moves, data)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(_OPS, max_size=60), st.data())
def test_harness_traces_replay_and_one_changed_read_is_caught_deep(
    moves: list[tuple[object, ...]], data: st.DataObject
) -> None:
    _replays_and_catches_a_changed_read(moves, data)


def test_replay_stops_taking_steps_after_a_failure(base_trace: Trace) -> None:
    altered = replace_step(base_trace, FIRST_READ, result=Result(data=b""))
    replay = Replay(altered.header)
    for step in altered.steps[: FIRST_READ + 1]:
        report = replay.advance(step)
    assert report.failure is not None
    replay.check_invariants()
    with pytest.raises(AssertionError, match="stopped at a failure"):
        replay.advance(altered.steps[FIRST_READ + 1])


# --- end to end -----------------------------------------------------------------------------


def test_end_to_end_through_python_m_proofs_cli(base_trace: Trace, tmp_path: Path) -> None:
    good = save(tmp_path, base_trace, "good.jsonl")
    bad = save(tmp_path, replace_step(base_trace, FIRST_READ, result=Result(data=b"")), "bad.jsonl")
    results = [
        subprocess.run(
            [sys.executable, "-m", "proofs.cli.main", "check-trace", path],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for path in (good, bad)
    ]
    assert results[0].returncode == EXIT_OK and ": ok: " in results[0].stdout
    assert results[1].returncode == EXIT_DIVERGED
    assert f"step {FIRST_READ} (read)" in results[1].stdout
    # A reader that stops early (| head) ends the output quietly; the exit code stays the
    # verdict's. The story of a long trace is larger than a pipe's buffer.
    ops: list[Operation] = []
    for entry in range(150):
        ops += [Add(1, entry, KEY, b"e" * 50), JournalForce()]
    long = build_trace(ops)
    long_bad = replace_step(long, 201, completed=())
    for path, code in (
        (save(tmp_path, long, "long.jsonl"), EXIT_OK),
        (save(tmp_path, long_bad, "long-bad.jsonl"), EXIT_DIVERGED),
    ):
        child = subprocess.Popen(
            [sys.executable, "-m", "proofs.cli.main", "explain", path, "--state"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline().startswith(path.encode())
        child.stdout.close()
        assert child.wait(timeout=60) == code
        assert child.stderr.read() == b""
        child.stderr.close()
