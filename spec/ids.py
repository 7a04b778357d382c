"""Identifier types shared by the model and the implementation.

BookKeeper ids are Java longs (ledger and entry ids) and ints (entry log ids); NewType keeps
them apart in the type checker at no run-time cost. Range checks live with the codecs that
write them (spec/format/entry_log.md).
"""

from typing import NewType

LedgerId = NewType("LedgerId", int)
EntryId = NewType("EntryId", int)
EntryLogId = NewType("EntryLogId", int)

#: A location packs an entry log id and the offset of an entry's payload inside that log:
#: ``(log_id << 32) | offset`` (DefaultEntryLogger.addEntry).
Location = NewType("Location", int)

INT32_MAX = 2**31 - 1
#: A location keeps the payload offset in its low 32 bits: every offset is below this, so no
#: entry log may grow past it.
LOCATION_OFFSET_END = 2**32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def make_location(log_id: EntryLogId, offset: int) -> Location:
    """Pack a log id and a payload offset the way BookKeeper does."""
    assert 0 <= log_id <= INT32_MAX, log_id
    assert 0 <= offset < LOCATION_OFFSET_END, offset
    return Location((log_id << 32) | offset)


def location_log_id(location: Location) -> EntryLogId:
    """The entry log id of a location (``location >> 32``)."""
    return EntryLogId(location >> 32)


def location_offset(location: Location) -> int:
    """The payload offset of a location (``location & 0xffffffff``)."""
    return location & 0xFFFFFFFF
