"""The operation registry (spec/operations.py) and its table checks.

- every declaration agrees with its class (name, fields, docstring) and with the static
  unions, with the trace page (spec/trace.md: each op's kind) and with the adapter protocol
  (impl/server/protocol.py: the op names and their fields);
- ``require_complete`` accepts a table that covers the registry exactly and refuses one that
  misses an operation or has one too many, naming the consumer and the operations;
  ``require_fields`` does the same for tables keyed by field name.

The consumers' own tables are checked in tests/unit/proofs/harness/test_registry_tables.py.
"""

from __future__ import annotations

import typing

import attrs
import pytest

from impl.server.protocol import OP_FIELDS, Op
from spec.operations import (
    OPERATIONS,
    REGISTRY,
    Add,
    Background,
    Environment,
    Fence,
    IncompleteTable,
    Kind,
    Operation,
    OperationSpec,
    Read,
    Request,
    answered_later,
    checked_tables,
    operation,
    require_complete,
    require_fields,
    spec_of,
    table_problem,
    union_problem,
)
from spec.trace import FIELD_DECODERS
from tests.paths import ROOT
from tests.unit.format_page import table_rows

#: Adapter ops that are no operation of a trace: ``inspect`` reads the abstract state.
ADAPTER_ONLY = {"inspect"}


def test_every_declaration_agrees_with_its_class() -> None:
    assert list(OPERATIONS) == [spec.name for spec in REGISTRY.values()]
    for cls, spec in REGISTRY.items():
        assert spec.cls is cls and OPERATIONS[spec.name] is cls
        assert spec.name == cls.name
        assert spec.fields == tuple(field.name for field in attrs.fields(cls))
        assert cls.__doc__ is not None and spec.description == " ".join(cls.__doc__.split())
        assert "\n" not in spec.description and spec.description.endswith("."), spec


def test_the_unions_are_the_registry() -> None:
    assert list(typing.get_args(Operation)) == list(REGISTRY)
    for kind, union in ((Kind.REQUEST, Request), (Kind.BACKGROUND, Background)):
        assert list(typing.get_args(union)) == [c for c, s in REGISTRY.items() if s.kind is kind]
    environment = [c for c, s in REGISTRY.items() if s.kind is Kind.ENVIRONMENT]
    assert list(typing.get_args(Environment)) == environment


def test_a_declared_operation_missing_from_its_union_is_named() -> None:
    registry = [*REGISTRY.values(), _fake("trim")]
    assert union_problem("Background", Background, Kind.BACKGROUND, REGISTRY.values()) is None
    problem = union_problem("Background", Background, Kind.BACKGROUND, registry)
    assert problem is not None and problem.endswith("missing ['Fake'], extra []")
    problem = union_problem("Request", Request | Fence, Kind.BACKGROUND, REGISTRY.values())
    assert (
        problem is not None
        and "extra ['Add', 'Checkpoint', 'Delete', 'Fence', 'Gc', 'Read', 'WriteClose']" in problem
    )


def test_only_adds_and_fences_are_answered_later() -> None:
    assert [s.name for s in REGISTRY.values() if s.answered_later] == ["add", "fence"]
    assert spec_of(Add(1, 0, b"", b"")).answered_later
    assert not spec_of(Read(1, 0)).answered_later


def test_the_trace_page_gives_each_op_its_kind() -> None:
    text = (ROOT / "spec" / "trace.md").read_text(encoding="utf-8")
    start = text.index("\n### Operations\n")
    rows = table_rows(text[start : text.index("\n#", start + 1)])
    assert [row[0] for row in rows] == list(OPERATIONS)
    for row in rows:
        kind = REGISTRY[OPERATIONS[row[0]]].kind
        assert row[2].startswith(f"{kind.value}:"), row


def test_adapter_ops_are_the_registry_s_and_take_the_same_fields() -> None:
    declared = {spec.adapter_op: spec for spec in REGISTRY.values() if spec.adapter_op}
    assert set(declared) == {op.value for op in Op} - ADAPTER_ONLY
    for name, spec in declared.items():
        assert OP_FIELDS[Op(name)] == spec.fields, name
        assert name == spec.name, "the adapter and the trace name an op alike"


def test_a_declaration_needs_a_name_and_a_description() -> None:
    declare = operation(Kind.BACKGROUND)

    @attrs.frozen
    class Nameless:
        """Nothing."""

    with pytest.raises(AssertionError, match="class attribute name"):
        declare(Nameless)

    @attrs.frozen
    class Undocumented:
        name = "undocumented"

    with pytest.raises(AssertionError, match="docstring"):
        declare(Undocumented)
    with pytest.raises(AssertionError, match="'add' twice"):
        declare(Add)


# --- require_complete ----------------------------------------------------------------------

COMPLETE = {cls: spec.name for cls, spec in REGISTRY.items()}


def _fake(fake_name: str, *, later: bool = False) -> OperationSpec:
    """The declaration of a new operation ``fake_name`` (not added to the registry)."""

    @attrs.frozen
    class Fake:
        """A fake operation."""

        name = fake_name

    return OperationSpec(Fake, fake_name, (), Kind.BACKGROUND, later, None, "A fake operation.")


def test_a_complete_table_passes_and_is_recorded() -> None:
    assert table_problem(COMPLETE, "the test table") is None
    assert require_complete(COMPLETE, "the test table") is COMPLETE
    assert "the test table" in [checked.consumer for checked in checked_tables()]


def test_a_missing_entry_names_the_consumer_and_the_operations() -> None:
    table = {cls: name for cls, name in COMPLETE.items() if cls not in (Read, Fence)}
    with pytest.raises(IncompleteTable) as info:
        require_complete(table, "the short table")
    message = str(info.value)
    assert message.startswith("the short table has no entry for the operation(s) read, fence")
    assert "the short table" not in [checked.consumer for checked in checked_tables()]


def test_an_undeclared_operation_in_a_table_is_named() -> None:
    fake = _fake("trim")
    with pytest.raises(IncompleteTable, match=r"the long table has entries for trim\b"):
        require_complete({**COMPLETE, fake.cls: "trim"}, "the long table")


def test_a_declared_operation_missing_from_a_table_is_named() -> None:
    registry = [*REGISTRY.values(), _fake("trim")]
    problem = table_problem(COMPLETE, "the old table", registry=registry)
    assert problem is not None and problem.startswith("the old table has no entry for")
    assert "operation(s) trim declared" in problem


def test_a_table_over_the_operations_answered_later() -> None:
    acks = {Add: "add", Fence: "fence"}
    assert table_problem(acks, "acks", among=answered_later) is None
    problem = table_problem(COMPLETE, "acks", among=answered_later)
    assert problem is not None and "has entries for read" in problem
    registry = [*REGISTRY.values(), _fake("force_ledger", later=True), _fake("trim")]
    problem = table_problem(acks, "acks", among=answered_later, registry=registry)
    assert problem == (
        "acks has no entry for the operation(s) force_ledger declared in spec/operations.py: "
        "add their behaviour to its table"
    )


def test_require_fields_names_a_missing_field_and_its_operations() -> None:
    assert require_fields(FIELD_DECODERS, "decoders") is FIELD_DECODERS
    short = {field: codec for field, codec in FIELD_DECODERS.items() if field != "ledger"}
    with pytest.raises(IncompleteTable, match=r"decoders has no entry for the field\(s\) ledger"):
        require_fields(short, "decoders")
    with pytest.raises(IncompleteTable, match="read, fence, write_close, delete"):
        require_fields(short, "decoders")
    with pytest.raises(IncompleteTable, match="entries for urgent, which no operation has"):
        require_fields({**FIELD_DECODERS, "urgent": None}, "decoders")
