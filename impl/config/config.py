"""Server configuration under BookKeeper's own key names (docs/design.md, "Configuration").

Why: BookKeeper users should recognise every knob, and a real ``bk_server.conf`` should load
unchanged. So the keys, types and defaults are ServerConfiguration's (checked one by one
against ServerConfiguration.java and AbstractConfiguration.java; docs/configuration.md is the
user page), and the file is read the way BookKeeper reads it: Apache Commons Configuration 2's
PropertiesConfiguration with a ``,`` list delimiter (AbstractConfiguration/ConfigurationUtil).

This module is pure: the caller reads the file and passes its text (proofs/cli/config.py).

Reading, as Commons Configuration does it (PropertiesReader, DefaultListDelimiterHandler):
- lines end at ``\\n``, ``\\r\\n`` or ``\\r``; a line that is blank or whose first non-blank
  character is ``#`` or ``!`` is a comment, even in the middle of a continuation;
- each line is trimmed; a line ending in an odd number of backslashes continues on the next;
  a continuation still open at the end of the file is dropped (BookKeeper drops it too; we warn);
- ``key=value``, ``key: value`` and ``key value`` all work; key and value are trimmed;
- the value is unescaped (``\\t \\n \\r \\f \\b \\uXXXX``; ``\\`` before one of ``:#=!\\'"``
  gives that character; before anything else the backslash stays), then split at every ``,``
  not escaped as ``\\,`` and each item trimmed;
- a key given on several lines accumulates all its items. A key that takes one value uses the
  first item, as Commons Configuration's getters do (we warn). ``--set`` replaces, like
  setProperty, so the last ``--set`` of a key wins.

Not verified / not supported: ``include``/``includeoptional`` (refused), ``${...}``
interpolation (refused in the values of keys bkref uses, kept verbatim in ignored keys),
BookKeeper's float32 rounding of ``float`` keys (we keep the decimal value), and the quirk
that BookKeeper re-splits ``\\,``-escaped commas when it copies the file into its composite
configuration.
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Callable, Mapping, Sequence

import attrs

from impl.config.bk_keys import BOOKKEEPER_KEYS, KNOWN_FROM
from impl.format.entry_log import LOGFILE_HEADER_SIZE, MIN_SANE_ENTRY_SIZE, RECORD_SIZE_PREFIX
from spec.errors import ConfigError

#: BookKeeperConstants.MAX_LOG_SIZE_LIMIT: the default and the largest logSizeLimit (1 GiB).
MAX_LOG_SIZE_LIMIT_BYTES = 1 << 30
#: A log below this size cannot hold its header and one record (1024 + 4 + 16 bytes).
SMALLEST_USEFUL_LOG_BYTES = LOGFILE_HEADER_SIZE + RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE
#: DefaultEntryLogger: maxSaneEntrySize = nettyMaxFrameSizeBytes - 500 (protocol overhead).
NETTY_FRAME_OVERHEAD_BYTES = 500
#: ServerConfiguration.validate: journalAlignmentSize is a multiple of 512, at least 512.
JOURNAL_ALIGNMENT_UNIT_BYTES = 512
#: DiskChecker/LedgerDirsMonitor compare thresholds with this slack.
THRESHOLD_SLACK = 1e-6
MS_PER_S = 1000
MIB = 1024 * 1024
KIB = 1024
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

Value = bool | int | float | str | tuple[str, ...]


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
    _spec("logSizeLimit", _L, MAX_LOG_SIZE_LIMIT_BYTES, "bytes", "log_size_limit_bytes",
          "an entry log is rotated when the next record would take it past this size",
          Bounds(low=0, high=MAX_LOG_SIZE_LIMIT_BYTES)),
    _spec("flushEntrylogBytes", _L, 0, "bytes", "flush_entrylog_bytes",
          "flush the current entry log after this many bytes; <= 0 flushes only at rotation"),
    _spec("entryLogFilePreallocationEnabled", _B, True, "", "entry_log_file_preallocation_enabled",
          "create the next entry log in the background before it is needed"),
    _spec("entryLogPerLedgerEnabled", _B, False, "", "entry_log_per_ledger_enabled",
          "one active entry log per ledger instead of one shared log"),
    _spec("entrylogMapAccessExpiryTimeInSeconds", _I, 300, "s",
          "entrylog_map_access_expiry_time_s",
          "per-ledger mode: close a ledger's log this long after its last add", _NON_NEGATIVE),
    _spec("maximumNumberOfActiveEntryLogs", _I, 500, "logs", "maximum_number_of_active_entry_logs",
          "per-ledger mode: at most this many logs open; the least recent is closed", _POSITIVE),
    _spec("writeBufferSizeBytes", _I, 65536, "bytes", "write_buffer_size_bytes",
          "capacity of an entry log's write buffer", _POSITIVE),
    _spec("readBufferSizeBytes", _I, 512, "bytes", "read_buffer_size_bytes",
          "capacity of an entry log's read buffer", _POSITIVE),
    _spec("nettyMaxFrameSizeBytes", _I, 5 * MIB, "bytes", "netty_max_frame_size_bytes",
          "largest request; entries above this minus 500 bytes are flagged as insane",
          Bounds(low=NETTY_FRAME_OVERHEAD_BYTES, low_open=True)),
    _spec("minUsableSizeForEntryLogCreation", _L, None, "bytes",
          "min_usable_size_for_entry_log_creation_bytes",
          "a full ledger directory may still take a new entry log if this much space is free",
          _NON_NEGATIVE, default_from="logSizeLimit"),
    # --- ledger directories and disk space
    _spec("diskUsageThreshold", _F, 0.95, "fraction", "disk_usage_threshold",
          "a ledger directory above this usage is full (no new writes)", _FRACTION),
    _spec("diskUsageWarnThreshold", _F, 0.90, "fraction", "disk_usage_warn_threshold",
          "above this usage the bookie warns and forces garbage collection", _FRACTION),
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

#: Property keys Commons Configuration treats as "load this other file".
INCLUDE_KEYS = frozenset({"include", "includeoptional"})


# --- where a value came from -----------------------------------------------------------


class Origin(enum.Enum):
    """Where a value came from."""

    DEFAULT = "default"
    FILE = "file"
    SET = "--set"


@attrs.frozen
class Source:
    """The origin of one value: the default, lines of the file, or ``--set``."""

    origin: Origin
    file_name: str = ""
    lines: tuple[int, ...] = ()
    derived_from: str = ""

    def __str__(self) -> str:
        if self.origin is Origin.FILE:
            return f"{self.file_name}:{','.join(str(line) for line in self.lines)}"
        if self.origin is Origin.SET:
            return "--set"
        if self.derived_from:
            return f"default (= {self.derived_from})"
        return "default"

    def first(self) -> Source:
        """The source of the first value only (a scalar key uses its first value)."""
        return attrs.evolve(self, lines=self.lines[:1])


DEFAULT_SOURCE = Source(Origin.DEFAULT)
SET_SOURCE = Source(Origin.SET)


# --- reading .properties text (pure) ---------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WS = "[ \\t\\n\\x0b\\f\\r]"
#: PropertiesReader.PROPERTY_PATTERN: key, optional separator, value.
_PROPERTY = re.compile(
    rf"((?:[^ \t\n\x0b\f\r\\=:]|\\.)*)({_WS}*(?:{_WS}+|[=:]){_WS}*)?(.*)", re.DOTALL
)
#: Characters whose escape PropertiesConfiguration.unescapeJava drops ("needsUnescape").
_UNESCAPE_CHARACTERS = ":#=!\\'\""
_SIMPLE_ESCAPES = {"r": "\r", "f": "\f", "t": "\t", "n": "\n", "b": "\b"}
_JAVA_TRIMMED = "".join(chr(code) for code in range(0x21))


@attrs.frozen
class PropertyLine:
    """One property read from the text: its key, its value split into items, its line."""

    key: str
    items: tuple[str, ...]
    line: int


@attrs.frozen
class PropertiesText:
    """The properties of a text, in order, and the line of a dropped unfinished property."""

    properties: tuple[PropertyLine, ...]
    dropped_line: int | None


def java_trim(text: str) -> str:
    """String.trim(): strip every character up to and including the space."""
    return text.strip(_JAVA_TRIMMED)


def is_comment_line(line: str) -> bool:
    """PropertiesConfiguration.isCommentLine: blank, or starting with ``#`` or ``!``."""
    stripped = java_trim(line)
    return not stripped or stripped[0] in "#!"


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def logical_lines(text: str) -> tuple[tuple[tuple[int, str], ...], int | None]:
    """Join continuation lines. Returns ((first line number, joined line), ...) and the line
    number of an unfinished continuation at the end of the text (dropped), if any."""
    joined: list[tuple[int, str]] = []
    parts: list[str] = []
    start: int | None = None
    for number, physical in enumerate(_LINE_BREAK.split(text), start=1):
        if is_comment_line(physical):
            continue
        line = java_trim(physical)
        if start is None:
            start = number
        if _continues(line):
            parts.append(line[:-1])
            continue
        parts.append(line)
        joined.append((start, "".join(parts)))
        parts, start = [], None
    return tuple(joined), start


def split_key_value(line: str) -> tuple[str, str]:
    """PropertiesReader.doParseProperty: the raw (still escaped) key and value of a line."""
    match = _PROPERTY.fullmatch(line)
    assert match is not None, line  # the pattern matches every string
    return java_trim(match.group(1)), java_trim(match.group(3))


def _combine_utf16(units: str) -> str:
    """Join \\uXXXX surrogate pairs into one character; a lone surrogate is an error."""
    try:
        return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError as exc:
        raise ValueError("a \\u escape names half of a surrogate pair") from exc


def unescape_value(raw: str, *, keep_unknown: bool = True) -> str:
    """PropertiesConfiguration.unescapeJava (classic mode). Raises ValueError on a bad
    ``\\u`` escape. With ``keep_unknown`` False every escaped character loses its backslash
    (the key rule of StringEscapeUtils)."""
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append(char)
            index += 1
            continue
        escaped = raw[index + 1]
        if escaped == "u":
            digits = raw[index + 2 : index + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"bad unicode escape \\u{digits}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        if escaped in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escaped])
        elif escaped in _UNESCAPE_CHARACTERS or not keep_unknown:
            out.append(escaped)
        else:
            out.append("\\" + escaped)
        index += 2
    return _combine_utf16("".join(out))


def split_items(value: str) -> tuple[str, ...]:
    """DefaultListDelimiterHandler(',').splitString with trimming: ``\\,`` is a literal comma,
    ``\\\\`` a backslash, any other backslash is kept."""
    items: list[str] = []
    token: list[str] = []
    escaping = False
    for char in value:
        if escaping:
            if char not in ",\\":
                token.append("\\")
            token.append(char)
            escaping = False
        elif char == ",":
            items.append(java_trim("".join(token)))
            token = []
        elif char == "\\":
            escaping = True
        else:
            token.append(char)
    if escaping:
        token.append("\\")
    items.append(java_trim("".join(token)))
    return tuple(items)


def parse_properties(text: str) -> PropertiesText:
    """Every property of a bk_server.conf-style text, in order (repeats kept)."""
    lines, dropped = logical_lines(text)
    found: list[PropertyLine] = []
    for number, line in lines:
        raw_key, raw_value = split_key_value(line)
        try:
            key = unescape_value(raw_key, keep_unknown=False)
            items = split_items(unescape_value(raw_value))
        except ValueError as exc:
            raise ConfigError(f"line {number}: {exc}; write the character itself") from exc
        found.append(PropertyLine(key, items, number))
    return PropertiesText(tuple(found), dropped)


def parse_override(text: str) -> tuple[str, tuple[str, ...]]:
    """A ``--set key=value`` argument: the key and its value items (same escapes as a file)."""
    if "=" not in text:
        raise ConfigError(
            f"--set {text!r}: expected key=value, for example --set logSizeLimit=1048576"
        )
    raw_key, raw_value = text.split("=", 1)
    key = java_trim(raw_key)
    if not key:
        raise ConfigError(f"--set {text!r}: the key before '=' is empty; expected key=value")
    try:
        return key, split_items(unescape_value(java_trim(raw_value)))
    except ValueError as exc:
        raise ConfigError(f"--set {text!r}: {exc}; write the character itself") from exc


# --- writing .properties text (pure) ---------------------------------------------------


def escape_item(item: str) -> str:
    """The text that reads back as exactly ``item`` (one list item). Anything outside
    printable ASCII is written as ``\\uXXXX``, as java.util.Properties.store does."""
    out: list[str] = []
    for char in item:
        if char == "\\":
            out.append("\\\\\\\\")  # unescapeJava halves it, splitString halves it again
        elif char == ",":
            out.append("\\,")
        elif " " <= char <= "~":
            out.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    return "".join(out)


def render_value(value: Value) -> str:
    """A value as it is written after ``key=`` in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(escape_item(item) for item in value)
    if isinstance(value, str):
        return escape_item(value)
    return repr(value)


# --- typed values ----------------------------------------------------------------------

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BINARY = re.compile(r"[01]+")
_JAVA_FLOAT = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0"})
_JAVA_LIMITS = {Kind.INT: (INT_MIN, INT_MAX), Kind.LONG: (LONG_MIN, LONG_MAX)}


def parse_java_integer(text: str) -> int | None:
    """PropertyConverter.toNumber for integers: decimal with a sign, ``0x`` hex or ``0b``
    binary. None if the text is not one."""
    if text.startswith("0x") and _HEX.fullmatch(text[2:]):
        return int(text[2:], 16)
    if text.startswith("0b") and _BINARY.fullmatch(text[2:]):
        return int(text[2:], 2)
    if _DECIMAL.fullmatch(text):
        return int(text)
    return None


def parse_java_float(text: str) -> float | None:
    """Float/Double(String) after PropertyConverter's ``0x``/``0b`` integer forms."""
    whole = parse_java_integer(text)
    if whole is not None and text.startswith(("0x", "0b")):
        return float(whole)
    if not _JAVA_FLOAT.fullmatch(text):
        return None
    number = text.rstrip("fFdD") if text[-1] in "fFdD" else text
    return float(number.replace("Infinity", "inf"))


def parse_java_boolean(text: str) -> bool | None:
    """BooleanUtils.toBooleanObject: true/false, yes/no, on/off, y/n, t/f, 1/0, any case."""
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None


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
    if spec.kind in _JAVA_LIMITS:
        java_low, java_high = _JAVA_LIMITS[spec.kind]
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


def _bad_value(spec: KeySpec, raw: str, where: Source, problem: str) -> ConfigError:
    return ConfigError(
        f"{where}: bad value {raw!r} for {spec.key}: {problem}; allowed: {describe_allowed(spec)}"
    )


def _convert_scalar(spec: KeySpec, raw: str, where: Source) -> Value:
    """One text value to the key's Java type, range-checked. Raises ConfigError."""
    if raw == "":
        raise _bad_value(spec, raw, where, "the value is empty (remove the line for the default)")
    if "${" in raw:
        raise _bad_value(spec, raw, where, "${...} interpolation is not supported by bkref")
    if spec.kind is Kind.STRING:
        return raw
    if spec.kind is Kind.BOOLEAN:
        flag = parse_java_boolean(raw)
        if flag is None:
            raise _bad_value(spec, raw, where, "not a boolean")
        return flag
    if spec.kind in _JAVA_LIMITS:
        whole = parse_java_integer(raw)
        java_low, java_high = _JAVA_LIMITS[spec.kind]
        if whole is None:
            raise _bad_value(spec, raw, where, "not an integer")
        if not java_low <= whole <= java_high or not spec.bounds.admits(whole):
            raise _bad_value(spec, raw, where, "out of range")
        return whole
    number = parse_java_float(raw)
    if number is None:
        raise _bad_value(spec, raw, where, "not a number")
    if not spec.bounds.admits(number):
        raise _bad_value(spec, raw, where, "out of range")
    return number


def _convert_list(spec: KeySpec, items: tuple[str, ...], where: Source) -> tuple[str, ...]:
    raw = ",".join(items)
    if any(item == "" for item in items):
        raise _bad_value(spec, raw, where, "the list has an empty item")
    if any("${" in item for item in items):
        raise _bad_value(spec, raw, where, "${...} interpolation is not supported by bkref")
    repeated = sorted({item for item in items if items.count(item) > 1})
    if repeated:
        raise _bad_value(spec, raw, where, f"{repeated[0]!r} is listed twice")
    return items


# --- the configuration value -----------------------------------------------------------


@attrs.frozen
class Setting:
    """The effective value of one key bkref uses, and where it came from."""

    key: str
    value: Value
    source: Source = attrs.field(eq=False)


@attrs.frozen
class IgnoredKey:
    """A key BookKeeper knows and bkref does not use, kept as read (its value items)."""

    key: str
    items: tuple[str, ...]
    source: Source = attrs.field(eq=False)

    @property
    def known_from(self) -> str:
        """The BookKeeper class (or bk_server.conf) that defines the key."""
        return KNOWN_FROM[self.key]


@attrs.frozen
class ServerConfig:
    """A validated configuration: every key bkref uses, typed, with its source.

    Equality compares values (settings and ignored keys), not sources or warnings, so a
    configuration written with to_properties() reads back equal.
    """

    settings: tuple[Setting, ...]
    ignored: tuple[IgnoredKey, ...] = ()
    warnings: tuple[str, ...] = attrs.field(default=(), eq=False)
    _by_key: Mapping[str, Setting] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_by_key", {setting.key: setting for setting in self.settings})

    def check_invariants(self) -> None:
        """Assert every relation the loader promises (tests call this after each load)."""
        assert tuple(setting.key for setting in self.settings) == tuple(s.key for s in KEYS)
        for setting in self.settings:
            spec = KEYS_BY_NAME[setting.key]
            assert _has_kind(setting.value, spec.kind), (setting.key, setting.value)
            if spec.kind in _JAVA_LIMITS or spec.kind in (Kind.FLOAT, Kind.DOUBLE):
                assert isinstance(setting.value, int | float)
                assert spec.bounds.admits(setting.value), (setting.key, setting.value)
        ignored_keys = [ignored.key for ignored in self.ignored]
        assert len(ignored_keys) == len(set(ignored_keys)), ignored_keys
        for key in ignored_keys:
            assert key in BOOKKEEPER_KEYS, key
            assert key not in KEYS_BY_NAME, key
        values = {setting.key: setting.value for setting in self.settings}
        sources = {setting.key: setting.source for setting in self.settings}
        for check in CROSS_CHECKS:
            assert check(values, sources) is None, check.__name__

    # --- lookup by BookKeeper name

    def get(self, key: str) -> Value:
        """The effective value of a key bkref uses, by BookKeeper's name."""
        return self._setting(key).value

    def source(self, key: str) -> str:
        """Where the value of a used or ignored key came from: default, file:line, --set."""
        for ignored in self.ignored:
            if ignored.key == key:
                return str(ignored.source)
        return str(self._setting(key).source)

    @property
    def ignored_keys(self) -> tuple[str, ...]:
        """The BookKeeper keys that were given but that bkref does not use, in order."""
        return tuple(ignored.key for ignored in self.ignored)

    def to_properties(self) -> str:
        """bk_server.conf-style text that load_config reads back to an equal config."""
        lines = ["# Effective bkref configuration (BookKeeper key names).", ""]
        lines += [f"{s.key}={render_value(s.value)}" for s in self.settings]
        if self.ignored:
            lines += ["", "# BookKeeper keys bkref does not use, kept as read."]
            lines += [f"{i.key}={render_value(i.items)}" for i in self.ignored]
        return "\n".join(lines) + "\n"

    def _setting(self, key: str) -> Setting:
        setting = self._by_key.get(key)
        if setting is None:
            raise ConfigError(f"bkref does not use the key {key!r}: {_unknown_hint(key)}")
        return setting

    def _int(self, key: str) -> int:
        value = self.get(key)
        assert isinstance(value, int) and not isinstance(value, bool), (key, value)
        return value

    def _float(self, key: str) -> float:
        value = self.get(key)
        assert isinstance(value, float), (key, value)
        return value

    def _bool(self, key: str) -> bool:
        value = self.get(key)
        assert isinstance(value, bool), (key, value)
        return value

    def _paths(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        assert isinstance(value, tuple), (key, value)
        return value

    # --- typed accessors, one per key, units last

    @property
    def journal_directory(self) -> str:
        value = self.get("journalDirectory")
        assert isinstance(value, str), value
        return value

    @property
    def journal_directories(self) -> tuple[str, ...]:
        return self._paths("journalDirectories")

    @property
    def ledger_directories(self) -> tuple[str, ...]:
        return self._paths("ledgerDirectories")

    @property
    def log_size_limit_bytes(self) -> int:
        return self._int("logSizeLimit")

    @property
    def flush_entrylog_bytes(self) -> int:
        return self._int("flushEntrylogBytes")

    @property
    def entry_log_file_preallocation_enabled(self) -> bool:
        return self._bool("entryLogFilePreallocationEnabled")

    @property
    def entry_log_per_ledger_enabled(self) -> bool:
        return self._bool("entryLogPerLedgerEnabled")

    @property
    def entrylog_map_access_expiry_time_s(self) -> int:
        return self._int("entrylogMapAccessExpiryTimeInSeconds")

    @property
    def maximum_number_of_active_entry_logs(self) -> int:
        return self._int("maximumNumberOfActiveEntryLogs")

    @property
    def write_buffer_size_bytes(self) -> int:
        return self._int("writeBufferSizeBytes")

    @property
    def read_buffer_size_bytes(self) -> int:
        return self._int("readBufferSizeBytes")

    @property
    def netty_max_frame_size_bytes(self) -> int:
        return self._int("nettyMaxFrameSizeBytes")

    @property
    def max_sane_entry_size_bytes(self) -> int:
        """DefaultEntryLogger.maxSaneEntrySize: nettyMaxFrameSizeBytes - 500."""
        return self.netty_max_frame_size_bytes - NETTY_FRAME_OVERHEAD_BYTES

    @property
    def min_usable_size_for_entry_log_creation_bytes(self) -> int:
        return self._int("minUsableSizeForEntryLogCreation")

    @property
    def disk_usage_threshold(self) -> float:
        return self._float("diskUsageThreshold")

    @property
    def disk_usage_warn_threshold(self) -> float:
        return self._float("diskUsageWarnThreshold")

    @property
    def disk_usage_lwm_threshold(self) -> float:
        return self._float("diskUsageLwmThreshold")

    @property
    def disk_check_interval_ms(self) -> int:
        return self._int("diskCheckInterval")

    @property
    def flush_interval_ms(self) -> int:
        return self._int("flushInterval")

    @property
    def gc_wait_time_ms(self) -> int:
        return self._int("gcWaitTime")

    @property
    def minor_compaction_threshold(self) -> float:
        return self._float("minorCompactionThreshold")

    @property
    def minor_compaction_interval_s(self) -> int:
        return self._int("minorCompactionInterval")

    @property
    def minor_compaction_max_time_ms(self) -> int:
        return self._int("minorCompactionMaxTimeMillis")

    @property
    def major_compaction_threshold(self) -> float:
        return self._float("majorCompactionThreshold")

    @property
    def major_compaction_interval_s(self) -> int:
        return self._int("majorCompactionInterval")

    @property
    def major_compaction_max_time_ms(self) -> int:
        return self._int("majorCompactionMaxTimeMillis")

    @property
    def is_force_gc_allow_when_no_space(self) -> bool:
        return self._bool("isForceGCAllowWhenNoSpace")

    @property
    def force_allow_compaction(self) -> bool:
        return self._bool("forceAllowCompaction")

    @property
    def use_transactional_compaction(self) -> bool:
        return self._bool("useTransactionalCompaction")

    @property
    def journal_format_version_to_write(self) -> int:
        return self._int("journalFormatVersionToWrite")

    @property
    def journal_max_size_mib(self) -> int:
        return self._int("journalMaxSizeMB")

    @property
    def journal_max_size_bytes(self) -> int:
        return self.journal_max_size_mib * MIB

    @property
    def journal_max_backups(self) -> int:
        return self._int("journalMaxBackups")

    @property
    def journal_pre_alloc_size_mib(self) -> int:
        return self._int("journalPreAllocSizeMB")

    @property
    def journal_pre_alloc_size_bytes(self) -> int:
        return self.journal_pre_alloc_size_mib * MIB

    @property
    def journal_write_buffer_size_kib(self) -> int:
        return self._int("journalWriteBufferSizeKB")

    @property
    def journal_write_buffer_size_bytes(self) -> int:
        return self.journal_write_buffer_size_kib * KIB

    @property
    def journal_alignment_size_bytes(self) -> int:
        return self._int("journalAlignmentSize")

    @property
    def journal_sync_data(self) -> bool:
        return self._bool("journalSyncData")

    @property
    def journal_adaptive_group_writes(self) -> bool:
        return self._bool("journalAdaptiveGroupWrites")

    @property
    def journal_max_group_wait_ms(self) -> int:
        return self._int("journalMaxGroupWaitMSec")

    @property
    def journal_buffered_writes_threshold_bytes(self) -> int:
        return self._int("journalBufferedWritesThreshold")

    @property
    def journal_buffered_entries_threshold(self) -> int:
        return self._int("journalBufferedEntriesThreshold")

    @property
    def journal_flush_when_queue_empty(self) -> bool:
        return self._bool("journalFlushWhenQueueEmpty")

    @property
    def skip_replay_journal_invalid_record(self) -> bool:
        return self._bool("skipReplayJournalInvalidRecord")


def _has_kind(value: Value, kind: Kind) -> bool:
    if kind is Kind.BOOLEAN:
        return isinstance(value, bool)
    if kind in (Kind.INT, Kind.LONG):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in (Kind.FLOAT, Kind.DOUBLE):
        return isinstance(value, float)
    if kind is Kind.STRING:
        return isinstance(value, str) and value != ""
    return isinstance(value, tuple) and all(isinstance(item, str) for item in value)


# --- relations between keys ------------------------------------------------------------

Values = Mapping[str, Value]
Sources = Mapping[str, Source]
CrossCheck = Callable[[Values, Sources], str | None]


def _num(values: Values, key: str) -> float:
    value = values[key]
    assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
    return value


def _shown(values: Values, sources: Sources, *keys: str) -> str:
    return ", ".join(f"{key}={render_value(values[key])} ({sources[key]})" for key in keys)


def check_disk_thresholds(values: Values, sources: Sources) -> str | None:
    """DiskChecker and LedgerDirsMonitor refuse a warn or lwm threshold above the usage
    threshold (with 1e-6 slack)."""
    threshold = _num(values, "diskUsageThreshold")
    for key in ("diskUsageWarnThreshold", "diskUsageLwmThreshold"):
        if _num(values, key) - threshold > THRESHOLD_SLACK:
            return (
                f"{_shown(values, sources, key, 'diskUsageThreshold')}: {key} is above "
                f"diskUsageThreshold; allowed: {key} <= diskUsageThreshold"
            )
    return None


def check_journal_alignment(values: Values, sources: Sources) -> str | None:
    """ServerConfiguration.validate: alignment is a multiple of 512 and fits in one
    preallocation step."""
    alignment = _num(values, "journalAlignmentSize")
    if alignment % JOURNAL_ALIGNMENT_UNIT_BYTES:
        return (
            f"{_shown(values, sources, 'journalAlignmentSize')}: not a multiple of "
            f"{JOURNAL_ALIGNMENT_UNIT_BYTES}; allowed: 512, 1024, 1536, ... (bytes)"
        )
    if alignment > _num(values, "journalPreAllocSizeMB") * MIB:
        return (
            f"{_shown(values, sources, 'journalAlignmentSize', 'journalPreAllocSizeMB')}: "
            "the alignment is larger than one preallocation step; allowed: "
            "journalAlignmentSize <= journalPreAllocSizeMB * 1048576"
        )
    return None


def check_per_ledger_compaction(values: Values, sources: Sources) -> str | None:
    """ServerConfiguration.validate: per-ledger logs and transactional compaction exclude
    each other."""
    if values["entryLogPerLedgerEnabled"] is True and values["useTransactionalCompaction"] is True:
        keys = ("entryLogPerLedgerEnabled", "useTransactionalCompaction")
        return (
            f"{_shown(values, sources, *keys)}: BookKeeper refuses both together; "
            "allowed: at most one of them true"
        )
    return None


def check_compaction(values: Values, sources: Sources) -> str | None:
    """ServerConfiguration.validate and GarbageCollectorThread: an enabled compaction has a
    threshold <= 1 and an interval no shorter than gcWaitTime; minor runs more often and at
    a lower threshold than major."""
    gc_wait_ms = _num(values, "gcWaitTime")
    for kind in ("minor", "major"):
        interval_key, threshold_key = f"{kind}CompactionInterval", f"{kind}CompactionThreshold"
        interval_s = _num(values, interval_key)
        if interval_s > 0 and interval_s * MS_PER_S < gc_wait_ms:
            return (
                f"{_shown(values, sources, interval_key, 'gcWaitTime')}: the interval is "
                f"shorter than gcWaitTime; allowed: {interval_key} * 1000 >= gcWaitTime, "
                "or <= 0 to disable"
            )
        if interval_s > 0 and _num(values, threshold_key) > 1.0:
            return (
                f"{_shown(values, sources, threshold_key)}: above 1; allowed: a fraction "
                "<= 1, or <= 0 to disable"
            )
    if _enabled(values, "minor") and _enabled(values, "major"):
        keys = (
            "minorCompactionInterval",
            "majorCompactionInterval",
            "minorCompactionThreshold",
            "majorCompactionThreshold",
        )
        interval_ok = _num(values, keys[0]) < _num(values, keys[1])
        threshold_ok = _num(values, keys[2]) < _num(values, keys[3])
        if not (interval_ok and threshold_ok):
            return (
                f"{_shown(values, sources, *keys)}: with both enabled, allowed: "
                "minorCompactionInterval < majorCompactionInterval and "
                "minorCompactionThreshold < majorCompactionThreshold"
            )
    return None


def _enabled(values: Values, kind: str) -> bool:
    interval = _num(values, f"{kind}CompactionInterval")
    return interval > 0 and _num(values, f"{kind}CompactionThreshold") > 0


CROSS_CHECKS: tuple[CrossCheck, ...] = (
    check_disk_thresholds,
    check_journal_alignment,
    check_per_ledger_compaction,
    check_compaction,
)


# --- loading -----------------------------------------------------------------------------


@attrs.frozen
class _Given:
    """Everything given for one key: its items (accumulated over lines) and their source."""

    items: tuple[str, ...]
    source: Source
    occurrences: int


def _collect(
    text: str | None, source_name: str, overrides: Sequence[str]
) -> tuple[dict[str, _Given], list[str]]:
    """Keys in first-seen order with their items: file lines accumulate, --set replaces."""
    given: dict[str, _Given] = {}
    warnings: list[str] = []
    if text is not None:
        parsed = _parse_file(text, source_name)
        for prop in parsed.properties:
            old = given.get(prop.key)
            if old is None:
                source = Source(Origin.FILE, source_name, (prop.line,))
                given[prop.key] = _Given(prop.items, source, 1)
            else:
                source = attrs.evolve(old.source, lines=(*old.source.lines, prop.line))
                given[prop.key] = _Given(old.items + prop.items, source, old.occurrences + 1)
        if parsed.dropped_line is not None:
            warnings.append(
                f"{source_name}:{parsed.dropped_line}: the last property ends with a "
                "continuation backslash and no next line; BookKeeper drops it, so does bkref"
            )
    for override in overrides:
        key, items = parse_override(override)
        given[key] = _Given(items, SET_SOURCE, 1)
    return given, warnings


def _parse_file(text: str, source_name: str) -> PropertiesText:
    try:
        return parse_properties(text)
    except ConfigError as exc:
        raise ConfigError(f"{source_name}: {exc}") from exc


_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _words(key: str) -> frozenset[str]:
    """The words of a camelCase key, lower case, plural 's' dropped (for reordered names
    such as maxBackupJournals / journalMaxBackups)."""
    return frozenset(word.lower().removesuffix("s") for word in _WORD.findall(key))


def _unknown_hint(key: str) -> str:
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


def _check_key(key: str, source: Source) -> None:
    if key.lower() in INCLUDE_KEYS:
        raise ConfigError(
            f"{source}: {key!r} (loading another file) is not supported by bkref; "
            "copy that file's lines into this one"
        )
    if not key:
        raise ConfigError(f"{source}: a line has a value but no key; write key=value")
    if key not in KEYS_BY_NAME and key not in BOOKKEEPER_KEYS:
        raise ConfigError(
            f"{source}: unknown key {key!r}: neither bkref nor BookKeeper knows it; "
            f"{_unknown_hint(key)}"
        )


def _value_of(spec: KeySpec, given: _Given, warnings: list[str]) -> tuple[Value, Source]:
    """The typed value of a key that was given, with the source it came from."""
    if spec.kind is Kind.LIST:
        if given.items == ("",):
            return (), given.source  # Commons reads an empty list as unset: the default applies
        return _convert_list(spec, given.items, given.source), given.source
    source = given.source.first()
    if len(given.items) > 1:
        warnings.append(
            f"{given.source}: {spec.key} takes one value but was given "
            f"{len(given.items)} ({', '.join(given.items)}); BookKeeper uses the first, "
            f"so does bkref: {given.items[0]!r}"
        )
    return _convert_scalar(spec, given.items[0], source), source


def _resolve_defaults(values: dict[str, Value], sources: dict[str, Source]) -> None:
    """Fill keys whose default is another key's value (in table order, so chains work)."""
    for spec in KEYS:
        if spec.key in values and values[spec.key] != ():
            continue
        if spec.default_from is None:
            assert spec.default is not None, spec.key
            values[spec.key], sources[spec.key] = spec.default, DEFAULT_SOURCE
            continue
        base = values[spec.default_from]
        if spec.kind is Kind.LIST:
            assert isinstance(base, str), (spec.key, base)
            values[spec.key] = (base,)
        else:
            values[spec.key] = base
        sources[spec.key] = Source(Origin.DEFAULT, derived_from=spec.default_from)


def _soft_warnings(values: Values, sources: Sources, given: Mapping[str, _Given]) -> list[str]:
    """Settings BookKeeper accepts that are probably not what the user meant."""
    warnings: list[str] = []
    limit = _num(values, "logSizeLimit")
    if limit < SMALLEST_USEFUL_LOG_BYTES:
        warnings.append(
            f"{_shown(values, sources, 'logSizeLimit')}: below {SMALLEST_USEFUL_LOG_BYTES} "
            "bytes (header + one smallest record), so every entry log holds exactly one "
            "entry; BookKeeper allows it"
        )
    both_given = "journalDirectory" in given and "journalDirectories" in given
    if both_given and values["journalDirectories"] != (values["journalDirectory"],):
        warnings.append(
            f"{_shown(values, sources, 'journalDirectory')}: ignored because "
            "journalDirectories is set (journalDirectory is deprecated)"
        )
    return warnings


def load_config(text: str | None, source_name: str, overrides: Sequence[str]) -> ServerConfig:
    """Read a bk_server.conf-style text (None for no file), apply ``--set key=value``
    overrides, validate, and return the configuration. Raises ConfigError naming the key,
    the value, what is allowed and where the value came from."""
    given, warnings = _collect(text, source_name, overrides)
    values: dict[str, Value] = {}
    sources: dict[str, Source] = {}
    ignored: list[IgnoredKey] = []
    for key, item in given.items():
        _check_key(key, item.source)
        spec = KEYS_BY_NAME.get(key)
        if spec is None:
            ignored.append(IgnoredKey(key, item.items, item.source))
            continue
        values[key], sources[key] = _value_of(spec, item, warnings)
    _resolve_defaults(values, sources)
    for spec in KEYS:
        if spec.default_from is not None and spec.kind is not Kind.LIST:
            value = values[spec.key]
            assert isinstance(value, int | float)
            if not spec.bounds.admits(value):
                raise _bad_value(spec, render_value(value), sources[spec.key], "out of range")
    for check in CROSS_CHECKS:
        problem = check(values, sources)
        if problem is not None:
            raise ConfigError(problem)
    warnings += _soft_warnings(values, sources, given)
    settings = tuple(Setting(spec.key, values[spec.key], sources[spec.key]) for spec in KEYS)
    config = ServerConfig(settings, tuple(ignored), tuple(warnings))
    config.check_invariants()
    return config


def default_config() -> ServerConfig:
    """BookKeeper's defaults, as a bookie started without a configuration file has them."""
    return load_config(None, "", ())
