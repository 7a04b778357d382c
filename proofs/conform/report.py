"""The reports of a conformance run: the final verdict on the terminal, JUnit XML for CI
systems, and one HTML page for a person (docs/conformance.md, "Reports").

Spec pages: spec/properties.md (the checks each report has a row for), spec/crash.py (the
crash plans the coverage matrix has columns for), spec/adapter.md (the capabilities shown in
the header).

Why it is shaped so:

- Every report reads a :class:`proofs.conform.results.RunResult` and nothing else: no bookie,
  no model, no file of the run is opened here. So each report is tested on hand-built runs
  (a pass, a failure with its trace, an error, a version 1 bookie), and a report cannot
  disagree with another about what happened.
- Everything a bookie wrote is untrusted: its standard error, and the messages and traces
  that quote its answers. The HTML page escapes every string it shows, and both the page and
  the XML replace the control characters XML 1.0 cannot carry (a NUL, a terminal's colour
  codes) with visible ``\\xNN`` escapes, so a bookie's output can neither inject markup nor
  make a CI system's XML parser reject the file.
- The HTML page is one file with its style inline, no script and no address outside itself:
  it is opened from a CI artifact or a mail attachment, often with no network, and must read
  the same there. The verdict comes first, then what was checked (per check, then the
  coverage matrix), then each failure told step by step with the command that replays it,
  then the table of scenarios.
- A JUnit file that says nothing when the bookie could not start would show green in CI; so
  a run the bookie could not start (or restart, part way) has a test case ``start`` in
  error, with the bookie's stderr.

Not built: a report streamed while the run goes on (the terminal's progress lines are the
runner's, proofs/conform/runner.py); merging the reports of several runs.
"""

from __future__ import annotations

import html
import os
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence

from proofs.conform.results import CHECKS, Cell, Failure, RunResult, ScenarioResult
from proofs.harness.promises import PROMISES, gaps

#: The file names :func:`write_reports` writes in its directory.
JUNIT_NAME = "junit.xml"
HTML_NAME = "report.html"

#: What each check of :data:`CHECKS` means, for the rows of the reports.
CHECK_TITLES = {
    "refinement": "every answer, ack and state allowed by the model",
    "durability": "1. Durability: an acknowledged add reads back, through every crash",
    "fence": "2. Fence durability: a fenced ledger stays fenced",
    "auth": "3. Auth: an add with the wrong master key is refused",
    "resurrection": "4. No resurrection: a deleted ledger stays deleted",
    "progress": "6. Forward progress: every request is answered",
}
#: Where a crash met an operation, in the order of the matrix's column groups.
POINTS = ("none", "idle", "in_flight")
POINT_TITLES = {"none": "no crash", "idle": "crash after it, idle", "in_flight": "crash in flight"}
#: SIGKILL, then the power-loss plans of spec/crash.py, in the order of the matrix's columns.
KILL_PLANS = ("kill",)
POWER_PLANS = ("lose_unsynced", "keep_prefix", "torn_write", "keep_subset", "keep_all")
#: The operations every bookie serves, then the optional ones, in the order of the rows.
CORE_OPERATIONS = ("add", "read", "fence", "delete")
OPTIONAL_OPERATIONS = ("checkpoint", "gc", "inspect", "write_close")

#: Characters XML 1.0 cannot hold (and a browser shows badly): C0 controls but tab, newline
#: and carriage return; DEL and the C1 controls; lone surrogates; the two non-characters.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_STEP_LINE = re.compile(r"^step (\d+)\b")


def clean(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry shown as an escape (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _e(text: object) -> str:
    """``text`` ready to stand in HTML, in an element or a quoted attribute."""
    return html.escape(clean(str(text)), quote=True)


# --- what every report says ----------------------------------------------------------------


def verdict_word(run: RunResult) -> str:
    """PASS, FAIL or CANNOT RUN, from the run's exit status."""
    return {0: "PASS", 1: "FAIL"}.get(run.exit_code, "CANNOT RUN")


def verdict_sentence(run: RunResult) -> str:
    """One sentence under the verdict saying why it is what it is."""
    n = len(run.scenarios)
    counts = Counter(s.verdict for s in run.scenarios)
    if run.error is not None and not run.scenarios:
        return "The bookie could not be run; no scenario was carried out."
    if n == 0:
        return "No scenario was selected, so nothing was checked."
    parts = []
    if run.error is not None:
        parts.append(f"The run stopped after {_n(n, 'scenario')}: the bookie could not be run")
    if counts["fail"]:
        parts.append(f"{counts['fail']} of {_n(n, 'scenario')} failed")
    if counts["error"]:
        parts.append(f"{counts['error']} of {_n(n, 'scenario')} could not be carried out")
    if not parts:
        return (
            f"All {n} scenarios passed every check."
            if n > 1
            else "The scenario passed every check."
        )
    if run.error is not None and not counts["fail"] and not counts["error"]:
        parts.append(f"{_n(counts['pass'], 'scenario')} before it passed")
    return "; ".join(parts) + "."


def check_counts(run: RunResult, check: str) -> tuple[str, int, int, int]:
    """(status, passed, failed, not judged to the end) of ``check``.

    A scenario that passed held every check to its last step; one that failed ``check``
    broke it; one that failed another check or could not be carried out stopped before its
    end, so ``check`` was judged only up to there. The status is ``fail`` when any scenario
    broke it, ``pass`` when none did and at least one was judged to the end, else
    ``not checked``.
    """
    failed = len(run.failed(check))
    passed = sum(1 for s in run.scenarios if s.verdict == "pass")
    partial = len(run.scenarios) - failed - passed
    status = "fail" if failed else "pass" if passed else "not checked"
    return status, passed, failed, partial


def totals(run: RunResult) -> dict[str, int]:
    """The run's figures summed over its scenarios."""
    return {
        "steps": sum(s.steps for s in run.scenarios),
        "crashes": sum(s.crashes for s in run.scenarios),
        "power_losses": sum(s.power_losses for s in run.scenarios),
        "adds_acknowledged": sum(s.adds_acknowledged for s in run.scenarios),
        "reads_checked": sum(s.reads_checked for s in run.scenarios),
    }


def levels_text(run: RunResult) -> str:
    caps = run.capabilities
    return ", ".join(caps.levels) if caps is not None else "unknown (no ready line read)"


def replay_commands(failure: Failure) -> list[str]:
    """The commands that replay a failure's trace against the model."""
    if failure.trace_path is None:
        return []
    return [f"bkref check-trace {failure.trace_path}", f"bkref explain {failure.trace_path}"]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _failure_title(scenario: ScenarioResult) -> str:
    failure = scenario.failure
    if failure is None:
        return f"scenario {scenario.index}: {scenario.verdict}"
    what = failure.check if failure.check is not None else "could not be carried out"
    return f"scenario {scenario.index}: {what} ({failure.kind})"


# --- the terminal ---------------------------------------------------------------------------


def terminal_summary(run: RunResult, report_dir: str | None = None) -> str:
    """The final verdict the CLI and the pytest plugin print: the verdict, the figures of
    the run, each check's pass/fail, the failures with their replay and reproduce commands,
    and, with ``report_dir``, where the reports are."""
    t = totals(run)
    counts = Counter(s.verdict for s in run.scenarios)
    lines = [
        f"bkref conform: {verdict_word(run)}. {verdict_sentence(run)}",
        f"  adapter: {run.adapter}",
        f"  seed {run.seed}, profile {run.profile}, "
        f"{'lazy disk (power losses)' if run.lazy_disk else 'no lazy disk (SIGKILL only)'}, "
        f"levels: {levels_text(run)}",
        f"  scenarios run: {len(run.scenarios)} (pass {counts['pass']}, fail {counts['fail']}, "
        f"error {counts['error']}) in {run.seconds:.1f} s, {t['steps']} steps",
        f"  crashes injected: {t['crashes']}; power losses: {t['power_losses']}",
        f"  acknowledged adds checked: {t['adds_acknowledged']}; reads judged: "
        f"{t['reads_checked']}",
        "  checks:",
    ]
    for check in CHECKS:
        status, passed, failed, partial = check_counts(run, check)
        detail = f"{passed} passed, {failed} failed"
        if partial:
            detail += f", {partial} not judged to the end"
        lines.append(f"    {check:<13} {status.upper():<12} {detail}")
    if run.scenarios:
        lines += promises_text(run)
    if run.error is not None:
        lines.append("  the bookie could not be run:")
        lines.extend("    " + line for line in clean(run.error).splitlines())
    for scenario in run.scenarios:
        failure = scenario.failure
        if failure is None:
            continue
        lines.append(f"  {_failure_title(scenario)}: {clean(failure.message)}")
        if failure.trace_path is not None:
            lines.append(f"    trace: {failure.trace_path}")
        if failure.unshrunk_path is not None:
            lines.append(f"    unshrunk: {failure.unshrunk_path}")
        lines.extend(f"    replay: {command}" for command in replay_commands(failure))
        if failure.reproduce:
            lines.append(f"    reproduce: {failure.reproduce}")
    if report_dir is not None:
        lines.append(
            f"  report: {os.path.join(report_dir, HTML_NAME)} "
            f"(JUnit XML: {os.path.join(report_dir, JUNIT_NAME)})"
        )
    return "\n".join(lines)


def promises_text(run: RunResult) -> list[str]:
    """The promises observed, by the plan of the crash before (proofs/harness/promises.py),
    and the gaps: what this run could have observed and did not. A gap is not a pass."""
    counts = run.promises()
    plans = run.plans()
    state = run.capabilities.state if run.capabilities is not None else "none"
    lines = [f"  promises observed (state level {state}; by the crash before the step):"]
    lines.append("    " + f"{'promise:':<14}" + "".join(f"{plan:>14}" for plan in plans))
    for promise in PROMISES:
        row = "".join(f"{counts[(promise, plan)]:>14}" for plan in plans)
        lines.append(f"    {promise + ':':<14}{row}")
    missing = gaps(counts, plans)
    if missing:
        shown = ", ".join(f"{promise} after {plan}" for promise, plan in missing)
        lines.append(f"  gaps (never observed, so not checked): {shown}")
    else:
        lines.append("  gaps: none; every promise was observed after every plan")
    return lines


def failure_text(scenario: ScenarioResult) -> str:
    """A failed or errored scenario in plain text: what broke, the trace told step by step,
    where the trace is, how to replay it and run it again, and the bookie's stderr tail.
    The body of a JUnit failure and of a pytest failure."""
    failure = scenario.failure
    if failure is None:
        return f"scenario {scenario.index}: {scenario.verdict} (no failure recorded)"
    # The title and the message on the first line: pytest's short summary and many CI
    # systems show only that line.
    lines = [f"{_failure_title(scenario)}: {failure.message}"]
    if failure.step is not None:
        lines.append(f"failing step: {failure.step}")
    if failure.steps_before_shrink:
        lines.append(
            f"shrunk from {failure.steps_before_shrink} to {failure.steps_after_shrink} steps"
        )
    if failure.context:
        lines.append("")
        lines.append("before shrinking, the steps that led to it (its ledger's, and the crashes):")
        lines.extend(failure.context)
    if failure.told:
        lines.append("")
        lines.append("the trace, step by step:")
        lines.extend(failure.told)
    lines.append("")
    if failure.trace_path is not None:
        lines.append(f"trace: {failure.trace_path}")
    if failure.unshrunk_path is not None:
        lines.append(f"unshrunk trace: {failure.unshrunk_path}")
    lines.extend(f"replay: {command}" for command in replay_commands(failure))
    if failure.reproduce:
        lines.append(f"reproduce: {failure.reproduce}")
    if failure.stderr_tail:
        lines.append("")
        lines.append("the bookie's standard error (last lines):")
        lines.append(failure.stderr_tail.rstrip("\n"))
    return clean("\n".join(lines))


# --- JUnit XML ------------------------------------------------------------------------------


def junit_tree(run: RunResult) -> ET.ElementTree[ET.Element]:
    """The run as JUnit XML: one testsuite, one testcase per scenario."""
    counts = Counter(s.verdict for s in run.scenarios)
    start_error = run.error is not None
    suite = ET.Element(
        "testsuite",
        {
            "name": "bkref conform",
            "tests": str(len(run.scenarios) + (1 if start_error else 0)),
            "failures": str(counts["fail"]),
            "errors": str(counts["error"] + (1 if start_error else 0)),
            "skipped": "0",
            "time": f"{run.seconds:.3f}",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
        },
    )
    properties = ET.SubElement(suite, "properties")
    caps = run.capabilities
    props = [
        ("seed", str(run.seed)),
        ("adapter", run.adapter),
        ("profile", run.profile),
        ("lazy_disk", "true" if run.lazy_disk else "false"),
        ("levels", levels_text(run)),
    ]
    if caps is not None:
        props += [
            ("protocol_version", str(caps.version)),
            ("bookie", caps.bookie),
            ("ops", ",".join(sorted(caps.ops))),
            ("state", caps.state),
            ("answers", caps.answers),
        ]
    for name, value in props:
        ET.SubElement(properties, "property", {"name": name, "value": clean(value)})
    classname = f"bkref.conform.{run.profile}"
    if start_error:
        case = ET.SubElement(
            suite, "testcase", {"name": "start", "classname": classname, "time": "0"}
        )
        error = ET.SubElement(
            case, "error", {"message": "the bookie could not be run", "type": "cannot_run"}
        )
        error.text = clean(run.error or "")
    for scenario in run.scenarios:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "name": f"scenario-{scenario.index}",
                "classname": classname,
                "time": f"{scenario.seconds:.3f}",
            },
        )
        if scenario.verdict in ("fail", "error"):
            failure = scenario.failure
            message = (
                f"{failure.check or failure.kind}: {failure.message}"
                if failure is not None
                else scenario.verdict
            )
            element = ET.SubElement(
                case,
                "failure" if scenario.verdict == "fail" else "error",
                {
                    "message": clean(message),
                    "type": failure.kind if failure is not None else scenario.verdict,
                },
            )
            element.text = failure_text(scenario)
        out = ET.SubElement(case, "system-out")
        out.text = (
            f"steps {scenario.steps}, crashes {scenario.crashes}, power losses "
            f"{scenario.power_losses}, acknowledged adds checked {scenario.adds_acknowledged}, "
            f"reads judged {scenario.reads_checked}"
        )
    ET.indent(suite)
    return ET.ElementTree(suite)


def write_junit(run: RunResult, path: str) -> None:
    """Write the run as JUnit XML at ``path``."""
    junit_tree(run).write(path, encoding="utf-8", xml_declaration=True)


# --- HTML -----------------------------------------------------------------------------------

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a;
  margin: 0; background: #f6f7f9; }
main { max-width: 1200px; margin: 0 auto; padding: 0 24px 48px; }
header.verdict { padding: 20px 24px; color: #fff; }
header.verdict h1 { margin: 0 0 4px; font-size: 30px; letter-spacing: .5px; }
header.verdict p { margin: 0; font-size: 17px; }
header.verdict p.jump { margin-top: 6px; font-size: 15px; }
header.verdict a { color: #fff; }
.v-pass { background: #1f7a3f; } .v-fail { background: #b3261e; }
.v-cannot-run { background: #8a5a00; }
h2 { margin: 32px 0 10px; font-size: 21px; border-bottom: 2px solid #d5d9df;
  padding-bottom: 4px; }
h3 { margin: 0 0 8px; font-size: 18px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 0; }
dl.facts dt { font-weight: 600; color: #4a5360; } dl.facts dd { margin: 0; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  font-size: 13px; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #d5d9df; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #eceff3; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.s-pass { color: #1f7a3f; font-weight: 700; } .s-fail { color: #b3261e; font-weight: 700; }
.s-error, .s-not-checked { color: #8a5a00; font-weight: 700; }
td.s-pass, td.s-fail, td.s-error, td.s-not-checked { white-space: nowrap; }
tr.row-fail td { background: #fdecea; } tr.row-error td { background: #fff4e0; }
div.scroll { overflow-x: auto; max-width: 100%; }
table.matrix { font-size: 13px; }
table.matrix td { text-align: center; min-width: 2.4em; padding: 3px 6px; }
table.matrix thead th { text-align: center; }
table.matrix td.hit { background: #e3f3e8; }
table.matrix td.zero { background: #ffd9a8; color: #7a3d00; font-weight: 700;
  outline: 1px dashed #c26a00; outline-offset: -3px; }
table.matrix th.op { text-align: left; }
.legend { margin: 6px 0 0; color: #4a5360; font-size: 13px; }
.legend span.zero { background: #ffd9a8; padding: 0 6px; outline: 1px dashed #c26a00; }
article.failure { background: #fff; border: 1px solid #e0b4b0; border-left: 6px solid #b3261e;
  padding: 14px 18px; margin: 0 0 18px; }
article.failure.kind-error { border-color: #e8cfa0; border-left-color: #8a5a00; }
p.message { font-size: 16px; margin: 0 0 10px; white-space: pre-wrap; }
pre { background: #1d232a; color: #f1f3f5; padding: 10px 12px; overflow-x: auto;
  white-space: pre-wrap; word-break: break-word; margin: 4px 0 12px; }
pre.stderr { background: #2b1d1d; }
ol.told { list-style: none; padding: 0; margin: 4px 0 12px; }
ol.told li { background: #fbfcfd; border: 1px solid #e3e6ea; margin: 0 0 4px;
  padding: 4px 8px; }
ol.told li.failing { background: #fdecea; border-color: #b3261e; }
ol.told li.preamble { background: transparent; border-style: dashed; }
.tl { white-space: pre-wrap; font-family: ui-monospace, Menlo, Consolas, monospace;
  font-size: 13px; }
.tl.head { font-weight: 700; }
.muted { color: #6a7380; }
footer { margin-top: 40px; color: #6a7380; font-size: 13px; }
"""


def _row(cells: Iterable[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(cells) + "</tr>"


def _td(text: object, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{_e(text)}</td>"


def _columns(run: RunResult) -> list[tuple[str, str]]:
    """The (point, plan) columns of the coverage matrix: every pair the run could reach
    (power-loss plans only with the lazy disk), then any other pair the runner reported."""
    plans = KILL_PLANS + (POWER_PLANS if run.lazy_disk else ())
    columns = [("none", "none")] + [(p, plan) for p in POINTS[1:] for plan in plans]
    seen = {(c.point, c.plan) for s in run.scenarios for c in s.cells}
    extra = sorted(seen - set(columns), key=lambda c: (_order(POINTS, c[0]), c[1]))
    return columns + extra


def _order(known: Sequence[str], name: str) -> int:
    return known.index(name) if name in known else len(known)


def _operations(run: RunResult) -> list[str]:
    """The rows of the coverage matrix: the core operations, the optional ones the bookie
    claims, then any other the runner reported."""
    claimed = run.capabilities.ops if run.capabilities is not None else frozenset()
    rows = list(CORE_OPERATIONS) + [op for op in OPTIONAL_OPERATIONS if op in claimed]
    seen = {c.operation for s in run.scenarios for c in s.cells}
    return rows + sorted(seen - set(rows))


def coverage(run: RunResult) -> dict[Cell, int]:
    """How many scenarios reached each cell."""
    counts: Counter[Cell] = Counter()
    for scenario in run.scenarios:
        counts.update(scenario.cells)
    return dict(counts)


def _matrix_html(run: RunResult) -> str:
    columns = _columns(run)
    rows = _operations(run)
    counts = coverage(run)
    groups: list[tuple[str, int]] = []
    for point, _plan in columns:
        if groups and groups[-1][0] == point:
            groups[-1] = (point, groups[-1][1] + 1)
        else:
            groups.append((point, 1))
    head1 = '<th rowspan="2">operation</th>' + "".join(
        f'<th colspan="{span}">{_e(POINT_TITLES.get(point, point))}</th>' for point, span in groups
    )
    # A plan's name may break after an underscore, so thirteen columns fit a laptop's width.
    head2 = "".join(f"<th>{_e(plan).replace('_', '_<wbr>')}</th>" for _point, plan in columns)
    body = []
    empty = 0
    for op in rows:
        cells = [f'<th class="op">{_e(op)}</th>']
        for point, plan in columns:
            n = counts.get(Cell(op, point, plan), 0)
            empty += n == 0
            title = f"{op}, {POINT_TITLES.get(point, point)}, plan {plan}: {_n(n, 'scenario')}"
            cells.append(f'<td class="{"zero" if n == 0 else "hit"}" title="{_e(title)}">{n}</td>')
        body.append(_row(cells))
    return (
        '<div class="scroll"><table class="matrix">'
        f"<thead><tr>{head1}</tr><tr>{head2}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
        f'<p class="legend">Each cell: how many scenarios ran the operation at that crash '
        f'point under that plan. <span class="zero">0</span> marks a cell no scenario reached '
        f"({empty} of {len(rows) * len(columns)}).</p>"
    )


def _promises_html(run: RunResult) -> str:
    """The promises-observed matrix: a promise (row) after a plan (column), with the gaps
    marked: what the run could have observed and did not is not a pass."""
    counts = run.promises()
    plans = run.plans()
    head = "<th>promise</th>" + "".join(
        f"<th>{_e(plan).replace('_', '_<wbr>')}</th>" for plan in plans
    )
    body = []
    for promise in PROMISES:
        cells = [f'<th class="op">{_e(promise)}</th>']
        for plan in plans:
            n = counts[(promise, plan)]
            title = f"{promise} after {plan}: {_n(n, 'observation')}"
            cls = "zero gap" if n == 0 else "hit"
            cells.append(f'<td class="{cls}" title="{_e(title)}">{n}</td>')
        body.append(_row(cells))
    missing = gaps(counts, plans)
    note = (
        f'<p class="gaps">{len(missing)} gap(s), never observed and so not checked: '
        + _e(", ".join(f"{promise} after {plan}" for promise, plan in missing))
        + "</p>"
        if missing
        else '<p class="muted">No gap: every promise was observed after every plan.</p>'
    )
    return (
        f'<table class="matrix promises"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>{note}"
    )


def _checks_html(run: RunResult) -> str:
    rows = []
    for check in CHECKS:
        status, passed, failed, partial = check_counts(run, check)
        failures = ", ".join(
            f'<a href="#scenario-{s.index}">scenario {s.index}</a>' for s in run.failed(check)
        )
        rows.append(
            _row(
                [
                    f"<td><b>{_e(check)}</b><br><span class='muted'>"
                    f"{_e(CHECK_TITLES.get(check, ''))}</span></td>",
                    f'<td class="s-{status.replace(" ", "-")}">{_e(status.upper())}</td>',
                    _td(passed, "num"),
                    _td(failed, "num"),
                    _td(partial, "num"),
                    f"<td>{failures or '&mdash;'}</td>",
                ],
                "row-fail" if status == "fail" else "",
            )
        )
    return (
        "<table><thead><tr><th>check</th><th>verdict</th><th class='num'>scenarios passed</th>"
        "<th class='num'>failed</th><th class='num'>not judged to the end</th>"
        "<th>failing scenarios</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        "<p class='legend'>A scenario that failed another check, or could not be carried out, "
        "stopped early: its checks were judged only up to there.</p>"
    )


def _told_html(failure: Failure) -> str:
    """The told trace as a list, one item per step (lines before the first step in an item
    of their own); the failing step is marked."""
    groups: list[tuple[int | None, list[str]]] = []
    for line in failure.told:
        match = _STEP_LINE.match(line)
        if match is not None or not groups:
            groups.append((int(match.group(1)) if match else None, []))
        groups[-1][1].append(line)
    items = []
    for step, lines in groups:
        cls = "preamble" if step is None else "failing" if step == failure.step else ""
        first, *rest = lines
        body = f'<div class="tl head">{_e(first)}</div>' if step is not None else ""
        body += "".join(
            f'<div class="tl">{_e(line)}</div>' for line in (rest if step is not None else lines)
        )
        attr = f' class="{cls}"' if cls else ""
        items.append(f"<li{attr}>{body}</li>")
    return f'<ol class="told">{"".join(items)}</ol>'


def _failure_html(scenario: ScenarioResult) -> str:
    failure = scenario.failure
    assert failure is not None
    facts = [("kind", failure.kind), ("check", failure.check or "none (could not run)")]
    if failure.step is not None:
        facts.append(("failing step", str(failure.step)))
    if failure.steps_before_shrink:
        facts.append(
            (
                "shrunk",
                f"from {failure.steps_before_shrink} to {failure.steps_after_shrink} steps",
            )
        )
    facts.append(("trace file", failure.trace_path or "none written"))
    if failure.unshrunk_path is not None:
        facts.append(("unshrunk trace", failure.unshrunk_path))
    parts = [
        f'<article class="failure kind-{_e(failure.kind)}" id="scenario-{scenario.index}">',
        f"<h3>{_e(_failure_title(scenario))}</h3>",
        f'<p class="message">{_e(failure.message)}</p>',
        '<dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd class='mono'>{_e(v)}</dd>" for k, v in facts)
        + "</dl>",
    ]
    commands = replay_commands(failure)
    if commands:
        parts.append("<h4>Replay the trace against the model</h4>")
        parts.append(f'<pre class="replay">{_e(chr(10).join(commands))}</pre>')
    if failure.reproduce:
        parts.append("<h4>Run the scenario again</h4>")
        parts.append(f'<pre class="reproduce">{_e(failure.reproduce)}</pre>')
    if failure.context:
        parts.append("<h4>Before shrinking: the steps that led to it</h4>")
        parts.append(
            '<p class="muted">Its ledger\'s steps and the crashes of the whole scenario, '
            "which shrinking may have dropped: why the workload sent what it sent.</p>"
        )
        parts.append(f'<pre class="context">{_e(chr(10).join(failure.context))}</pre>')
    if failure.told:
        parts.append("<h4>The shrunk trace, step by step</h4>")
        parts.append(_told_html(failure))
    parts.append("<h4>The bookie's standard error (last lines)</h4>")
    if failure.stderr_tail:
        parts.append(f'<pre class="stderr">{_e(failure.stderr_tail.rstrip(chr(10)))}</pre>')
    else:
        parts.append('<p class="muted">It wrote nothing on standard error.</p>')
    parts.append("</article>")
    return "".join(parts)


def _scenarios_html(run: RunResult) -> str:
    rows = []
    for s in run.scenarios:
        what = ""
        if s.failure is not None:
            what = (
                f'<a href="#scenario-{s.index}">{_e(s.failure.check or s.failure.kind)}</a>: '
                f"{_e(_shorten(s.failure.message))}"
            )
        rows.append(
            _row(
                [
                    _td(s.index, "num"),
                    f'<td class="s-{_e(s.verdict)}">{_e(s.verdict)}</td>',
                    _td(s.steps, "num"),
                    _td(s.crashes, "num"),
                    _td(s.power_losses, "num"),
                    _td(s.adds_acknowledged, "num"),
                    _td(s.reads_checked, "num"),
                    _td(f"{s.seconds:.2f}", "num"),
                    f"<td>{what}</td>",
                ],
                f"row-{s.verdict}" if s.verdict != "pass" else "",
            )
        )
    if not rows:
        return '<p class="muted">No scenario was carried out.</p>'
    return (
        "<table><thead><tr><th class='num'>scenario</th><th>verdict</th>"
        "<th class='num'>steps</th><th class='num'>crashes</th><th class='num'>power losses</th>"
        "<th class='num'>acknowledged adds checked</th><th class='num'>reads judged</th>"
        "<th class='num'>seconds</th><th>failure</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _shorten(text: str, limit: int = 140) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= limit and "\n" not in text else first[: limit - 1] + "…"


def _jump_html(failing: Sequence[ScenarioResult]) -> str:
    """Links from the verdict to each failure, so the first thing read leads to the story."""
    if not failing:
        return ""
    links = ", ".join(
        f'<a href="#scenario-{s.index}">scenario {s.index} '
        f"({_e(s.failure.check or s.failure.kind if s.failure else s.verdict)})</a>"
        for s in failing
    )
    return f'<p class="jump">Failures: {links}</p>'


def render_html(run: RunResult) -> str:
    """The run as one self-contained HTML page."""
    word = verdict_word(run)
    t = totals(run)
    caps = run.capabilities
    facts = [
        ("adapter", run.adapter),
        ("seed", str(run.seed)),
        ("profile", run.profile),
        ("lazy disk", "yes: power losses injected" if run.lazy_disk else "no: SIGKILL only"),
        ("levels", levels_text(run)),
    ]
    if caps is not None:
        facts += [
            ("bookie", caps.bookie or "(not named: adapter protocol version 1)"),
            ("adapter protocol", f"version {caps.version}"),
            ("optional ops", ", ".join(sorted(caps.ops)) or "none"),
            ("inspect state", caps.state),
            ("answer profile", caps.answers),
        ]
    facts += [
        ("scenarios", str(len(run.scenarios))),
        ("steps", str(t["steps"])),
        ("crashes injected", str(t["crashes"])),
        ("power losses", str(t["power_losses"])),
        ("acknowledged adds checked", str(t["adds_acknowledged"])),
        ("reads judged", str(t["reads_checked"])),
        ("time", f"{run.seconds:.1f} s"),
    ]
    failing = [s for s in run.scenarios if s.failure is not None]
    sections = [
        '<section id="run"><h2>The run</h2><dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
        + "</dl></section>",
    ]
    if run.error is not None:
        sections.append(
            '<section id="cannot-run"><h2>The bookie could not be run</h2>'
            f'<pre class="stderr">{_e(run.error)}</pre></section>'
        )
    sections.append(f'<section id="checks"><h2>Checks</h2>{_checks_html(run)}</section>')
    sections.append(
        '<section id="coverage"><h2>Coverage: operation &times; crash point &times; plan</h2>'
        f"{_matrix_html(run)}</section>"
        '<section id="promises"><h2>Promises observed</h2>'
        '<p class="muted">A step observes a promise when its answer could have shown it broken '
        "(a read of an acknowledged entry, of one in flight at a crash, of a deleted ledger; an "
        "add to a fenced ledger; a wrong key), counted by the crash plan before it. State "
        f"level: {_e(run.capabilities.state if run.capabilities else 'none')}.</p>"
        f"{_promises_html(run)}</section>"
    )
    if failing:
        sections.append(
            '<section id="failures"><h2>Failures</h2>'
            + "".join(_failure_html(s) for s in failing)
            + "</section>"
        )
    sections.append(f'<section id="scenarios"><h2>Scenarios</h2>{_scenarios_html(run)}</section>')
    title = f"bkref conform: {word} ({run.adapter})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<header class="verdict v-{word.lower().replace(" ", "-")}" id="verdict">'
        f"<h1>{_e(word)}</h1><p>{_e(verdict_sentence(run))}</p>{_jump_html(failing)}</header>"
        f"<main>{''.join(sections)}"
        f"<footer>Written by bkref conform at "
        f"{_e(time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()))}. Replay a failure with "
        "<code>bkref check-trace</code> or <code>bkref explain</code> on its trace file; "
        "docs/conformance.md says how to read this page.</footer>"
        "</main></body></html>\n"
    )


def write_html(run: RunResult, path: str) -> None:
    """Write the run as one self-contained HTML page at ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(run))


def write_reports(run: RunResult, directory: str) -> list[str]:
    """Write ``junit.xml`` and ``report.html`` in ``directory`` (made if missing); return
    their paths."""
    os.makedirs(directory, exist_ok=True)
    junit = os.path.join(directory, JUNIT_NAME)
    page = os.path.join(directory, HTML_NAME)
    write_junit(run, junit)
    write_html(run, page)
    return [junit, page]
