"""The pytest plugin (proofs/conform/pytest_plugin.py), run by pytester in a scratch
directory against a fake runner put in place of ``make_conformance``: one item per scenario,
a failure told with its trace, a bookie that cannot start, selection, the reports, and
nothing at all without ``--bkref-adapter``.

Every run passes ``-p no:bkref -p proofs.conform.pytest_plugin``: the entry point may or may
not be installed in the environment running these tests, and loading the module by name
with the entry point blocked gives the same single plugin either way.
"""

from __future__ import annotations

import os
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import attrs
import pytest

from proofs.conform import pytest_plugin
from proofs.conform.results import Capabilities, ScenarioResult
from spec.errors import BkrefError
from tests.paths import ROOT
from tests.unit.proofs.conform import runs

pytest_plugins = ["pytester"]

#: Load the plugin by name (the module is already imported here, so pytest cannot rewrite
#: its asserts, and says so: it has none to rewrite).
PLUGIN = (
    *("-p", "no:bkref", "-p", "proofs.conform.pytest_plugin"),
    *("-W", "ignore::pytest.PytestAssertRewriteWarning"),
)
#: And no cache left in the scratch directory, but where a test needs it.
LOAD = (*PLUGIN, "-p", "no:cacheprovider")


class FakeConformance:
    """A runner that starts nothing: ``results`` by index (a pass when absent)."""

    def __init__(
        self,
        count: int = 3,
        results: dict[int, ScenarioResult] | None = None,
        cannot_run: str | None = None,
        stops_starting_at: frozenset[int] = frozenset(),
    ) -> None:
        self.stops_starting_at = stops_starting_at
        self.count = count
        self.results = results or {}
        self.cannot_run = cannot_run
        self.started = 0
        self.ran: list[int] = []

    def capabilities(self) -> Capabilities:
        self.started += 1
        if self.cannot_run is not None:
            raise BkrefError(self.cannot_run)
        return runs.V2

    def scenario_count(self) -> int:
        return self.count

    def run_one(self, index: int) -> ScenarioResult:
        self.ran.append(index)
        if index in self.stops_starting_at:
            raise BkrefError("--lazy-disk cannot be used here: /dev/fuse is missing")
        return self.results.get(index, runs.passing(index))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Installs a factory building ``FakeConformance(**fake["kwargs"])``; records its
    arguments in ``fake["args"]`` and the instance in ``fake["conformance"]``."""
    box: dict[str, Any] = {"kwargs": {}}

    def factory(adapter: str, **options: Any) -> FakeConformance:
        box["args"] = {"adapter": adapter, **options}
        conformance = FakeConformance(**box["kwargs"])
        box["conformance"] = conformance
        return conformance

    monkeypatch.setattr(pytest_plugin, "make_conformance", factory)
    return box


def test_each_scenario_is_an_item_and_a_pass_passes(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    listed = pytester.runpytest(*LOAD, "--bkref-adapter", "./b {data_dir}", "--collect-only", "-q")
    assert [line for line in listed.outlines if line.startswith("bkref-conform::")] == [
        "bkref-conform::scenario[0]",
        "bkref-conform::scenario[1]",
        "bkref-conform::scenario[2]",
    ]
    result = pytester.runpytest(
        *LOAD, "--bkref-adapter", "./b {data_dir}", "--bkref-seed", "9", "--bkref-profile",
        "standard", "-v",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    assert fake["args"] == {
        "adapter": "./b {data_dir}",
        "profile": "standard",
        "seed": 9,
        "lazy_disk": False,
        "report_dir": None,
    }
    assert fake["conformance"].ran == [0, 1, 2]
    assert fake["conformance"].started == 1
    out = result.stdout.str()
    assert "collected 3 items" in out
    assert "seed 9 (again with --bkref-seed 9)" in out
    assert "bkref conform: PASS. All 3 scenarios passed every check." in out
    assert "crashes injected: 6; power losses: 3" in out
    assert "acknowledged adds checked: 51" in out


def test_a_failing_scenario_fails_with_its_trace_told(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"results": {1: attrs.evolve(runs.FAILED, index=1)}}
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-lazy-disk")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 1
    out = result.stdout.str()
    assert "FAILED bkref-conform::scenario[1] - Failed: scenario 1: durability" in out
    assert f"scenario 1: durability (property): {runs.DURABILITY_FAILURE.message}" in out
    for line in runs.TOLD:
        assert line in out
    failure = runs.DURABILITY_FAILURE
    assert f"reproduce: {failure.reproduce}" in out
    assert f"replay: bkref explain {failure.trace_path}" in out
    assert "<script>alert('owned')</script>" in out  # the stderr tail, as text
    assert "\\x1b[31mpanic:" in out  # its colour codes shown, not obeyed
    assert "durability    FAIL" in out
    assert fake["args"]["lazy_disk"] is True


def test_a_scenario_in_error_fails_its_item(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"results": {0: attrs.evolve(runs.ERRORED, index=0)}, "count": 1}
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "scenario 0: could not be carried out (error)" in out
    assert "the bookie is stuck" in out
    assert "bkref conform: CANNOT RUN" in out


def test_a_bookie_that_cannot_start_errors_every_item_once(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"cannot_run": "exited with status 127 before its ready line: sh: nope"}
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./nope")
    result.assert_outcomes(errors=3)
    assert fake["conformance"].started == 1  # not once per item
    assert fake["conformance"].ran == []
    out = result.stdout.str()
    assert out.count("the bookie could not be run:") >= 3
    assert "sh: nope" in out
    assert "bkref conform: CANNOT RUN. The bookie could not be run" in out


def test_a_run_that_cannot_go_on_fails_the_remaining_items_at_once(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"count": 4, "stops_starting_at": frozenset({1})}
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-lazy-disk")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    assert fake["conformance"].ran == [0, 1]
    out = result.stdout.str()
    assert out.count("/dev/fuse is missing") >= 3
    assert (
        "bkref conform: CANNOT RUN. The run stopped after 1 scenario: the bookie could not be "
        "run; 1 scenario before it passed." in out
    )
    assert "the bookie could not be run:" in out


def test_scenarios_are_selected_by_k_or_by_option(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"count": 12}
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "-k", "scenario[1]")
    result.assert_outcomes(passed=1)
    assert fake["conformance"].ran == [1]  # not 10 or 11
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-scenarios", "0,3-5")
    result.assert_outcomes(passed=4)
    assert fake["conformance"].ran == [0, 3, 4, 5]
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-scenarios", "3-x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "'3-x' is not a scenario number or a range like 3-5" in result.stderr.str()
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-scenarios", "2,12")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "has scenarios 0 to 11; 12 is not one of them" in result.stderr.str()


def test_last_failed_runs_again_only_the_failed_scenarios(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    fake["kwargs"] = {"count": 4, "results": {2: attrs.evolve(runs.FAILED, index=2)}}
    pytester.runpytest(*PLUGIN, "--bkref-adapter", "./b").assert_outcomes(passed=3, failed=1)
    result = pytester.runpytest(*PLUGIN, "--bkref-adapter", "./b", "--lf")
    result.assert_outcomes(failed=1, deselected=3)
    assert fake["conformance"].ran == [2]


def test_the_reports_are_written_where_asked(
    pytester: pytest.Pytester, fake: dict[str, Any], tmp_path: Path
) -> None:
    fake["kwargs"] = {"results": {2: attrs.evolve(runs.FAILED, index=2)}}
    report = tmp_path / "report"
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b", "--bkref-report", str(report))
    result.assert_outcomes(passed=2, failed=1)
    assert fake["args"]["report_dir"] == str(report)
    suite = ET.parse(report / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    assert (report / "report.html").read_text(encoding="utf-8").count("<h1>FAIL</h1>") == 1
    assert f"report: {report / 'report.html'}" in result.stdout.str()


def test_the_users_own_tests_run_beside_the_scenarios(
    pytester: pytest.Pytester, fake: dict[str, Any]
) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    result = pytester.runpytest(*LOAD, "--bkref-adapter", "./b")
    result.assert_outcomes(passed=4)


def test_without_the_option_it_adds_nothing_and_imports_nothing(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_mine="""
import sys

def test_mine():
    loaded = [m for m in sys.modules if m.startswith(("proofs.conform.", "models."))]
    assert loaded == ["proofs.conform.pytest_plugin"], loaded
"""
    )
    result = pytester.runpytest_subprocess(*LOAD)
    result.assert_outcomes(passed=1)
    assert "bkref conform" not in result.stdout.str()


def test_the_entry_point_loads_the_plugin(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyproject declares the pytest11 entry point ``bkref``, and a distribution declaring
    it so makes pytest load the plugin with no ``-p``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entry = project["project"]["entry-points"]["pytest11"]
    assert entry == {"bkref": "proofs.conform.pytest_plugin"}
    dist = tmp_path / "site" / "bkref_probe-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bkref-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\nbkref = {entry['bkref']}\n")
    path = os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--help")
    assert "--bkref-adapter=CMD" in result.stdout.str()
    assert result.ret == 0


def test_selection_parses_lists_and_ranges() -> None:
    assert pytest_plugin.parse_selection("4, 0,2-3,3") == [0, 2, 3, 4]
    for bad in ("", "a", "3-1", "-2", "1-"):
        with pytest.raises(pytest.UsageError):
            pytest_plugin.parse_selection(bad)


def test_end_to_end_against_bkrefs_own_adapter(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The real runner, bkref's own adapter as the bookie, scenario 0 of the quick profile
    chosen with ``-k``: it passes, and the reports say so."""
    from proofs.conform.targets import bkref_adapter_command

    report = tmp_path / "report"
    result = pytester.runpytest(
        *LOAD, "--bkref-adapter", bkref_adapter_command(), "--bkref-profile", "quick",
        "--bkref-seed", "1", "-k", "scenario[0]", "--bkref-report", str(report),
    )  # fmt: skip
    result.assert_outcomes(passed=1, deselected=11)
    out = result.stdout.str()
    assert "bkref conform: PASS. The scenario passed every check." in out
    assert "levels: protocol, structural, format" in out
    adds = [line for line in result.outlines if "acknowledged adds checked:" in line]
    assert adds and int(adds[0].split(":")[1].split(";")[0]) > 0
    suite = ET.parse(report / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
    assert [c.get("name") for c in suite.iter("testcase")] == ["scenario-0"]
    assert "<h1>PASS</h1>" in (report / "report.html").read_text(encoding="utf-8")


def test_end_to_end_a_bookie_that_cannot_start(pytester: pytest.Pytester) -> None:
    """The real runner and a command that exits at once: every chosen scenario errors with
    its stderr, and the bookie was tried once."""
    result = pytester.runpytest(
        *LOAD, "--bkref-adapter", "sh -c 'echo no such disk >&2; exit 3'",
        "--bkref-scenarios", "0-2",
    )  # fmt: skip
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert out.count("no such disk") >= 3
    assert "bkref conform: CANNOT RUN. The bookie could not be run" in out
