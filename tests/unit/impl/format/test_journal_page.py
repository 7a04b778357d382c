"""spec/format/journal.md is normative: its constants table must equal the codec's constants
and the journal's file names (impl/format/names.py), its file-name examples must be what
impl/format/names.py names, and its worked example must decode with
the codec, replay as the page says, and be byte for byte what tests/unit/bk_journal_layout.py
builds from the page's words.
"""

from __future__ import annotations

import re

import pytest

import impl.format.journal as fmt
import spec.ids
from impl.format import names
from impl.fs.api import join
from impl.journal.last_mark import NO_MARK, LogMark, decode_last_mark, encode_last_mark
from impl.journal.replay import replay
from models.fs.simdisk import SimDisk
from spec.errors import DamagedFile
from tests.unit import bk_journal_layout as bk
from tests.unit import format_page

PAGE = format_page.page_path("journal.md")
EXAMPLE_ID = 1700000000000
#: The journal's file names, which the page's constant table lists beside the codec's.
NAME_CONSTANTS = ("LAST_MARK_FILE_NAME", "JOURNAL_FILE_SUFFIX")


def _constants() -> dict[str, object]:
    """The codec's constants and the journal's file names: what the page's table lists."""
    codec = format_page.codec_constants(fmt, spec.ids, (int, bytes, str))
    return codec | {name: getattr(names, name) for name in NAME_CONSTANTS}


def _hex_blocks(title: str) -> list[bytes]:
    blocks = re.findall(r"```hex\n(.*?)```", format_page.section(PAGE, title), re.S)
    assert blocks, f"no hex block under {title!r}"
    return [format_page.parse_page_hex(block) for block in blocks]


def test_constant_table_is_parsed() -> None:
    # Guards the comparisons below against passing on an empty or misread table.
    constants = format_page.page_constants(PAGE)
    assert len(constants) >= 25
    assert constants["MAGIC"] == b"BKLG"
    assert constants["PADDING_MASK"] == -0x100


@pytest.mark.parametrize("name", sorted(_constants()))
def test_every_codec_constant_is_on_the_page_with_its_value(name: str) -> None:
    constants = format_page.page_constants(PAGE)
    assert name in constants, f"{name} is missing from the page's constant table"
    assert constants[name] == _constants()[name]


def test_the_page_names_no_constant_the_codec_lacks() -> None:
    assert set(format_page.page_constants(PAGE)) == set(_constants())


def test_the_meta_record_table_matches_the_codec() -> None:
    section = format_page.section(PAGE, "Grammar")
    ids = {row[1]: int(row[0].split()[0].strip("`"), 16) for row in format_page.table_rows(section)}
    assert ids["ledger master key"] == fmt.METAENTRY_ID_LEDGER_KEY
    assert ids["fence"] == fmt.METAENTRY_ID_FENCE_KEY
    assert ids["force ledger"] == fmt.METAENTRY_ID_FORCE_LEDGER
    assert ids["explicit LAC"] == fmt.METAENTRY_ID_LEDGER_EXPLICITLAC


def test_file_name_examples_are_what_the_codec_names() -> None:
    rows = {
        row[0]: row[3]
        for row in format_page.table_rows(format_page.section(PAGE, "File names and directories"))
    }
    assert rows["journal"] == names.journal_file_name(EXAMPLE_ID)
    assert names.parse_journal_file_name(rows["journal"]) == EXAMPLE_ID
    assert rows["lastMark"] == names.LAST_MARK_FILE_NAME
    assert rows["lastMark being written (bkref)"] == names.LAST_MARK_FILE_NAME + ".tmp"
    assert rows["lastMark being written (bkref)"] == names.tmp_file_name(names.LAST_MARK_FILE_NAME)


def test_padding_examples_in_the_text_hold() -> None:
    text = " ".join(format_page.section(PAGE, "Padding").split())
    assert "at position 583 with alignment 512 it is 441 bytes (zeros_len 433)" in text
    assert fmt.padding_length(583, 512) == 441 == len(bk.padding(583))
    assert "at 1016 it is just the 8" in text
    assert fmt.encode_padding(1016, 512) == bk.padding(1016) == bytes.fromhex("ffffff0000000000")
    assert "so it runs to 1536 (zeros_len 508)" in text
    assert 1020 + fmt.padding_length(1020, 512) == 1536
    assert fmt.encode_padding(1020, 512)[4:8] == (508).to_bytes(4, "big")


def test_worked_example_is_what_bk_journal_layout_builds() -> None:
    journal, mark = _hex_blocks("Worked example")
    built = bk.worked_example()
    assert journal == built.file_bytes()
    assert len(journal) == 1024
    assert [item.offset for item in built.written] == [512, 538, 563]
    assert mark == bk.last_mark(EXAMPLE_ID, 1024)


def test_worked_example_encodes_with_the_codec() -> None:
    journal, mark = _hex_blocks("Worked example")
    assert journal[:512] == fmt.encode_header(6)
    assert journal[512:538] == fmt.encode_key_record(1, b"pw")
    assert journal[538:563] == fmt.encode_data_record(_payload())
    assert journal[563:583] == fmt.encode_fence_record(1)
    assert journal[583:] == fmt.encode_padding(583, 512)
    assert fmt.decode_version(journal[:8]) == 6
    assert decode_last_mark(mark) == LogMark(EXAMPLE_ID, 1024)
    assert encode_last_mark(LogMark(EXAMPLE_ID, 1024)) == mark


def _payload() -> bytes:
    return (1).to_bytes(8, "big") + (0).to_bytes(8, "big") + b"hello"


def _replay_bytes(data: bytes) -> tuple[list[fmt.JournalRecord], LogMark]:
    disk = SimDisk()
    disk.mkdir("/j/current")
    handle = disk.open(join("/j/current", names.journal_file_name(EXAMPLE_ID)), create=True)
    handle.pwrite(0, data)
    handle.close()
    run = replay(disk, "/j/current", NO_MARK, skip_invalid=False)
    records = list(run)
    return records, run.end_mark


def test_worked_example_replays_as_the_page_says() -> None:
    journal, _ = _hex_blocks("Worked example")
    records, end = _replay_bytes(journal)
    expected = [
        fmt.JournalRecord("key", 1, fmt.METAENTRY_ID_LEDGER_KEY, b"pw", EXAMPLE_ID, 512, 538),
        fmt.JournalRecord("data", 1, 0, _payload(), EXAMPLE_ID, 538, 563),
        fmt.JournalRecord("fence", 1, fmt.METAENTRY_ID_FENCE_KEY, b"", EXAMPLE_ID, 563, 583),
    ]
    assert records == expected
    assert end == LogMark(EXAMPLE_ID, 1024)


def test_worked_example_cut_or_zeroed_as_the_page_says() -> None:
    journal, _ = _hex_blocks("Worked example")
    section = " ".join(format_page.section(PAGE, "Worked example").split())
    assert "Cut at 560 (inside the entry), replay yields the key record only and stops at 538" in (
        section
    )
    cut, cut_end = _replay_bytes(journal[:560])
    assert [r.kind for r in cut] == ["key"]
    assert cut_end == LogMark(EXAMPLE_ID, 538)
    assert "with `00 00 00 00` written at 538 instead, the start is refused" in section
    with pytest.raises(DamagedFile) as caught:
        _replay_bytes(journal[:538] + bytes(4) + journal[542:])
    assert caught.value.offset == 538
