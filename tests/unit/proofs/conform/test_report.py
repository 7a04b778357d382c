"""The reports of a conformance run (proofs/conform/report.py), on hand-built runs: the HTML
page parsed with html.parser and checked for what a person reads there (the verdict, each
check, the coverage matrix with its empty cells, each failure told step by step, the bookie's
stderr escaped), the JUnit XML parsed with xml.etree, and the terminal's final lines. The
page is also rendered once in headless Chromium when it is installed."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import attrs

from proofs.conform import report
from proofs.conform.results import CHECKS, RunResult
from tests.browser import dump_dom, needs_chromium, screenshot
from tests.unit.proofs.conform import runs

_VOID = {"meta", "br", "wbr", "link", "img", "hr", "input"}


@attrs.define
class Element:
    tag: str
    attributes: dict[str, str]
    children: list[Element | str] = attrs.field(factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attributes.get("class", "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        found = []
        for child in self.children:
            if isinstance(child, Element):
                if (tag is None or child.tag == tag) and (cls is None or cls in child.classes):
                    found.append(child)
                found.extend(child.find_all(tag, cls))
        return found

    def by_id(self, ident: str) -> Element:
        matches = [e for e in self.find_all() if e.attributes.get("id") == ident]
        assert len(matches) == 1, f"{len(matches)} elements with id {ident}"
        return matches[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.start_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        self.start_tags.append(tag)
        element = Element(tag, {k: v or "" for k, v in attrs_})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert tag not in _VOID, f"</{tag}>"
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> tuple[Element, list[str]]:
    """The page's tree and every start tag in order; fails on a tag closed out of order."""
    builder = _TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root, builder.start_tags


def matrix(root: Element) -> dict[tuple[str, str, str], tuple[int, set[str]]]:
    """The coverage matrix as {(operation, point, plan): (count, classes)}."""
    table = root.by_id("coverage").find_all("table")[0]
    head1, head2 = table.find_all("thead")[0].find_all("tr")
    points = []
    for th in head1.find_all("th")[1:]:
        points += [th.text()] * int(th.attributes["colspan"])
    plans = [th.text() for th in head2.find_all("th")]
    titles = {v: k for k, v in report.POINT_TITLES.items()}
    cells = {}
    for row in table.find_all("tbody")[0].find_all("tr"):
        op = row.find_all("th")[0].text()
        for point, plan, td in zip(points, plans, row.find_all("td"), strict=True):
            cells[(op, titles[point], plan)] = (int(td.text()), td.classes)
    return cells


def test_the_page_of_a_failing_run() -> None:
    run = runs.fail_run()
    page = report.render_html(run)
    root, tags = parse(page)

    header = root.by_id("verdict")
    assert header.find_all("h1")[0].text() == "FAIL"
    assert "v-fail" in header.classes
    assert "1 of 5 scenarios failed; 1 of 5 scenarios could not be carried out" in header.text()
    jump = header.find_all("p", "jump")[0]
    assert [a.attributes["href"] for a in jump.find_all("a")] == ["#scenario-3", "#scenario-4"]
    assert jump.text() == "Failures: scenario 3 (durability), scenario 4 (error)"
    assert page.index('id="verdict"') < page.index('id="checks"') < page.index('id="failures"')

    # Self-contained: its style inline, no script, nothing fetched, links only inside it.
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert tags.count("style") == 1
    refs = [e.attributes.get("href") or e.attributes.get("src") for e in root.find_all()]
    assert all(ref.startswith("#") for ref in refs if ref is not None)

    facts = root.by_id("run").text()
    for shown in (runs.ADAPTER, "mybookie 0.3", "protocol, structural, format", "168", "64"):
        assert shown in facts

    rows = {
        tr.find_all("td")[0].find_all("b")[0].text(): [td.text() for td in tr.find_all("td")]
        for tr in root.by_id("checks").find_all("tbody")[0].find_all("tr")
    }
    assert list(rows) == list(CHECKS)
    assert rows["durability"][1:5] == ["FAIL", "3", "1", "1"]
    assert rows["durability"][5] == "scenario 3"
    assert rows["refinement"][1:5] == ["PASS", "3", "0", "2"]

    failure = runs.DURABILITY_FAILURE
    article = root.by_id("scenario-3")
    assert article.find_all("p", "message")[0].text() == failure.message
    told = article.find_all("ol", "told")[0]
    assert [div.text() for div in told.find_all("div", "tl")] == list(failure.told)
    [failing] = told.find_all("li", "failing")
    assert failing.find_all("div", "head")[0].text().startswith("step 3 ")
    assert failure.trace_path is not None
    assert failure.trace_path in article.text()
    assert article.find_all("pre", "reproduce")[0].text() == failure.reproduce
    assert article.find_all("pre", "replay")[0].text() == (
        f"bkref check-trace {failure.trace_path}\nbkref explain {failure.trace_path}"
    )
    # The stderr tail is text: the script tag in it is shown, not run; its control
    # characters are shown as escapes.
    stderr = article.find_all("pre", "stderr")[0].text()
    assert "<script>alert('owned')</script>" in stderr
    assert "\\x1b[31mpanic:\\x1b[0m index & journal disagree\\x00" in stderr
    assert "\x1b" not in page and "\x00" not in page
    assert "<b>bold</b>" in told.text() and not told.find_all("b")

    errored = root.by_id("scenario-4")
    assert "kind-error" in errored.classes
    assert "could not be carried out" in errored.find_all("h3")[0].text()
    assert "waiting on lock" in errored.find_all("pre", "stderr")[0].text()

    scenario_rows = root.by_id("scenarios").find_all("tbody")[0].find_all("tr")
    assert [tr.find_all("td")[1].text() for tr in scenario_rows] == [
        "pass", "pass", "pass", "fail", "error",
    ]  # fmt: skip
    assert "row-fail" in scenario_rows[3].classes


def test_the_coverage_matrix_marks_cells_no_scenario_reached() -> None:
    cells = matrix(parse(report.render_html(runs.fail_run()))[0])
    ops = {op for op, _, _ in cells}
    assert ops == {"add", "read", "fence", "delete", "checkpoint", "inspect"}  # as claimed
    # 1 + 2 points x (kill + 5 power-loss plans) columns, with the lazy disk.
    assert len(cells) == 6 * 13
    assert cells[("add", "none", "none")] == (4, {"hit"})  # three passes and the failure
    assert cells[("add", "in_flight", "kill")] == (3, {"hit"})
    assert cells[("fence", "idle", "lose_unsynced")] == (3, {"hit"})
    assert cells[("read", "idle", "keep_prefix")] == (1, {"hit"})
    reached = {k for k, (n, _) in cells.items() if n}
    assert len(reached) == 5
    for key, (count, classes) in cells.items():
        assert ("zero" in classes) == (count == 0), key
    assert all(cells[("delete", p, plan)][1] == {"zero"} for _, p, plan in cells)


def test_the_matrix_of_a_version_1_bookie_without_the_lazy_disk() -> None:
    root, _ = parse(report.render_html(runs.v1_run()))
    cells = matrix(root)
    assert {op for op, _, _ in cells} == set(report.CORE_OPERATIONS)
    assert {(p, plan) for _, p, plan in cells} == {
        ("none", "none"), ("idle", "kill"), ("in_flight", "kill"),
    }  # fmt: skip
    # A cell the runner reported beyond those columns still gets one.
    run = runs.v1_run()
    odd = attrs.evolve(run.scenarios[0], cells=frozenset(runs.cells(("add", "idle", "torn_write"))))
    cells = matrix(parse(report.render_html(attrs.evolve(run, scenarios=(odd,))))[0])
    assert cells[("add", "idle", "torn_write")] == (1, {"hit"})
    facts = root.by_id("run").text()
    assert "(not named: adapter protocol version 1)" in facts
    assert "version 1" in facts
    assert root.by_id("verdict").find_all("h1")[0].text() == "PASS"
    assert not [e for e in root.find_all() if e.attributes.get("id") == "failures"]


def test_the_page_of_a_bookie_that_cannot_start() -> None:
    root, _ = parse(report.render_html(runs.cannot_run()))
    assert root.by_id("verdict").find_all("h1")[0].text() == "CANNOT RUN"
    assert "sh: ./missing: not found <&>\\x1b[0m" in root.by_id("cannot-run").text()
    statuses = [
        tr.find_all("td")[1].text()
        for tr in root.by_id("checks").find_all("tbody")[0].find_all("tr")
    ]
    assert statuses == ["NOT CHECKED"] * len(CHECKS)
    assert "No scenario was carried out." in root.by_id("scenarios").text()


def test_a_run_with_a_scenario_in_error(tmp_path: Path) -> None:
    """A scenario that could not be carried out and no failure: exit 2, CANNOT RUN, the
    error told with the bookie's stderr; the checks passed by the other scenario."""
    run = runs.error_run()
    assert run.exit_code == 2
    root, _ = parse(report.render_html(run))
    assert root.by_id("verdict").find_all("h1")[0].text() == "CANNOT RUN"
    assert "1 of 2 scenarios could not be carried out" in root.by_id("verdict").text()
    assert "waiting on lock" in root.by_id("scenario-4").find_all("pre", "stderr")[0].text()
    statuses = {
        tr.find_all("td")[1].text()
        for tr in root.by_id("checks").find_all("tbody")[0].find_all("tr")
    }
    assert statuses == {"PASS"}
    suite = _junit(run, tmp_path)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert {n for n in cases} == {"scenario-0", "scenario-4"}
    assert {c.get("classname") for c in cases.values()} == {"bkref.conform.standard"}
    error = cases["scenario-4"].find("error")
    assert error is not None and "waiting on lock" in (error.text or "")
    assert report.terminal_summary(run).startswith("bkref conform: CANNOT RUN. 1 of 2 scenarios")


def test_a_run_that_stopped_part_way_says_so_everywhere(tmp_path: Path) -> None:
    run = runs.stopped_run()
    assert run.exit_code == 2
    sentence = (
        "The run stopped after 1 scenario: the bookie could not be run; 1 scenario before it "
        "passed."
    )
    root, _ = parse(report.render_html(run))
    assert root.by_id("verdict").text() == "CANNOT RUN" + sentence
    assert "disk full" in root.by_id("cannot-run").text()
    suite = _junit(run, tmp_path)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")
    assert [c.get("name") for c in suite.findall("testcase")] == ["start", "scenario-0"]
    text = report.terminal_summary(run)
    assert text.splitlines()[0] == f"bkref conform: CANNOT RUN. {sentence}"
    assert "    the bookie exited with status 1 before its ready line: disk full" in text


def _junit(run: RunResult, tmp_path: Path) -> ET.Element:
    path = tmp_path / "junit.xml"
    report.write_junit(run, str(path))
    return ET.parse(path).getroot()


def test_junit_of_a_failing_run(tmp_path: Path) -> None:
    suite = _junit(runs.fail_run(), tmp_path)
    assert suite.tag == "testsuite"
    assert suite.get("name") == "bkref conform"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "1", "1")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["seed"] == "42"
    assert props["adapter"] == runs.ADAPTER
    assert props["profile"] == "quick"
    assert props["levels"] == "protocol, structural, format"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [f"scenario-{i}" for i in (0, 1, 2, 3, 4)]
    assert {c.get("classname") for c in cases} == {"bkref.conform.quick"}
    assert [c.find("failure") is not None for c in cases] == [False] * 3 + [True, False]
    failure = cases[3].find("failure")
    assert failure is not None
    assert failure.get("type") == "property"
    assert failure.get("message") == f"durability: {runs.DURABILITY_FAILURE.message}"
    text = failure.text or ""
    first = f"scenario 3: durability (property): {runs.DURABILITY_FAILURE.message}"
    assert text.splitlines()[0] == first  # what a CI system shows when it shows one line
    for line in runs.TOLD:
        assert line in text.splitlines()
    assert f"reproduce: {runs.DURABILITY_FAILURE.reproduce}" in text
    assert f"trace: {runs.DURABILITY_FAILURE.trace_path}" in text
    # The bookie's colour codes and NUL would make the file unparsable; they are escaped.
    assert "\\x1b[31mpanic:\\x1b[0m index & journal disagree\\x00" in text
    error = cases[4].find("error")
    assert error is not None
    assert error.get("type") == "error"
    assert "the bookie is stuck" in (error.get("message") or "")
    assert "acknowledged adds checked 17" in (cases[0].findtext("system-out") or "")


def test_junit_of_a_passing_run_and_of_one_that_cannot_start(tmp_path: Path) -> None:
    suite = _junit(runs.pass_run(), tmp_path)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "0")
    assert not list(suite.iter("failure")) and not list(suite.iter("error"))
    # No scenario ran: one case in error, so CI does not show an empty green suite.
    suite = _junit(runs.cannot_run(), tmp_path)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "1")
    [case] = suite.findall("testcase")
    assert case.get("name") == "start"
    error = case.find("error")
    assert error is not None
    assert "status 127" in (error.text or "")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["levels"] == "unknown (no ready line read)"
    v1 = _junit(runs.v1_run(), tmp_path)
    props = {p.get("name"): p.get("value") for p in v1.iter("property")}
    assert (props["protocol_version"], props["levels"], props["ops"]) == ("1", "protocol", "")


def test_terminal_summary_gives_the_final_verdict() -> None:
    text = report.terminal_summary(runs.fail_run(), "/tmp/r")
    lines = text.splitlines()
    assert lines[0] == (
        "bkref conform: FAIL. 1 of 5 scenarios failed; 1 of 5 scenarios could not be carried out."
    )
    assert "  scenarios run: 5 (pass 3, fail 1, error 1) in 40.0 s, 168 steps" in lines
    assert "  crashes injected: 8; power losses: 5" in lines
    assert "  acknowledged adds checked: 64; reads judged: 31" in lines
    checks = {line.split()[0]: line.split()[1] for line in lines if line.startswith("    ")
              and line.split()[0] in CHECKS}  # fmt: skip
    assert checks == {c: "FAIL" if c == "durability" else "PASS" for c in CHECKS}
    assert f"    replay: bkref explain {runs.DURABILITY_FAILURE.trace_path}" in lines
    assert f"    reproduce: {runs.DURABILITY_FAILURE.reproduce}" in lines
    assert lines[-1] == "  report: /tmp/r/report.html (JUnit XML: /tmp/r/junit.xml)"
    assert report.terminal_summary(runs.pass_run()).startswith(
        "bkref conform: PASS. All 3 scenarios passed every check."
    )
    one = attrs.evolve(runs.pass_run(), scenarios=(runs.passing(0),))
    assert report.terminal_summary(one).startswith(
        "bkref conform: PASS. The scenario passed every check."
    )
    nothing = attrs.evolve(runs.pass_run(), scenarios=())
    assert report.terminal_summary(nothing).startswith(
        "bkref conform: PASS. No scenario was selected, so nothing was checked."
    )
    cannot = report.terminal_summary(runs.cannot_run())
    assert cannot.startswith("bkref conform: CANNOT RUN.")
    assert "    sh: ./missing: not found <&>\\x1b[0m" in cannot.splitlines()


def test_write_reports_writes_both_files(tmp_path: Path) -> None:
    directory = tmp_path / "new" / "dir"
    paths = report.write_reports(runs.fail_run(), str(directory))
    assert paths == [str(directory / "junit.xml"), str(directory / "report.html")]
    assert ET.parse(paths[0]).getroot().get("failures") == "1"
    assert parse(Path(paths[1]).read_text(encoding="utf-8"))[0].by_id("verdict")


@needs_chromium
def test_the_page_renders_in_a_browser(tmp_path: Path) -> None:
    """Chromium, offline and with scripts of no consequence (there are none), loads the page
    and shows the verdict, the failure's told steps and the stderr as text."""
    page = tmp_path / "report.html"
    report.write_html(runs.fail_run(), str(page))
    root, tags = parse(dump_dom(page, tmp_path / "profile"))
    assert root.by_id("verdict").find_all("h1")[0].text() == "FAIL"
    told = root.by_id("scenario-3").find_all("ol", "told")[0]
    assert [d.text() for d in told.find_all("div", "tl")] == list(runs.TOLD)
    assert "script" not in tags
    shot = tmp_path / "shot.png"
    png = screenshot(page, tmp_path / "profile", shot, "1100x1600")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(shot) > 20_000  # a page drawn, not a blank one
