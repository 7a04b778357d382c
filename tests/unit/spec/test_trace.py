"""The trace codec (spec/trace.py) against its page (spec/trace.md).

- the page's tables equal the code (ops and their fields, field types, crash plans, results'
  error codes, header and state fields), and its worked example reads, checks out, and is
  exactly what the writer writes;
- round trip: ``read_trace(write_trace(t)) == t`` for generated well-formed traces;
- the reader is total: arbitrary text, and arbitrary mutations of a valid trace, either read
  or raise TraceError, never anything else;
- each kind of malformed line is refused with a message naming the line and the problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.crash import CrashPlan, KeepPrefix, KeepSubset, LoseUnsynced, TornSectors, TornWrite
from spec.errors import TraceError
from spec.operations import (
    ADVANCE_CLOCK_MAX_S,
    CRASHED,
    DATA_AIMS,
    DISK_FULL_PLACES,
    ERROR_CODES,
    FAULT_AIMS,
    FAULT_OPS,
    FILE_KINDS,
    OK,
    OPERATIONS,
    PENDING,
    UNKNOWN_FAULT,
    Add,
    AdvanceClock,
    Checkpoint,
    Completion,
    Crash,
    Delete,
    DiskFull,
    DiskWritable,
    FailFsync,
    FailRead,
    FailWrite,
    Fence,
    FiredFault,
    JournalForce,
    Operation,
    Read,
    Restart,
    Result,
    Rotate,
    Shutdown,
    WriteClose,
    failed,
)
from spec.state import LOG_STATES, AbstractState, LedgerView, LogView, MapView
from spec.trace import (
    FIELD_DECODERS,
    ID_MAX,
    LOG_ID_MAX,
    OPTIONAL_STATE_FIELDS,
    PLAN_KINDS,
    STATE_FIELDS,
    Step,
    Trace,
    TraceHeader,
    encode_header,
    encode_step,
    plan_to_json,
    read_trace,
    read_trace_bytes,
    state_from_json,
    state_to_json,
    write_trace,
)
from tests.paths import ROOT
from tests.unit.format_page import table_rows

PAGE = ROOT / "spec" / "trace.md"

# --- the page --------------------------------------------------------------------------------


def _section(title: str, level: str = "##") -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n{level} {title}\n")
    end = text.find("\n#", start + 1)
    return text[start : end if end != -1 else len(text)]


def _names(cell: str) -> list[str]:
    return [name.strip().strip("`") for name in cell.split(",") if name.strip()]


def _example() -> str:
    match = re.search(r"```jsonl\n(.*?)```", _section("Worked example"), re.DOTALL)
    assert match is not None, "spec/trace.md has no ```jsonl block in its worked example"
    return match.group(1)


def test_page_op_table_equals_the_operations() -> None:
    rows = table_rows(_section("Operations", "###"))
    assert [row[0] for row in rows] == list(OPERATIONS)
    for row in rows:
        expected = [field.name for field in attrs.fields(OPERATIONS[row[0]])]
        assert _names(row[1]) == expected, row[0]


def test_page_field_types_cover_every_op_field() -> None:
    rows = table_rows(_section("Field types", "###"))
    assert [row[0] for row in rows] == list(FIELD_DECODERS)
    used = {field.name for cls in OPERATIONS.values() for field in attrs.fields(cls)}
    assert used == set(FIELD_DECODERS)


def test_page_crash_plans_equal_the_codec() -> None:
    rows = table_rows(_section("Crash plans", "###"))
    assert [row[0] for row in rows] == list(PLAN_KINDS)
    for row in rows:
        expected = [field.name for field in attrs.fields(PLAN_KINDS[row[0]])]
        assert _names(row[1]) == expected, row[0]


def test_page_result_error_codes_and_state_fields_equal_the_code() -> None:
    results = _section("Results", "###")
    listed = re.search(r"error code of spec/adapter.md: (.*?) \|", results)
    assert listed is not None
    assert _names(listed.group(1)) == list(ERROR_CODES)
    rows = [row[0] for row in table_rows(_section("State", "###"))]
    assert rows == [*STATE_FIELDS, *OPTIONAL_STATE_FIELDS]
    header_fields = [row[0] for row in table_rows(_section("Header"))]
    assert header_fields == list(json.loads(encode_header(TraceHeader((), "x"))))
    for state in LOG_STATES:
        assert f"`{state}`" in _section("State", "###"), state


def test_worked_example_reads_and_is_what_the_writer_writes() -> None:
    text = _example()
    trace = read_trace(text, "spec/trace.md")
    assert write_trace(trace) == text
    steps = trace.steps
    assert dict(trace.header.config)["logSizeLimit"] == "2048"
    assert [s.op.name for s in steps] == [
        "add", "add", "journal_force", "read", "add", "crash", "restart", "read", "read"
    ]  # fmt: skip
    assert steps[0].result == PENDING
    assert steps[2].completed == (Completion(0), Completion(1))
    assert steps[3].result == Result(data=b"world")
    assert steps[4].result == PENDING
    assert all(c.step != 4 for s in steps for c in s.completed), "step 4 is never acked"
    assert steps[5].op == Crash(KeepPrefix(1))
    assert steps[6].result.replayed == 3
    assert steps[7].result == failed("no_entry")
    assert steps[8].result == Result(data=b"hello")
    state = steps[2].state
    assert state is not None
    assert state.log(0) == LogView(0, "active", ((7, 50),))
    assert state.journal_mark >= state.last_mark == (0, 0)


# --- strategies ------------------------------------------------------------------------------

ids = st.integers(0, 3) | st.integers(0, ID_MAX)
log_ids = st.integers(0, 3) | st.integers(0, LOG_ID_MAX)
keys = st.binary(max_size=6)
datas = st.binary(max_size=12)

plans: st.SearchStrategy[CrashPlan] = st.one_of(
    st.just(LoseUnsynced()),
    st.builds(KeepPrefix, ids),
    st.builds(TornWrite, ids, ids),
    st.builds(TornSectors, ids, st.frozensets(ids, max_size=4), ids),
    st.builds(KeepSubset, st.frozensets(ids, max_size=4)),
)


def operations(
    ledgers: st.SearchStrategy[int] = ids,
    entries: st.SearchStrategy[int] = ids,
    keys: st.SearchStrategy[bytes] = keys,
    datas: st.SearchStrategy[bytes] = datas,
) -> st.SearchStrategy[Operation]:
    """Every op, with its fields drawn from the given strategies."""
    simple = [Checkpoint(), JournalForce(), Rotate(), Restart(), Shutdown(), DiskWritable()]
    return st.one_of(
        st.builds(Add, ledgers, entries, keys, datas),
        st.builds(Read, ledgers, entries),
        st.builds(Fence, ledgers, keys),
        st.builds(WriteClose, ledgers, keys),
        st.builds(Delete, ledgers),
        st.builds(Crash, plans),
        st.sampled_from(simple),
        st.sampled_from(DISK_FULL_PLACES).map(DiskFull),
        st.integers(1, ADVANCE_CLOCK_MAX_S).map(AdvanceClock),
        st.sampled_from(FAULT_AIMS).map(FailFsync),
        st.sampled_from(DATA_AIMS).flatmap(
            lambda aim: st.sampled_from((FailWrite(aim), FailRead(aim)))
        ),
    )


#: Faults a step may carry (a trace never holds the unknown one: older versions only).
fired_faults = st.lists(
    st.builds(FiredFault, st.sampled_from(FAULT_OPS[:-1]), st.sampled_from(FILE_KINDS)),
    max_size=2,
    unique=True,
).map(tuple)


def results_for(
    op: Operation, datas: st.SearchStrategy[bytes] = datas
) -> st.SearchStrategy[Result]:
    """The results ``op`` may have (spec/trace.md, "Results")."""
    choices: list[st.SearchStrategy[Result]] = [
        st.sampled_from(ERROR_CODES).map(failed),
        st.just(CRASHED),
    ]
    if op.name == "read":
        choices.append(datas.map(lambda data: Result(data=data)))
    elif op.name == "restart":
        choices.append(st.builds(Result, replayed=st.none() | ids))
    else:
        choices.append(st.just(OK))
    if op.name in ("add", "fence"):
        choices.append(st.just(PENDING))
    return st.one_of(choices)


def _unique_pairs(values: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    pairs = st.lists(st.tuples(values, ids), max_size=3, unique_by=lambda pair: pair[0])
    return pairs.map(tuple)


log_views = st.builds(LogView, log_ids, st.sampled_from(LOG_STATES), _unique_pairs(ids))
ledger_views = st.builds(LedgerView, ids, st.none() | ids, st.booleans())
map_views = st.one_of(
    st.builds(MapView, log_ids, st.just(False), st.none()),
    st.builds(
        MapView,
        log_ids,
        st.just(True),
        st.none() | _unique_pairs(ids).map(lambda pairs: tuple(sorted(pairs))),
    ),
)
states: st.SearchStrategy[AbstractState] = st.builds(
    AbstractState,
    entry_logs=st.lists(log_views, max_size=3, unique_by=lambda v: v.log_id).map(tuple),
    least_unflushed_log_id=log_ids,
    last_mark=st.tuples(ids, ids),
    journal_mark=st.tuples(ids, ids),
    current_log_id=st.none() | log_ids,
    ledgers=st.lists(ledger_views, max_size=3, unique_by=lambda v: v.ledger_id).map(tuple),
    deleted_ledgers=st.lists(ids, max_size=3, unique=True).map(tuple),
    durable_last_mark=st.none() | st.tuples(ids, ids),
    ledgers_maps=st.none()
    | st.lists(map_views, max_size=3, unique_by=lambda v: v.log_id).map(tuple),
)

optional_states = st.none() | states


@st.composite
def histories(
    draw: st.DrawFn,
    ops: st.SearchStrategy[Operation] | None = None,
    read_datas: st.SearchStrategy[bytes] = datas,
    state_values: st.SearchStrategy[AbstractState | None] = optional_states,
    max_steps: int = 10,
) -> tuple[Step, ...]:
    """Well-formed histories: steps numbered in order, results fit their ops, and every
    completion names an earlier pending add or fence, once. Not necessarily meaningful."""
    ops = operations() if ops is None else ops
    pending: list[int] = []
    steps: list[Step] = []
    for index in range(draw(st.integers(0, max_steps))):
        op = draw(ops)
        result = draw(results_for(op, read_datas))
        completed: list[Completion] = []
        if pending:
            for target in draw(st.lists(st.sampled_from(pending), unique=True, max_size=3)):
                pending.remove(target)
                completed.append(Completion(target, draw(st.none() | st.sampled_from(ERROR_CODES))))
        if result.pending:
            pending.append(index)
        steps.append(
            Step(index, op, result, tuple(completed), draw(state_values), draw(fired_faults))
        )
    return tuple(steps)


headers = st.builds(
    TraceHeader,
    config=st.lists(
        st.tuples(st.text(max_size=8), st.text(max_size=8)),
        max_size=3,
        unique_by=lambda pair: pair[0],
    ).map(tuple),
    source=st.text(max_size=12),
)
traces = st.builds(Trace, headers, histories(max_steps=6))


# --- round trip ------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(traces)
def test_round_trip(trace: Trace) -> None:
    _check_round_trip(trace)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(traces)
def test_round_trip_deep(trace: Trace) -> None:
    _check_round_trip(trace)


def _check_round_trip(trace: Trace) -> None:
    text = write_trace(trace)
    assert text.endswith("\n")
    assert text.isascii()
    assert read_trace(text, "t") == trace
    assert read_trace(text.splitlines(keepends=True), "t") == trace
    assert read_trace_bytes(text.encode("utf-8"), "t") == trace


@settings(max_examples=60, deadline=None)
@given(states)
def test_state_json_round_trip(state: AbstractState) -> None:
    obj = state_to_json(state)
    present = {
        "durable_last_mark": state.durable_last_mark is not None,
        "ledgers_maps": state.ledgers_maps is not None,
    }
    assert list(present) == list(OPTIONAL_STATE_FIELDS)
    optional = [name for name in OPTIONAL_STATE_FIELDS if present[name]]
    assert list(obj) == [*STATE_FIELDS, *optional]
    assert state_from_json(json.loads(json.dumps(obj)), "inspect") == state


# --- the reader is total ---------------------------------------------------------------------


def _read_or_trace_error(text: str) -> None:
    try:
        trace = read_trace(text, "fuzz")
    except TraceError as exc:
        assert str(exc).startswith("fuzz"), exc
    else:
        assert isinstance(trace, Trace)


@settings(max_examples=100, deadline=None)
@given(st.text() | st.text(alphabet='{}[]":,0123456789-.eEtrufalsn \n\r\\'))
def test_arbitrary_text_reads_or_raises_trace_error(text: str) -> None:
    _read_or_trace_error(text)
    _read_or_trace_error('{"bkref_trace": 1, "source": "", "config": {}}\n' + text)


@settings(max_examples=100, deadline=None)
@given(st.binary())
def test_arbitrary_bytes_read_or_raise_trace_error(data: bytes) -> None:
    try:
        read_trace_bytes(data, "fuzz")
    except TraceError as exc:
        assert str(exc).startswith("fuzz"), exc


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False),
    st.text(max_size=6),
    st.sampled_from(["", "zz", "0g", "a=", "YQ==", "c0ffee", "add", "keep_subset", "io_error"]),
    # Fresh objects each time (st.just would hand out one shared object, which a later
    # mutation would change under Hypothesis: a flaky strategy).
    st.builds(list),
    st.builds(dict),
    st.builds(lambda: [1, 2]),
    st.builds(lambda: [[1, 2], [1, 3]]),
    st.builds(lambda: {"journal_id": 1, "offset": -1}),
)


def _containers(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((value, key))
            _containers(item, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.append((value, index))
            _containers(item, out)
    return out


@st.composite
def mutated_traces(draw: st.DrawFn) -> str:
    """A valid trace with one to three mutations: of JSON values and fields first, then of
    whole lines and of the text."""
    documents = [json.loads(line) for line in write_trace(draw(traces)).splitlines()]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(documents) - 1))
        container, key = draw(st.sampled_from(_containers(documents[at], [])))
        kind = draw(st.sampled_from(["value", "drop_key", "add_key"]))
        if kind == "value":
            container[key] = draw(JSON_VALUES)
        elif kind == "drop_key" and isinstance(container, dict):
            del container[key]
        elif kind == "add_key" and isinstance(container, dict):
            container[draw(st.sampled_from(["extra", "data", "ok", "error", "step", "plan"]))] = 1
    lines = [json.dumps(document) for document in documents]
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(lines) - 1))
        other = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["dup", "drop", "swap", "text"]))
        if action == "dup":
            lines.insert(at, lines[other])
        elif action == "drop" and len(lines) > 1:
            del lines[at]
        elif action == "swap":
            lines[at], lines[other] = lines[other], lines[at]
        else:
            start = draw(st.integers(0, len(lines[at])))
            end = draw(st.integers(start, min(len(lines[at]), start + 4)))
            lines[at] = lines[at][:start] + draw(st.text(max_size=3)) + lines[at][end:]
    return "\n".join(lines)


@settings(max_examples=100, deadline=None)
@given(mutated_traces())
def test_mutated_traces_read_or_raise_trace_error(text: str) -> None:
    _read_or_trace_error(text)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None)
@given(mutated_traces())
def test_mutated_traces_read_or_raise_trace_error_deep(text: str) -> None:
    _read_or_trace_error(text)


# --- malformed lines -------------------------------------------------------------------------

HEADER = '{"bkref_trace": 1, "source": "test", "config": {"logSizeLimit": "2048"}}'
ADD0 = '{"step": 0, "op": "add", "ledger": 1, "entry": 0, "key": "6b6579", "data": "aGk=", '


def _error(*lines: str, name: str = "run.jsonl") -> str:
    with pytest.raises(TraceError) as info:
        read_trace(list(lines), name)
    return str(info.value)


def test_completion_of_a_step_that_was_not_pending_names_the_line() -> None:
    lines = [HEADER, ADD0 + '"result": {"pending": true}}']
    lines += ['{"step": 1, "op": "checkpoint", "result": {"ok": true}}'] * 4
    lines[2:] = [line.replace('"step": 1', f'"step": {i}') for i, line in enumerate(lines[2:], 1)]
    lines.append(
        '{"step": 5, "op": "journal_force", "result": {"ok": true}, '
        '"completed": [{"step": 9, "ok": true}]}'
    )
    assert _error(*lines) == (
        "run.jsonl line 7: step 5: completed names step 9, which is not an earlier pending "
        "add or fence"
    )


def test_a_completion_completes_once_and_only_a_pending_step() -> None:
    pending = ADD0 + '"result": {"pending": true}}'
    force = '{{"step": {}, "op": "journal_force", "result": {{"ok": true}}, "completed": {}}}'
    once = force.format(1, '[{"step": 0, "ok": true}]')
    assert read_trace([HEADER, pending, once]).steps[1].completed == (Completion(0),)
    twice = force.format(2, '[{"step": 0, "ok": false, "error": "io_error"}]')
    assert "completed at step 1" in _error(HEADER, pending, once, twice)
    same_line = force.format(1, '[{"step": 0, "ok": true}, {"step": 0, "ok": true}]')
    assert "again" in _error(HEADER, pending, same_line)
    itself = ADD0 + '"result": {"pending": true}, "completed": [{"step": 0, "ok": true}]}'
    assert "not an earlier pending" in _error(HEADER, itself)
    not_pending = ADD0 + '"result": {"ok": true}}'
    assert "not an earlier pending" in _error(HEADER, not_pending, once)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"step": 1, "op": "rotate", "result": {"ok": true}}', "expected step 0, got step 1"),
        ('{"op": "rotate", "result": {"ok": true}}', "needs the field 'step'"),
        ('{"step": 0, "op": "rotate", "result": {"ok": true}, "x": 1}', "no field 'x'"),
        (
            '{"step": 0, "op": "read", "ledger": 1, "result": {"ok": true}}',
            "needs the field 'entry'",
        ),
        ('{"step": 0, "op": "grow", "result": {"ok": true}}', "'op' must be one of add, read"),
        ('{"step": 0, "op": "rotate"}', "needs the field 'result'"),
        ('{"step": true, "op": "rotate", "result": {"ok": true}}', "must be an integer"),
        ('{"step": 0.0, "op": "rotate", "result": {"ok": true}}', "must be an integer"),
        ('{"step": 0, "op": "delete", "ledger": -1, "result": {"ok": true}}', "from 0 to"),
        (
            '{"step": 0, "op": "delete", "ledger": 9223372036854775808, "result": {"ok": true}}',
            "from 0 to 9223372036854775807",
        ),
        (
            '{"step": 0, "op": "delete", "ledger": "1", "result": {"ok": true}}',
            "must be an integer",
        ),
        ('{"step": 0, "op": "fence", "ledger": 1, "key": "abc", "result": {"ok": true}}', "hex"),
        ('{"step": 0, "op": "fence", "ledger": 1, "key": "zz", "result": {"ok": true}}', "hex"),
        (ADD0.replace("aGk=", "aGk") + '"result": {"ok": true}}', "base64"),
        (ADD0.replace("aGk=", "aGl=") + '"result": {"ok": true}}', "canonical"),
        (ADD0.replace("aGk=", "aG k=") + '"result": {"ok": true}}', "base64"),
        (ADD0.replace("aGk=", "aGk=\\n") + '"result": {"ok": true}}', "base64"),
        ('{"step": 0, "op": "rotate", "result": {"ok": false, "error": "oops"}}', "error code"),
        ('{"step": 0, "op": "rotate", "result": {"ok": 1}}', "true or false"),
        ('{"step": 0, "op": "rotate", "result": {}}', "has no 'ok'"),
        ('{"step": 0, "op": "rotate", "result": {"ok": true, "crashed": true}}', "no field 'ok'"),
        ('{"step": 0, "op": "rotate", "result": {"crashed": 1}}', "must be true"),
        ('{"step": 0, "op": "rotate", "result": {"ok": false}}', "needs the field 'error'"),
        ('{"step": 0, "op": "rotate", "result": {"pending": true}}', "cannot be pending"),
        ('{"step": 0, "op": "rotate", "result": {"ok": true, "data": ""}}', "returns no data"),
        (
            '{"step": 0, "op": "read", "ledger": 1, "entry": 2, "result": {"ok": true}}',
            "must carry the data",
        ),
        ('{"step": 0, "op": "rotate", "result": {"ok": true, "replayed": 2}}', "only a restart"),
        ('{"step": 0, "op": "restart", "result": {"ok": true, "replayed": -2}}', "from 0 to"),
        ('{"step": 0, "op": "crash", "result": {"ok": true}}', "needs the field 'plan'"),
        ('{"step": 0, "op": "crash", "plan": {"kind": "eat"}, "result": {"ok": true}}', "kind"),
        (
            '{"step": 0, "op": "crash", "plan": {"kind": "keep_prefix"}, "result": {"ok": true}}',
            "needs the field 'count'",
        ),
        (
            '{"step": 0, "op": "crash", "plan": {"kind": "keep_subset", "indices": [2, 1]}, '
            '"result": {"ok": true}}',
            "strictly increasing",
        ),
        (
            '{"step": 0, "op": "crash", "plan": {"kind": "torn_sectors", "keep": 0, '
            '"sectors": [1, 1], "garbage": 0}, "result": {"ok": true}}',
            "plan.sectors must be strictly increasing",
        ),
        (
            '{"step": 0, "op": "crash", "plan": {"kind": "torn_sectors", "keep": 0, '
            '"sectors": []}, "result": {"ok": true}}',
            "needs the field 'garbage'",
        ),
        (
            '{"step": 0, "op": "crash", "plan": {"kind": "lose_unsynced", "count": 1}, '
            '"result": {"ok": true}}',
            "no field 'count'",
        ),
        ('{"step": 0, "op": "rotate", "result": {"ok": true}, "completed": {}}', "an array"),
        (
            '{"step": 0, "op": "rotate", "result": {"ok": true}, "state": {}}',
            "needs the field 'entry_logs'",
        ),
        ('{"step": 0, "step": 0, "op": "rotate", "result": {"ok": true}}', "more than once"),
        ('{"step": 0, "op": "rotate", "result": {"ok": true}, "x": NaN}', "NaN is not JSON"),
        ("[1, 2]", "must be a JSON object, got an array"),
        ("{", "not JSON"),
        ("[" * 100_000, "nested too deeply"),
        ('{"step": ' + "9" * 5000 + "}", "a number of 5000 characters"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_malformed_step_lines_are_refused_with_a_reason(line: str, expected: str) -> None:
    message = _error(HEADER, line)
    assert message.startswith("run.jsonl line 2: "), message
    assert expected in message, message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"bkref_trace": 5, "source": "", "config": {}}',
            "trace version 5 is not supported: this bkref reads version 1, 2, 3, 4 only",
        ),
        (
            '{"bkref_trace": 2, "source": "", "config": {}}',
            "the header of a version 2 trace needs the field 'profile'",
        ),
        (
            '{"bkref_trace": 1, "source": "", "config": {}, "profile": {}}',
            "no field 'profile'",
        ),
        (
            '{"bkref_trace": 2, "source": "", "config": {}, "profile": '
            '{"acks": "async", "state": "most", "answers": "bkref"}}',
            "profile.state must be one of full, protocol, none, got 'most'",
        ),
        (
            '{"bkref_trace": 2, "source": "", "config": {}, "profile": {"acks": "async"}}',
            "the profile needs the field 'state'",
        ),
        ('{"bkref_trace": true, "source": "", "config": {}}', "must be an integer"),
        ('{"step": 0, "op": "rotate", "result": {"ok": true}}', 'has no "bkref_trace"'),
        ('{"bkref_trace": 1, "source": "", "config": {"a": 1}}', "config.a must be a string"),
        ('{"bkref_trace": 1, "source": 3, "config": {}}', "source must be a string"),
        ('{"bkref_trace": 1, "config": {}}', "needs the field 'source'"),
        ('{"bkref_trace": 1, "source": "", "config": {}, "seed": 1}', "no field 'seed'"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_malformed_headers_are_refused_with_a_reason(line: str, expected: str) -> None:
    message = _error("  ", line)
    assert message.startswith("run.jsonl line 2: "), message
    assert expected in message, message


def test_state_errors_name_the_field() -> None:
    state = state_to_json(
        AbstractState(
            (LogView(1, "active", ((2, 40),)),),
            1,
            (0, 0),
            (0, 9),
            1,
            (LedgerView(2, 0, False),),
            (),
        )
    )
    line = {"step": 0, "op": "rotate", "result": {"ok": True}, "state": state}
    assert read_trace([HEADER, json.dumps(line)]).steps[0].state is not None
    bad: dict[str, Any] = json.loads(json.dumps(state))
    bad["entry_logs"][0]["state"] = "sealed"
    line["state"] = bad
    assert "state.entry_logs[0].state must be one of preallocated" in _error(
        HEADER, json.dumps(line)
    )
    bad["entry_logs"][0]["state"] = "active"
    bad["ledgers"].append(bad["ledgers"][0])
    assert "names 2 twice" in _error(HEADER, json.dumps(line))
    with pytest.raises(TraceError, match=r"^adapter response 3: state\.last_mark needs"):
        state_from_json({**state, "last_mark": {}}, "adapter response 3")


def test_ledgers_maps_read_sorted_and_only_from_version_4() -> None:
    """A state's ledgers_maps (version 4): the pairs read in ledger order whatever the
    recorder's order; a map on an unsealed log, a repeated log or ledger, and the field in
    an older trace are refused by name."""
    state = state_to_json(
        AbstractState((LogView(1, "rotated", ((2, 40),)),), 1, (0, 0), (0, 9), 2, (), ())
    )
    maps: list[dict[str, object]] = [
        {"log_id": 1, "sealed": True, "ledger_bytes": [[7, 30], [2, 40]]},
        {"log_id": 2, "sealed": False, "ledger_bytes": None},
        {"log_id": 3, "sealed": True, "ledger_bytes": None},
    ]
    line = {
        "step": 0,
        "op": "rotate",
        "result": {"ok": True},
        "state": {**state, "ledgers_maps": maps},
    }
    header4 = encode_header(TraceHeader((), "test"))
    read = read_trace([header4, json.dumps(line)]).steps[0].state
    assert read is not None
    assert read.ledgers_maps == (
        MapView(1, True, ((2, 40), (7, 30))),
        MapView(2, False, None),
        MapView(3, True, None),
    )
    assert read.ledgers_map(3) == MapView(3, True, None)
    header3 = header4.replace('"bkref_trace": 4', '"bkref_trace": 3')
    assert "no field 'ledgers_maps'" in _error(header3, json.dumps(line))
    maps[1]["ledger_bytes"] = [[1, 20]]
    assert "ledgers_maps[1].ledger_bytes must be null when sealed is false" in _error(
        header4, json.dumps(line)
    )
    maps[1]["ledger_bytes"] = None
    maps[0]["ledger_bytes"] = [[7, 30], [7, 40]]
    assert "names 7 twice" in _error(header4, json.dumps(line))
    maps[0]["ledger_bytes"] = []
    maps[2]["log_id"] = 1
    assert "names 1 twice" in _error(header4, json.dumps(line))


def test_empty_trace_and_blank_lines() -> None:
    assert "the trace is empty" in _error(name="e")
    assert "the trace is empty" in _error(" ", "\t", "\r\n")
    trace = read_trace(f'\n{HEADER}\r\n\n{ADD0}"result": {{"ok": true}}}}\r\n\n')
    assert len(trace.steps) == 1
    assert trace.steps[0].op == Add(1, 0, b"key", b"hi")


def test_upper_case_keys_read_and_are_written_lower_case() -> None:
    step = read_trace([HEADER, ADD0.replace("6b6579", "6B6579") + '"result": {"ok": true}}'])
    assert step.steps[0].op == Add(1, 0, b"key", b"hi")
    assert '"key": "6b6579"' in encode_step(step.steps[0])


def test_non_utf8_bytes_name_their_line() -> None:
    data = (HEADER + "\n").encode() + b'{"step": 0, "op": "rot\xffate"}\n'
    with pytest.raises(TraceError, match=r"^t line 2: the line is not UTF-8"):
        read_trace_bytes(data, "t")


def test_the_writer_refuses_what_the_reader_would() -> None:
    with pytest.raises(AssertionError, match="cannot be pending"):
        encode_step(Step(0, Rotate(), PENDING))
    with pytest.raises(AssertionError, match="must carry the data"):
        encode_step(Step(0, Read(1, 1), OK))
    with pytest.raises(AssertionError, match="names 3 twice"):
        state_to_json(AbstractState((), 0, (0, 0), (0, 0), None, (), (3, 3)))
    with pytest.raises(AssertionError, match="expected step 0"):
        write_trace(Trace(TraceHeader((), ""), (Step(1, Rotate(), OK),)))
    with pytest.raises(AssertionError, match="not an earlier pending"):
        write_trace(Trace(TraceHeader((), ""), (Step(0, Rotate(), OK, (Completion(0),)),)))


def test_a_version_2_header_carries_its_profile_and_a_version_1_header_the_default() -> None:
    from spec.profile import DEFAULT_PROFILE, Profile

    profile = Profile(acks="async", state="protocol", answers="either")
    header = TraceHeader(config=(("logSizeLimit", "2048"),), source="test", profile=profile)
    text = write_trace(Trace(header, ()))
    assert '"profile": {"acks": "async", "state": "protocol", "answers": "either"}' in text
    assert read_trace(text).header.profile == profile
    old = read_trace('{"bkref_trace": 1, "source": "old", "config": {}}\n')
    assert old.header.version == 1 and old.header.profile == DEFAULT_PROFILE


def test_a_version_2_trace_reads_its_faults_as_firing_where_they_were_armed() -> None:
    text = "\n".join(
        [
            '{"bkref_trace": 2, "source": "old", "config": {}, "profile": '
            '{"acks": "in_process", "state": "full", "answers": "bkref"}}',
            '{"step": 0, "op": "fail_fsync", "result": {"ok": true}}',
            '{"step": 1, "op": "disk_full", "result": {"ok": true}}',
            '{"step": 2, "op": "checkpoint", "result": {"ok": false, "error": "io_error"}}',
        ]
    )
    steps = read_trace(text).steps
    assert [step.op for step in steps] == [FailFsync("any"), DiskFull("ledger_dirs"), Checkpoint()]
    assert [step.faults for step in steps] == [(UNKNOWN_FAULT,), (UNKNOWN_FAULT,), ()]
    with pytest.raises(TraceError, match="no field 'faults'"):
        read_trace(text.replace('"io_error"}}', '"io_error"}, "faults": []}'))
    with pytest.raises(TraceError, match="no field 'file'"):
        read_trace(text.replace('"fail_fsync",', '"fail_fsync", "file": "journal",'))


def test_a_version_3_step_names_the_faults_it_fired() -> None:
    step = Step(0, Checkpoint(), failed("io_error"), faults=(FiredFault("fsync", "index"),))
    text = write_trace(Trace(TraceHeader((), "t"), (step,)))
    assert '"faults": [{"op": "fsync", "file": "index"}]' in text
    assert read_trace(text).steps == (step,)
    with pytest.raises(TraceError, match=r"faults\[0\]\.file must be one of"):
        read_trace(text.replace('"file": "index"', '"file": "disk"'))
    # A write or read is never aimed at a directory (only its fsync is): refused, typed.
    aimed = write_trace(Trace(TraceHeader((), "t"), (Step(0, FailWrite("journal"), OK),)))
    with pytest.raises(TraceError, match="file must be one of any, journal"):
        read_trace(aimed.replace('"file": "journal"', '"file": "directory"'))


def test_the_recorder_plans_read_back() -> None:
    from spec.crash import KeepAll, Unknown

    for plan in (KeepAll(), Unknown()):
        step = Step(0, Crash(plan), OK)
        assert read_trace(write_trace(Trace(TraceHeader((), "t"), (step,)))).steps == (step,)


def test_torn_sectors_is_written_with_its_sectors_sorted() -> None:
    plan = TornSectors(keep=2, sectors=frozenset({5, 0, 3}), garbage=9)
    assert plan_to_json(plan) == {
        "kind": "torn_sectors",
        "keep": 2,
        "sectors": [0, 3, 5],
        "garbage": 9,
    }
