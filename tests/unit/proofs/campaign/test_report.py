"""The reports of a campaign (proofs/campaign/report.py), on hand-built summaries: a pass of
two passes, a failure whose row carries a real shrunk trace (a scenario run against a
known-bad variant), a coverage-short campaign, an adapter's campaign (probes not judged),
and an error row full of hostile text with a trace that cannot be read. The HTML page is
parsed with html.parser (the conformance report's test helpers) and checked for what a person
reads there; the terminal's lines and the JSON are checked as text and values. The page is
also rendered once in headless Chromium when it is installed."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from proofs.campaign import report
from proofs.campaign.coverage import PLAN_ORDER, PROBES, expected_cells, minimum
from proofs.campaign.scenario import ScenarioSpec, run_scenario
from proofs.campaign.summary import (
    Aggregates,
    CampaignSummary,
    PassReport,
    Settings,
    Totals,
    aggregate,
)
from proofs.conform.runner import tell
from proofs.harness.promises import PLANS, PROMISES
from spec.trace import read_trace
from tests.browser import dump_dom, needs_chromium, screenshot
from tests.unit.proofs.conform.test_report import Element, parse

BAD_VARIANT = "tests.quality.refinement_variants:AckBeforeJournalFsyncBookie"
COMMIT = "git:0123456789abcdef0123456789abcdef01234567"
OUT = "/runs/c1"
#: The expected cell no scenario of the passing campaign reached, and one it reached.
NEVER = "journal_sync/inside/torn_write/*"
REACHED = "add/inside/kill/*"
#: The promise, after a plan, no scenario of the passing campaign observed.
GAP = ("in_flight", "keep_all")
HOSTILE = "<script>alert('owned')</script> & \x1b[31mred\x1b[0m\x00 done"


def _settings(**changes: Any) -> Settings:
    base = Settings(
        seed=7,
        scenarios=500,
        steps=400,
        master="local[2]",
        bookie="bkref in-process (impl.bookie.bookie:Bookie)",
        out_dir=OUT,
    )
    return attrs.evolve(base, **changes)


def _cells() -> dict[str, int]:
    """Every expected cell reached (with a fault before some) but NEVER, and a few others."""
    cells = {cell.replace("*", "none"): 3 for cell in expected_cells() if cell != NEVER}
    cells["add/inside/kill/fsync"] = 2  # collapsed: add/inside/kill/* = 5
    cells["journal_ack/after/kill/none"] = 4
    cells["checkpoint/none/none/fsync"] = 6
    cells["add/none/none/no_space"] = 1
    return cells


def _pass_one() -> Aggregates:
    timeline = {b: (50, 20_000 + 1_000 * b, 1_100 + 10 * b) for b in range(10)}
    return Aggregates(
        totals=Totals(
            scenarios=500,
            passed=500,
            steps=245_000,
            rules=800,
            crashes=9_000,
            crash_states=11_450,
            restarts=9_100,
            adds_acked=30_000,
            reads=12_000,
            seconds=90.0,
            shrink_seconds=0.0,
        ),
        # Every probe met, whatever its rate: the minimum for the campaign's 1,000 rules.
        probes={name: minimum(probe, 1_000) for name, probe in PROBES.items()},
        cells=_cells(),
        promises=_promises(),
        timeline=timeline,
        commits=(COMMIT,),
        workers=("vm:101", "vm:102"),
    )


def _promises() -> dict[str, int]:
    """Every promise observed after every plan (as "promise/plan" -> count) but GAP."""
    return {
        f"{promise}/{plan}": 7
        for promise in PROMISES
        for plan in PLANS
        if (promise, plan) not in (GAP, ("in_flight", "none"))
    }


def _pass_two() -> Aggregates:
    return Aggregates(
        totals=Totals(
            scenarios=100,
            passed=100,
            steps=40_000,
            rules=200,
            crashes=2_000,
            crash_states=2_500,
            restarts=2_000,
            adds_acked=1_904,
            reads=3_000,
            seconds=20.0,
        ),
        probes={name: 1 for name in PROBES},
        cells={"journal_force/inside/keep_prefix/none": 1},
        timeline={9: (10, 4_000, 250), 10: (60, 24_000, 1_500), 11: (30, 12_000, 750)},
        commits=(COMMIT,),
        workers=("vm:101", "vm:102"),
    )


def passing() -> CampaignSummary:
    first = PassReport(1, _pass_one(), wall_seconds=50.0)
    second = PassReport(
        2,
        _pass_two(),
        wall_seconds=8.2,
        focus="rules=add_to_the_boundary,journal_force;plans=keep_prefix,torn_write",
        aimed_probes=("an add at the rotation boundary", "crash during journal_force"),
        aimed_cells=("journal_force/inside/keep_prefix/*", NEVER),
        closed_probes=("an add at the rotation boundary",),
        closed_cells=("journal_force/inside/keep_prefix/*",),
    )
    return CampaignSummary(
        settings=_settings(),
        passes=(first, second),
        started_at=1_700_000_000.0,
        wall_seconds=58.2,
        spark_start_seconds=3.4,
        cores=2,
        commit=COMMIT,
        bucket_seconds=5.0,
    )


@functools.cache
def _bad_record() -> Mapping[str, Any]:
    """A real failing row: a scenario run against a bookie that acks before the journal's
    fsync, its failure shrunk."""
    record = run_scenario(ScenarioSpec(seed=1, index=0, variant=BAD_VARIANT)).to_record()
    assert record["verdict"] == "fail" and record["trace"]
    return record


def failing() -> CampaignSummary:
    record = _bad_record()
    start = float(record["started_at"]) - 1.0
    rows = aggregate([record], start=start, bucket_seconds=1.0)
    return CampaignSummary(
        settings=_settings(variant=BAD_VARIANT, scenarios=1),
        passes=(PassReport(1, rows, wall_seconds=1.5),),
        started_at=start,
        wall_seconds=1.5,
        cores=1,
        commit=str(record["commit"]),
        bucket_seconds=1.0,
    )


def coverage_short() -> CampaignSummary:
    summary = passing()
    probes = dict(summary.passes[0].aggregates.probes)
    probes["crash during journal_force"] = 0
    first = attrs.evolve(
        summary.passes[0], aggregates=attrs.evolve(summary.passes[0].aggregates, probes=probes)
    )
    second = attrs.evolve(summary.passes[1], aggregates=attrs.evolve(_pass_two(), probes={}))
    return attrs.evolve(summary, passes=(first, second))


def adapter() -> CampaignSummary:
    summary = passing()
    no_probes = [
        attrs.evolve(one, aggregates=attrs.evolve(one.aggregates, probes={}))
        for one in summary.passes
    ]
    settings = _settings(bookie="./mybookie --data {data_dir}", probes_apply=False)
    return attrs.evolve(summary, settings=settings, passes=tuple(no_probes[:1]))


def hostile() -> CampaignSummary:
    """An error row (the checker broke) whose message, bookie, replay and trace are hostile;
    its trace cannot be read."""
    record = dict(_bad_record())
    record.update(
        verdict="error",
        failure_kind="exception",
        message=HOSTILE + "\nsecond line",
        trace='{"bkref_trace": 4, <script>\x00',
        bookie=HOSTILE,
        replay="bkref replay --seed 1 --index 0 --variant '" + HOSTILE + "'",
        failing_step=None,
    )
    rows = aggregate([record], start=float(record["started_at"]), bucket_seconds=1.0)
    return CampaignSummary(
        settings=_settings(bookie=HOSTILE, master="local[*] <b>&"),
        passes=(PassReport(1, rows, wall_seconds=0.5),),
        started_at=float(record["started_at"]),
        wall_seconds=0.5,
        commit=str(record["commit"]),
    )


def _page(summary: CampaignSummary) -> tuple[Element, list[str], str]:
    page = report.render_html(summary)
    root, tags = parse(page)
    return root, tags, page


def _heading(root: Element) -> str:
    return root.by_id("verdict").find_all("h1")[0].text()


def matrix(root: Element) -> dict[str, tuple[str, set[str]]]:
    """The coverage matrix as {op/point/plan/*: (text, classes)}."""
    table = root.by_id("coverage").find_all("table", "matrix")[0]
    head1, head2 = table.find_all("thead")[0].find_all("tr")
    points = []
    titles = {title: point for point, title in report.POINT_TITLES.items()}
    for th in head1.find_all("th")[1:]:
        points += [titles[th.text()]] * int(th.attributes["colspan"])
    plans = [th.text() for th in head2.find_all("th")]
    cells = {}
    for row in table.find_all("tbody")[0].find_all("tr"):
        op = row.find_all("th")[0].text()
        for point, plan, td in zip(points, plans, row.find_all("td"), strict=True):
            cells[f"{op}/{point}/{plan}/*"] = (td.text(), td.classes)
    return cells


def _told(record: Mapping[str, Any]) -> list[str]:
    return tell(read_trace(str(record["trace"]).splitlines(), "x"))


# --- the page -----------------------------------------------------------------------------


def test_the_page_of_a_passing_campaign() -> None:
    summary = passing()
    root, tags, page = _page(summary)
    header = root.by_id("verdict")
    assert _heading(root) == "PASS"
    assert "v-pass" in header.classes
    checked = header.find_all("p", "checked")[0].text()
    assert checked.startswith(
        "600 scenarios, 285,000 steps, 13,950 crash states recovered and judged, 31,904 "
        "acknowledged adds checked, on local[2] (2 cores) in 58.2 s. Every step was judged "
        "against the model"
    )
    for prop in ("durability", "fence durability", "auth", "no resurrection", "forward progress"):
        assert prop in checked
    ids = ["verdict", "settings", "throughput", "passes", "probes", "promises", "coverage"]
    ids += ["failures", "scenarios"]
    assert sorted(ids, key=lambda i: page.index(f'id="{i}"')) == ids

    # Self-contained: its style inline, no script, nothing fetched, no address outside it.
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert tags.count("style") == 1 and "http" not in page
    refs = [e.attributes.get("href") or e.attributes.get("src") for e in root.find_all()]
    assert all(ref.startswith("#") for ref in refs if ref is not None)

    facts = root.by_id("settings").text()
    for shown in ("seed7", "local[2]", "cores2", "Python workers2", COMMIT, OUT, "3.4 s"):
        assert shown in facts
    assert not root.by_id("settings").find_all("p", "warning")

    passes = root.by_id("passes").find_all("tbody")[0].find_all("tr")
    cells = [[td.text() for td in tr.find_all("td")] for tr in passes]
    assert cells[0][:6] == ["1", "500", "245,000", "11,450", "10.0", "50.0"]
    assert cells[1][6:] == [summary.passes[1].focus, "1 of 2", "1 of 2"]

    probe_rows = root.by_id("probes").find_all("tbody")[0].find_all("tr")
    assert [tr.find_all("td")[0].text() for tr in probe_rows] == list(PROBES)
    assert not root.by_id("probes").find_all("tr", "missed")
    assert f"{len(PROBES)} of {len(PROBES)} probes met" in root.by_id("probes").text()

    promises = root.by_id("promises")
    rows = promises.find_all("tbody")[0].find_all("tr")
    assert [tr.find_all("td")[0].text() for tr in rows] == list(PROMISES)
    in_flight = [td.text() for td in rows[PROMISES.index("in_flight")].find_all("td")][1:]
    assert in_flight == ["-", "7", "7", "7", "7", "7", "gap"]  # none, kill, ..., keep_all
    assert [td.text() for td in promises.find_all("td", "missed")] == ["gap"]
    assert "1 gap(s), never observed and so not checked: in_flight after keep_all" in (
        promises.text()
    )

    assert root.by_id("failures").text() == "FailuresNo scenario failed."
    totals = root.by_id("scenarios").find_all("tbody")[0].find_all("tr")
    assert [tr.find_all("th")[0].text() for tr in totals] == ["pass 1", "pass 2", "all"]
    assert [td.text() for td in totals[2].find_all("td")][:5] == [
        "600", "600", "0", "0", "285,000",
    ]  # fmt: skip


def test_the_throughput_plots() -> None:
    summary = passing()
    root, _, _ = _page(summary)
    plots = root.by_id("throughput").find_all("svg", "plot")
    assert len(plots) == 2
    timeline = summary.all.timeline
    assert sorted(timeline) == list(range(12))  # no gap: a bar a bucket
    for svg, column in zip(plots, (1, 2), strict=True):
        assert svg.find_all("title")[0].text()  # the plot's own title, first
        bars = svg.find_all("rect", "bar")
        assert len(bars) == len(timeline)
        heights = [float(bar.attributes["height"]) for bar in bars]
        tallest = max(timeline, key=lambda b: timeline[b][column])
        assert heights.index(max(heights)) == tallest
        rate = timeline[tallest][column] / summary.bucket_seconds
        assert (
            bars[tallest]
            .find_all("title")[0]
            .text()
            .startswith(f"{tallest * 5}-{tallest * 5 + 5} s: {rate:,.0f} ")
        )
        ticks = [t.text() for t in svg.find_all("text", "tick")]
        assert "0" in ticks and "60" in ticks  # 12 buckets of 5 s: the x axis to 60 s
        assert len(ticks) >= 6
        assert [t.text() for t in svg.find_all("text", "mark")] == ["pass 2"]
    # Pass 2's first bucket (9) is where its mark stands: 45 s on the axis.
    [mark] = plots[0].find_all("line", "mark")
    bar9 = plots[0].find_all("rect", "bar")[9]
    assert mark.attributes["x1"] == bar9.attributes["x"]


def test_a_bucket_with_no_scenario_is_a_bar_of_zero() -> None:
    one = attrs.evolve(_pass_one(), timeline={0: (1, 100, 10), 3: (2, 400, 0)})
    summary = attrs.evolve(passing(), passes=(PassReport(1, one, 4.0),), bucket_seconds=1.0)
    root, _, _ = _page(summary)
    steps, crash_states = root.by_id("throughput").find_all("svg", "plot")
    assert [float(b.attributes["height"]) > 0 for b in steps.find_all("rect", "bar")] == [
        True, False, False, True,
    ]  # fmt: skip
    assert float(crash_states.find_all("rect", "bar")[3].attributes["height"]) == 0
    empty = attrs.evolve(summary, passes=(PassReport(1, Aggregates(), 0.0),))
    plots = _page(empty)[0].by_id("throughput").find_all("svg", "plot")
    assert len(plots) == 2 and not plots[0].find_all("rect")
    assert "no scenario finished" in plots[0].text()


def test_the_coverage_matrix_marks_expected_cells_never_reached() -> None:
    cells = matrix(_page(passing())[0])
    operations = {cell.split("/")[0] for cell in cells}
    assert operations == {c.split("/")[0] for c in expected_cells()} | {"journal_ack"}
    columns = [tuple(c.split("/")[1:3]) for c in cells if c.startswith("add/")]
    assert columns == [(p, plan) for p in ("inside", "after") for plan in PLAN_ORDER]
    assert cells[NEVER] == ("never", {"unreached"})
    assert cells[REACHED] == ("5", {"hit"})  # a crash with a fault before it counted too
    assert cells["journal_force/inside/keep_prefix/*"] == ("4", {"hit"})  # both passes
    assert cells["journal_ack/after/kill/*"] == ("4", {"hit"})
    # Not expected and not reached: a plain zero, not highlighted.
    assert cells["add/after/kill/*"] == ("0", {"zero"})
    assert [c for c, (_, cls) in cells.items() if "unreached" in cls] == [NEVER]
    coverage = _page(passing())[0].by_id("coverage")
    assert "Expected cells reached: 83 of 84." in coverage.text()
    faults = coverage.find_all("table", "matrix")[1]
    assert [th.text() for th in faults.find_all("thead")[0].find_all("th")] == [
        "operation", "fsync", "no_space",
    ]  # fmt: skip
    rows = {
        tr.find_all("th")[0].text(): [td.text() for td in tr.find_all("td")]
        for tr in faults.find_all("tbody")[0].find_all("tr")
    }
    assert rows == {"add": ["0", "1"], "checkpoint": ["6", "0"]}


def test_the_page_of_a_failing_campaign() -> None:
    record = _bad_record()
    root, tags, _ = _page(failing())
    assert _heading(root) == "FAIL"
    header = root.by_id("verdict")
    assert header.find_all("p", "problem")[0].text() == "1 of 1 scenario failed."
    ident = f"failure-1-{record['index']}"
    jump = header.find_all("p", "jump")[0]
    assert [a.attributes["href"] for a in jump.find_all("a")] == [f"#{ident}"]

    article = root.by_id(ident)
    assert "kind-fail" in article.classes
    assert article.find_all("h3")[0].text() == "pass 1, scenario 0: fail (refinement)"
    assert article.find_all("p", "message")[0].text() == record["message"]
    assert article.find_all("pre", "replay")[0].text() == record["replay"]
    trace_file = f"{OUT}/failures/pass1-scenario0.jsonl"
    assert article.find_all("pre", "check")[0].text() == (
        f"bkref check-trace {trace_file}\nbkref explain {trace_file}"
    )
    told = article.find_all("ol", "told")[0]
    lines = [div.text() for div in told.find_all("div", "tl")]
    assert lines == _told(record)
    assert any("DIVERGENCE" in line for line in lines)
    [marked] = told.find_all("li", "failing")
    assert marked.find_all("div", "head")[0].text().startswith(f"step {record['failing_step']} ")
    assert "script" not in tags


def test_a_coverage_short_campaign() -> None:
    summary = coverage_short()
    assert (summary.verdict, summary.exit_code) == ("pass", 3)
    root, _, _ = _page(summary)
    assert _heading(root) == "COVERAGE SHORT"
    assert "v-coverage-short" in root.by_id("verdict").classes
    assert root.by_id("verdict").find_all("p", "problem")[0].text() == (
        f"Every scenario passed, but 1 of {len(PROBES)} probes missed."
    )
    [missed] = root.by_id("probes").find_all("tr", "missed")
    assert [td.text() for td in missed.find_all("td")] == [
        "crash during journal_force", "0", "1", "MISSED",
    ]  # fmt: skip
    met = [tr for tr in root.by_id("probes").find_all("tbody")[0].find_all("tr")]
    assert len(met) == len(PROBES)


def test_an_adapter_campaign_judges_no_probe_and_no_cell() -> None:
    root, _, _ = _page(adapter())
    assert _heading(root) == "PASS"
    probes = root.by_id("probes")
    assert not probes.find_all("table")
    assert "an adapter's scenarios record none" in probes.text()
    cells = matrix(root)
    assert cells[NEVER] == ("0", {"zero"})  # shown, not judged
    assert "./mybookie --data {data_dir}" in root.by_id("settings").text()


def test_hostile_text_from_a_row_is_shown_not_run() -> None:
    summary = hostile()
    root, tags, page = _page(summary)
    assert _heading(root) == "ERROR"
    assert "script" not in tags and "<script" not in page.lower()
    assert "\x1b" not in page and "\x00" not in page
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt; &amp; \\x1b[31mred" in page
    shown = "<script>alert('owned')</script> & \\x1b[31mred\\x1b[0m\\x00 done"
    [article] = root.by_id("failures").find_all("article")
    assert "kind-error" in article.classes
    assert article.find_all("p", "message")[0].text() == shown + "\nsecond line"
    assert shown in article.find_all("pre", "replay")[0].text()
    assert shown in root.by_id("settings").text()
    assert "local[*] <b>&" in root.by_id("settings").text()
    assert not article.find_all("ol", "told")
    untold = article.find_all("p", "untold")[0].text()
    assert untold.startswith("The trace cannot be read: failures/pass1-scenario0.jsonl")
    text = report.terminal_summary(summary)
    assert "\x1b" not in text and "\x00" not in text
    assert f"    pass 1, scenario 0: error (exception): {shown}" in text.splitlines()


def test_write_html_makes_its_directory_and_leaves_no_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "report.html"
    report.write_html(passing(), str(path))
    assert os.listdir(path.parent) == ["report.html"]
    assert _heading(parse(path.read_text(encoding="utf-8"))[0]) == "PASS"
    report.write_html(failing(), str(path))  # over an old one
    assert _heading(parse(path.read_text(encoding="utf-8"))[0]) == "FAIL"
    assert os.listdir(path.parent) == ["report.html"]


# --- the terminal -------------------------------------------------------------------------


def test_terminal_summary_of_a_passing_campaign() -> None:
    lines = report.terminal_summary(passing()).splitlines()
    assert lines[0] == (
        "bkref campaign: PASS. 600 scenarios, 285,000 steps, 13,950 crash states recovered "
        "and judged, 31,904 acknowledged adds checked, on local[2] (2 cores) in 58.2 s."
    )
    assert "  pass 1: 500 scenarios in 50.0 s, 4,900 steps/s, 229 crash states/s" in lines
    assert (
        "  pass 2: 100 scenarios in 8.2 s, 4,878 steps/s, 305 crash states/s; focus: "
        "rules=add_to_the_boundary,journal_force;plans=keep_prefix,torn_write; closed 1 of 2 "
        "missed probes and 1 of 2 missed cells"
    ) in lines
    assert f"  probes: {len(PROBES)} of {len(PROBES)} probes met" in lines
    assert "  expected cells reached: 83 of 84" in lines
    assert f"    never reached: {NEVER}" in lines
    assert "  promises observed, by the crash before the step:" in lines
    assert (
        "    durability:   none 7, kill 7, lose_unsynced 7, keep_prefix 7, torn_write 7, "
        "keep_subset 7, keep_all 7"
    ) in lines
    assert "    gaps (never observed, so not checked): in_flight after keep_all" in lines
    for title in ("1. Durability", "2. Fence", "3. Auth", "4. No resurrection", "6. Forward"):
        assert any(title in line for line in lines), title
    assert lines[-2:] == [f"  report: {OUT}/report.html", f"  dataset: {OUT}/scenarios"]
    assert not any("WARNING" in line for line in lines)


def test_terminal_summary_of_a_failing_campaign() -> None:
    record = _bad_record()
    lines = report.terminal_summary(failing()).splitlines()
    assert lines[0].startswith("bkref campaign: FAIL. 1 of 1 scenario failed. 1 scenario, ")
    trace_file = f"{OUT}/failures/pass1-scenario0.jsonl"
    assert "  scenarios that did not pass: 1" in lines
    at = lines.index(f"    pass 1, scenario 0: fail (refinement): {record['message']}")
    assert lines[at + 1 : at + 4] == [
        f"      replay: {record['replay']}",
        f"      trace: bkref check-trace {trace_file}",
        f"      trace: bkref explain {trace_file}",
    ]


def test_terminal_summary_lists_the_first_ten_failures() -> None:
    records = [{**_bad_record(), "index": i} for i in range(12)]
    rows = aggregate(records, start=float(records[0]["started_at"]), bucket_seconds=1.0)
    summary = attrs.evolve(failing(), passes=(PassReport(1, rows, wall_seconds=1.0),))
    lines = report.terminal_summary(summary).splitlines()
    assert "  scenarios that did not pass: 12 (the first 10 here)" in lines
    titles = [line for line in lines if line.startswith("    pass 1, scenario ")]
    assert [t.split(":")[0] for t in titles] == [f"    pass 1, scenario {i}" for i in range(10)]
    assert "    and 2 more: the page shows 12, the dataset all" in lines
    articles = _page(summary)[0].by_id("failures").find_all("article")
    assert [a.attributes["id"] for a in articles] == [f"failure-1-{i}" for i in range(12)]


def test_terminal_summary_of_other_verdicts() -> None:
    short = report.terminal_summary(coverage_short()).splitlines()
    assert short[0].startswith(
        f"bkref campaign: COVERAGE SHORT. Every scenario passed, but 1 of {len(PROBES)} probes "
        "missed. 600 scenarios"
    )
    assert "    missed: crash during journal_force: 0 (minimum 1)" in short
    assert report.terminal_summary(hostile()).startswith(
        "bkref campaign: ERROR. 1 of 1 scenario could not be judged (the checker broke: those "
        "rows say nothing about the bookie). 1 scenario, "
    )
    text = report.terminal_summary(adapter())
    assert "  probes: not judged (an adapter's scenarios record none)" in text.splitlines()
    assert "  expected cells: not judged (an adapter's campaign)" in text.splitlines()


def test_rows_of_different_commits_are_said_loudly() -> None:
    """Rows of code other than the campaign's: an ERROR (summary.py), and a warning that
    names each commit; rows of two commits with no commit of the campaign's: a warning."""
    summary = passing()
    other = attrs.evolve(summary.passes[1].aggregates, commits=("git:fedcba+dirty",))
    mixed = attrs.evolve(
        summary, passes=(summary.passes[0], attrs.evolve(summary.passes[1], aggregates=other))
    )
    lines = report.terminal_summary(mixed).splitlines()
    assert lines[0].startswith(
        f"bkref campaign: ERROR. Rows ran other code than the campaign's ({COMMIT}): "
        "git:fedcba+dirty. 600 scenarios, "
    )
    assert lines[1].startswith("  WARNING: THE ROWS COME FROM 2 DIFFERENT COMMITS")
    assert lines[2:4] == [f"    {COMMIT} (the campaign's own)", "    git:fedcba+dirty"]
    root = _page(mixed)[0]
    assert _heading(root) == "ERROR"
    warning = root.by_id("settings").find_all("p", "warning")[0]
    assert "2 different commits" in warning.text()
    assert report.to_json(mixed)["commits"] == [COMMIT, "git:fedcba+dirty"]
    assert report.to_json(mixed)["exit_code"] == 2

    unknown = attrs.evolve(mixed, commit="")
    lines = report.terminal_summary(unknown).splitlines()
    assert lines[0].startswith("bkref campaign: PASS. ")
    assert lines[1:4] == [
        "  WARNING: THE ROWS COME FROM 2 DIFFERENT COMMITS: the scenarios did not all run the "
        "same code, and a replay at one commit may not reproduce a row of another:",
        f"    {COMMIT}",
        "    git:fedcba+dirty",
    ]


# --- JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "verdict", "exit_code"),
    [
        (passing, "PASS", 0),
        (failing, "FAIL", 1),
        (hostile, "ERROR", 2),
        (coverage_short, "COVERAGE SHORT", 3),
        (adapter, "PASS", 0),
    ],
)
def test_to_json(make: Any, verdict: str, exit_code: int) -> None:
    summary = make()
    back = json.loads(json.dumps(report.to_json(summary)))
    assert (back["verdict"], back["exit_code"]) == (verdict, exit_code)
    assert back["settings"]["seed"] == 7
    assert back["totals"]["scenarios"] == summary.all.totals.scenarios
    assert [p["number"] for p in back["passes"]] == [p.number for p in summary.passes]
    assert back["missed_cells"] == list(summary.missed_cells)
    assert back["promises"] == dict(summary.all.promises)
    assert back["promise_gaps"] == [f"{p}/{plan}" for p, plan in summary.promise_gaps]
    assert len(back["probes"]) == (len(PROBES) if summary.settings.probes_apply else 0)
    assert back["cores"] == summary.cores and back["wall_seconds"] == summary.wall_seconds
    assert [(t["bucket"], t["steps"]) for t in back["timeline"]] == [
        (b, counts[1]) for b, counts in sorted(summary.all.timeline.items())
    ]


def test_to_json_of_a_failure() -> None:
    record = _bad_record()
    back = json.loads(json.dumps(report.to_json(failing())))
    assert back["failures"] == [
        {
            "pass": 1,
            "index": 0,
            "verdict": "fail",
            "failure_kind": "refinement",
            "message": record["message"],
            "replay": record["replay"],
            "trace_file": f"{OUT}/failures/pass1-scenario0.jsonl",
        }
    ]
    assert back["failures_total"] == 1
    short = report.to_json(coverage_short())
    assert short["missed_probes"] == ["crash during journal_force"]
    [status] = [p for p in short["probes"] if not p["met"]]
    assert status == {"name": "crash during journal_force", "count": 0, "minimum": 1, "met": False}
    hostile_json = report.to_json(hostile())
    assert "\x1b" not in json.dumps(hostile_json, ensure_ascii=False)
    assert hostile_json["failures"][0]["message"].startswith("<script>")  # JSON, not HTML


def test_ticks_and_their_labels() -> None:
    assert report.nice_ticks(58.2) == [0, 20, 40, 60]
    assert report.nice_ticks(4_900) == [0, 1_000, 2_000, 3_000, 4_000, 5_000]
    assert report.nice_ticks(0) == [0.0, 1.0]
    assert [report.short_number(v) for v in (0, 950, 1_500, 12_000, 3_000_000, 0.5, 0.1 * 3)] == [
        "0", "950", "1.5k", "12k", "3M", "0.5", "0.3",
    ]  # fmt: skip


# --- a real browser -----------------------------------------------------------------------


@needs_chromium
def test_the_page_renders_in_a_browser(tmp_path: Path) -> None:
    """Chromium, offline, loads the page of a failing campaign whose coverage has a hole and
    shows the verdict, both plots, the unreached cell and the failure's told steps."""
    summary = failing()
    first = attrs.evolve(
        summary.passes[0], aggregates=summary.passes[0].aggregates.plus(_pass_one())
    )
    summary = attrs.evolve(summary, passes=(first, *passing().passes[1:]), bucket_seconds=5.0)
    page = tmp_path / "report.html"
    report.write_html(summary, str(page))
    root, tags = parse(dump_dom(page, tmp_path / "profile"))
    assert _heading(root) == "FAIL"
    assert len(root.by_id("throughput").find_all("svg", "plot")) == 2
    assert matrix(root)[NEVER] == ("never", {"unreached"})
    told = root.by_id("failure-1-0").find_all("ol", "told")[0]
    assert [d.text() for d in told.find_all("div", "tl")] == _told(_bad_record())
    assert "script" not in tags
    shot = tmp_path / "shot.png"
    png = screenshot(page, tmp_path / "profile", shot, "1280x3000")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(shot) > 20_000  # a page drawn, not a blank one


def test_durations_are_told_as_a_person_reads_them() -> None:
    """Issue 26: the legend said "in 5.59206 s"."""
    summary = attrs.evolve(passing(), bucket_seconds=5.59206)
    _root, _tags, page = _page(summary)
    assert "5.59206" not in page
    assert "in 5.6 s, by their steps" in page
    assert [report.seconds_text(x) for x in (0.25, 1.0, 5.59206, 12.4, 600.0)] == [
        "0.25 s",
        "1 s",
        "5.6 s",
        "12 s",
        "600 s",
    ]
