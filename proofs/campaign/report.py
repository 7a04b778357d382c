"""The reports of a verification campaign: the final verdict on the terminal, one HTML page
for a person, and a JSON summary for CI (docs/campaign.md, "Verdict and exit status").

Spec pages: spec/properties.md (the properties every step is judged against),
proofs/campaign/coverage.py (the cells and probes the coverage sections show).

Why it is shaped so:

- Every report reads a :class:`proofs.campaign.summary.CampaignSummary` and nothing else: no
  Spark, no dataset, no file of the run is opened here. So each report is tested on
  hand-built summaries, and the three cannot disagree about what happened. The one thing
  computed here that the summary does not hold is the telling of each failing row's shrunk
  trace (``bkref explain``'s, from the row's own trace text).
- The verdict word is the exit status's (:func:`verdict_word`): PASS, FAIL, ERROR (the
  checker broke, which says nothing about the bookie, or rows ran code other than the
  campaign's), or COVERAGE SHORT (every scenario passed but the campaign did not reach every
  probe it is held to). Rows of more than one commit are said loudly in every report.
- Everything a row carries is untrusted: a bookie's messages, traces and command strings.
  The page escapes every string it shows and, as the conformance report does
  (proofs/conform/report.py :func:`clean`), shows control characters as ``\\xNN``; the
  terminal and the JSON get the same :func:`clean` text, so a row cannot colour or rewrite
  the terminal it is printed on.
- The page is one file with its style inline, no script, no image but inline SVG drawn here,
  and no address outside itself: it is opened from a CI artifact with no network. Its
  sections have stable ids (verdict, settings, throughput, passes, probes, promises, coverage,
  failures, scenarios) that tests and links rely on. Its look is the conformance report's
  (the same style sheet, extended).
- A trace that cannot be read, or told, is said so on the page: a report must be written at
  the end of an hour-long campaign whatever one row holds.

Not built: a report of a campaign still running (proofs/campaign/progress.py draws the live
line); comparing two campaigns; plots of anything but throughput over time.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import textwrap
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from proofs.campaign.coverage import PLAN_ORDER, collapsed, expected_cells
from proofs.campaign.summary import CampaignSummary, PassReport, Totals, failure_trace_name
from proofs.conform.report import _CSS as _CONFORM_CSS
from proofs.conform.report import CHECK_TITLES, _e, clean
from proofs.conform.results import CHECKS
from proofs.conform.runner import tell
from proofs.harness.promises import PROMISES, promise_counts
from spec.errors import TraceError
from spec.trace import read_trace

#: The file names under a campaign's output directory the reports point at.
HTML_NAME = "report.html"
DATASET_NAME = "scenarios"
#: Failing scenarios the terminal lists (the page shows every one the summary kept).
TERMINAL_FAILURES = 10
#: Expected cells never reached the terminal names (the page shows every one).
TERMINAL_CELLS = 12
#: The verdict word of each exit status (proofs/campaign/summary.py EXIT_*).
VERDICT_WORDS = {0: "PASS", 1: "FAIL", 2: "ERROR", 3: "COVERAGE SHORT"}
#: Where a crash met an operation, in the order of the matrix's column groups.
POINT_TITLES = {"inside": "crash inside the operation", "after": "crash right after it"}

_STEP_LINE = re.compile(r"^step (\d+)\b")


# --- what every report says ----------------------------------------------------------------


def verdict_word(summary: CampaignSummary) -> str:
    """PASS, FAIL, ERROR or COVERAGE SHORT, from the campaign's exit status."""
    return VERDICT_WORDS[summary.exit_code]


def problem_sentence(summary: CampaignSummary) -> str:
    """Why the verdict is not PASS, in one sentence; empty for a pass."""
    t = summary.all.totals
    parts = []
    if t.failed:
        extra = f", {t.errors:,} could not be judged" if t.errors else ""
        parts.append(f"{t.failed:,} of {_n(t.scenarios, 'scenario')} failed{extra}")
    elif t.errors:
        parts.append(
            f"{t.errors:,} of {_n(t.scenarios, 'scenario')} could not be judged "
            "(the checker broke: those rows say nothing about the bookie)"
        )
    foreign = summary.foreign_commits
    if foreign:
        parts.append(
            f"rows ran other code than the campaign's ({clean(summary.commit)}): "
            + ", ".join(clean(c) for c in foreign)
        )
    if parts:
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "."
    if not summary.coverage_met:
        missed = len(summary.missed_probes)
        return f"Every scenario passed, but {missed} of {_n(len(summary.probes), 'probe')} missed."
    return ""


def figures(summary: CampaignSummary) -> str:
    """The campaign's figures, where and how long it ran (no full stop)."""
    t = summary.all.totals
    return (
        f"{_n(t.scenarios, 'scenario')}, {_n(t.steps, 'step')}, "
        f"{_n(t.crash_states, 'crash state')} recovered and judged, "
        f"{_n(t.adds_acked, 'acknowledged add')} checked, on {clean(summary.settings.master)} "
        f"({_n(summary.cores, 'core')}) in {summary.wall_seconds:.1f} s"
    )


#: What every step of every scenario is held to (the checks of proofs/conform/results.py).
CHECKED = (
    "Every step was judged against the model (every answer, ack and state it allows) and the "
    "properties: durability of acknowledged adds through every crash, fence durability, auth, "
    "no resurrection of deleted ledgers, and forward progress."
)


def per_s(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def failures_total(summary: CampaignSummary) -> int:
    """Rows that did not pass (the summary keeps the first of them, the dataset all)."""
    t = summary.all.totals
    return t.failed + t.errors


def commits(summary: CampaignSummary) -> list[str]:
    """The code the rows ran, and the driver's: more than one means rows of different
    code were mixed, and a replay at one commit may not reproduce another's row."""
    return sorted({*summary.all.commits, summary.commit} - {""})


def trace_path(summary: CampaignSummary, record: Mapping[str, Any]) -> str:
    """Where the campaign wrote a failing row's shrunk trace."""
    return os.path.join(summary.settings.out_dir, failure_trace_name(record))


def trace_commands(summary: CampaignSummary, record: Mapping[str, Any]) -> list[str]:
    """The commands that check and tell a failing row's trace against the model."""
    path = trace_path(summary, record)
    return [shlex.join(["bkref", "check-trace", path]), shlex.join(["bkref", "explain", path])]


def out_path(summary: CampaignSummary, name: str) -> str:
    return os.path.join(summary.settings.out_dir, name)


def cells_reached(summary: CampaignSummary) -> tuple[int, int]:
    """(expected cells reached, expected cells)."""
    expected = len(expected_cells())
    return expected - len(summary.missed_cells), expected


def told(record: Mapping[str, Any]) -> tuple[list[str], str]:
    """A failing row's trace told step by step (``bkref explain``'s lines), and, when it has
    none or it cannot be read or told, why not."""
    text = record.get("trace")
    if not text:
        return [], "The row carries no trace."
    name = failure_trace_name(record)
    try:
        trace = read_trace(str(text).splitlines(), name)
    except TraceError as exc:
        return [], f"The trace cannot be read: {exc}"
    try:
        return tell(trace), ""
    except Exception as exc:  # a report is written whatever one row holds
        return [], f"The trace cannot be told: {type(exc).__name__}: {exc}"


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _first_line(text: object) -> str:
    lines = str(text or "").splitlines()
    return lines[0] if lines else ""


def _failure_title(record: Mapping[str, Any]) -> str:
    kind = record.get("failure_kind") or "no kind recorded"
    return f"pass {record['pass_number']}, scenario {record['index']}: {record['verdict']} ({kind})"


# --- the terminal ---------------------------------------------------------------------------


def terminal_summary(summary: CampaignSummary) -> str:
    """The final verdict ``bkref campaign`` prints: the verdict and the figures, what was
    checked, each pass, the probes and cells, the failing scenarios with the commands that
    replay them, and where the page and the dataset are."""
    problem = problem_sentence(summary)
    lines = [
        f"bkref campaign: {verdict_word(summary)}. "
        + (f"{problem} " if problem else "")
        + f"{figures(summary)}."
    ]
    lines += _commits_lines(summary)
    lines += _settings_lines(summary)
    lines.append("  checked at every step, through every crash:")
    lines += [f"    {check:<13} {CHECK_TITLES[check]}" for check in CHECKS]
    lines += [_pass_line(one) for one in summary.passes]
    lines += _probe_lines(summary)
    lines += _cell_lines(summary)
    lines += _promise_lines(summary)
    lines += _failure_lines(summary)
    if summary.settings.out_dir:
        lines.append(f"  report: {clean(out_path(summary, HTML_NAME))}")
        lines.append(f"  dataset: {clean(out_path(summary, DATASET_NAME))}")
    return "\n".join(lines)


_OWN = " (the campaign's own)"


def _commits_lines(summary: CampaignSummary) -> list[str]:
    found = commits(summary)
    if len(found) <= 1:
        return []
    return [
        f"  WARNING: THE ROWS COME FROM {len(found)} DIFFERENT COMMITS: the scenarios did not "
        "all run the same code, and a replay at one commit may not reproduce a row of another:",
        *(f"    {clean(c)}{_OWN if c == summary.commit else ''}" for c in found),
    ]


def _settings_lines(summary: CampaignSummary) -> list[str]:
    s = summary.settings
    variant = f", variant {clean(s.variant)}" if s.variant else ""
    if s.manager != "single":
        variant += f", entry logs {clean(s.manager)}"
    lazy = "lazy disk" if s.lazy_disk else "no lazy disk"
    return [
        f"  seed {s.seed}, {_n(s.scenarios, 'scenario')} of {_n(s.steps, 'step')}, {lazy}"
        f"{variant}, commit {clean(summary.commit or 'unknown')}",
        f"  bookie: {clean(s.bookie)}",
    ]


def _pass_line(one: PassReport) -> str:
    t = one.aggregates.totals
    line = (
        f"  pass {one.number}: {_n(t.scenarios, 'scenario')} in {one.wall_seconds:.1f} s, "
        f"{per_s(t.steps, one.wall_seconds):,.0f} steps/s, "
        f"{per_s(t.crash_states, one.wall_seconds):,.0f} crash states/s"
    )
    if one.focus:
        line += f"; focus: {clean(one.focus)}"
    if one.number > 1 or one.aimed_probes or one.aimed_cells:
        line += (
            f"; closed {len(one.closed_probes)} of {len(one.aimed_probes)} missed probes and "
            f"{len(one.closed_cells)} of {len(one.aimed_cells)} missed cells"
        )
    return line


def _probe_lines(summary: CampaignSummary) -> list[str]:
    if not summary.settings.probes_apply:
        return ["  probes: not judged (an adapter's scenarios record none)"]
    probes = summary.probes
    met = sum(p.met for p in probes)
    lines = [f"  probes: {met} of {len(probes)} probes met"]
    lines += [
        f"    missed: {p.name}: {p.count:,} (minimum {p.minimum:,})" for p in probes if not p.met
    ]
    return lines


def _cell_lines(summary: CampaignSummary) -> list[str]:
    if not summary.settings.probes_apply:
        return ["  expected cells: not judged (an adapter's campaign)"]
    reached, expected = cells_reached(summary)
    lines = [f"  expected cells reached: {reached} of {expected}"]
    missed = summary.missed_cells
    if missed:
        shown = ", ".join(missed[:TERMINAL_CELLS])
        more = f", and {len(missed) - TERMINAL_CELLS} more" if len(missed) > TERMINAL_CELLS else ""
        lines += textwrap.wrap(
            f"never reached: {shown}{more}", 100, initial_indent="    ", subsequent_indent="      "
        )
    return lines


def _promise_lines(summary: CampaignSummary) -> list[str]:
    """The promises observed (proofs/harness/promises.py), one line each with its count
    after each plan, and the gaps: what no step could have shown broken."""
    counts = promise_counts(dict(summary.all.promises))
    plans = summary.promise_plans
    lines = ["  promises observed, by the crash before the step:"]
    for promise in PROMISES:
        shown = ", ".join(f"{plan} {counts[(promise, plan)]:,}" for plan in plans)
        lines.append(f"    {promise + ':':<13} {shown}")
    missing = summary.promise_gaps
    if missing:
        text = ", ".join(f"{promise} after {plan}" for promise, plan in missing)
        lines += textwrap.wrap(
            f"gaps (never observed, so not checked): {text}",
            100,
            initial_indent="    ",
            subsequent_indent="      ",
        )
    else:
        lines.append("    gaps: none; every promise was observed after every plan")
    return lines


def _failure_lines(summary: CampaignSummary) -> list[str]:
    kept = summary.all.failures
    total = failures_total(summary)
    if not total:
        return []
    shown = kept[:TERMINAL_FAILURES]
    first = f" (the first {len(shown)} here)" if total > len(shown) else ""
    lines = [f"  scenarios that did not pass: {total:,}{first}"]
    for record in shown:
        lines.append(f"    {_failure_title(record)}: {clean(_first_line(record.get('message')))}")
        lines.append(f"      replay: {clean(str(record.get('replay') or ''))}")
        if record.get("trace"):
            lines += [f"      trace: {clean(c)}" for c in trace_commands(summary, record)]
    if total > len(shown):
        lines.append(
            f"    and {total - len(shown):,} more: the page shows {len(kept)}, the dataset all"
        )
    return lines


# --- JSON -----------------------------------------------------------------------------------


def to_json(summary: CampaignSummary) -> dict[str, Any]:
    """The campaign as plain values for CI (``json.dumps`` takes it). Strings from rows are
    :func:`clean`'s text, as the other reports show them."""
    return {
        "verdict": verdict_word(summary),
        "scenario_verdict": summary.verdict,
        "exit_code": summary.exit_code,
        "coverage_met": summary.coverage_met,
        "settings": {
            k: clean(v) if isinstance(v, str) else v
            for k, v in attrs.asdict(summary.settings).items()
        },
        "totals": attrs.asdict(summary.all.totals),
        "passes": [_pass_json(one) for one in summary.passes],
        "probes_apply": summary.settings.probes_apply,
        "probes": [
            {"name": p.name, "count": p.count, "minimum": p.minimum, "met": p.met}
            for p in summary.probes
        ],
        "missed_probes": list(summary.missed_probes),
        "missed_cells": list(summary.missed_cells),
        "promises": dict(sorted(summary.all.promises.items())),
        "promise_gaps": [f"{promise}/{plan}" for promise, plan in summary.promise_gaps],
        "failures_total": failures_total(summary),
        "failures": [_failure_json(summary, r) for r in summary.all.failures],
        "commit": clean(summary.commit),
        "commits": [clean(c) for c in commits(summary)],
        "started_at": summary.started_at,
        "wall_seconds": summary.wall_seconds,
        "spark_start_seconds": summary.spark_start_seconds,
        "cores": summary.cores,
        "workers": [clean(w) for w in summary.all.workers],
        "bucket_seconds": summary.bucket_seconds,
        "timeline": [
            {"bucket": b, "scenarios": n, "steps": steps, "crash_states": crash_states}
            for b, (n, steps, crash_states) in sorted(summary.all.timeline.items())
        ],
        "report": out_path(summary, HTML_NAME),
        "dataset": out_path(summary, DATASET_NAME),
    }


def _pass_json(one: PassReport) -> dict[str, Any]:
    return {
        "number": one.number,
        "wall_seconds": one.wall_seconds,
        "focus": one.focus,
        "totals": attrs.asdict(one.aggregates.totals),
        "aimed_probes": list(one.aimed_probes),
        "aimed_cells": list(one.aimed_cells),
        "closed_probes": list(one.closed_probes),
        "closed_cells": list(one.closed_cells),
    }


def _failure_json(summary: CampaignSummary, record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "pass": record["pass_number"],
        "index": record["index"],
        "verdict": record["verdict"],
        "failure_kind": record.get("failure_kind"),
        "message": clean(str(record.get("message") or "")),
        "replay": clean(str(record.get("replay") or "")),
        "trace_file": trace_path(summary, record) if record.get("trace") else None,
    }


# --- SVG plots ------------------------------------------------------------------------------

#: The plot's size and margins, in SVG user units (pixels at 100%).
_W, _H = 540, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 62, 14, 22, 40


def nice_ticks(top: float, want: int = 5) -> list[float]:
    """Ticks 0, s, 2s, ... up to the first at or above ``top``, s a 1, 2 or 5 times a power
    of ten giving about ``want`` of them."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / want
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def seconds_text(value: float) -> str:
    """A duration for a person: "5.6 s", "12 s", "0.25 s" (issue 26: a bar's width was
    printed "5.59206 s")."""
    if value >= 10:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.1f}".rstrip("0").rstrip(".") + " s"
    return f"{value:.2g} s"


def short_number(value: float) -> str:
    """A tick label: 950, 1.5k, 12k, 3M, 0.05."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def rate_series(
    timeline: Mapping[int, tuple[int, int, int]], column: int, bucket_seconds: float
) -> list[float]:
    """Per bucket from 0 to the last one, ``column`` of the timeline (1 steps, 2 crash
    states) per second; a bucket in which no scenario finished is 0."""
    if not timeline:
        return []
    last = max(timeline)
    return [per_s(timeline.get(b, (0, 0, 0))[column], bucket_seconds) for b in range(last + 1)]


@attrs.frozen
class _Frame:
    """The plot area: seconds and values mapped to SVG coordinates."""

    x_max: float
    y_max: float
    width: float = _W - _LEFT - _RIGHT
    height: float = _H - _TOP - _BOTTOM

    def x(self, seconds: float) -> float:
        return _LEFT + seconds / self.x_max * self.width

    def y(self, value: float) -> float:
        return _TOP + self.height - value / self.y_max * self.height

    @property
    def bottom(self) -> float:
        return _TOP + self.height


def svg_plot(
    title: str,
    unit: str,
    values: Sequence[float],
    bucket_seconds: float,
    marks: Sequence[tuple[float, str]] = (),
    cls: str = "",
) -> str:
    """A bar chart of ``values`` (one a bucket of ``bucket_seconds``) over time, with
    labelled axes; ``marks`` are (seconds, label) drawn as dashed vertical lines."""
    head = (
        f'<svg class="plot {cls}" role="img" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{_e(title)}</title>'
    )
    if not values:
        return head + (
            f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">no scenario finished</text>'
            "</svg>"
        )
    x_ticks = nice_ticks(len(values) * bucket_seconds, 6)
    y_ticks = nice_ticks(max(values))
    frame = _Frame(x_ticks[-1], y_ticks[-1])
    return "".join(
        [
            head,
            *(_y_tick(frame, tick) for tick in y_ticks),
            *(_bar(frame, b, value, bucket_seconds, unit) for b, value in enumerate(values)),
            *(_mark(frame, seconds, label) for seconds, label in marks),
            *(_x_tick(frame, tick) for tick in x_ticks),
            _axes(frame, unit),
            "</svg>",
        ]
    )


def _y_tick(frame: _Frame, value: float) -> str:
    y = frame.y(value)
    return (
        f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + frame.width}" y1="{y:.1f}" y2="{y:.1f}"/>'
        f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
        f"{_e(short_number(value))}</text>"
    )


def _x_tick(frame: _Frame, seconds: float) -> str:
    x = frame.x(seconds)
    return (
        f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.bottom}" '
        f'y2="{frame.bottom + 4}"/><text class="tick" x="{x:.1f}" y="{frame.bottom + 17}" '
        f'text-anchor="middle">{_e(short_number(seconds))}</text>'
    )


def _bar(frame: _Frame, bucket: int, value: float, bucket_seconds: float, unit: str) -> str:
    """One bucket's bar, its figure in its tooltip (an SVG title: no script needed)."""
    start = bucket * bucket_seconds
    width = max(1.0, frame.x(bucket_seconds) - frame.x(0) - 1)
    when = f"{seconds_text(start)[:-2]}-{seconds_text(start + bucket_seconds)}"
    return (
        f'<rect class="bar" x="{frame.x(start):.1f}" y="{frame.y(value):.1f}" '
        f'width="{width:.1f}" height="{frame.bottom - frame.y(value):.1f}">'
        f"<title>{_e(when)}: {_e(f'{value:,.0f}')} {_e(unit)}</title></rect>"
    )


def _mark(frame: _Frame, seconds: float, label: str) -> str:
    x = frame.x(seconds)
    return (
        f'<line class="mark" x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{frame.bottom}"/>'
        f'<text class="mark" x="{x + 4:.1f}" y="{_TOP - 8}">{_e(label)}</text>'
    )


def _axes(frame: _Frame, unit: str) -> str:
    right = _LEFT + frame.width
    return (
        f'<line class="axis" x1="{_LEFT}" x2="{right}" y1="{frame.bottom}" y2="{frame.bottom}"/>'
        f'<line class="axis" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{frame.bottom}"/>'
        f'<text class="label" x="{_LEFT + frame.width / 2}" y="{_H - 4}" '
        'text-anchor="middle">seconds since the campaign started</text>'
        f'<text class="label" transform="translate(13 {_TOP + frame.height / 2}) rotate(-90)" '
        f'text-anchor="middle">{_e(unit)}</text>'
    )


def pass_marks(summary: CampaignSummary) -> list[tuple[float, str]]:
    """Where each pass after the first began finishing scenarios: (seconds, label)."""
    marks = []
    for one in summary.passes[1:]:
        if one.aggregates.timeline:
            first = min(one.aggregates.timeline)
            marks.append((first * summary.bucket_seconds, f"pass {one.number}"))
    return marks


# --- HTML -----------------------------------------------------------------------------------

_CSS = (
    _CONFORM_CSS
    + """
.v-error { background: #8a5a00; } .v-coverage-short { background: #9a4f00; }
p.warning { background: #fff4e0; border: 2px solid #b3261e; padding: 8px 12px;
  font-weight: 700; }
div.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; background: #fff; border: 1px solid #d5d9df; padding: 8px; }
figcaption { font-size: 13px; color: #4a5360; margin: 0 0 4px; font-weight: 600; }
svg.plot { display: block; font: 11px system-ui, sans-serif; }
svg.plot text { fill: #4a5360; } svg.plot text.label { font-size: 12px; fill: #1d232a; }
svg.plot line.grid { stroke: #e3e6ea; } svg.plot line.axis { stroke: #6a7380; }
svg.plot line.mark { stroke: #1d232a; stroke-dasharray: 4 3; }
svg.plot text.mark { fill: #1d232a; font-weight: 600; }
svg.steps rect.bar { fill: #2f6db5; } svg.crash-states rect.bar { fill: #7b4fb5; }
tr.missed td, td.missed { background: #ffd9a8; color: #7a3d00; font-weight: 700; }
td.wrap { word-break: break-word; max-width: 320px; }
table.matrix td.unreached { background: #ffd9a8; color: #7a3d00; font-weight: 700;
  outline: 1px dashed #c26a00; outline-offset: -3px; }
table.matrix td.zero { background: #fff; color: #9aa2ad; font-weight: 400; outline: none; }
.legend span.unreached { background: #ffd9a8; padding: 0 6px; outline: 1px dashed #c26a00; }
h4 { margin: 12px 0 4px; } .nowrap { white-space: nowrap; }
section#coverage h3 { margin-top: 22px; }
"""
)


def _row(cells: Iterable[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(cells) + "</tr>"


def _td(text: object, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{_e(text)}</td>"


def _num(value: float, digits: int = 0) -> str:
    return _td(f"{value:,.{digits}f}", "num")


def _th(*names: str) -> str:
    return "".join(
        f"<th class='num'>{_e(n[1:])}</th>" if n.startswith("#") else f"<th>{_e(n)}</th>"
        for n in names
    )


def _table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return (
        f"<table{attr}><thead><tr>{_th(*head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _facts(facts: Iterable[tuple[str, str]]) -> str:
    return (
        '<dl class="facts">'
        + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
        + "</dl>"
    )


def _settings_html(summary: CampaignSummary) -> str:
    s = summary.settings
    found = commits(summary)
    facts = [
        ("seed", str(s.seed)),
        ("scenarios asked", f"{s.scenarios:,} (both passes)"),
        ("steps per scenario", f"{s.steps:,}"),
        ("master", s.master),
        ("cores", str(summary.cores)),
        ("Python workers", str(len(summary.all.workers))),
        ("bookie", s.bookie),
        ("variant", s.variant or "none: bkref's own Bookie"),
        ("entry-log manager", s.manager),
        ("lazy disk", "yes" if s.lazy_disk else "no"),
        ("commit", summary.commit or "unknown"),
        ("commits of the rows", ", ".join(found) or "none recorded"),
        ("output directory", s.out_dir or "none"),
        ("dataset", out_path(summary, DATASET_NAME)),
        ("started", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(summary.started_at))),
        ("wall time", f"{summary.wall_seconds:.1f} s"),
        ("Spark start-up", f"{summary.spark_start_seconds:.1f} s"),
    ]
    warning = ""
    if len(found) > 1:
        warning = (
            f'<p class="warning">The rows come from {len(found)} different commits: the '
            "scenarios did not all run the same code, and a replay at one commit may not "
            "reproduce a row of another.</p>"
        )
    return warning + _facts(facts)


def _throughput_html(summary: CampaignSummary) -> str:
    timeline = summary.all.timeline
    width = summary.bucket_seconds
    marks = pass_marks(summary)
    t = summary.all.totals
    plots = [
        ("Trace steps judged per second", "steps/s", 1, "steps"),
        ("Crash states recovered and judged per second", "crash states/s", 2, "crash-states"),
    ]
    figures_html = "".join(
        f"<figure><figcaption>{_e(title)}</figcaption>"
        f"{svg_plot(title, unit, rate_series(timeline, column, width), width, marks, cls)}"
        "</figure>"
        for title, unit, column, cls in plots
    )
    return (
        f'<div class="plots">{figures_html}</div>'
        f'<p class="legend">Each bar: the scenarios that finished (run and shrinking) in '
        f"{seconds_text(width)}, by their steps and crash states. Over the whole run: "
        f"{per_s(t.steps, summary.wall_seconds):,.0f} steps/s and "
        f"{per_s(t.crash_states, summary.wall_seconds):,.0f} crash states/s.</p>"
    )


def _breakable(text: str) -> str:
    """``text`` escaped, with line breaks allowed after its commas and semicolons (a focus
    is one long word)."""
    return _e(text).replace(",", ",<wbr>").replace(";", ";<wbr>")


def _passes_html(summary: CampaignSummary) -> str:
    rows = []
    for one in summary.passes:
        t = one.aggregates.totals
        rows.append(
            _row(
                [
                    _td(one.number, "num"),
                    _num(t.scenarios),
                    _num(t.steps),
                    _num(t.crash_states),
                    _num(per_s(t.scenarios, one.wall_seconds), 1),
                    _num(one.wall_seconds, 1),
                    f'<td class="wrap">{_breakable(one.focus or "none")}</td>',
                    _td(f"{len(one.closed_probes)} of {len(one.aimed_probes)}", "num"),
                    _td(f"{len(one.closed_cells)} of {len(one.aimed_cells)}", "num"),
                ]
            )
        )
    head = ["#pass", "#scenarios", "#steps", "#crash states", "#scenarios/s", "#seconds"]
    head += ["focus", "#missed probes closed", "#missed cells closed"]
    return _table(head, rows)


def _probes_html(summary: CampaignSummary) -> str:
    if not summary.settings.probes_apply:
        return (
            '<p class="muted">Not judged: the probes are what the in-process workload records, '
            "and an adapter's scenarios record none.</p>"
        )
    probes = summary.probes
    rows = [
        _row(
            [_td(p.name), _num(p.count), _num(p.minimum), _td("met" if p.met else "MISSED")],
            "" if p.met else "missed",
        )
        for p in probes
    ]
    met = sum(p.met for p in probes)
    missed = f"; missed: {', '.join(summary.missed_probes)}" if met < len(probes) else ""
    return (
        f"<p>{met} of {len(probes)} probes met{_e(missed)}. A probe's minimum is its rate per "
        f"1,000 rules times the {summary.all.totals.rules:,} rules the campaign ran (at least "
        "1).</p>" + _table(["probe", "#count", "#minimum", "status"], rows)
    )


def _promises_html(summary: CampaignSummary) -> str:
    """The promises observed: a promise (row) after a plan (column), the gaps marked."""
    counts = promise_counts(dict(summary.all.promises))
    plans = summary.promise_plans
    missing = set(summary.promise_gaps)
    rows = [
        _row(
            [_td(promise)]
            + [
                _td("gap", "missed")
                if (promise, plan) in missing
                else _td("-")
                if (promise, plan) == ("in_flight", "none")  # no crash yet: nothing in flight
                else _num(counts[(promise, plan)])
                for plan in plans
            ]
        )
        for promise in PROMISES
    ]
    gaps_text = (
        f"{len(missing)} gap(s), never observed and so not checked: "
        + ", ".join(f"{promise} after {plan}" for promise, plan in summary.promise_gaps)
        if missing
        else "No gap: every promise was observed after every plan."
    )
    return (
        "<p>A step observes a promise when its answer could have shown it broken, counted "
        "under the plan of the crash before it (<code>none</code> before the first crash). "
        f"{_e(gaps_text)}</p>" + _table(["promise", *(f"#{plan}" for plan in plans)], rows)
    )


def _matrix_columns(cells: Mapping[str, int]) -> list[tuple[str, str]]:
    """(point, plan) of each column: inside and after, each under every plan of PLAN_ORDER,
    then any other plan the rows reached."""
    columns = []
    for point in POINT_TITLES:
        seen = {c.split("/")[2] for c in cells if c.split("/")[1] == point}
        plans = list(PLAN_ORDER) + sorted(seen - set(PLAN_ORDER))
        columns += [(point, plan) for plan in plans]
    return columns


def _matrix_rows(cells: Mapping[str, int]) -> list[str]:
    """The operations: those expected to be crashed inside, then any other a row reached."""
    expected = list(dict.fromkeys(c.split("/")[0] for c in expected_cells()))
    seen = {c.split("/")[0] for c in cells if c.split("/")[1] in POINT_TITLES}
    return expected + sorted(seen - set(expected))


def _matrix_html(summary: CampaignSummary) -> str:
    counts = collapsed(summary.all.cells)
    missed = set(summary.missed_cells)
    columns = _matrix_columns(counts)
    head1 = '<th rowspan="2">operation</th>' + "".join(
        f'<th colspan="{sum(1 for p, _ in columns if p == point)}">{_e(title)}</th>'
        for point, title in POINT_TITLES.items()
    )
    head2 = "".join(f"<th>{_e(plan).replace('_', '_<wbr>')}</th>" for _, plan in columns)
    body = []
    for op in _matrix_rows(counts):
        row = [f'<th class="op">{_e(op)}</th>']
        for point, plan in columns:
            cell = f"{op}/{point}/{plan}/*"
            n = counts.get(cell, 0)
            cls, shown = ("hit", f"{n:,}") if n else ("zero", "0")
            if cell in missed:
                cls, shown = "unreached", "never"
            title = f"{op}, {POINT_TITLES[point]}, plan {plan}: {n:,}"
            row.append(f'<td class="{cls}" title="{_e(title)}">{_e(shown)}</td>')
        body.append(_row(row))
    reached, expected = cells_reached(summary)
    judged = (
        f'<span class="unreached">never</span> marks an expected cell no scenario reached '
        f"({expected - reached} of {expected})."
        if summary.settings.probes_apply
        else "Expected cells are not judged for an adapter's campaign."
    )
    return (
        f"<p>Expected cells reached: {reached} of {expected}.</p>"
        if summary.settings.probes_apply
        else ""
    ) + (
        '<div class="scroll"><table class="matrix">'
        f"<thead><tr>{head1}</tr><tr>{head2}</tr></thead><tbody>{''.join(body)}</tbody>"
        f'</table></div><p class="legend">Each cell: how many crashes met the operation at '
        f"that point under that plan, whatever fault fired before. {judged}</p>"
    )


def _faults_html(summary: CampaignSummary) -> str:
    fired: dict[str, dict[str, int]] = {}
    for cell, count in summary.all.cells.items():
        op, point, _, fault = cell.split("/")
        if point == "none":
            fired.setdefault(op, {})
            fired[op][fault] = fired[op].get(fault, 0) + count
    if not fired:
        return '<p class="muted">No injected fault fired.</p>'
    kinds = sorted({k for by_kind in fired.values() for k in by_kind})
    rows = [
        _row([f'<th class="op">{_e(op)}</th>', *(_num(fired[op].get(k, 0)) for k in kinds)])
        for op in sorted(fired)
    ]
    return "<h3>Faults fired, by operation</h3>" + _table(["operation", *kinds], rows, "matrix")


def _told_html(lines: Sequence[str], failing_step: int | None) -> str:
    """The told trace as a list, one item per step (lines before the first step in an item
    of their own), one ``div.tl`` per line; the failing step is marked."""
    groups: list[tuple[int | None, list[str]]] = []
    for line in lines:
        match = _STEP_LINE.match(line)
        if match is not None or not groups:
            groups.append((int(match.group(1)) if match else None, []))
        groups[-1][1].append(line)
    items = []
    for step, group in groups:
        cls = "preamble" if step is None else "failing" if step == failing_step else ""
        body = "".join(
            f'<div class="tl{" head" if i == 0 and step is not None else ""}">{_e(line)}</div>'
            for i, line in enumerate(group)
        )
        attr = f' class="{cls}"' if cls else ""
        items.append(f"<li{attr}>{body}</li>")
    return f'<ol class="told">{"".join(items)}</ol>'


def _or_none(value: object) -> str:
    return "none" if value is None else str(value)


def _shrunk_note(record: Mapping[str, Any]) -> str:
    """What the run said before it was shrunk, when that differs from the shrunk trace's
    message (other step numbers, often a longer way to the same problem)."""
    first = record.get("message_before_shrink")
    if not first or first == record.get("message"):
        return ""
    return (
        f'<p class="muted">Before shrinking ({_e(record.get("steps_before_shrink"))} steps): '
        f"{_e(first)}</p>"
    )


def _failure_html(summary: CampaignSummary, record: Mapping[str, Any]) -> str:
    ident = f"failure-{record['pass_number']}-{record['index']}"
    facts = [
        ("verdict", str(record["verdict"])),
        ("kind", str(record.get("failure_kind") or "none recorded")),
        ("failing step of the trace", _or_none(record.get("failing_step"))),
        ("steps of the first run", _or_none(record.get("steps_before_shrink"))),
        ("bookie", str(record.get("bookie", ""))),
        ("commit", str(record.get("commit", ""))),
        ("worker", str(record.get("worker", ""))),
        ("trace file", trace_path(summary, record) if record.get("trace") else "none"),
    ]
    kind = "error" if record["verdict"] == "error" else "fail"
    parts = [
        f'<article class="failure kind-{kind}" id="{_e(ident)}">',
        f"<h3>{_e(_failure_title(record))}</h3>",
        f'<p class="message">{_e(record.get("message") or "no message")}</p>',
        _shrunk_note(record),
        _facts(facts),
        "<h4>Run the scenario again, locally</h4>",
        f'<pre class="replay">{_e(record.get("replay") or "")}</pre>',
    ]
    lines, why_not = told(record)
    if record.get("trace"):
        parts.append("<h4>Check and tell the trace against the model</h4>")
        parts.append(
            f'<pre class="check">{_e(chr(10).join(trace_commands(summary, record)))}</pre>'
        )
    shrunk = " (shrunk)" if record.get("shrink_seconds") else ""
    parts.append(f"<h4>The trace{shrunk}, step by step</h4>")
    if lines:
        parts.append(_told_html(lines, record.get("failing_step")))
    else:
        parts.append(f'<p class="muted untold">{_e(why_not)}</p>')
    parts.append("</article>")
    return "".join(parts)


def _failures_html(summary: CampaignSummary) -> str:
    kept = summary.all.failures
    total = failures_total(summary)
    if not total:
        return '<p class="muted">No scenario failed.</p>'
    note = (
        f"<p>{total:,} scenarios did not pass; the first {len(kept)} are shown here, the "
        f"dataset ({_e(out_path(summary, DATASET_NAME))}) holds them all.</p>"
        if total > len(kept)
        else ""
    )
    return note + "".join(_failure_html(summary, r) for r in kept)


_TOTALS_HEAD = [
    "", "#scenarios", "#passed", "#failed", "#errors", "#steps", "#rules", "#crashes",
    "#crash states", "#restarts", "#acknowledged adds", "#reads", "#run seconds",
    "#shrink seconds",
]  # fmt: skip


def _totals_row(label: str, t: Totals, cls: str = "") -> str:
    counts = [t.scenarios, t.passed, t.failed, t.errors, t.steps, t.rules, t.crashes]
    counts += [t.crash_states, t.restarts, t.adds_acked, t.reads]
    cells = [f'<th class="nowrap">{_e(label)}</th>', *(_num(n) for n in counts)]
    cells += [_num(t.seconds, 1), _num(t.shrink_seconds, 1)]
    return _row(cells, cls)


def _scenarios_html(summary: CampaignSummary) -> str:
    rows = [_totals_row(f"pass {one.number}", one.aggregates.totals) for one in summary.passes]
    rows.append(_totals_row("all", summary.all.totals, "total"))
    return '<div class="scroll">' + _table(_TOTALS_HEAD, rows) + "</div>"


def _jump_html(summary: CampaignSummary) -> str:
    """Links from the verdict to the first failures."""
    kept = summary.all.failures[:TERMINAL_FAILURES]
    if not kept:
        return ""
    links = ", ".join(
        f'<a href="#failure-{_e(r["pass_number"])}-{_e(r["index"])}">'
        f"pass {_e(r['pass_number'])} scenario {_e(r['index'])}</a>"
        for r in kept
    )
    return f'<p class="jump">Failures: {links}</p>'


def render_html(summary: CampaignSummary) -> str:
    """The campaign as one self-contained HTML page."""
    word = verdict_word(summary)
    problem = problem_sentence(summary)
    problem_html = f'<p class="problem">{_e(problem)}</p>' if problem else ""
    sections = [
        ("settings", "Settings", _settings_html(summary)),
        ("throughput", "Throughput", _throughput_html(summary)),
        ("passes", "Passes", _passes_html(summary)),
        ("probes", "Probes", _probes_html(summary)),
        ("promises", "Promises observed", _promises_html(summary)),
        (
            "coverage",
            "Coverage: operation &times; crash point &times; plan",
            _matrix_html(summary) + _faults_html(summary),
        ),
        ("failures", "Failures", _failures_html(summary)),
        ("scenarios", "Scenarios", _scenarios_html(summary)),
    ]
    body = "".join(
        f'<section id="{ident}"><h2>{title}</h2>{content}</section>'
        for ident, title, content in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(f'bkref campaign: {word}')}</title><style>{_CSS}</style></head><body>"
        f'<header class="verdict v-{word.lower().replace(" ", "-")}" id="verdict">'
        f"<h1>{_e(word)}</h1>{problem_html}"
        f'<p class="checked">{_e(figures(summary))}. {_e(CHECKED)}</p>'
        f"{_jump_html(summary)}</header>"
        f"<main>{body}<footer>Written by bkref campaign at "
        f"{_e(time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()))}. Run a failing scenario "
        "again with its <code>bkref replay</code> command; check or tell its trace with "
        "<code>bkref check-trace</code> or <code>bkref explain</code>.</footer>"
        "</main></body></html>\n"
    )


def write_html(summary: CampaignSummary, path: str) -> None:
    """Write the campaign's page at ``path`` (its directory made if missing), whole or not
    at all: written beside it, then renamed over it."""
    page = render_html(summary)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(partial, path)
