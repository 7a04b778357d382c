"""``bkref explain`` (proofs/cli/explain.py): the story of a trace, step by step.

Traces come from the real refinement harness (tests/unit/proofs/cli/test_check_trace.py builds
them). The last tests keep docs/walkthrough.md honest: its traces are regenerated and must tell
the same story, and the step lines pasted in it must be what explain prints today.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import proofs.cli.main
from models.bookie.bookie import BookieModel, ModelConfig
from proofs.cli.check_trace import EXIT_DIVERGED, EXIT_OK, EXIT_UNUSABLE
from proofs.cli.explain import durability_text, logs_text, state_text, told_steps
from proofs.harness.replay import Replay
from spec.crash import LoseUnsynced
from spec.operations import (
    OK,
    PENDING,
    Add,
    Completion,
    Crash,
    FailFsync,
    Fence,
    FiredFault,
    JournalForce,
    Read,
    Restart,
    Result,
)
from spec.trace import Step, Trace, read_trace, write_trace
from tests.paths import ROOT
from tests.unit.proofs.cli.test_check_trace import KEY, base_ops, build_trace, replace_step, save

WALKTHROUGH = ROOT / "docs" / "walkthrough.md"
TRACES = ROOT / "docs" / "traces"
WALKTHROUGH_TRACES = (
    "add-to-durable.jsonl",
    "crash-in-checkpoint.jsonl",
    "crash-in-compaction.jsonl",
)

CRASH = 15  # in base_ops(): the crash, with the add of 1:6 pending
RESTART = 16
ADD_AFTER_FENCE = 13


@pytest.fixture(scope="module")
def base_trace() -> Trace:
    return build_trace(base_ops())


@pytest.fixture
def explain(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    rows = tuple(row for row in proofs.cli.main.COMMANDS if row[0] in ("check-trace", "explain"))
    assert len(rows) == 2, "check-trace or explain is missing from proofs.cli.main.COMMANDS"
    monkeypatch.setattr(proofs.cli.main, "COMMANDS", rows)

    def call(*argv: str) -> tuple[int, str, str]:
        code = proofs.cli.main.main(["explain", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def blocks(out: str) -> dict[int, str]:
    """The told steps: step number -> its lines (header included)."""
    found: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("step "):
            current = found.setdefault(int(line.split()[1]), [])
        elif not line.startswith(" "):
            current = None
        if current is not None:
            current.append(line)
    return {step: "\n".join(lines) for step, lines in found.items()}


def flat(text: str) -> str:
    """Text with its line folds undone, for phrases that may wrap."""
    return re.sub(r"\s+", " ", text)


# --- the story ------------------------------------------------------------------------------


def test_every_step_is_told_in_order_and_the_run_ends_ok(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = explain(save(tmp_path, base_trace))
    assert (code, err) == (EXIT_OK, "")
    assert told_steps(out.splitlines()) == list(range(len(base_trace.steps)))
    assert out.rstrip().splitlines()[-1].startswith("steps 0-21 agree with the model")


def test_the_story_of_a_crash_says_what_may_be_lost_and_what_survived(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    _, out, _ = explain(save(tmp_path, base_trace))
    told = blocks(out)
    before = flat(told[CRASH - 1])
    assert "pending (no ack; a crash now may lose them): ledger 1 entry 6" in before
    crash = flat(told[CRASH])
    assert "must survive (acknowledged): entries 1:0, 1:1, 1:2, 1:3, 1:4, 1:5, 2:0" in crash
    assert "may or may not survive (not acknowledged): entries 1:6" in crash
    assert "unknown (pending at a crash; not yet seen): ledger 1 entry 6" in crash
    restart = flat(told[RESTART])
    assert "entry 1:6, not acknowledged, was lost" in restart
    assert "durable: ledger 1 entries 0-5; ledger 2 entry 0; fenced: 2" in restart
    assert "recovery moved lastMark from" in restart


def test_from_and_to_limit_the_steps_told(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    path = save(tmp_path, base_trace)
    code, out, _ = explain(path, "--from", "3", "--to", "7")
    assert code == EXIT_OK
    assert told_steps(out.splitlines()) == [3, 4, 5, 6, 7]
    assert "telling steps 3-7" in out
    _, out, _ = explain(path, "--from", "20")
    assert told_steps(out.splitlines()) == [20, 21]
    _, out, _ = explain(path, "--to", "0")
    assert told_steps(out.splitlines()) == [0]


def test_state_lines_only_with_the_state_flag(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    path = save(tmp_path, base_trace)
    _, plain, _ = explain(path, "--to", "5")
    _, stated, _ = explain(path, "--to", "5", "--state")
    assert "  state: " not in plain
    assert stated.count("  state: ") == 6
    told = blocks(stated)
    assert "state: logs [0 active {1: 80}]; current log 0" in flat(told[0])


def test_a_divergence_is_told_and_ends_the_story(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    altered = replace_step(base_trace, ADD_AFTER_FENCE, result=PENDING)
    code, out, err = explain(save(tmp_path, altered), "--from", "10")
    assert (code, err) == (EXIT_DIVERGED, "")
    assert told_steps(out.splitlines()) == [10, 11, 12, ADD_AFTER_FENCE]
    last = flat(blocks(out)[ADD_AFTER_FENCE])
    assert "DIVERGENCE: here the implementation does something the model does not allow" in last
    assert "add 2:1 answered accepted, waiting for the journal; allowed: fenced" in last


def test_a_divergence_before_from_is_still_told(
    base_trace: Trace, tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    altered = replace_step(base_trace, 6, result=Result(data=b"other"))
    code, out, _ = explain(save(tmp_path, altered), "--from", "12")
    assert code == EXIT_DIVERGED
    assert told_steps(out.splitlines()) == [6]
    assert "read 1:2 answered other bytes" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--from", "99"], "the trace has steps 0 to 21"),
        (["--from", "5", "--to", "4"], "is before --from 5"),
    ],
)
def test_a_range_outside_the_trace_exits_2(
    base_trace: Trace,
    tmp_path: Path,
    explain: Callable[..., tuple[int, str, str]],
    argv: list[str],
    expected: str,
) -> None:
    code, out, err = explain(save(tmp_path, base_trace), *argv)
    assert (code, out) == (EXIT_UNUSABLE, "")
    assert err.count("\n") == 1 and err.startswith("bkref explain: ") and expected in err


def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = explain(str(tmp_path / "missing.jsonl"))
    assert code == EXIT_UNUSABLE and err.count("\n") == 1 and "cannot read" in err
    header_only = tmp_path / "h.jsonl"
    header_only.write_text('{"bkref_trace": 1, "source": "x", "config": {}}\n')
    code, _, err = explain(str(header_only))
    assert code == EXIT_UNUSABLE and "no steps" in err and err.count("\n") == 1


def test_a_history_the_model_cannot_run_stops_the_story_with_exit_2(
    tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    trace = build_trace([Add(1, 0, KEY, b"a"), JournalForce()])
    down = (
        Step(2, Crash(LoseUnsynced()), OK),
        Step(3, Read(1, 0), Result(error="no_entry")),  # a read while the bookie is down
    )
    steps = (*trace.steps, *down)
    code, out, err = explain(save(tmp_path, Trace(trace.header, steps)))
    assert code == EXIT_UNUSABLE
    assert told_steps(out.splitlines()) == [0, 1, 2]
    assert err.count("\n") == 1 and "step 3 (read)" in err


# --- the renderings, on the model directly -------------------------------------------------


def test_durability_text_follows_the_model_through_a_crash() -> None:
    model = BookieModel(ModelConfig(log_size_limit_bytes=4096))
    model.step(0, Add(1, 0, KEY, b"a"), PENDING, ())
    model.step(1, Add(1, 1, KEY, b"b"), PENDING, ())
    model.step(2, Fence(3, KEY), PENDING, ())
    assert durability_text(model) == (
        "durable: nothing yet; pending (no ack; a crash now may lose them): ledger 1 entries "
        "0-1; fence pending: 3"
    )
    assert logs_text(model) == "entry logs: log 0 active: ledger 1 42 bytes, none fsynced"
    model.step(3, Crash(LoseUnsynced()), Result(), ())
    assert durability_text(model) == (
        "bookie down; durable: nothing yet; unknown (pending at a crash; not yet seen): "
        "ledger 1 entries 0-1; fence unknown: 3"
    )


def test_state_text_when_nothing_was_recorded() -> None:
    assert state_text(None).startswith("not recorded")


# --- the walkthrough ------------------------------------------------------------------------


def _walkthrough_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "walkthrough_traces", ROOT / "docs" / "walkthrough_traces.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _story(trace: Trace) -> list[tuple[object, ...]]:
    return [(step.op, step.result, step.completed) for step in trace.steps]


def test_the_walkthrough_traces_regenerate_and_still_tell_the_same_story(
    tmp_path: Path, explain: Callable[..., tuple[int, str, str]]
) -> None:
    written = _walkthrough_script().write_traces(tmp_path)
    assert sorted(path.name for path in written) == sorted(WALKTHROUGH_TRACES)
    for name in WALKTHROUGH_TRACES:
        fresh = read_trace((tmp_path / name).read_text())
        kept = read_trace((TRACES / name).read_text())
        assert _story(fresh) == _story(kept), (
            f"docs/traces/{name} is stale: run python3 docs/walkthrough_traces.py and update "
            "the explain output pasted in docs/walkthrough.md"
        )
        assert explain(str(tmp_path / name))[0] == EXIT_OK


def test_the_walkthrough_shows_what_explain_prints_today(
    explain: Callable[..., tuple[int, str, str]],
) -> None:
    doc = WALKTHROUGH.read_text(encoding="utf-8")
    printed: set[str] = set()
    for name in WALKTHROUGH_TRACES:
        code, out, err = explain(str(TRACES / name))
        assert (code, err) == (EXIT_OK, ""), err
        printed.update(out.splitlines())
        assert f"docs/traces/{name}" in doc
    pasted = [line for line in doc.splitlines() if re.match(r"step \d+  ", line)]
    assert len(pasted) >= 10, "the walkthrough pastes explain output"
    stale = [line for line in pasted if line not in printed]
    assert not stale, f"docs/walkthrough.md shows lines explain no longer prints: {stale}"


def test_replay_of_the_walkthrough_traces_keeps_its_invariants() -> None:
    for name in WALKTHROUGH_TRACES:
        trace = read_trace((TRACES / name).read_text())
        replay = Replay(trace.header)
        for step in trace.steps:
            assert replay.advance(step).failure is None
            replay.check_invariants()
        # the trace round-trips, so the checked-in file is what write_trace makes of it
        assert write_trace(trace) == (TRACES / name).read_text()


def test_reads_after_the_restart_in_the_walkthrough_traces() -> None:
    durable = read_trace((TRACES / "add-to-durable.jsonl").read_text())
    reads = [(s.op, s.result) for s in durable.steps if isinstance(s.op, Read)]
    assert reads[0] == (Read(1, 0), Result(data=b"hello, bookie"))
    assert reads[2][1].error == "no_entry"
    interrupted = read_trace((TRACES / "crash-in-checkpoint.jsonl").read_text())
    crashed = [s for s in interrupted.steps if s.result.crashed]
    assert [s.op.name for s in crashed] == ["checkpoint"]
    restart = next(s for s in interrupted.steps if isinstance(s.op, Restart))
    assert restart.result.replayed


def test_durability_text_names_failed_entries_and_fences() -> None:
    """A failed add or fence (io_error while a fault is active) used to stop explain with a
    KeyError."""
    model = BookieModel(ModelConfig(log_size_limit_bytes=4096))
    model.step(0, Add(1, 0, KEY, b"a"), PENDING, ())
    model.step(1, Fence(3, KEY), PENDING, ())
    model.step(2, FailFsync(), OK, ())
    model.step(
        3,
        JournalForce(),
        Result(error="io_error"),
        (Completion(0, "io_error"), Completion(1, "io_error")),
        (FiredFault("fsync", "journal"),),
    )
    text = durability_text(model)
    assert "failed (io_error: may or may not have been kept): ledger 1 entry 0" in text
    assert "fence failed (may or may not be in effect): 3" in text
