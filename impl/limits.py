"""Every bound of the engine in one place, with its unit last, production and test values side
by side (docs/design.md, "Limits").

Why one object: a bound that lives as a module constant is easy to forget when a test wants
the engine to reach it. The checks (the refinement harness, the bookie crash check) open the
bookie with :data:`TEST_LIMITS`, so that what happens at a bound (a read handle evicted, a
scan window refilled mid-record, index segments merged, journal replay reading across a
chunk, completed acks pruned) happens after a few steps instead of never. Production code
uses :data:`LIMITS`. ``Bookie.open`` takes the object and hands it to the parts it builds
(entry logger, ledger index, index rebuild, journal replay, pending acks); the driver and the
adapter server take theirs as a keyword argument defaulting to :data:`LIMITS`.

What is not here, and where it is instead:

- sizes the operator sets (``logSizeLimit``, ``writeBufferSizeBytes``, group-commit wait,
  ...): configuration under BookKeeper's key names (impl/config/config.py); the checks' tiny
  values for those are :data:`TEST_SETTINGS` below;
- facts of the on-disk formats (header sizes, the most ledgers a map record may hold, the
  32-bit location offset, the longest master key an index segment can hold): the codecs
  under impl/format/, each pointing at its spec page.

Each field is checked when the object is built (a bound of zero or less would hang or refuse
everything: the error names the field), and :meth:`Limits.check_invariants`, also run then,
checks how the fields relate.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from impl.format.entry_log import (
    LEDGERS_MAP_MAX_BATCH_SIZE,
    MIN_SANE_ENTRY_SIZE,
    RECORD_SIZE_PREFIX,
)
from impl.format.ledger_index import MASTER_KEY_MAX_BYTES as INDEX_KEY_MAX_BYTES
from spec.ids import LOCATION_OFFSET_END

KIB = 1024
MIB = 1024 * KIB

#: The smallest scan window: one record head (4-byte size, 8-byte ledger id, 8-byte entry
#: id), which the entry-log scanner must see whole before it decides anything.
SCAN_WINDOW_MIN_BYTES = RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"Limits.{attribute.name} must be positive, got {value}")


@attrs.frozen(kw_only=True)
class Limits:
    """The engine's bounds. Names end in their unit (``_bytes``, ``_ms``, ``_logs``) or in
    ``_max`` / ``_min`` for counts. Each field says why it exists and who reads it."""

    # --- entry logs (impl/entrylog/) ----------------------------------------------------
    #: The largest ``logSizeLimit`` accepted (ServerConfiguration.MAX_LOG_SIZE_LIMIT, 1 GiB):
    #: a location's offset is 32 bits, with room for the last record past the limit. Read
    #: from LIMITS by the configuration's key table (impl/config/keys.py) and the entry
    #: logger's settings (impl/entrylog/logger.py), which are checked before any engine exists.
    log_size_limit_max_bytes: int = attrs.field(default=1 << 30, validator=_positive)
    #: Read handles the entry logger keeps open on logs other than the active one; the oldest
    #: is closed first (impl/entrylog/logger.py, EntryLogger._source). Bounds open files.
    read_handles_max: int = attrs.field(default=64, validator=_positive)
    #: Bytes the entry-log scanner reads at a time; records may straddle windows
    #: (impl/entrylog/reader.py, scan/iter_records/extract_metadata; passed by the entry
    #: logger and the index rebuild). Bounds memory on a log of any size.
    scan_chunk_bytes: int = attrs.field(default=MIB, validator=_positive)
    #: Ledgers per record of a sealed log's ledgers map (impl/format/entry_log.py,
    #: encode_ledgers_map, called by impl/entrylog/manager.py at sealing). BookKeeper writes
    #: 10,000 (LEDGERS_MAP_MAX_BATCH_SIZE, also the most a record may hold) and reads records
    #: of any count; the checks write 3, so that a log of a handful of ledgers fills a batch
    #: exactly or spills into the next.
    ledgers_map_batch_max: int = attrs.field(
        default=LEDGERS_MAP_MAX_BATCH_SIZE, validator=_positive
    )
    #: A ``lastId`` file longer than this is garbage, not an id (impl/entrylog/ids.py,
    #: read_last_id, for the LogIdAllocator of the entry logger): ``<8 hex digits>\\n`` fits
    #: with room to spare, and a damaged file is never read whole.
    last_id_file_max_bytes: int = attrs.field(default=64, validator=_positive)

    # --- journal (impl/journal/) --------------------------------------------------------
    #: Bytes journal replay reads at a time; a longer record is read whole
    #: (impl/journal/replay.py, JournalReplay, given by recovery). Bounds replay's memory.
    replay_chunk_bytes: int = attrs.field(default=4 * MIB, validator=_positive)

    # --- ledger index (impl/index/) -----------------------------------------------------
    #: Index segments on disk (the full one and its deltas) before a flush merges them into
    #: one full segment (impl/index/ledger_index.py, LedgerIndex._should_merge; the page
    #: spec/format/ledger_index.md calls it SEGMENTS_MAX). Bounds the files a load reads.
    index_segments_max: int = attrs.field(default=16, validator=_positive)
    #: Deltas are merged early once they outweigh the full segment and this many bytes
    #: (LedgerIndex._should_merge; MERGE_MIN_BYTES on the page): small indexes do not merge
    #: at every flush, large ones spend at most twice the deltas' bytes on merging.
    index_merge_min_bytes: int = attrs.field(default=MIB, validator=_positive)
    #: A progress line every this many entry logs while the index is rebuilt from them
    #: (impl/index/rebuild.py, rebuild_index; impl/bookie/recovery.py prints the summary
    #: itself below it). Bounds the time an operator waits without news.
    rebuild_progress_every_logs: int = attrs.field(default=16, validator=_positive)

    # --- the journal (impl/journal/journal.py) ------------------------------------------
    #: A journal file rolls over past the smaller of this and journalMaxSizeMB (read by
    #: Bookie._journal_settings). BookKeeper's key counts MiB, so without this cap no test run
    #: ever rolls a journal over, replays across several journal files or trims one; the
    #: checks set a few sectors. Default: no cap below any journalMaxSizeMB.
    journal_file_max_bytes: int = attrs.field(default=1 << 62, validator=_positive)

    # --- the bookie (impl/bookie/) ------------------------------------------------------
    #: Master keys longer than this are refused by add and fence (impl/bookie/bookie.py) and
    #: by the adapter's request parser (impl/server/protocol.py, RequestBounds). At most what
    #: an index segment can hold; BookKeeper's keys are 20-byte digests.
    master_key_max_bytes: int = attrs.field(default=INDEX_KEY_MAX_BYTES, validator=_positive)
    #: The bookie's list of pending acks is pruned of completed ones when it reaches this
    #: length, or twice what the last pruning kept (impl/bookie/ack.py, PendingAcks):
    #: amortised O(1) per add, and completing an ack on the journal thread takes no lock.
    pending_acks_prune_min: int = attrs.field(default=1024, validator=_positive)
    #: The driver's journal thread never sleeps less than this while records wait for their
    #: group (impl/bookie/driver.py, BookieDriver._journal_sleep_ns): no busy loop.
    group_wait_min_ms: int = attrs.field(default=1, validator=_positive)
    #: How long the journal thread sleeps with nothing queued (BookieDriver._journal_sleep_ns);
    #: an append wakes it earlier.
    journal_idle_ms: int = attrs.field(default=500, validator=_positive)
    #: The maintenance thread wakes at least this often to read the clock for checkpoints and
    #: disk checks (BookieDriver._maintenance_loop): a clock moved by hand is seen soon.
    maintenance_tick_ms: int = attrs.field(default=100, validator=_positive)
    #: How long BookieDriver.stop waits for each thread before reporting it stuck.
    thread_join_timeout_ms: int = attrs.field(default=30_000, validator=_positive)

    #: Bytes of ``bkref-reserve`` in every journal and ledger directory: room the bookie
    #: frees, on a disk its own data filled to the byte, for the few writes that get it out
    #: of there (an accept's identity stamps, the start's lastMark and index flush;
    #: impl/bookie/reserve.py). Written at a start that finds it missing and has room.
    dir_reserve_bytes: int = attrs.field(default=256 * KIB, validator=_positive)

    # --- input a user names to a command (proofs/cli/input_file.py) ---------------------
    #: The largest configuration file ``--conf`` reads (bkref config, adapter, dirs accept,
    #: import): BookKeeper's own bk_server.conf is about 50 KiB; ``--conf /dev/zero`` stops
    #: here with one line instead of filling the memory.
    conf_file_max_bytes: int = attrs.field(default=16 * MIB, validator=_positive)
    #: The largest trace check-trace, explain, check-traces and record read (spec/trace.md):
    #: traces are read whole to be judged.
    trace_file_max_bytes: int = attrs.field(default=1 << 30, validator=_positive)
    #: The longest line of either: an add of the largest entry, base64 in a trace step, fits
    #: (the adapter's own line bound is about 40 MiB).
    input_line_max_bytes: int = attrs.field(default=64 * MIB, validator=_positive)
    #: How long a FIFO named as input is given to find a writer before the command says it
    #: has none (a FIFO without a writer would block its open, then its reads, forever).
    #: Process substitution (``--conf <(...)``) has its writer from the start.
    input_writer_wait_ms: int = attrs.field(default=2_000, validator=_positive)
    #: How long a pipe or device named as input may send nothing before the command gives up
    #: on it (a writer that never writes and never closes).
    input_idle_ms: int = attrs.field(default=60_000, validator=_positive)

    # --- the adapter server (impl/server/) ----------------------------------------------
    #: Requests the adapter holds unanswered before its reader stops reading
    #: (impl/server/dispatcher.py, Dispatcher; spec/adapter.md, "Flow control").
    in_flight_max: int = attrs.field(default=10_000, validator=_positive)
    #: How long the adapter waits for the answers in flight once the bookie has shut down
    #: (Dispatcher.close; spec/adapter.md, "Shutdown and end of input").
    drain_timeout_ms: int = attrs.field(default=10_000, validator=_positive)

    def __attrs_post_init__(self) -> None:
        self.check_invariants()

    def check_invariants(self) -> None:
        """How the bounds relate; each message names the fields."""
        assert self.ledgers_map_batch_max <= LEDGERS_MAP_MAX_BATCH_SIZE, (
            f"ledgers_map_batch_max={self.ledgers_map_batch_max} is above what a map record "
            f"may hold ({LEDGERS_MAP_MAX_BATCH_SIZE})"
        )
        assert self.scan_chunk_bytes >= SCAN_WINDOW_MIN_BYTES, (
            f"scan_chunk_bytes={self.scan_chunk_bytes} is below one record head "
            f"({SCAN_WINDOW_MIN_BYTES})"
        )
        assert self.master_key_max_bytes <= INDEX_KEY_MAX_BYTES, (
            f"master_key_max_bytes={self.master_key_max_bytes} is above what an index segment "
            f"holds ({INDEX_KEY_MAX_BYTES})"
        )
        assert self.group_wait_min_ms <= self.journal_idle_ms, (
            f"group_wait_min_ms={self.group_wait_min_ms} is above "
            f"journal_idle_ms={self.journal_idle_ms}"
        )
        assert self.input_line_max_bytes <= self.trace_file_max_bytes, (
            f"input_line_max_bytes={self.input_line_max_bytes} is above "
            f"trace_file_max_bytes={self.trace_file_max_bytes}"
        )
        assert self.log_size_limit_max_bytes < LOCATION_OFFSET_END, (
            f"log_size_limit_max_bytes={self.log_size_limit_max_bytes} does not fit a "
            "location's 32-bit offset"
        )


#: What a production bookie runs with.
LIMITS = Limits()

#: What the checks run with: every bound reached within a few steps of their workloads. No
#: value here made a check noticeably slower (the refinement benchmark is within its noise;
#: the bookie crash check gains the crash points of an index merge, about 4% more states).
TEST_LIMITS = Limits(
    # Two sealed logs read in turn already evict a handle.
    read_handles_max=2,
    # A record head plus 44 bytes: most of the checks' records straddle two windows.
    scan_chunk_bytes=64,
    # One journal sector: replay reads across chunks after a record or two.
    replay_chunk_bytes=512,
    # Every second checkpoint merges the index segments ...
    index_segments_max=2,
    # ... and a few deltas outweigh a small full segment.
    index_merge_min_bytes=256,
    # A rebuild of three logs already reports progress.
    rebuild_progress_every_logs=2,
    # A sealed log of three ledgers fills a map record; a fourth starts the next.
    ledgers_map_batch_max=3,
    # A journal rolls over after a few groups: replay crosses files, checkpoints trim them.
    journal_file_max_bytes=2048,
    # Completed acks are pruned at nearly every add.
    pending_acks_prune_min=2,
    # An adapter under test stops reading after a handful of unanswered requests.
    in_flight_max=8,
    # A reserve of two sectors: laid down at a first start, freed on a full disk.
    dir_reserve_bytes=1024,
)

#: The checks' configuration, under BookKeeper's key names: entry logs of a few records so
#: they rotate every few adds, a small write buffer so it flushes mid-log, and no
#: group-commit wait (the checks decide when the journal is forced).
TEST_SETTINGS: Mapping[str, str] = {
    "logSizeLimit": "1400",
    "writeBufferSizeBytes": "256",
    "journalMaxGroupWaitMSec": "0",
}
