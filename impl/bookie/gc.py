"""Garbage collection: which entry logs to delete, which to compact and when (BookKeeper's
GarbageCollectorThread), as pure decisions and one object that keeps a cycle's state.

Spec pages: spec/protocol/compaction.md (the three phases, their files and their recovery),
spec/adapter.md (the ``gc`` op and its answer), spec/properties.md (5: the space of deleted
ledgers is reclaimed, no live entry is lost on the way). docs/design.md "Data flow", **gc**,
is the order of a cycle.

Why a module beside the bookie: the policy (when a compaction is due, which logs qualify, in
which order, how fast) is a set of decisions on numbers, and every one of them is a port of
GarbageCollectorThread that can be checked against BookKeeper's own rules and tests without a
bookie (tests/unit/impl/bookie/test_gc_bk_ports.py). What touches files, the index and the
bookie's locks stays in the bookie (Bookie.gc_begin and the phase steps), which hands this
module what it needs as callables. So:

- :class:`GcPolicy` is GarbageCollectorThread's constructor: the configuration's numbers and
  its validation rules (a threshold above 1 refused, an interval shorter than gcWaitTime
  refused, minor below major in both threshold and interval when both are enabled), and
  forceAllowCompaction's isForceMinor/MajorCompactionAllow.
- :func:`compaction_kind` is runWithFlags's decision, exactly: major first, then minor, from
  force, suspendMajor, suspendMinor, the enables, the force-allow flags and the time since
  the last compaction of each kind.
- :func:`suspension` is InterleavedLedgerStorage's LedgerDirsListener read off the ledger
  directories' states: an almost full directory suspends major compaction, a full one both,
  and with isForceGCAllowWhenNoSpace either forces GC instead.
- :class:`Throttle` is AbstractLogCompactor.Throttler (Guava's RateLimiter) on the injected
  clock: compactionRateByEntries, or compactionRateByBytes with isThrottleByBytes.
- :class:`GarbageCollector` holds entryLogMetaMap (per flushed log its ledgers and bytes),
  runs the steps of a cycle that decide (drop deleted ledgers, extract new logs' metadata,
  pick the logs with nothing live, decide the kind, order the candidates) and keeps the
  cycle's queue and counters between the bookie's phase steps.

Differences from BookKeeper, each on purpose:

- The suspension flags are a function of the directories' present states, not of the
  history of listener calls: with several directories, BookKeeper's flags depend on the order
  in which they changed (a "writable" of one directory resumes compaction while another is
  still full); bkref suspends while any directory is almost full or full.
- Candidates are ordered by usage, then by log id (BookKeeper: 10 usage buckets, each in the
  metadata map's order), so the order is the same on every run and the model can predict it.
- The last compaction times are stamped when a cycle ends (its queue is done, dropped by a new
  cycle, or failed), as BookKeeper's ``finally`` does, on the injected monotonic clock.
- Logs whose metadata cannot be read (a read error) are skipped for this cycle and tried again
  at the next, as BookKeeper's extractMetaFromEntryLogs logs and continues; a file that is not
  an entry log (a zero-byte preallocated log of an earlier run) holds nothing, as the bookie's
  abstract state already says (impl/bookie/state.py), and is deleted.

Not verified here: the persistent metadata map (gcEntryLogMetadataCacheEnabled), the usage
against logSizeLimit (useTargetEntryLogSizeForGc), entry location compaction (DbLedgerStorage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal

import attrs

from impl.clock import Clock
from impl.config.config import ServerConfig
from impl.entrylog.ledger_dirs import DirState
from spec.errors import BookieIOError, ConfigError
from spec.ids import EntryLogId, LedgerId

#: The kinds of compaction a cycle runs (at most one of major and minor per cycle).
Kind = Literal["major", "minor", "none"]

MS_PER_S = 1000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


# --- the policy ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class GcPolicy:
    """GarbageCollectorThread's compaction parameters after its constructor's checks.

    Build with :meth:`create` (or :meth:`from_config`), which refuses what the constructor
    refuses with a ConfigError naming the key and the rule. Intervals are milliseconds."""

    gc_wait_ms: int = 600_000
    minor_threshold: float = 0.2
    minor_interval_ms: int = 3_600_000
    minor_max_time_ms: int = -1
    major_threshold: float = 0.8
    major_interval_ms: int = 86_400_000
    major_max_time_ms: int = -1
    force_gc_when_no_space: bool = False
    enable_minor: bool = True
    enable_major: bool = True
    force_minor_allowed: bool = False
    force_major_allowed: bool = False
    rate_by_entries: int = 1000
    rate_by_bytes: int = 1_000_000
    throttle_by_bytes: bool = False

    @classmethod
    def create(
        cls,
        *,
        gc_wait_ms: int = 600_000,
        minor_threshold: float = 0.2,
        minor_interval_s: int = 3600,
        minor_max_time_ms: int = -1,
        major_threshold: float = 0.8,
        major_interval_s: int = 86400,
        major_max_time_ms: int = -1,
        force_gc_when_no_space: bool = False,
        force_allow_compaction: bool = False,
        rate_by_entries: int = 1000,
        rate_by_bytes: int = 1_000_000,
        throttle_by_bytes: bool = False,
    ) -> GcPolicy:
        """The policy, checked as GarbageCollectorThread's constructor checks it."""
        if gc_wait_ms <= 0:
            raise ConfigError(f"gcWaitTime={gc_wait_ms}: must be positive (ms)")
        minor_interval_ms = minor_interval_s * MS_PER_S
        major_interval_ms = major_interval_s * MS_PER_S
        enable_minor = _enabled("minor", minor_threshold, minor_interval_ms, gc_wait_ms)
        enable_major = _enabled("major", major_threshold, major_interval_ms, gc_wait_ms)
        if (
            enable_minor
            and enable_major
            and (minor_interval_ms >= major_interval_ms or minor_threshold >= major_threshold)
        ):
            raise ConfigError(
                f"minorCompactionThreshold={minor_threshold}, minorCompactionInterval="
                f"{minor_interval_s}, majorCompactionThreshold={major_threshold}, "
                f"majorCompactionInterval={major_interval_s}: with both compactions enabled, "
                "minor must run more often and at a lower threshold than major (allowed: "
                "minorCompactionInterval < majorCompactionInterval and "
                "minorCompactionThreshold < majorCompactionThreshold)"
            )
        for key, rate in (
            ("compactionRateByEntries", rate_by_entries),
            ("compactionRateByBytes", rate_by_bytes),
        ):
            if rate <= 0:
                raise ConfigError(
                    f"{key}={rate}: the compaction rate must be positive (Guava's RateLimiter "
                    "refuses 0); set a rate of at least 1 per second"
                )
        return cls(
            gc_wait_ms=gc_wait_ms,
            minor_threshold=minor_threshold,
            minor_interval_ms=minor_interval_ms,
            minor_max_time_ms=minor_max_time_ms,
            major_threshold=major_threshold,
            major_interval_ms=major_interval_ms,
            major_max_time_ms=major_max_time_ms,
            force_gc_when_no_space=force_gc_when_no_space,
            enable_minor=enable_minor,
            enable_major=enable_major,
            force_minor_allowed=force_allow_compaction and 0 < minor_threshold < 1.0,
            force_major_allowed=force_allow_compaction and 0 < major_threshold < 1.0,
            rate_by_entries=rate_by_entries,
            rate_by_bytes=rate_by_bytes,
            throttle_by_bytes=throttle_by_bytes,
        )

    @classmethod
    def from_config(cls, config: ServerConfig) -> GcPolicy:
        """The policy of a validated configuration (impl/config/config.py refuses the same
        values at load; this is the constructor's second look, as in BookKeeper)."""
        return cls.create(
            gc_wait_ms=config.gc_wait_time_ms,
            minor_threshold=config.minor_compaction_threshold,
            minor_interval_s=config.minor_compaction_interval_s,
            minor_max_time_ms=config.minor_compaction_max_time_ms,
            major_threshold=config.major_compaction_threshold,
            major_interval_s=config.major_compaction_interval_s,
            major_max_time_ms=config.major_compaction_max_time_ms,
            force_gc_when_no_space=config.is_force_gc_allow_when_no_space,
            force_allow_compaction=config.force_allow_compaction,
            rate_by_entries=config.compaction_rate_by_entries,
            rate_by_bytes=config.compaction_rate_by_bytes,
            throttle_by_bytes=config.is_throttle_by_bytes,
        )

    def threshold(self, kind: Kind) -> float:
        """The usage below which a log is compacted by a compaction of ``kind``."""
        if kind == "major":
            return self.major_threshold
        if kind == "minor":
            return self.minor_threshold
        return 0.0

    def max_time_ms(self, kind: Kind) -> int:
        """How long a run of ``kind`` may go on (MaxTimeMillis; <= 0: no limit)."""
        if kind == "major":
            return self.major_max_time_ms
        if kind == "minor":
            return self.minor_max_time_ms
        return 0


def _enabled(kind: str, threshold: float, interval_ms: int, gc_wait_ms: int) -> bool:
    """GarbageCollectorThread: a compaction with a positive interval and threshold is enabled,
    once its threshold is at most 1 and its interval no shorter than gcWaitTime."""
    if interval_ms <= 0 or threshold <= 0:
        return False
    if threshold > 1.0:
        raise ConfigError(
            f"{kind}CompactionThreshold={threshold}: above 1 (a log's usage is at most 1); "
            f"allowed: a fraction <= 1, or <= 0 to disable {kind} compaction"
        )
    if interval_ms < gc_wait_ms:
        raise ConfigError(
            f"{kind}CompactionInterval={interval_ms // MS_PER_S}: shorter than gcWaitTime="
            f"{gc_wait_ms} ms; allowed: {kind}CompactionInterval * 1000 >= gcWaitTime, or <= 0 "
            f"to disable {kind} compaction"
        )
    return True


def compaction_kind(
    policy: GcPolicy,
    *,
    force: bool,
    suspend_major: bool,
    suspend_minor: bool,
    now_ms: int,
    last_major_ms: int,
    last_minor_ms: int,
) -> Kind:
    """runWithFlags's choice: major when (forced and allowed by forceAllowCompaction, or
    enabled and forced or due) and not suspended; else minor under the same rule; else none."""
    major_due = now_ms - last_major_ms > policy.major_interval_ms
    if (
        (policy.force_major_allowed and force) or (policy.enable_major and (force or major_due))
    ) and not suspend_major:
        return "major"
    minor_due = now_ms - last_minor_ms > policy.minor_interval_ms
    if (
        (policy.force_minor_allowed and force) or (policy.enable_minor and (force or minor_due))
    ) and not suspend_minor:
        return "minor"
    return "none"


@attrs.frozen
class Suspension:
    """The flags a cycle runs with: forced (isForceGCAllowWhenNoSpace on a short disk),
    suspendMajor and suspendMinor."""

    force: bool = False
    suspend_major: bool = False
    suspend_minor: bool = False


def suspension(states: Iterable[DirState], force_gc_when_no_space: bool) -> Suspension:
    """InterleavedLedgerStorage's LedgerDirsListener from the directories' present states:
    almost full suspends major, full suspends major and minor; with
    isForceGCAllowWhenNoSpace either forces GC instead (enableForceGC)."""
    seen = set(states)
    full = DirState.FULL in seen
    almost = DirState.ALMOST_FULL in seen
    if force_gc_when_no_space:
        return Suspension(force=full or almost)
    return Suspension(suspend_major=full or almost, suspend_minor=full)


# --- the throttle ----------------------------------------------------------------------------


class CompactionCancelled(BookieIOError):
    """A compaction's copy was cancelled (a shutdown or a stopping driver); it was rolled
    back and nothing changed (Throttler.cancelledAcquire's IOException in BookKeeper)."""


class Throttle:
    """AbstractLogCompactor.Throttler: a smooth bursty rate limiter (Guava's RateLimiter
    with one second of stored permits) on the injected clock. ``acquire(record_bytes)`` takes
    one permit per record (compactionRateByEntries) or one per byte (isThrottleByBytes,
    compactionRateByBytes) and waits, through ``sleep_ns``, until they are due. ``sleep_ns``
    moves a ManualClock in tests and the simulated runs, and sleeps for real in production."""

    def __init__(
        self,
        rate_per_s: int,
        *,
        by_bytes: bool,
        clock: Clock,
        sleep_ns: Callable[[int], None],
    ) -> None:
        assert rate_per_s > 0, rate_per_s
        self._rate = rate_per_s
        self._by_bytes = by_bytes
        self._clock = clock
        self._sleep_ns = sleep_ns
        self._interval_ns = NS_PER_S / rate_per_s
        self._max_stored = float(rate_per_s)  # one second's worth, as RateLimiter.create
        self._stored = 0.0
        self._next_free_ns = float(clock.monotonic_ns())
        self._cancelled = False
        #: Every wait handed to ``sleep_ns``, summed (for tests and the benchmarks).
        self.waited_ns = 0

    @classmethod
    def from_policy(
        cls, policy: GcPolicy, clock: Clock, sleep_ns: Callable[[int], None]
    ) -> Throttle:
        rate = policy.rate_by_bytes if policy.throttle_by_bytes else policy.rate_by_entries
        return cls(rate, by_bytes=policy.throttle_by_bytes, clock=clock, sleep_ns=sleep_ns)

    def acquire(self, records: int, bytes_: int) -> None:
        """Take the permits of ``records`` records of ``bytes_`` bytes, waiting if due (the
        compactor's Throttle protocol, impl/entrylog/compactor.py). Raises
        CompactionCancelled once after :meth:`cancel`, so the copy stops and rolls back."""
        if self._cancelled:
            self._cancelled = False
            raise CompactionCancelled(
                "the compaction was cancelled (the bookie is shutting down or its GC thread "
                "is stopping); it was rolled back and nothing changed"
            )
        wait = self.reserve(bytes_ if self._by_bytes else records)
        if wait > 0:
            self.waited_ns += wait
            self._sleep_ns(wait)

    def cancel(self) -> None:
        """Stop the copy in progress at its next record (BookKeeper's cancelledAcquire)."""
        self._cancelled = True

    def clear(self) -> None:
        """Forget a cancel that came too late for the copy it was meant for."""
        self._cancelled = False

    def reserve(self, permits: int) -> int:
        """Reserve ``permits`` and return how long (ns) the caller must wait before using
        them (RateLimiter.reserveEarliestAvailable: the wait is for the previous debt)."""
        assert permits >= 0, permits
        now = float(self._clock.monotonic_ns())
        if now > self._next_free_ns:
            earned = (now - self._next_free_ns) / self._interval_ns
            self._stored = min(self._max_stored, self._stored + earned)
            self._next_free_ns = now
        wait = int(self._next_free_ns - now)
        from_store = min(float(permits), self._stored)
        fresh = permits - from_store
        self._next_free_ns += fresh * self._interval_ns
        self._stored -= from_store
        return max(0, wait)


# --- the answers ---------------------------------------------------------------------------


@attrs.frozen
class GcStats:
    """What a GC cycle did (the adapter's ``gc`` answer, spec/adapter.md)."""

    #: "major" | "minor" | "none".
    compaction: str
    #: Logs deleted because nothing live was left (step 3, and phase 1's "nothing live").
    logs_deleted: int
    #: Compactions finished (phase 3 done).
    logs_compacted: int
    entries_moved: int
    #: Bytes of files removed minus bytes of compaction logs kept.
    bytes_reclaimed: int
    #: gc_begin only: the source logs it will compact, in order.
    candidates: tuple[int, ...] = ()


@attrs.frozen
class PhaseResult:
    """What one compaction step did."""

    #: "copy" | "flush" | "index" | "idle" (no compaction to step).
    phase: str
    source_log: int | None
    #: None after a copy that found nothing live (the source was deleted).
    new_log: int | None
    entries_moved: int


IDLE = PhaseResult("idle", None, None, 0)


# --- the metadata map and the cycle ---------------------------------------------------------


class LogUsage:
    """One log's EntryLogMetadata: its total bytes as extracted, and the bytes per ledger
    still counted (removeLedgerIf drops deleted ones; total stays)."""

    __slots__ = ("ledgers", "total")

    def __init__(self, ledgers: Mapping[int, int]) -> None:
        self.ledgers: dict[int, int] = dict(ledgers)
        self.total: int = sum(self.ledgers.values())

    @property
    def remaining(self) -> int:
        return sum(self.ledgers.values())

    @property
    def usage(self) -> float:
        """remaining / total (a log with total 0 has usage 0)."""
        total = self.total
        return 0.0 if total == 0 else self.remaining / total

    def drop_dead(self, is_live: Callable[[LedgerId], bool]) -> bool:
        """removeIfLedgerNotExists: forget the ledgers no longer live; True if any went."""
        dead = [ledger for ledger in self.ledgers if not is_live(LedgerId(ledger))]
        for ledger in dead:
            del self.ledgers[ledger]
        return bool(dead)


@attrs.define
class _Cycle:
    """A cycle in flight: its kind, its queue and what it did so far."""

    kind: Kind
    queue: list[EntryLogId]
    started_ns: int
    logs_deleted: int = 0
    logs_compacted: int = 0
    entries_moved: int = 0
    bytes_reclaimed: int = 0


class GarbageCollector:
    """entryLogMetaMap and the decisions of a cycle; the bookie does the file work.

    ``clock`` times the compaction intervals and MaxTimeMillis (monotonic, ms). Not
    thread-safe: the bookie calls it under its GC lock."""

    def __init__(self, policy: GcPolicy, clock: Clock) -> None:
        self.policy = policy
        self._clock = clock
        now = self.now_ms()
        #: GarbageCollectorThread stamps both at construction: nothing is due at once.
        self.last_major_ms = now
        self.last_minor_ms = now
        #: entryLogMetaMap: per flushed log known so far, its usage.
        self.meta: dict[EntryLogId, LogUsage] = {}
        self._cycle: _Cycle | None = None

    def now_ms(self) -> int:
        return self._clock.monotonic_ns() // NS_PER_MS

    # --- steps 1 to 5 ------------------------------------------------------------------

    def drop_deleted(self, is_live: Callable[[LedgerId], bool]) -> None:
        """Step 1 (doGcLedgers): forget the ledgers deleted since the last cycle."""
        for usage in self.meta.values():
            usage.drop_dead(is_live)

    def extract_new(
        self,
        candidates: Iterable[EntryLogId],
        read: Callable[[EntryLogId], Mapping[int, int] | None],
        is_live: Callable[[LedgerId], bool],
    ) -> list[EntryLogId]:
        """Step 2 (extractMetaFromEntryLogs): the metadata of candidate logs not yet known;
        ``read`` answers None when the log cannot be read now (tried again next cycle).
        Logs no longer candidates (gone) are forgotten. Returns the logs it could not read."""
        wanted = set(candidates)
        for gone in [log_id for log_id in self.meta if log_id not in wanted]:
            del self.meta[gone]
        unreadable: list[EntryLogId] = []
        for log_id in sorted(wanted):
            if log_id in self.meta:
                continue
            ledgers = read(log_id)
            if ledgers is None:
                unreadable.append(log_id)
                continue
            usage = LogUsage(ledgers)
            usage.drop_dead(is_live)
            self.meta[log_id] = usage
        return unreadable

    def dead_logs(self) -> list[EntryLogId]:
        """Step 3 (doGcEntryLogs): the logs with nothing live left, empty ones included."""
        return sorted(log_id for log_id, usage in self.meta.items() if usage.remaining == 0)

    def forget(self, log_id: EntryLogId) -> None:
        """A log was removed (by step 3, or by a compaction)."""
        self.meta.pop(log_id, None)

    def decide(self, flags: Suspension, force: bool) -> Kind:
        """Step 4: the kind of this cycle (a forced cycle, or forced by a short disk)."""
        return compaction_kind(
            self.policy,
            force=force or flags.force,
            suspend_major=flags.suspend_major,
            suspend_minor=flags.suspend_minor,
            now_ms=self.now_ms(),
            last_major_ms=self.last_major_ms,
            last_minor_ms=self.last_minor_ms,
        )

    def candidates(self, kind: Kind) -> list[EntryLogId]:
        """Step 5: the logs with something live and usage below the kind's threshold,
        lowest usage first, then lowest id."""
        if kind == "none":
            return []
        threshold = self.policy.threshold(kind)
        found = [
            (usage.usage, log_id)
            for log_id, usage in self.meta.items()
            if usage.remaining > 0 and usage.usage < threshold
        ]
        return [log_id for _, log_id in sorted(found)]

    # --- the cycle in flight -----------------------------------------------------------

    def begin(self, kind: Kind, logs_deleted: int, bytes_reclaimed: int) -> GcStats:
        """Start a cycle whose steps 0 to 3 deleted ``logs_deleted`` logs; returns the
        stats so far with the candidates in order. A cycle still in flight must be ended."""
        assert self._cycle is None, "end the cycle in flight first"
        queue = self.candidates(kind)
        self._cycle = _Cycle(
            kind=kind,
            queue=list(queue),
            started_ns=self._clock.monotonic_ns(),
            logs_deleted=logs_deleted,
            bytes_reclaimed=bytes_reclaimed,
        )
        if kind == "none":
            self.end()
            return GcStats("none", logs_deleted, 0, 0, bytes_reclaimed, ())
        return GcStats(kind, logs_deleted, 0, 0, bytes_reclaimed, tuple(queue))

    @property
    def in_cycle(self) -> bool:
        return self._cycle is not None

    def next_source(self) -> EntryLogId | None:
        """The next log to compact, None when the cycle's queue is done or its
        MaxTimeMillis ran out (doCompactEntryLogs's stopCompaction); the caller then ends
        the cycle (:meth:`end`)."""
        cycle = self._cycle
        if cycle is None:
            return None
        max_ms = self.policy.max_time_ms(cycle.kind)
        elapsed_ms = (self._clock.monotonic_ns() - cycle.started_ns) // NS_PER_MS
        while cycle.queue:
            if max_ms > 0 and elapsed_ms >= max_ms:
                break
            log_id = cycle.queue.pop(0)
            if log_id in self.meta:  # still there (a log deleted meanwhile is skipped)
                return log_id
        return None

    def record(
        self,
        *,
        deleted: int = 0,
        compacted: int = 0,
        moved: int = 0,
        reclaimed: int = 0,
    ) -> None:
        """Count what a compaction step did in the cycle in flight."""
        cycle = self._cycle
        if cycle is None:
            return
        cycle.logs_deleted += deleted
        cycle.logs_compacted += compacted
        cycle.entries_moved += moved
        cycle.bytes_reclaimed += reclaimed

    def stats(self) -> GcStats:
        """The cycle in flight's stats so far (zeros and "none" when there is none)."""
        cycle = self._cycle
        if cycle is None:
            return GcStats("none", 0, 0, 0, 0)
        return GcStats(
            cycle.kind,
            cycle.logs_deleted,
            cycle.logs_compacted,
            cycle.entries_moved,
            cycle.bytes_reclaimed,
        )

    def end(self) -> GcStats:
        """End the cycle in flight (done, dropped or failed): stamp the time of its kind
        (a major moves the minor time too, as runWithFlags's finally does)."""
        cycle, stats = self._cycle, self.stats()
        self._cycle = None
        if cycle is not None:
            now = self.now_ms()
            if cycle.kind == "major":
                self.last_major_ms = self.last_minor_ms = now
            elif cycle.kind == "minor":
                self.last_minor_ms = now
        return stats

    def check_invariants(self) -> None:
        for log_id, usage in self.meta.items():
            assert usage.remaining <= usage.total, (log_id, usage.remaining, usage.total)
        if self._cycle is not None:
            assert self._cycle.kind != "none", self._cycle
