"""The server configuration: loaded, validated, typed, with where each value came from.

Why: an operator points bkref at the ``bk_server.conf`` their bookies already use and gets
the same values BookKeeper would use, or an error naming the key, the value, what is allowed
and the file line or ``--set`` it came from (docs/design.md, "Configuration"; the user page is
docs/configuration.md). The text is read by impl/config/properties.py and the keys, types
and defaults are the table of impl/config/keys.py; this module turns the properties given
into a ServerConfig: it accumulates and overrides them, converts each to its key's type,
fills the defaults, checks the relations between keys (ServerConfiguration.validate and the
classes that read the keys), and warns about settings BookKeeper accepts that are probably
not meant.

- a key given on several lines accumulates all its items. A key that takes one value uses the
  first item, as Commons Configuration's getters do (we warn). ``--set`` replaces, like
  setProperty, so the last ``--set`` of a key wins;
- a key bkref does not use but BookKeeper knows (impl/config/bk_keys.py) is kept as read and
  reported as ignored; a key nobody knows is refused with a suggestion.

Pure: the caller reads the file and passes its text (proofs/cli/config.py).

Not verified / not supported: ``include``/``includeoptional`` (refused), ``${...}``
interpolation (refused in the values of keys bkref uses, kept verbatim in ignored keys).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

import attrs

from impl.config.bk_keys import BOOKKEEPER_KEYS, KNOWN_FROM
from impl.config.keys import (
    JAVA_LIMITS,
    JOURNAL_ALIGNMENT_UNIT_BYTES,
    KEYS,
    KEYS_BY_NAME,
    KIB,
    MIB,
    NETTY_FRAME_OVERHEAD_BYTES,
    NOT_BUILT,
    KeySpec,
    Kind,
    Status,
    describe_allowed,
    unknown_key_hint,
)
from impl.config.properties import (
    INCLUDE_KEYS,
    PropertiesText,
    Value,
    parse_java_boolean,
    parse_java_float,
    parse_java_integer,
    parse_override,
    parse_properties,
    render_value,
)
from impl.format.entry_log import LOGFILE_HEADER_SIZE, MIN_SANE_ENTRY_SIZE, RECORD_SIZE_PREFIX
from spec.errors import ConfigError

#: A log below this size cannot hold its header and one record (1024 + 4 + 16 bytes).
SMALLEST_USEFUL_LOG_BYTES = LOGFILE_HEADER_SIZE + RECORD_SIZE_PREFIX + MIN_SANE_ENTRY_SIZE
#: DiskChecker/LedgerDirsMonitor compare thresholds with this slack.
THRESHOLD_SLACK = 1e-6
MS_PER_S = 1000


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


# --- a given value, converted to its key's type ------------------------------------------


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
        if "\0" in raw:
            raise _bad_value(spec, raw, where, _NUL_PROBLEM)
        return raw
    if spec.kind is Kind.BOOLEAN:
        flag = parse_java_boolean(raw)
        if flag is None:
            raise _bad_value(spec, raw, where, "not a boolean")
        return flag
    if spec.kind in JAVA_LIMITS:
        whole = parse_java_integer(raw)
        java_low, java_high = JAVA_LIMITS[spec.kind]
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


#: No file system takes a NUL byte in a path (it ends a C string): refused here, where the
#: message can name the key, rather than as an untyped error where the path is opened.
_NUL_PROBLEM = "a path cannot contain a NUL byte"


def _convert_list(spec: KeySpec, items: tuple[str, ...], where: Source) -> tuple[str, ...]:
    raw = ",".join(items)
    if any(item == "" for item in items):
        raise _bad_value(spec, raw, where, "the list has an empty item")
    if any("${" in item for item in items):
        raise _bad_value(spec, raw, where, "${...} interpolation is not supported by bkref")
    if any("\0" in item for item in items):
        raise _bad_value(spec, raw, where, _NUL_PROBLEM)
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
            if spec.kind in JAVA_LIMITS or spec.kind in (Kind.FLOAT, Kind.DOUBLE):
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
            raise ConfigError(f"bkref does not use the key {key!r}: {unknown_key_hint(key)}")
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
    def entry_log_slots_per_ledger_dir(self) -> int:
        return self._int("entryLogSlotsPerLedgerDir")

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
    def compaction_rate(self) -> int:
        return self._int("compactionRate")

    @property
    def compaction_rate_by_entries(self) -> int:
        return self._int("compactionRateByEntries")

    @property
    def compaction_rate_by_bytes(self) -> int:
        return self._int("compactionRateByBytes")

    @property
    def is_throttle_by_bytes(self) -> bool:
        return self._bool("isThrottleByBytes")

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
    each other. BookKeeper's reason is its own per-ledger manager, which cannot allocate a
    compaction log (it compacts in place); bkref's can, and bkref compacts transactionally
    whatever useTransactionalCompaction says, so per-ledger logs with transactional compaction
    is what bkref runs. The check stays only so that bkref refuses the configurations
    BookKeeper refuses at start ("Rules between keys", docs/configuration.md): with
    entryLogPerLedgerEnabled=true leave useTransactionalCompaction at its default."""
    if values["entryLogPerLedgerEnabled"] is True and values["useTransactionalCompaction"] is True:
        keys = ("entryLogPerLedgerEnabled", "useTransactionalCompaction")
        return (
            f"{_shown(values, sources, *keys)}: BookKeeper refuses both together; "
            "allowed: at most one of them true"
        )
    return None


def check_entry_log_manager(values: Values, sources: Sources) -> str | None:
    """bkref's own rule: entryLogPerLedgerEnabled=true and entryLogSlotsPerLedgerDir > 0
    each choose an entry-log manager (a log per ledger, or N slots per directory), so at
    most one of them is set."""
    if values["entryLogPerLedgerEnabled"] is True and _num(values, "entryLogSlotsPerLedgerDir"):
        keys = ("entryLogPerLedgerEnabled", "entryLogSlotsPerLedgerDir")
        return (
            f"{_shown(values, sources, *keys)}: each chooses an entry-log manager (a log per "
            "ledger, or that many slots per ledger directory); allowed: "
            "entryLogPerLedgerEnabled=false or entryLogSlotsPerLedgerDir=0"
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
    check_entry_log_manager,
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
            f"{unknown_key_hint(key)}"
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
    if values["journalSyncData"] is False:
        warnings.append(
            f"{_shown(values, sources, 'journalSyncData')}: BookKeeper would acknowledge adds "
            "before the journal is synced; bkref still syncs before every acknowledgement "
            "(with fsync instead of fdatasync)"
        )
    both_given = "journalDirectory" in given and "journalDirectories" in given
    if both_given and values["journalDirectories"] != (values["journalDirectory"],):
        warnings.append(
            f"{_shown(values, sources, 'journalDirectory')}: ignored because "
            "journalDirectories is set (journalDirectory is deprecated)"
        )
    return warnings


def _not_built(values: Values, sources: Sources, given: Mapping[str, _Given]) -> list[str]:
    """Warnings for the keys bkref accepts but does not act on (impl/config/keys.py,
    NOT_BUILT) that were set to a value where BookKeeper would behave otherwise; a
    ConfigError for a refused one."""
    warnings: list[str] = []
    for key, not_built in NOT_BUILT.items():
        value = values[key]
        if not_built.harmless is not None and value == not_built.harmless:
            continue
        if not_built.harmless_as_key is not None and value == values[not_built.harmless_as_key]:
            continue
        shown = _shown(values, sources, key)
        if not_built.status is Status.REFUSED:
            assert not_built.harmless is not None, key
            raise ConfigError(
                f"{shown}: not implemented by bkref: {not_built.instead}; remove the setting "
                f"or set {key}={render_value(not_built.harmless)}"
            )
        if key in given:
            warnings.append(f"{shown}: accepted but has no effect in bkref: {not_built.instead}")
    return warnings


#: BookKeeper's ledger storages whose files bkref writes (entry logs; SortedLedgerStorage
#: only adds a memtable in front of InterleavedLedgerStorage).
_INTERLEAVED_STORAGES = frozenset(
    {
        "org.apache.bookkeeper.bookie.InterleavedLedgerStorage",
        "org.apache.bookkeeper.bookie.SortedLedgerStorage",
    }
)


def _ignored_but_noted(ignored: Sequence[IgnoredKey]) -> list[str]:
    """Warnings (or a ConfigError) for keys bkref does not parse whose silent ignoring an
    operator would not expect: another ledger storage, separate index directories, a bookie
    forced read-only (bkref has no read-only mode, so it would take writes)."""
    warnings: list[str] = []
    for item in ignored:
        value = ",".join(item.items).strip()
        where = f"{item.key}={value} ({item.source})"
        if item.key == "ledgerStorageClass" and value not in _INTERLEAVED_STORAGES:
            warnings.append(
                f"{where}: ignored: bkref writes InterleavedLedgerStorage's files (entry logs, "
                "with its own ledger index), never DbLedgerStorage's RocksDB indexes"
            )
        elif item.key == "indexDirectories":
            warnings.append(
                f"{where}: ignored: bkref keeps its ledger index in one of ledgerDirectories "
                "(its identity stamps say which); BookKeeper's .idx files there are read only "
                "by `bkref import --index-dirs`"
            )
        elif item.key == "entryLocationCompactionInterval":
            warnings.append(
                f"{where}: ignored: it schedules DbLedgerStorage's compaction of its RocksDB "
                "entry-location index, which bkref does not have (bkref's own index is "
                "rewritten by its checkpoints)"
            )
        elif item.key == "forceReadOnlyBookie" and value.lower() == "true":
            raise ConfigError(
                f"{where}: not implemented by bkref: it has no read-only mode and would take "
                "writes; remove the setting or set forceReadOnlyBookie=false"
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
    warnings += _not_built(values, sources, given)
    warnings += _ignored_but_noted(ignored)
    settings = tuple(Setting(spec.key, values[spec.key], sources[spec.key]) for spec in KEYS)
    config = ServerConfig(settings, tuple(ignored), tuple(warnings))
    config.check_invariants()
    return config


def default_config() -> ServerConfig:
    """BookKeeper's defaults, as a bookie started without a configuration file has them."""
    return load_config(None, "", ())
