"""The keys bkref reads, under BookKeeper's own names: type, default, bounds, unit, meaning.

Why: BookKeeper users should recognise every knob, and a real ``bk_server.conf`` should load
unchanged. So the keys, types and defaults are ServerConfiguration's (checked one by one
against ServerConfiguration.java and AbstractConfiguration.java; docs/configuration.md is the
user page, and docs/design.md, "Configuration", says why bkref reads BookKeeper's names).
This module is the table (KEYS) and what each key accepts; reading the text is
impl/config/properties.py, and loading, validating and holding a configuration is
impl/config/config.py. Every key name BookKeeper knows, used or not, is impl/config/bk_keys.py.

Not verified: BookKeeper's float32 rounding of ``float`` keys (bkref keeps the decimal value).
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Mapping

import attrs

from impl.config.bk_keys import BOOKKEEPER_KEYS
from impl.config.properties import Value
from impl.format.entry_log import MIN_SANE_ENTRY_SIZE
from impl.limits import LIMITS

#: DefaultEntryLogger: maxSaneEntrySize = nettyMaxFrameSizeBytes - 500 (protocol overhead).
NETTY_FRAME_OVERHEAD_BYTES = 500
#: The smallest nettyMaxFrameSizeBytes bkref takes, exclusive: the overhead plus an entry's
#: 16 bytes of ids, so that the largest sane entry carries at least one byte of data (below
#: it the adapter could take no add at all; 501 to 516 used to fail an assertion at start).
NETTY_FRAME_MIN_EXCLUSIVE_BYTES = NETTY_FRAME_OVERHEAD_BYTES + MIN_SANE_ENTRY_SIZE
#: ServerConfiguration.validate: journalAlignmentSize is a multiple of 512, at least 512.
JOURNAL_ALIGNMENT_UNIT_BYTES = 512
MIB = 1024 * 1024
KIB = 1024
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class Kind(enum.Enum):
    """The Java type BookKeeper reads a key as."""

    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"


@attrs.frozen
class Bounds:
    """The values a number may take. ``None`` means the Java type's own limit."""

    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = False

    def admits(self, value: float) -> bool:
        """True if ``value`` lies inside (written so that NaN is never admitted)."""
        if self.low is not None:
            above = value > self.low if self.low_open else value >= self.low
            if not above:
                return False
        if self.high is not None:
            below = value < self.high if self.high_open else value <= self.high
            if not below:
                return False
        return math.isfinite(value)


ANY = Bounds()


@attrs.frozen
class KeySpec:
    """One key bkref uses: BookKeeper's name, Java type, default, unit and meaning."""

    key: str
    kind: Kind
    #: The default; ``None`` when the default is the value of ``default_from``.
    default: Value | None
    unit: str
    #: The ServerConfig accessor, named with the unit last.
    attr: str
    doc: str
    bounds: Bounds = ANY
    default_from: str | None = None


def _spec(
    key: str,
    kind: Kind,
    default: Value | None,
    unit: str,
    attr: str,
    doc: str,
    bounds: Bounds = ANY,
    default_from: str | None = None,
) -> KeySpec:
    return KeySpec(key, kind, default, unit, attr, doc, bounds, default_from)


_POSITIVE = Bounds(low=1)
_NON_NEGATIVE = Bounds(low=0)
_FRACTION = Bounds(low=0, low_open=True, high=1, high_open=True)
_I, _L, _F, _D, _B = Kind.INT, Kind.LONG, Kind.FLOAT, Kind.DOUBLE, Kind.BOOLEAN

#: Every key bkref uses, in the order ``bkref config`` prints them.
KEYS: tuple[KeySpec, ...] = (
    # --- directories
    _spec("journalDirectory", Kind.STRING, "/tmp/bk-txn", "path", "journal_directory",
          "deprecated single journal directory; used only when journalDirectories is unset"),
    _spec("journalDirectories", Kind.LIST, None, "paths", "journal_directories",
          "journal directories, one journal each", default_from="journalDirectory"),
    _spec("ledgerDirectories", Kind.LIST, ("/tmp/bk-data",), "paths", "ledger_directories",
          "directories holding entry logs (and bkref's index)"),
    # --- entry logger
    # BookKeeperConstants.MAX_LOG_SIZE_LIMIT (1 GiB) is the default and the largest value.
    _spec("logSizeLimit", _L, LIMITS.log_size_limit_max_bytes, "bytes", "log_size_limit_bytes",
          "an entry log is rotated when the next record would take it past this size",
          Bounds(low=0, high=LIMITS.log_size_limit_max_bytes)),
    _spec("flushEntrylogBytes", _L, 0, "bytes", "flush_entrylog_bytes",
          "flush the current entry log after this many bytes; <= 0 flushes only at rotation"),
    _spec("entryLogFilePreallocationEnabled", _B, True, "", "entry_log_file_preallocation_enabled",
          "create the next entry log in the background before it is needed"),
    _spec("entryLogPerLedgerEnabled", _B, False, "", "entry_log_per_ledger_enabled",
          "one active entry log per ledger instead of one shared log"),
    _spec("entrylogMapAccessExpiryTimeInSeconds", _I, 300, "s",
          "entrylog_map_access_expiry_time_s",
          "per-ledger mode: close a ledger's log this long after its last add; slots mode: "
          "forget the ledger's slot then", _NON_NEGATIVE),
    _spec("maximumNumberOfActiveEntryLogs", _I, 500, "logs", "maximum_number_of_active_entry_logs",
          "per-ledger mode: at most this many logs open; the least recent is closed; slots "
          "mode: at most this many ledgers mapped to a slot", _POSITIVE),
    # bkref's own key (BKREF_OWN_KEYS): BookKeeper has no slots manager.
    _spec("entryLogSlotsPerLedgerDir", _I, 0, "logs", "entry_log_slots_per_ledger_dir",
          "bkref's own key, not BookKeeper's: > 0 keeps this many active entry logs per "
          "writable ledger directory, ledgers mapped to them round robin (the slots manager "
          "of BookKeeper issue #570); 0 is off", _NON_NEGATIVE),
    _spec("writeBufferSizeBytes", _I, 65536, "bytes", "write_buffer_size_bytes",
          "capacity of an entry log's write buffer", _POSITIVE),
    _spec("readBufferSizeBytes", _I, 512, "bytes", "read_buffer_size_bytes",
          "capacity of an entry log's read buffer", _POSITIVE),
    _spec("nettyMaxFrameSizeBytes", _I, 5 * MIB, "bytes", "netty_max_frame_size_bytes",
          "largest request; entries above this minus 500 bytes are flagged as insane",
          Bounds(low=NETTY_FRAME_MIN_EXCLUSIVE_BYTES, low_open=True)),
    _spec("minUsableSizeForEntryLogCreation", _L, None, "bytes",
          "min_usable_size_for_entry_log_creation_bytes",
          "a full ledger directory may still take a new entry log if this much space is free",
          _NON_NEGATIVE, default_from="logSizeLimit"),
    # --- ledger directories and disk space
    _spec("diskUsageThreshold", _F, 0.95, "fraction", "disk_usage_threshold",
          "a ledger directory above this usage is full (no new writes)", _FRACTION),
    _spec("diskUsageWarnThreshold", _F, 0.90, "fraction", "disk_usage_warn_threshold",
          "above this usage the directory is almost full: its active log rotates off",
          _FRACTION),
    _spec("diskUsageLwmThreshold", _F, None, "fraction", "disk_usage_lwm_threshold",
          "a full directory becomes writable again below this usage", _FRACTION,
          default_from="diskUsageThreshold"),
    _spec("diskCheckInterval", _I, 10000, "ms", "disk_check_interval_ms",
          "period of the disk usage check", _POSITIVE),
    # --- checkpoint
    _spec("flushInterval", _I, 10000, "ms", "flush_interval_ms",
          "period of the checkpoint (flush ledger storage, persist lastMark)", _POSITIVE),
    # --- garbage collection and compaction
    _spec("gcWaitTime", _L, 600000, "ms", "gc_wait_time_ms",
          "period of the garbage collector", _POSITIVE),
    _spec("minorCompactionThreshold", _D, 0.2, "fraction", "minor_compaction_threshold",
          "minor compaction rewrites logs whose live fraction is below this; <= 0 disables"),
    _spec("minorCompactionInterval", _L, 3600, "s", "minor_compaction_interval_s",
          "period of minor compaction; <= 0 disables"),
    _spec("minorCompactionMaxTimeMillis", _L, -1, "ms", "minor_compaction_max_time_ms",
          "stop a minor compaction run after this long; <= 0 runs to the end"),
    _spec("majorCompactionThreshold", _D, 0.8, "fraction", "major_compaction_threshold",
          "major compaction rewrites logs whose live fraction is below this; <= 0 disables"),
    _spec("majorCompactionInterval", _L, 86400, "s", "major_compaction_interval_s",
          "period of major compaction; <= 0 disables"),
    _spec("majorCompactionMaxTimeMillis", _L, -1, "ms", "major_compaction_max_time_ms",
          "stop a major compaction run after this long; <= 0 runs to the end"),
    _spec("isForceGCAllowWhenNoSpace", _B, False, "", "is_force_gc_allow_when_no_space",
          "keep compacting when the disks are full (else compaction is suspended)"),
    _spec("forceAllowCompaction", _B, False, "", "force_allow_compaction",
          "allow a forced compaction even when periodic compaction is disabled"),
    _spec("useTransactionalCompaction", _B, False, "", "use_transactional_compaction",
          "compact through a separate .compacting log in three phases (BP-6)"),
    _spec("compactionRate", _I, 1000, "entries/s", "compaction_rate",
          "deprecated: the default of compactionRateByEntries", _POSITIVE),
    _spec("compactionRateByEntries", _I, None, "entries/s", "compaction_rate_by_entries",
          "compaction copies at most this many entries per second", _POSITIVE,
          default_from="compactionRate"),
    _spec("compactionRateByBytes", _I, 1000000, "bytes/s", "compaction_rate_by_bytes",
          "with isThrottleByBytes, compaction copies at most this many bytes per second",
          _POSITIVE),
    _spec("isThrottleByBytes", _B, False, "", "is_throttle_by_bytes",
          "throttle compaction by compactionRateByBytes instead of compactionRateByEntries"),
    # --- journal
    _spec("journalFormatVersionToWrite", _I, 6, "version", "journal_format_version_to_write",
          "journal format version of new journal files",
          Bounds(low=4, high=6)),
    _spec("journalMaxSizeMB", _L, 2048, "MiB", "journal_max_size_mib",
          "a journal file is rolled after this size", _POSITIVE),
    _spec("journalMaxBackups", _I, 5, "files", "journal_max_backups",
          "old journal files kept after a checkpoint no longer needs them", _NON_NEGATIVE),
    _spec("journalPreAllocSizeMB", _I, 16, "MiB", "journal_pre_alloc_size_mib",
          "the journal file is extended by this much at a time", _POSITIVE),
    _spec("journalWriteBufferSizeKB", _I, 64, "KiB", "journal_write_buffer_size_kib",
          "capacity of the journal's write buffer", _POSITIVE),
    _spec("journalAlignmentSize", _I, 512, "bytes", "journal_alignment_size_bytes",
          "journal writes are padded to a multiple of this size",
          Bounds(low=JOURNAL_ALIGNMENT_UNIT_BYTES)),
    _spec("journalSyncData", _B, True, "", "journal_sync_data",
          "BookKeeper acknowledges without a sync when false; bkref always syncs first"),
    _spec("journalAdaptiveGroupWrites", _B, True, "", "journal_adaptive_group_writes",
          "group several adds into one journal fsync"),
    _spec("journalMaxGroupWaitMSec", _L, 2, "ms", "journal_max_group_wait_ms",
          "longest an add waits for its group to be forced", _NON_NEGATIVE),
    _spec("journalBufferedWritesThreshold", _L, 524288, "bytes",
          "journal_buffered_writes_threshold_bytes",
          "force the group once this many bytes are waiting", _NON_NEGATIVE),
    _spec("journalBufferedEntriesThreshold", _L, 0, "entries",
          "journal_buffered_entries_threshold",
          "force the group once this many entries are waiting; <= 0 uses the bytes threshold"),
    _spec("journalFlushWhenQueueEmpty", _B, False, "", "journal_flush_when_queue_empty",
          "force the group as soon as no add is waiting"),
    _spec("skipReplayJournalInvalidRecord", _B, False, "", "skip_replay_journal_invalid_record",
          "on replay, skip the rest of a journal file at an invalid record instead of failing"),
)  # fmt: skip

KEYS_BY_NAME: Mapping[str, KeySpec] = {spec.key: spec for spec in KEYS}

#: The keys of KEYS that are bkref's own, not BookKeeper's: every other key of KEYS is a key
#: of impl/config/bk_keys.py (tests/unit/impl/config/test_keys.py checks both). Each names
#: a feature BookKeeper does not have, and says so in its meaning; a bk_server.conf never
#: sets one, so a real BookKeeper configuration still loads unchanged and means the same.
#: ``entryLogSlotsPerLedgerDir``: the slots entry-log manager (impl/entrylog/slots.py).
BKREF_OWN_KEYS: frozenset[str] = frozenset({"entryLogSlotsPerLedgerDir"})


# --- what bkref does with each key -----------------------------------------------------


class Status(enum.Enum):
    """What bkref does with a key it reads (docs/configuration.md, "Keys bkref uses").

    Every key of KEYS is parsed and validated as BookKeeper does, so a real bk_server.conf
    loads; but a parsed key is not necessarily a working one. A key whose behaviour is not
    built is either accepted with a warning (ignoring it cannot lose, resurrect or misplace
    data: the feature is simply absent) or refused unless it has its default (ignoring it
    would silently give a directory another layout than the operator asked for). No key is
    refused today (entryLogPerLedgerEnabled was, until per-ledger entry logs were built); the
    status stays for the next key whose absence would change the layout."""

    IMPLEMENTED = "implemented"
    IGNORED = "ignored"
    REFUSED = "refused"


@attrs.frozen
class NotBuilt:
    """A key of KEYS whose behaviour bkref does not have, and why that is safe or not."""

    status: Status
    #: What bkref does instead, in words (printed in the warning or the error).
    instead: str
    #: The value with which BookKeeper behaves as bkref does: no warning, no refusal. None:
    #: every value given is warned about (the feature runs at any value in BookKeeper).
    harmless: Value | None = None
    #: Or: harmless when equal to this other key's value.
    harmless_as_key: str | None = None


_TRANSACTIONAL = (
    "bkref always compacts transactionally (BP-6: a .compacting log, then .compacted, then "
    "the index); BookKeeper's in-place compactor (useTransactionalCompaction=false) is not "
    "built"
)

#: The keys of KEYS that bkref parses and validates but does not act on. Every other key of
#: KEYS is implemented: the engine reads its value (tests/unit/impl/config/test_status.py
#: checks both halves).
NOT_BUILT: Mapping[str, NotBuilt] = {
    "readBufferSizeBytes": NotBuilt(
        Status.IGNORED,
        "bkref reads each entry with positioned reads of its own bytes, without a read buffer",
    ),
    "minUsableSizeForEntryLogCreation": NotBuilt(
        Status.IGNORED,
        "with every ledger directory full bkref refuses a new entry log (no_space) instead "
        "of creating one in a full directory that still has this much room",
    ),
    "diskUsageLwmThreshold": NotBuilt(
        Status.IGNORED,
        "a full directory becomes writable again as soon as its usage is at or below "
        "diskUsageThreshold (no low-water mark)",
        harmless_as_key="diskUsageThreshold",
    ),
    "useTransactionalCompaction": NotBuilt(Status.IGNORED, _TRANSACTIONAL, harmless=True),
    "journalPreAllocSizeMB": NotBuilt(
        Status.IGNORED,
        "bkref never preallocates the journal: each group is appended and synced as written "
        "(the key still bounds journalAlignmentSize, as BookKeeper checks)",
    ),
    "journalWriteBufferSizeKB": NotBuilt(
        Status.IGNORED, "bkref writes each journal group with one write, without a buffer"
    ),
    "journalAdaptiveGroupWrites": NotBuilt(
        Status.IGNORED,
        "bkref always groups: one journal sync covers every record written before it (each "
        "add is still acknowledged only after the sync that covers it)",
        harmless=True,
    ),
}


def status_of(key: str) -> Status:
    """The status of a key of KEYS."""
    assert key in KEYS_BY_NAME, key
    not_built = NOT_BUILT.get(key)
    return Status.IMPLEMENTED if not_built is None else not_built.status


#: The range of each Java integer type.
JAVA_LIMITS: Mapping[Kind, tuple[int, int]] = {
    Kind.INT: (INT_MIN, INT_MAX),
    Kind.LONG: (LONG_MIN, LONG_MAX),
}


# --- what a key accepts, in words ------------------------------------------------------


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**63 else repr(value)


def describe_allowed(spec: KeySpec) -> str:
    """What a key accepts, in words ("an integer from 0 to 1073741824 (bytes)")."""
    if spec.kind is Kind.BOOLEAN:
        return "true or false (also yes/no, on/off)"
    if spec.kind is Kind.STRING:
        return "a non-empty text"
    if spec.kind is Kind.LIST:
        return "one or more distinct non-empty paths, comma-separated"
    bounds = spec.bounds
    low, high = bounds.low, bounds.high
    if spec.kind in JAVA_LIMITS:
        java_low, java_high = JAVA_LIMITS[spec.kind]
        low = java_low if low is None else low + bounds.low_open
        high = java_high if high is None else high - bounds.high_open
        words = f"an integer from {_number_text(low)} to {_number_text(high)}"
    else:
        words = _describe_float(bounds)
    return f"{words} ({spec.unit})" if spec.unit else words


def _describe_float(bounds: Bounds) -> str:
    parts: list[str] = []
    if bounds.low is not None:
        word = "above" if bounds.low_open else "at least"
        parts.append(f"{word} {_number_text(bounds.low)}")
    if bounds.high is not None:
        word = "below" if bounds.high_open else "at most"
        parts.append(f"{word} {_number_text(bounds.high)}")
    return "a number " + " and ".join(parts) if parts else "any finite number"


# --- a misspelt key --------------------------------------------------------------------

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _words(key: str) -> frozenset[str]:
    """The words of a camelCase key, lower case, plural 's' dropped (for reordered names
    such as maxBackupJournals / journalMaxBackups)."""
    return frozenset(word.lower().removesuffix("s") for word in _WORD.findall(key))


def unknown_key_hint(key: str) -> str:
    """'did you mean ...?' for a misspelt key, preferring the keys bkref uses: same name in
    another case, then a close spelling, then the same words in another order."""
    for candidates in (KEYS_BY_NAME, BOOKKEEPER_KEYS):
        by_lower = {name.lower(): name for name in candidates}
        if key.lower() in by_lower:
            return f"did you mean {by_lower[key.lower()]!r}? (key names are case-sensitive)"
        close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.75)
        if close:
            return f"did you mean {by_lower[close[0]]!r}?"
        same_words = sorted(name for name in candidates if _words(name) == _words(key))
        if same_words:
            return f"did you mean {same_words[0]!r}?"
    return "check the spelling against docs/configuration.md"
