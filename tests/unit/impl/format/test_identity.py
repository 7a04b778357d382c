"""impl/format/identity.py against spec/format/identity.md: the constants of the page, the
worked round trip, and row D1 of the page's damage table (every way the bytes of a stamp can
be damaged is refused with a message saying what is wrong)."""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impl.format.identity import (
    KEYS,
    MAGIC_LINE,
    Stamp,
    StampFormatError,
    decode_stamp,
    encode_stamp,
)
from impl.format.names import IDENTITY_FILE_NAME
from tests.paths import ROOT

PAGE = (ROOT / "spec" / "format" / "identity.md").read_text(encoding="utf-8")

STAMP = Stamp(
    instance="0123456789abcdef0123456789abcdef",
    generation=3,
    sealed=True,
    directory="/data/ledgers1",
    journal_dirs=("/data/journal",),
    ledger_dirs=("/data/ledgers0", "/data/ledgers1"),
    index_dir="/data/ledgers0",
)


def test_the_page_shows_the_codec_s_magic_line_keys_and_file_name() -> None:
    block = PAGE.split("```")[1].strip().splitlines()
    assert block[0] == MAGIC_LINE
    assert [line.split("=")[0] for line in block[1:-1]] == list(KEYS)
    assert block[-1].startswith("crc32=")
    assert f"`<directory>/current/{IDENTITY_FILE_NAME}`" in PAGE


def test_a_stamp_reads_back_as_written_and_is_text() -> None:
    data = encode_stamp(STAMP)
    assert decode_stamp(data) == STAMP
    text = data.decode("utf-8")
    assert text.startswith(MAGIC_LINE + "\n") and "state=sealed\n" in text
    body, crc = text.rsplit("crc32=", 1)
    assert crc == f"{zlib.crc32(body.encode()):08x}\n"


@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_refused_with_a_typed_error_or_read(data: bytes) -> None:
    with contextlib.suppress(StampFormatError):
        decode_stamp(data)


def _recrc(text: str) -> bytes:
    """Text with a correct crc32 line: damage the CRC alone cannot catch."""
    body = text.encode("utf-8")
    return body + f"crc32={zlib.crc32(body):08x}\n".encode()


def _recrc_bytes(body: bytes) -> bytes:
    return body + f"crc32={zlib.crc32(body):08x}\n".encode()


def _body() -> str:
    return encode_stamp(STAMP).decode().rsplit("crc32=", 1)[0]


DAMAGE: dict[str, Callable[[], bytes]] = {
    "crc32 mismatch": lambda: encode_stamp(STAMP).replace(b"ledgers1", b"ledgers2", 1),
    "no crc32 line": lambda: encode_stamp(STAMP)[:-20],
    "cut short": lambda: encode_stamp(STAMP)[:30],
    "empty": lambda: b"",
    "bad crc32 line": lambda: _body().encode() + b"crc32=zz\n",
    "not UTF-8": lambda: _recrc_bytes(_body().encode().replace(b"journal", b"j\xffurnal", 1)),
    "first line": lambda: _recrc(_body().replace(MAGIC_LINE, "bkref directory identity v2")),
    "key missing": lambda: _recrc(_body().replace("generation=3\n", "")),
    "key out of order": lambda: _recrc(
        _body().replace("generation=3\nstate=sealed\n", "state=sealed\ngeneration=3\n")
    ),
    "bad instance": lambda: _recrc(_body().replace("0123456789abcdef0", "0123456789ABCDEF0")),
    "bad generation": lambda: _recrc(_body().replace("generation=3", "generation=0")),
    "bad state": lambda: _recrc(_body().replace("state=sealed", "state=done")),
    "directory not listed": lambda: _recrc(
        _body().replace("directory=/data/ledgers1", "directory=/data/other")
    ),
    "index not a ledger directory": lambda: _recrc(
        _body().replace("indexDirectory=/data/ledgers0", "indexDirectory=/data/journal")
    ),
    "too large": lambda: b"x" * (1 << 17),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_row_d1_every_damage_to_a_stamp_s_bytes_is_refused(name: str) -> None:
    data = DAMAGE[name]()
    with pytest.raises(StampFormatError) as refused:
        decode_stamp(data)
    assert str(refused.value)


def test_a_path_a_stamp_cannot_hold_is_refused_when_encoding() -> None:
    for bad in ("/a,b", "/a\nb", "/a\0b"):
        stamp = Stamp(
            instance=STAMP.instance,
            generation=1,
            sealed=False,
            directory=bad,
            journal_dirs=(bad,),
            ledger_dirs=("/l",),
            index_dir="/l",
        )
        with pytest.raises(StampFormatError, match=re.escape(repr(bad))):
            encode_stamp(stamp)
