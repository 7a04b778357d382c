"""``bkref check-trace`` on a trace recorded by ``bkref record`` from ``bkref adapter``
(tests/unit/proofs/cli/test_record.py record_scenario: pipelined adds, reads, fences,
inspects, a kill -9 with adds in flight, restarts, clean ends): the trace passes, and each
mutation of tests/quality/trace_mutations.py, a history no correct bookie produces, fails
at or after the step it changed.

The verdicts rest on the model's ``async`` ack profile (spec/profile.py): a recorded
trace's acks arrive in any step, not only at a journal force, and an add may be answered ok
in its own response.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import proofs.cli.main as cli
from proofs.cli.check_trace import EXIT_DIVERGED, EXIT_OK
from spec.trace import Trace, read_trace_bytes, write_trace
from tests.quality.trace_mutations import MUTATIONS
from tests.unit.proofs.cli.test_record import record_scenario


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    path = record_scenario(tmp_path_factory.mktemp("recorded"))
    return read_trace_bytes(path.read_bytes(), str(path))


def check(
    trace: Trace, path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, object]]:
    path.write_text(write_trace(trace))
    capsys.readouterr()
    code = cli.main(["check-trace", str(path), "--json"])
    verdict = json.loads(capsys.readouterr().out)
    assert isinstance(verdict, dict)
    return code, verdict


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_mutation_changes_the_trace_from_its_step_on(recorded: Trace, name: str) -> None:
    mutation = MUTATIONS[name](recorded)
    # Still a well-formed trace: the reader takes it, only the meaning is wrong.
    again = read_trace_bytes(write_trace(mutation.trace).encode())
    assert again == mutation.trace
    changed = [
        i for i, (a, b) in enumerate(zip(recorded.steps, again.steps, strict=True)) if a != b
    ]
    assert changed == [mutation.step]


def test_the_recorded_trace_passes(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, verdict = check(recorded, tmp_path / "original.jsonl", capsys)
    assert code == EXIT_OK, verdict


def catches(recorded: Trace, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check-trace rejects the mutation ``name`` of the recorded trace, at or after the step
    it changed (not at an earlier divergence that any recorded trace would show)."""
    mutation = MUTATIONS[name](recorded)
    code, verdict = check(mutation.trace, tmp_path / f"{name}.jsonl", capsys)
    assert code == EXIT_DIVERGED, verdict
    failure = verdict["failure"]
    assert isinstance(failure, dict)
    assert failure["step"] >= mutation.step, (failure, mutation.step)


def test_check_trace_catches_a_read_returning_other_bytes(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catches(recorded, "read_data_changed", tmp_path, capsys)


def test_check_trace_catches_an_ack_never_sent_before_a_clean_shutdown(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catches(recorded, "ack_dropped", tmp_path, capsys)


def test_check_trace_catches_a_fence_forgotten_after_a_restart(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catches(recorded, "fence_forgotten_after_restart", tmp_path, capsys)


def test_check_trace_catches_an_acknowledged_entry_missing_after_a_restart(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catches(recorded, "entry_missing_after_restart", tmp_path, capsys)


def test_check_trace_catches_a_sealed_log_whose_ledgers_map_is_wrong(
    recorded: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catches(recorded, "ledgers_map_changed", tmp_path, capsys)
