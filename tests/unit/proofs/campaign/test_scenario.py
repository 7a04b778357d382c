"""A campaign scenario (proofs/campaign/scenario.py): drawn from (seed, index) alone, the same
in any interpreter, judged by the harness, a failure shrunk to one that fails the same way,
and the row's counts read off the trace."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import attrs
import pytest

import models.bookie.bookie as model_module
from impl.bookie.bookie import Bookie
from proofs.campaign import scenario
from proofs.campaign.coverage import cells_of
from proofs.campaign.errors import CampaignError
from proofs.campaign.scenario import (
    Focus,
    ScenarioSpec,
    item_of,
    load_opener,
    run_drawn,
    run_item,
    run_scenario,
    signature,
)
from proofs.harness.replay import replay_trace, summarize
from spec.operations import Add
from spec.trace import read_trace, write_trace
from tests.paths import ROOT

VARIANT = "tests.quality.refinement_variants:AckBeforeJournalFsyncBookie"


def _trace_text(spec: ScenarioSpec) -> str:
    return write_trace(run_drawn(spec).trace)


def test_a_scenario_is_the_same_every_time_it_is_drawn() -> None:
    spec = ScenarioSpec(seed=4, index=2, steps=120)
    assert _trace_text(spec) == _trace_text(spec)
    assert _trace_text(spec) != _trace_text(ScenarioSpec(seed=4, index=3, steps=120))
    assert _trace_text(spec) != _trace_text(ScenarioSpec(seed=5, index=2, steps=120))


_DRAW_ELSEWHERE = """
import hashlib, sys
from proofs.campaign.scenario import ScenarioSpec, run_drawn
from spec.trace import write_trace
text = write_trace(run_drawn(ScenarioSpec(seed=4, index=2, steps=120)).trace)
print(hashlib.sha256(text.encode()).hexdigest())
"""


def test_another_interpreter_with_another_hash_seed_draws_the_same_scenario() -> None:
    import hashlib

    mine = hashlib.sha256(_trace_text(ScenarioSpec(seed=4, index=2, steps=120)).encode())
    digests = set()
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", _DRAW_ELSEWHERE],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            check=True,
            timeout=300,
        )
        digests.add(done.stdout.strip())
    assert digests == {mine.hexdigest()}


def test_a_scenario_runs_to_its_steps_and_its_row_counts_its_trace() -> None:
    spec = ScenarioSpec(seed=9, index=0, steps=150)
    row = run_scenario(spec)
    run = run_drawn(spec)
    steps = run.steps
    assert row.verdict == "pass", row.message
    assert row.steps == len(steps) >= 150
    assert row.rules == len(run.calls) <= row.steps
    summary = summarize(steps)
    assert row.adds_acked == summary.adds_acknowledged > 0
    assert row.crashes == summary.crashes
    assert row.crash_states >= row.crashes
    assert row.coverage == cells_of(steps)
    assert row.probes == dict(run.probes)
    assert row.trace is None and row.message is None
    assert row.replay == "bkref replay --seed 9 --index 0 --steps 150"
    assert row.commit.startswith(("git:", "bkref "))


def test_the_item_a_task_gets_runs_the_same_scenario() -> None:
    spec = ScenarioSpec(seed=9, index=1, steps=60, focus=Focus(frozenset({"crash"})))
    record = run_item(item_of(spec, 0))
    direct = run_scenario(spec, shrink_runs=0).to_record()
    for name in ("steps", "rules", "crashes", "adds_acked", "coverage", "probes", "focus"):
        assert record[name] == direct[name], name
    assert record["focus"] == "rules=crash"


def test_a_focus_favours_its_rules() -> None:
    favoured = Focus(frozenset({"delete", "fence"}))
    counts: dict[bool, collections.Counter[str]] = {
        True: collections.Counter(),
        False: collections.Counter(),
    }
    for index in range(6):
        for focused in (True, False):
            spec = ScenarioSpec(
                seed=1, index=index, steps=150, focus=favoured if focused else Focus()
            )
            counts[focused].update(call.rule for call in run_drawn(spec).calls)
    share = {focused: (c["delete"] + c["fence"]) / sum(c.values()) for focused, c in counts.items()}
    assert share[True] > 3 * share[False], share


def test_focus_texts_round_trip_and_unknown_names_are_refused() -> None:
    focus = Focus(frozenset({"crash", "delete"}), frozenset({"kill"}))
    assert focus.text == "rules=crash,delete;plans=kill"
    assert Focus.parse(focus.text) == focus
    assert Focus.parse("") == Focus()
    with pytest.raises(CampaignError, match="no rule named nosuch"):
        Focus.parse("rules=nosuch")
    with pytest.raises(CampaignError, match="no plan named boom"):
        Focus.parse("plans=boom")
    with pytest.raises(CampaignError, match="is not rules="):
        Focus.parse("colour=red")


def test_a_known_bad_variant_fails_and_its_shrunk_trace_fails_the_same_way() -> None:
    # The variant acknowledges a group before its fsync: a crash after such a write-before-
    # sync, or the sync step's acks, shows it; some of the first scenarios of a seed do.
    for index in range(10):
        spec = ScenarioSpec(seed=1, index=index, steps=200, variant=VARIANT)
        row = run_scenario(spec)
        if row.verdict != "pass":
            break
    assert row.verdict == "fail" and row.failure_kind == "refinement", row.message
    assert row.message is not None
    assert row.trace is not None and row.steps_before_shrink is not None
    trace = read_trace(row.trace.splitlines())
    assert len(trace.steps) < row.steps_before_shrink
    verdict = replay_trace(trace)
    assert verdict.failure is not None
    assert verdict.failure.step == row.failing_step == len(trace.steps) - 1
    assert (
        signature(scenario.Problem("fail", "refinement", verdict.failure.describe()))[1]
        == (signature(scenario.Problem("fail", "refinement", row.message))[1])
    )
    assert f"--variant {VARIANT}" in row.replay
    # The same scenario against bkref's own bookie passes: the variant's bug, not the draw.
    assert run_scenario(ScenarioSpec(seed=1, index=index, steps=200)).verdict == "pass"


def test_signatures_tell_failures_apart() -> None:
    divergence = scenario.Problem("fail", "refinement", "step 12 (read): ledger 3 is short")
    same = scenario.Problem("fail", "refinement", "step 3 (read): ledger 1 is short")
    other = scenario.Problem("fail", "refinement", "step 3 (add): answered ok")
    prop = scenario.Problem("fail", "refinement", "property durability at step 4: lost")
    assert signature(divergence) == signature(same)
    assert signature(divergence) != signature(other)
    assert signature(prop)[2] == "durability"


class _RaisingBookie(Bookie):
    """A bookie whose add raises an exception of its own: a bug of the bookie."""

    def add_entry(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise RuntimeError("the bookie broke")


def test_an_exception_of_the_bookie_is_a_fail_and_one_of_the_checker_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = ScenarioSpec(seed=2, index=0, steps=50)
    bookie_bug = run_scenario(spec, opener=_RaisingBookie.open, shrink_runs=0)
    assert bookie_bug.verdict == "fail" and bookie_bug.failure_kind == "exception"
    assert bookie_bug.message is not None and "RuntimeError" in bookie_bug.message

    # The model's table of step rules emptied: its step() raises a KeyError of its own.
    monkeypatch.setattr(model_module, "STEP_RULES", {})
    checker_bug = run_scenario(spec, shrink_runs=0)
    assert checker_bug.verdict == "error"
    assert checker_bug.message is not None
    assert "KeyError in models/bookie/bookie.py" in checker_bug.message
    assert checker_bug.trace is not None  # what ran before, for the report


def test_variants_load_by_name_and_mistakes_are_told() -> None:
    assert load_opener("") == Bookie.open
    assert load_opener(VARIANT).__self__.__name__ == "AckBeforeJournalFsyncBookie"  # type: ignore[attr-defined]
    for bad, why in (
        ("nocolon", "MODULE:NAME"),
        ("no.such.module:X", "cannot import"),
        ("impl.bookie.bookie:Nope", "has no Nope"),
        ("impl.limits:LIMITS", "neither a Bookie subclass nor an opener"),
    ):
        with pytest.raises(CampaignError, match=why):
            load_opener(bad)


def test_the_row_record_is_json_ready() -> None:
    record = run_scenario(ScenarioSpec(seed=3, index=1, steps=40)).to_record()
    assert json.loads(json.dumps(record)) == record
    assert sum(isinstance(step.op, Add) for step in run_drawn(ScenarioSpec(3, 1, 40)).steps)


def test_a_failure_seen_by_a_shadow_crash_replays_from_its_row_s_trace() -> None:
    # The shadow crash crashes a copy of the disk: its crash, restart and reads are not the
    # run's own steps, but the row's trace must hold them, or it would replay as a pass.
    variant = "tests.quality.refinement_variants:LastMarkBeforeLogsBookie"
    row = run_scenario(ScenarioSpec(seed=1, index=0, steps=400, variant=variant))
    assert row.verdict == "fail" and row.message is not None
    assert row.message.startswith("shadow crash after step")
    assert row.trace is not None
    verdict = replay_trace(read_trace(row.trace.splitlines()))
    assert verdict.failure is not None and verdict.failure.step == row.failing_step


def test_a_scenario_runs_with_either_entry_log_manager_and_many_logs_draw_their_rules() -> None:
    single = ScenarioSpec(seed=4, index=2, steps=150)
    per_ledger = ScenarioSpec(seed=4, index=2, steps=150, manager="per-ledger")
    one, many = run_drawn(single), run_drawn(per_ledger)
    assert one.problem is None and many.problem is None, (one.problem, many.problem)
    assert "entryLogPerLedgerEnabled" not in dict(one.knobs)
    assert dict(many.knobs)["entryLogPerLedgerEnabled"] == "true"
    # Many active logs draw from the table with the write close and the clock, under a seed
    # text of their own; the single log's draws are the ones they always were.
    assert "+write_close+clock" in per_ledger.seed_text()
    assert "+write_close" not in single.seed_text()
    assert not {"write_close", "advance_clock"} & {call.rule for call in one.calls}
    drawn = {
        call.rule for i in range(8) for call in run_drawn(attrs.evolve(per_ledger, index=i)).calls
    }
    assert {"write_close", "advance_clock"} <= drawn
    assert "--manager per-ledger" in per_ledger.replay_command
    assert "--manager" not in single.replay_command
    again, _ = scenario.spec_of(item_of(per_ledger, 3))
    assert again == per_ledger
