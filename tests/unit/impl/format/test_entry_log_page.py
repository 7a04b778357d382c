"""spec/format/entry_log.md against the codec and the independent writer.

The page is normative: its constant table must equal impl/format/entry_log.py's constants,
its file-name examples must be what impl/format/names.py names, and its worked example must
decode with the codec and be byte for byte what tests/unit/bk_layout.py builds from the page's
words.
"""

from __future__ import annotations

import re

import pytest

import impl.format.entry_log as fmt
import spec.ids
from impl.entrylog.reader import extract_metadata, scan
from impl.format import names
from spec.ids import EntryLogId, make_location
from tests.unit import bk_layout, format_page
from tests.unit.bk_layout import BytesSource

PAGE = format_page.page_path("entry_log.md")


def test_constant_table_is_parsed() -> None:
    # Guards the comparisons below against passing on an empty or misread table.
    constants = format_page.page_constants(PAGE)
    assert len(constants) >= 16
    assert constants["MAGIC"] == b"BKLO"


@pytest.mark.parametrize("name", sorted(format_page.codec_constants(fmt, spec.ids, (int, bytes))))
def test_every_codec_constant_is_on_the_page_with_its_value(name: str) -> None:
    constants = format_page.page_constants(PAGE)
    assert name in constants, f"{name} is missing from the page's constant table"
    assert constants[name] == format_page.codec_constants(fmt, spec.ids, (int, bytes))[name]


def test_the_page_names_no_constant_the_codec_lacks() -> None:
    assert set(format_page.page_constants(PAGE)) == set(
        format_page.codec_constants(fmt, spec.ids, (int, bytes))
    )


def test_file_name_examples_are_what_the_codec_names() -> None:
    rows = {
        row[0]: row[2] for row in format_page.table_rows(format_page.section(PAGE, "File names"))
    }
    assert rows["entry log"] == names.log_file_name(255)
    assert rows["compaction log being written"] == names.compacting_file_name(255)
    assert rows["compaction log flushed, index not yet updated"] == names.compacted_file_name(
        255, 10
    )
    assert rows["last allocated id"] == "ff\\n"


def worked_example_bytes() -> bytes:
    section = format_page.section(PAGE, "Worked example")
    match = re.search(r"```hex\n(.*?)```", section, re.S)
    assert match is not None, "the worked example's hex block is missing"
    return format_page.parse_page_hex(match.group(1))


def test_worked_example_is_what_bk_layout_builds() -> None:
    built = bk_layout.build_log([(1, 0, b"hello"), (2, 0, b"bk")])
    assert worked_example_bytes() == built.data
    assert len(built.data) == 1127
    assert built.map_offset == 1071


def test_worked_example_decodes_with_the_codec() -> None:
    data = worked_example_bytes()
    header = fmt.decode_header(data[: fmt.LOGFILE_HEADER_SIZE])
    assert header == fmt.Header(magic=b"BKLO", version=1, ledgers_map_offset=1071, ledgers_count=2)
    assert data[: fmt.LOGFILE_HEADER_SIZE] == fmt.encode_header(1, 1071, 2)
    first = fmt.encode_record(fmt.encode_payload(1, 0, b"hello"))
    second = fmt.encode_record(fmt.encode_payload(2, 0, b"bk"))
    assert data[1024:1049] == first
    assert data[1049:1071] == second
    assert data[1071:] == fmt.encode_ledgers_map([(1, 25), (2, 22)])
    assert fmt.decode_size(data[1024:1028]) == 21
    assert fmt.decode_ids(data[1028:1044]) == (1, 0)


def test_worked_example_reads_as_the_page_says() -> None:
    data = worked_example_bytes()
    log_id = EntryLogId(1)
    result = extract_metadata(BytesSource(data), log_id)
    assert result.source == "map"
    assert dict(result.metadata.ledgers) == {1: 25, 2: 22}
    scanned = scan(BytesSource(data), log_id)
    assert scanned.ledgers() == {1: 25, 2: 22}
    assert [r.offset for r in scanned.records] == [1028, 1053]
    assert make_location(log_id, 1028) == 4294968324
    assert make_location(log_id, 1053) == 4294968349
    unrotated = bk_layout.build_log([(1, 0, b"hello"), (2, 0, b"bk")], rotated=False).data
    assert len(unrotated) == 1071
    assert unrotated[8:20] == bytes(12)
    cut = scan(BytesSource(data[:1060]), log_id)
    assert [r.ledger_id for r in cut.records] == [1]
    assert cut.torn_tail_bytes == 11
