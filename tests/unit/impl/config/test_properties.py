"""impl/config/properties.py: .properties text as Commons Configuration reads it (logical lines,
continuations, escapes, list items), Java's typed values, and writing items back.

Reading through the loader (sources, warnings, errors with the file's line) is tested in
test_config.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.config.properties import (
    escape_item,
    java_trim,
    logical_lines,
    parse_java_boolean,
    parse_java_float,
    parse_java_integer,
    parse_properties,
    render_value,
    split_items,
    unescape_value,
)

# --- reading .properties text ---------------------------------------------------------


def test_value_may_contain_separators() -> None:
    props = parse_properties("a=b=c\nd:e:f\ng h=i\n").properties
    assert [(p.key, p.items) for p in props] == [("a", ("b=c",)), ("d", ("e:f",)), ("g", ("h=i",))]


def test_key_without_value_has_empty_value() -> None:
    props = parse_properties("extraServerComponents\nhttpServerPort=\n").properties
    assert [(p.key, p.items) for p in props] == [
        ("extraServerComponents", ("",)),
        ("httpServerPort", ("",)),
    ]


def test_comment_and_blank_lines_inside_a_continuation_are_skipped() -> None:
    # Commons Configuration's PropertiesReader checks for comments before joining.
    lines, dropped = logical_lines("a=1,\\\n# not part of it\n\n2\n")
    assert lines == ((1, "a=1,2"),)
    assert dropped is None


def test_even_backslashes_do_not_continue() -> None:
    lines, _ = logical_lines("a=x\\\\\nb=y\n")
    assert lines == ((1, "a=x\\\\"), (2, "b=y"))
    assert parse_properties("a=x\\\\\n").properties[0].items == ("x\\",)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\\tb", "a\tb"),
        ("\\u0041\\u00e9", "Aé"),
        ("\\ud83d\\ude00", "\U0001f600"),
        ("a\\:b\\=c\\#d\\!e", "a:b=c#d!e"),
        ("a\\\\b", "a\\b"),
        ("a\\qb", "a\\qb"),  # unknown escape: Commons keeps the backslash
        ("end\\", "end\\"),
    ],
)
def test_value_escapes(raw: str, expected: str) -> None:
    assert unescape_value(raw) == expected


# --- typed values ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["maybe", "tru", "2", "", " true"])
def test_not_booleans(text: str) -> None:
    assert parse_java_boolean(text) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42), ("+42", 42), ("-7", -7), ("0x1f", 31), ("0b101", 5), ("007", 7)],
)
def test_integer_forms(text: str, value: int) -> None:
    assert parse_java_integer(text) == value


@pytest.mark.parametrize("text", ["", "1.0", "1e3", "0X1F", "1_000", "0x", "- 1", "٣"])
def test_not_integers(text: str) -> None:
    assert parse_java_integer(text) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.5", 0.5), (".5", 0.5), ("5.", 5.0), ("1e-1", 0.1), ("0.5f", 0.5), ("0.25D", 0.25)],
)
def test_float_forms(text: str, value: float) -> None:
    assert parse_java_float(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1,5", "inf", "nan", "1_0.5", "0.5ff"])
def test_not_floats(text: str) -> None:
    assert parse_java_float(text) is None


# --- writing back ---------------------------------------------------------------------


#: One non-empty, trimmed list item (test_config.py draws its paths from it too).
ITEM = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).map(java_trim).filter(bool)


@settings(max_examples=200, deadline=None)
@given(st.lists(ITEM.filter(lambda s: "${" not in s), min_size=1, max_size=4))
def test_escaped_items_read_back(items: list[str]) -> None:
    rendered = render_value(tuple(items))
    assert rendered.isascii()
    assert split_items(unescape_value(rendered)) == tuple(items)
    line = f"ledgerDirectories={rendered}"
    assert parse_properties(line).properties[0].items == tuple(items)


def test_escape_item_examples() -> None:
    assert escape_item("a,b") == "a\\,b"
    assert escape_item("a\\b") == "a\\\\\\\\b"
    assert escape_item("é\n") == "\\u00e9\\u000a"
