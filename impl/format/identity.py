"""The identity stamp: which bkref instance a directory belongs to, and the directory set it
was stamped with (BookKeeper's cookie, in bkref's own file).

Spec page: spec/format/identity.md (the bytes, the rules a start applies, and what a crash
can leave beside what only damage can). This module is the pure codec: a :class:`Stamp` in,
bytes out, and back; where stamps are read, compared and written is
impl/bookie/identity.py.

Why a stamp of our own and not BookKeeper's ``VERSION`` cookie: the cookie names the bookie's
host and port and is checked against a copy in ZooKeeper, neither of which a storage layer
alone has; and a directory must never look like BookKeeper's when it is bkref's, or the
other way round. The stamp is text, so an operator can read it with ``cat``, and ends with a
CRC32 of everything before it, so damage is told apart from a stamp a crash left (a crash
never leaves a torn stamp: it is written under a temporary name, fsynced, then renamed).

Differences from BookKeeper's cookie: the stamp records the whole directory set in order and
the directory that holds the ledger index (BookKeeper's index lives in every ledger
directory, bkref's in one), a generation (raised by every ``bkref dirs accept``) and a state
(``pending`` while a set of stamps is being written, ``sealed`` once all are durable).
"""

from __future__ import annotations

import zlib
from typing import Final

import attrs

#: The first line of every stamp: the format and its version.
MAGIC_LINE: Final = "bkref directory identity v1"
#: The keys, in the order they are written.
KEYS: Final = (
    "instance",
    "generation",
    "state",
    "directory",
    "journalDirectories",
    "ledgerDirectories",
    "indexDirectory",
)
STATE_PENDING: Final = "pending"
STATE_SEALED: Final = "sealed"
#: Largest stamp read (a stamp is a few hundred bytes; a bigger file is not a stamp).
MAX_STAMP_BYTES: Final = 1 << 16
INSTANCE_HEX_DIGITS: Final = 32


class StampFormatError(ValueError):
    """The bytes are not a stamp (the message says which line and why)."""


@attrs.frozen
class Stamp:
    """One directory's stamp. ``directory`` is the configured path the directory was stamped
    under; the lists are the configuration's (normalised by
    impl.bookie.identity.normalise_dir); ``index_dir`` is the ledger directory whose
    ``current/`` holds the ledger index."""

    instance: str
    generation: int
    sealed: bool
    directory: str
    journal_dirs: tuple[str, ...]
    ledger_dirs: tuple[str, ...]
    index_dir: str

    def __attrs_post_init__(self) -> None:
        assert len(self.instance) == INSTANCE_HEX_DIGITS, self.instance
        assert self.generation >= 1, self.generation
        assert self.index_dir in self.ledger_dirs, (self.index_dir, self.ledger_dirs)
        assert self.directory in (*self.journal_dirs, *self.ledger_dirs), self.directory

    def same_set(self, other: Stamp) -> bool:
        """Whether both stamps record the same instance, generation and directory set."""
        return (self.instance, self.generation, self.journal_dirs, self.ledger_dirs) == (
            other.instance,
            other.generation,
            other.journal_dirs,
            other.ledger_dirs,
        ) and self.index_dir == other.index_dir


def _check_path(path: str) -> None:
    if not path or any(c in path for c in ",\n\r\0"):
        raise StampFormatError(f"directory path {path!r} cannot be written in a stamp")


def encode_stamp(stamp: Stamp) -> bytes:
    """The stamp's bytes: the magic line, one ``key=value`` line per key, then
    ``crc32=<8 hex digits>`` of every byte before that line. Raises StampFormatError for a
    path a stamp cannot hold (a comma, a line break or NUL: the configuration's lists are
    comma-separated, so such a path cannot be configured either)."""
    for path in (stamp.directory, *stamp.journal_dirs, *stamp.ledger_dirs):
        _check_path(path)
    values = (
        stamp.instance,
        str(stamp.generation),
        STATE_SEALED if stamp.sealed else STATE_PENDING,
        stamp.directory,
        ",".join(stamp.journal_dirs),
        ",".join(stamp.ledger_dirs),
        stamp.index_dir,
    )
    body = MAGIC_LINE + "\n" + "".join(f"{k}={v}\n" for k, v in zip(KEYS, values, strict=True))
    data = body.encode("utf-8")
    return data + f"crc32={zlib.crc32(data):08x}\n".encode("ascii")


def decode_stamp(data: bytes) -> Stamp:
    """The stamp in ``data``; raises StampFormatError saying what is wrong."""
    if len(data) > MAX_STAMP_BYTES:
        raise StampFormatError(f"{len(data)} bytes, more than a stamp ({MAX_STAMP_BYTES})")
    end = data.rfind(b"crc32=")
    if end < 0 or not data.endswith(b"\n"):
        raise StampFormatError("no crc32 line at the end (the file is cut short or not a stamp)")
    body, crc_line = data[:end], data[end:-1]
    try:
        crc = int(crc_line[len(b"crc32=") :].decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        raise StampFormatError(f"bad crc32 line {crc_line!r}") from None
    if len(crc_line) != len(b"crc32=") + 8 or zlib.crc32(body) != crc:
        raise StampFormatError(
            f"crc32 mismatch: the file says {crc_line[6:]!r}, its bytes give {zlib.crc32(body):08x}"
        )
    try:
        lines = body.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        raise StampFormatError("not UTF-8") from None
    if lines[0] != MAGIC_LINE:
        raise StampFormatError(f"first line {lines[0]!r} is not {MAGIC_LINE!r}")
    fields = lines[1:-1]
    if lines[-1] != "" or len(fields) != len(KEYS):
        raise StampFormatError(f"{len(fields)} key lines where a v1 stamp has {len(KEYS)}")
    values: dict[str, str] = {}
    for number, (key, line) in enumerate(zip(KEYS, fields, strict=True), start=2):
        name, sep, value = line.partition("=")
        if name != key or not sep:
            raise StampFormatError(f"line {number} is {line!r}, expected {key}=...")
        values[key] = value
    instance = values["instance"]
    if len(instance) != INSTANCE_HEX_DIGITS or any(c not in "0123456789abcdef" for c in instance):
        raise StampFormatError(f"instance {instance!r} is not {INSTANCE_HEX_DIGITS} hex digits")
    generation_text = values["generation"]
    if not generation_text.isdigit() or int(generation_text) < 1:
        raise StampFormatError(f"generation {generation_text!r} is not a positive integer")
    state = values["state"]
    if state not in (STATE_PENDING, STATE_SEALED):
        raise StampFormatError(f"state {state!r} is neither {STATE_PENDING} nor {STATE_SEALED}")
    journals = tuple(values["journalDirectories"].split(","))
    ledgers = tuple(values["ledgerDirectories"].split(","))
    for path in (values["directory"], *journals, *ledgers):
        _check_path(path)
    if values["indexDirectory"] not in ledgers:
        raise StampFormatError("indexDirectory is not one of ledgerDirectories")
    if values["directory"] not in (*journals, *ledgers):
        raise StampFormatError("directory is not one of the directories the stamp lists")
    return Stamp(
        instance=instance,
        generation=int(generation_text),
        sealed=state == STATE_SEALED,
        directory=values["directory"],
        journal_dirs=journals,
        ledger_dirs=ledgers,
        index_dir=values["indexDirectory"],
    )
