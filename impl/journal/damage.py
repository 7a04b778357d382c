"""What is damage in a journal and a lastMark: one pure decision each, facts in, verdict out.

Spec page: spec/format/journal.md, "Damage" (rows j1 to j18, m6, m7, m10) and "Which crash
states are possible".

Why a module of its own: recovery (impl/journal/replay.py, for impl/bookie/recovery.py) and
``bkref inspect`` (proofs/cli/inspect.py) both judge where a journal scan stops and whether a
lastMark lies on a record boundary. When each kept its own rule they disagreed (issue 26:
recovery skipped the later-group check at lastMark's own offset and lost ten acknowledged
adds without a word, while inspect called the same journal damaged). Now the facts are read
from the file once (``impl/journal/replay.py``: ``stop_facts``, ``walk_lengths``) and judged
here, by both, and tests/unit/impl/bookie/test_damage.py runs every row of the page's table
through recovery and through inspect.

The rule (the page argues it): bkref writes a journal one group at a time (records, then
padding to a multiple of 512), syncs it, and only then writes the next; it never
preallocates. So after a crash only the last group of a file can be incomplete, missing whole
512-byte sectors (zeros where the size reached the disk and the data did not, in any order)
or ending early. Hence, in V5+ journals:

- a zero length inside a sector that holds data is damage (j3): a sector reaches the disk
  whole, and the writer never writes a zero length;
- a later group after the stop (a padding record ending on a sector boundary, a record
  after it) is damage in journals bkref wrote after its own lastMark (``strict``: j4, j6,
  j15). BookKeeper may have several groups in flight when it crashes, so after its lastMark
  (16 bytes, no index coverage) the same shape is a crash state (j18);
- a journal without the BKLG header (read as version 1) that holds any data, or is longer
  than a header, is damage in the same journals (``strict``, j19): bkref writes versions 4
  to 6 only, each with its header synced before the first record;
- anything else (the end of the file, zeros to it, a record cut short, a zeroed first sector
  with data in a later one of the same last group) is a crash state.

V1 to V4 journals have no padding, so a group does not start on a sector and zeros anywhere in
the last one are a crash state (j17).
"""

from __future__ import annotations

from typing import Literal

import attrs

from impl.format.journal import HEADER_SIZE, V5

#: The oldest version bkref writes (journalFormatVersionToWrite takes 4 to 6); every one of
#: them starts with the BKLG header.
MIN_WRITTEN_VERSION = 4

#: What the scan met where it stopped: the end of the file (or a padding record cut by it),
#: a zero length, or a record whose length runs past the end of the file.
StopReason = Literal["end", "zero", "cut"]

#: Stable codes for where a scan stopped (docs/inspect.md, the journal object's ``stop``).
END_OF_FILE = "end_of_file"
PREALLOCATED_ZEROS = "preallocated_zeros"
TORN_RECORD = "torn_record"
TORN_GROUP = "torn_group"
ZERO_LENGTH_THEN_DATA = "zero_length_then_data"
LATER_GROUP = "damaged"


@attrs.frozen
class StopFacts:
    """What the bytes say about a stop at ``offset`` of a journal of ``size`` bytes.

    ``nonzero_after``: bytes from ``offset`` to the end that are not zero. ``zero_sector_data``:
    for a zero length, whether every sector its four bytes touch holds a byte that is not
    zero. ``later_group``: where a later group starts after the stop, or None."""

    version: int
    reason: StopReason
    offset: int
    size: int
    nonzero_after: int
    zero_sector_data: bool
    later_group: int | None


@attrs.frozen
class StopVerdict:
    """The judgement of a stop: a stable ``code``, a sentence, and ``damage`` (the problem,
    in words) or None when a crash can leave it."""

    code: str
    text: str
    damage: str | None


def judge_stop(facts: StopFacts, *, strict: bool) -> StopVerdict:
    """Whether a crash can leave a journal scan's stop (module docstring). ``strict``: the
    journal was written by bkref after a lastMark bkref wrote (one with the index coverage),
    so the later-group rule applies, at the mark's own offset too."""
    offset, size = facts.offset, facts.size
    after = size - offset
    if facts.reason == "end":
        return StopVerdict(END_OF_FILE, f"the end of the file at offset {offset}", None)
    headerless = offset > 0 or facts.nonzero_after or size > HEADER_SIZE
    if strict and facts.version < MIN_WRITTEN_VERSION and headerless:
        return StopVerdict(
            LATER_GROUP,
            "the file does not start with the BKLG header, yet it holds data "
            f"({facts.nonzero_after} bytes that are not zero from offset {offset}, {size} "
            "bytes in all)",
            "no BKLG header, yet records or data follow: bkref writes and syncs the header of "
            f"every journal (versions {MIN_WRITTEN_VERSION} to 6) before its first record, so a "
            f"crash leaves a journal without one only empty or all zeros within its first "
            f"{HEADER_SIZE} bytes",
        )
    if facts.nonzero_after == 0:
        return StopVerdict(
            PREALLOCATED_ZEROS,
            f"a zero length at offset {offset}, zeros to the end of the file ({after} bytes): "
            "BookKeeper's preallocation, or a last group whose data never reached the disk "
            "(bkref never preallocates); normal",
            None,
        )
    if facts.version >= V5 and facts.reason == "zero" and facts.zero_sector_data:
        return StopVerdict(
            ZERO_LENGTH_THEN_DATA,
            f"a zero length at offset {offset}, inside a 512-byte sector that holds data, and "
            f"{facts.nonzero_after} of the {after} bytes after it are not zero",
            "a zero length where a record belongs, inside a 512-byte sector that holds "
            "data: a crash leaves whole sectors unwritten, and the writer never writes a "
            "zero length",
        )
    later = facts.later_group if facts.version >= V5 else None
    if later is not None and strict:
        return StopVerdict(
            LATER_GROUP,
            f"replay stops at offset {offset}, and a later group of records starts at offset "
            f"{later}",
            f"replay would stop here, yet a later group of records starts at offset {later} "
            "(after a padding record): bkref syncs each group before it writes the next, so "
            "a crash leaves only the last group incomplete",
        )
    note = ""
    if later is not None:
        note = (
            f"; a later group starts at offset {later}, which only BookKeeper (several groups "
            "in flight) leaves: after a lastMark bkref wrote, a start refuses it"
        )
    if facts.reason == "cut":
        return StopVerdict(
            TORN_RECORD,
            f"a record cut short at offset {offset} ({after} bytes): a write cut by a crash, "
            f"or a journal still being written; never acknowledged, replay stops there{note}",
            None,
        )
    return StopVerdict(
        TORN_GROUP,
        f"a zero length at offset {offset}, and {facts.nonzero_after} of the {after} bytes "
        "after it are not zero: a last group torn by a crash (its sectors reach the disk in "
        f"any order{', and a V4 group does not start on one' if facts.version < V5 else ''})"
        f"; never acknowledged, replay stops there{note}",
        None,
    )


#: Why a walk of the record lengths stopped before its target (``walk_lengths``).
WalkStop = Literal["", "end", "zero", "cut", "invalid"]


def judge_mark(
    *,
    journal: str,
    mark_offset: int,
    size: int,
    header_end: int,
    reached: int,
    stop: WalkStop,
    skip_invalid: bool,
) -> str | None:
    """Why a lastMark offset cannot be where a checkpoint left it in its journal (rows m6, m7,
    m10), or None; ``journal`` names the journal in the sentence. A mark is written only
    once the journal bytes before it are durable, at the end of a group (or, from older
    bkref and BookKeeper, where a replay stopped).

    ``reached``/``stop``: where a walk of the record lengths from the header stopped, at or
    past the mark (``stop`` "") or before it and why. A mark inside the header is where
    replay starts anyway; a mark at the end of a journal whose rest an invalid record made
    replay skip (skipReplayJournalInvalidRecord) is where that replay ended. An invalid
    record before the mark is the journal's damage, not the mark's: None, and the caller
    reports the record (rows j5, j9, j10)."""
    if mark_offset > size:
        return f"points past the end of journal {journal} ({size} bytes)"
    if mark_offset <= header_end:
        return None
    if reached > mark_offset:
        return (
            f"is not on a record boundary of journal {journal}: a record runs from before "
            f"offset {mark_offset} to offset {reached}"
        )
    if stop == "invalid" and not skip_invalid:
        return None
    if reached < mark_offset and not (stop == "invalid" and mark_offset == size):
        why = {"end": "the end of the file", "zero": "a zero length", "cut": "a record cut short"}
        return (
            f"lies past the records of journal {journal}: they end at offset {reached} "
            f"({why.get(stop, stop)})"
        )
    return None
