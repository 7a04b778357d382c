"""impl/format/names.py: every name a bookie makes reads back as what made it, makers write
lower-case hex, parsers take what BookKeeper takes (upper-case hex too) and refuse near misses,
and BookKeeper #4804 (a log named in decimal) cannot happen by round trip.

The journal names are also checked against tests/unit/bk_journal_layout.py, a writer built
from spec/format/journal.md alone.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.format import names
from impl.format.entry_log import MAX_LOG_ID
from tests.unit import bk_index_layout
from tests.unit import bk_journal_layout as bk

log_ids = st.integers(min_value=0, max_value=MAX_LOG_ID)
journal_ids = st.integers(min_value=0, max_value=2**63 - 1)
segment_seqs = st.integers(min_value=1, max_value=2**64 - 1)

#: What a maker may write before the suffix: lower-case hex, no leading zero (Long.toHexString).
LOWER_HEX = re.compile(r"0|[1-9a-f][0-9a-f]*")


def _id_part(name: str, suffix: str) -> str:
    assert name.endswith(suffix), (name, suffix)
    return name[: -len(suffix)]


# --- round trips and the makers' spelling ----------------------------------------------------


@given(log_id=log_ids)
@settings(max_examples=200, deadline=None)
def test_log_names_round_trip_in_lower_case_hex(log_id: int) -> None:
    name = names.log_file_name(log_id)
    assert LOWER_HEX.fullmatch(_id_part(name, ".log")), name
    assert names.parse_log_file_name(name) == log_id
    assert names.log_id_prefix(name) == log_id
    assert names.parse_log_file_name(f"{log_id:X}.log") == log_id  # BookKeeper reads either case


@given(log_id=log_ids)
@settings(max_examples=100, deadline=None)
def test_compacting_names_round_trip(log_id: int) -> None:
    name = names.compacting_file_name(log_id)
    assert LOWER_HEX.fullmatch(_id_part(name, ".log.compacting")), name
    assert names.parse_compacting_file_name(name) == log_id
    assert names.parse_log_file_name(name) is None
    assert names.log_id_prefix(name) == log_id


@given(new_id=log_ids, src_id=log_ids)
@settings(max_examples=200, deadline=None)
def test_compacted_names_round_trip(new_id: int, src_id: int) -> None:
    name = names.compacted_file_name(new_id, src_id)
    new_part, src_part = _id_part(name, ".compacted").split(".log.")
    assert LOWER_HEX.fullmatch(new_part) and LOWER_HEX.fullmatch(src_part), name
    assert names.parse_compacted_file_name(name) == (new_id, src_id)
    upper = f"{new_id:X}.log.{src_id:X}.compacted"  # BookKeeper reads either case
    assert names.parse_compacted_file_name(upper) == (new_id, src_id)
    assert names.parse_log_file_name(name) is None
    assert names.log_id_prefix(name) == new_id


@given(journal_id=journal_ids)
@settings(max_examples=100, deadline=None)
def test_journal_file_names_round_trip(journal_id: int) -> None:
    name = names.journal_file_name(journal_id)
    assert name == bk.journal_name(journal_id)
    assert names.parse_journal_file_name(name) == journal_id
    assert names.parse_journal_file_name(name.upper().replace(".TXN", ".txn")) == journal_id


@given(seq=segment_seqs)
@settings(max_examples=100, deadline=None)
def test_segment_names_round_trip_at_fixed_width(seq: int) -> None:
    name = names.segment_file_name(seq)
    assert re.fullmatch(r"[0-9a-f]{16}\.seg", name), name
    assert names.parse_segment_file_name(name) == seq


def test_segment_names_sort_in_sequence_order() -> None:
    seqs = [1, 9, 10, 15, 16, 255, 256, 2**40, 2**64 - 1]
    assert sorted(names.segment_file_name(seq) for seq in seqs) == [
        names.segment_file_name(seq) for seq in seqs
    ]


def test_file_names_are_fixed_width_hex() -> None:
    assert names.segment_file_name(1) == "0000000000000001.seg"
    assert names.segment_file_name(255) == "00000000000000ff.seg"
    assert names.parse_segment_file_name("00000000000000ff.seg") == 255
    for other in ("ff.seg", "00000000000000FF.seg", "0000000000000001.seg.tmp", "lastMark"):
        assert names.parse_segment_file_name(other) is None


def test_the_spec_pages_examples() -> None:
    # spec/format/entry_log.md "File names" and spec/format/journal.md, literally.
    assert names.log_file_name(255) == "ff.log"
    assert names.compacting_file_name(255) == "ff.log.compacting"
    assert names.compacted_file_name(255, 10) == "ff.log.a.compacted"
    assert names.journal_file_name(1700000000000) == "18bcfe56800.txn"
    assert names.tmp_file_name(names.LAST_MARK_FILE_NAME) == "lastMark.tmp"


def test_tmp_names() -> None:
    segment = names.segment_file_name(3)
    assert names.tmp_file_name(segment) == "0000000000000003.seg.tmp"
    assert names.is_tmp_file_name(names.tmp_file_name(segment))
    assert names.parse_segment_file_name(names.tmp_file_name(segment)) is None
    for other in (segment, names.DELETED_FILE_NAME, "lastMark", "tmp", "x.tmpx"):
        assert not names.is_tmp_file_name(other), other
    with pytest.raises(AssertionError):
        names.tmp_file_name(names.tmp_file_name(segment))  # never a .tmp of a .tmp


@pytest.mark.parametrize(
    ("maker", "bad"),
    [
        (names.log_file_name, -1),
        (names.log_file_name, MAX_LOG_ID + 1),
        (names.compacting_file_name, MAX_LOG_ID + 1),
        (names.journal_file_name, -1),
        (names.journal_file_name, 2**63),
        (names.segment_file_name, 0),
        (names.segment_file_name, 2**64),
    ],
)
def test_makers_refuse_ids_out_of_range(maker: object, bad: int) -> None:
    assert callable(maker)
    with pytest.raises(AssertionError):
        maker(bad)


# --- parsers: what BookKeeper accepts, and near misses --------------------------------------


def test_log_file_names_parse_case_insensitively() -> None:
    assert names.parse_log_file_name("0.log") == 0
    assert names.parse_log_file_name("7fffffff.log") == MAX_LOG_ID
    assert names.parse_log_file_name("AbC.log") == 0xABC
    for other in ["x.log", "1.log.compacting", "1.LOG", ".log", "1.log ", "lastId", "80000000.log"]:
        assert names.parse_log_file_name(other) is None, other


def test_compacted_names_parse() -> None:
    assert names.parse_compacted_file_name("81.log.7b.compacted") == (0x81, 0x7B)
    assert names.parse_compacted_file_name("81.LOG.7B.compacted") is None  # suffixes are exact
    assert names.parse_compacted_file_name("81.log.compacting") is None
    assert names.parse_compacting_file_name("81.log.compacting") == 0x81
    assert names.parse_compacting_file_name("81.log.7b.compacted") is None


#: Names one character away from a valid one, or spelled in a way Python's int() would take but
#: BookKeeper's patterns do not: each must be refused by every parser.
NEAR_MISSES = [
    "",
    ".log",
    ".txn",
    "1.log.tmp",
    "1.txn.tmp",
    "1.log\n",
    " 1.log",
    "1.log ",
    "1 .log",
    "1..log",
    "1.log.",
    "0x1.log",
    "-1.log",
    "+1.log",
    "1_0.log",  # int("1_0", 16) == 16
    "\u0661.log",  # ARABIC-INDIC DIGIT ONE: int() takes it as 1
    "\uff11.txn",  # FULLWIDTH DIGIT ONE
    "g.log",
    "1.LOG",
    "1.Txn",
    "1.log.7b.compacted.tmp",
    "1.log.-7b.compacted",
    "1.log..compacted",
    ".log.7b.compacted",
    "1.log.compacting.tmp",
    "1.2.txn",
    "-1.txn",
    "8000000000000000.txn",
    "80000000.log",
    "80000000.log.compacting",
    "1.log.80000000.compacted",
    "000000000000001.seg",  # 15 digits
    "00000000000000001.seg",  # 17 digits
    "000000000000000g.seg",
    "0000000000000001.SEG",
    "lastMark",
    "lastId",
    "deleted-ledgers",
    "bkref-index",
    "VERSION",
]

PARSERS = [
    names.parse_log_file_name,
    names.parse_compacting_file_name,
    names.parse_compacted_file_name,
    names.parse_journal_file_name,
    names.parse_segment_file_name,
]


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_parsers_refuse_near_misses(name: str) -> None:
    for parse in PARSERS:
        assert parse(name) is None, (parse.__name__, name)


def test_the_near_misses_would_fool_a_naive_parser() -> None:
    # The list above is not vacuous: a parser built on int(prefix, 16) takes some of them.
    def naive(name: str) -> int | None:
        try:
            return int(name.split(".", 1)[0], 16)
        except ValueError:
            return None

    fooled = [name for name in NEAR_MISSES if name.endswith(".log") and naive(name) is not None]
    assert {"1_0.log", "\u0661.log", "0x1.log", "-1.log", "+1.log", " 1.log"} <= set(fooled)


@pytest.mark.parametrize(
    "name",
    ["VERSION", "lastMark", "abc.txn.tmp", "1.2.txn", ".txn", "-1.txn", "xyz.txn", "1.TXN",
     "8000000000000000.txn"],
)  # fmt: skip
def test_other_names_are_not_journals(name: str) -> None:
    assert names.parse_journal_file_name(name) is None


def test_log_id_prefix_is_file_name_2_log_id() -> None:
    # DefaultEntryLogger.fileName2LogId: the hex before the first dot, any size.
    assert names.log_id_prefix("1f.log.compacting") == 0x1F
    assert names.log_id_prefix("1ffffffff.log") == 0x1FFFFFFFF  # the caller says it is too big
    assert names.log_id_prefix("AB.log.7.compacted") == 0xAB
    for other in ("x.log", ".log", "1_0.log", "\u0661.log", "-1.log", ""):
        assert names.log_id_prefix(other) is None, other


# --- BookKeeper #4804: a log named in decimal --------------------------------------------------


def test_bookkeeper_4804_decimal_names_differ_from_hex_from_ten_on() -> None:
    """BookKeeper #4804: compaction recovery parsed log 0x1f4 from ``1f4.log.78.compacted``
    and made the recovered log ``500.log``, the id in decimal. Below ten both spellings are
    the same name, which is how such a bug hides from small tests."""
    for log_id in range(10):
        assert names.log_file_name(log_id) == f"{log_id}.log"
    for log_id in (10, 15, 16, 120, 500):
        assert names.log_file_name(log_id) != f"{log_id}.log"
    new_id, src_id = names.parse_compacted_file_name("1f4.log.78.compacted") or (None, None)
    assert (new_id, src_id) == (500, 120)
    assert names.log_file_name(500) == "1f4.log"  # what recovery must make available


@given(new_id=st.integers(min_value=10, max_value=MAX_LOG_ID), src_id=log_ids)
@settings(max_examples=300, deadline=None)
def test_bookkeeper_4804_a_decimal_named_log_is_never_the_right_log(
    new_id: int, src_id: int
) -> None:
    """A compacted file or a log spelled in decimal is never taken for the log it was meant
    to name: read as hex, the decimal digits of an id >= 10 give a larger id, or none."""
    decimal_compacted = f"{new_id}.log.{src_id}.compacted"
    parsed = names.parse_compacted_file_name(decimal_compacted)
    assert parsed is None or parsed[0] != new_id
    decimal_log = f"{new_id}.log"
    assert names.parse_log_file_name(decimal_log) != new_id
    # The hex spelling is the one that names it.
    assert names.parse_log_file_name(names.log_file_name(new_id)) == new_id


# --- BookKeeper's .idx files (spec/format/bk_index.md, "Where index files live") -----------------


@given(st.integers(min_value=0, max_value=2**63 - 1))
@settings(max_examples=300, deadline=None)
def test_bk_index_paths_are_get_ledger_name_and_parse_back(ledger_id: int) -> None:
    parts = names.bk_index_path_parts(ledger_id)
    assert "/".join(parts) == bk_index_layout.idx_path(ledger_id)
    assert names.parse_bk_index_file_name(parts[2]) == (ledger_id, False)
    assert names.parse_bk_index_file_name(parts[2] + names.RLOC_SUFFIX) == (ledger_id, True)


def test_bk_index_names_of_the_page() -> None:
    assert names.bk_index_path_parts(0) == ("0", "0", "0.idx")
    assert names.bk_index_path_parts(300) == ("1", "2c", "12c.idx")
    assert names.bk_index_path_parts(0x10203) == ("2", "3", "10203.idx")
    assert names.parse_bk_index_file_name("12C.idx") == (300, False)  # as Long.parseLong
    for foreign in ("12c.rloc", "12c.idx.tmp", ".idx", "x.idx", "12c", "10000000000000000.idx"):
        assert names.parse_bk_index_file_name(foreign) is None, foreign
