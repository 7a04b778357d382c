"""The threaded driver: runs the bookie's background steps for real use.

Spec page: spec/format/journal.md ("Group commit"). docs/design.md "Concurrency": the engine core
is a set of explicit steps (impl/bookie/bookie.py); tests interleave them by hand, and this driver
runs them on threads for the adapter and operators:

- the journal thread (Journal.java's ForceWriteThread and journal thread in one): calls
  ``journal_force`` whenever ``should_force`` says the group is due. It sleeps on an Event
  set by every journal append (``Bookie.set_append_hook``), so with
  journalMaxGroupWaitMSec=0 a record is forced as soon as it is queued; while records wait
  for their group it wakes at least every journalMaxGroupWaitMSec (and no more often than
  Limits.group_wait_min_ms) to look again. fsync releases the GIL, so request threads keep
  adding while a group is forced.

  Group commit under the GIL: the forces are pipelined (``defer_acks=True``). A group's
  Acks complete inside the next force, after that force has written its group and before
  its fsync; when no group follows at once, before the thread sleeps. So the client threads
  those Acks wake run during the next fsync. Completing them first instead lets the woken
  clients take the GIL at the next force's write (a system call releases it) and keep it
  until they block, which delays that fsync by their whole burst of adds: with 64 adds
  outstanding that serialised CPU and fsync (about 0.2x the raw batch-64 loop, against
  about 0.37x pipelined, tests/bench/bench_bookie.py). An Ack still completes only after
  the fsync covering its record.

  ``sys.setswitchinterval`` is left alone: lowering it (1 ms, 0.2 ms, 0.05 ms) so that the
  journal thread gets the GIL back sooner after its fsync was measured no better and often
  worse (more forced switches between the client and journal threads), and it is
  process-wide state a library should not change.
- the maintenance thread: a checkpoint every flushInterval ms, a disk check every
  diskCheckInterval ms, and entry-log preallocation after each of its wake-ups (a no-op
  when a log is already preallocated or preallocation is disabled). Due times are read
  from the injected Clock; the thread sleeps on an Event with a bounded timeout, never on
  ``time`` (impl/ reads no clock of its own).
- the GC thread (GarbageCollectorThread): a garbage collection cycle every gcWaitTime ms
  after the end of the previous one (scheduleWithFixedDelay), run step by step
  (``gc_begin``, then each compaction's copy, flush and index) so that ``stop`` is noticed
  between phases; a compaction left half way is rolled back by the bookie's shutdown. It has
  a thread of its own, as in BookKeeper, because a throttled compaction can take minutes and
  must not hold back checkpoints.

Failures do not vanish: the first exception of a thread is recorded, the bookie is told
(``Bookie.fail``: every pending Ack fails with BookieIOError and writes are refused), both
threads stop, and ``failed`` / ``stop()`` report it. The one exception is a maintenance step
that found no room (NoSpace: a checkpoint or a preallocation on a full disk; issue 10): it
applied nothing that cannot be applied again, so failing the bookie for it only turned every
later add into io_error until a restart, even after space was freed. Such a step is counted
(``no_space_steps``) and retried on the driver's schedule (a checkpoint after the next disk
check, which notices space that returned; a preallocation at the next wake-up); the bookie
serves meanwhile and its adds answer no_space while they find no room. A failed fsync still
fails the bookie (fsyncgate: the bytes it should have made durable may be gone). The journal
thread has no such exception: a journal write that finds no space leaves records that were
never written behind Acks, and the bookie fails as for any journal failure. A GC cycle that
fails with NoSpace or BookieIOError without failing the bookie (phases 1 and 2, and the steps
before them, roll back: Bookie.gc_begin) is counted (``gc_failures``), logged, and tried again
gcWaitTime later, as BookKeeper's GC thread logs and goes on; a failed phase 3 fails the bookie
and stops the threads like any other failure.

Not verified here: fairness between request threads, a journal thread that wakes late under
heavy load (the group then only grows), and the cost of the maintenance thread's tick
(Limits.maintenance_tick_ms, 100 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from impl.bookie.bookie import Bookie
from impl.clock import Clock
from impl.config.config import ServerConfig
from impl.limits import LIMITS, Limits
from spec.errors import BookieIOError, NoSpace

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class BookieDriver:
    """Runs the journal thread and the maintenance thread of one bookie. Its sleeps and its
    join timeout are those of ``limits`` (impl/limits.py): the journal thread sleeps at least
    ``group_wait_min_ms`` while records wait and ``journal_idle_ms`` with nothing queued, the
    maintenance thread wakes every ``maintenance_tick_ms`` at least, and :meth:`stop` waits
    ``thread_join_timeout_ms`` for each thread."""

    def __init__(
        self,
        bookie: Bookie,
        clock: Clock,
        config: ServerConfig,
        *,
        limits: Limits = LIMITS,
        log: Callable[[str], None] | None = None,
    ) -> None:
        """``log`` hears what the threads recover from by themselves (a failed GC cycle)."""
        self._bookie = bookie
        self._log = log or _say_nothing
        self._clock = clock
        self._group_wait_min_ns = limits.group_wait_min_ms * NS_PER_MS
        self._journal_idle_ns = limits.journal_idle_ms * NS_PER_MS
        self._maintenance_tick_ns = limits.maintenance_tick_ms * NS_PER_MS
        self._join_timeout_s = limits.thread_join_timeout_ms / 1000
        self._group_wait_ns = max(
            self._group_wait_min_ns, config.journal_max_group_wait_ms * NS_PER_MS
        )
        self._flush_interval_ns = config.flush_interval_ms * NS_PER_MS
        self._disk_check_interval_ns = config.disk_check_interval_ms * NS_PER_MS
        self._preallocate = config.entry_log_file_preallocation_enabled
        self._gc_wait_ns = config.gc_wait_time_ms * NS_PER_MS
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._started = False
        self._checkpoints = 0
        self._forces = 0
        self._no_space_steps = 0
        self._gc_cycles = 0
        self._gc_failures = 0

    # --- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start both threads. A driver starts once."""
        assert not self._started, "a BookieDriver starts once"
        self._started = True
        self._bookie.set_append_hook(self._on_append)
        for name, target in (
            ("bkref-journal", self._journal_loop),
            ("bkref-maintenance", self._maintenance_loop),
            ("bkref-gc", self._gc_loop),
        ):
            thread = threading.Thread(target=self._guarded, args=(target,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop both threads, after one last journal force so nothing queued waits for a
        thread that is gone. Raises BookieIOError if a thread failed (or hangs); the bookie
        itself stays open (the caller then shuts it down)."""
        self._stop.set()
        self._wake.set()
        if self._threads:
            self._bookie.cancel_gc()  # a throttled compaction copy stops at its next record
        for thread in self._threads:
            thread.join(self._join_timeout_s)
            if thread.is_alive():
                self._record(RuntimeError(f"thread {thread.name} did not stop in time"))
        self._bookie.set_append_hook(None)
        if not self.failed and self._bookie.failure is None:
            try:
                self._bookie.journal_force()
            except Exception as exc:
                self._record(exc)
        error = self.failed
        if error is not None:
            raise BookieIOError(f"the bookie's background thread failed: {error}") from error

    @property
    def failed(self) -> BaseException | None:
        """The first exception a thread raised, or None."""
        with self._lock:
            return self._errors[0] if self._errors else None

    @property
    def forces(self) -> int:
        """Journal forces done by the journal thread (for tests and the benchmark)."""
        return self._forces

    @property
    def no_space_steps(self) -> int:
        """Maintenance steps (disk check, checkpoint, preallocation) that found no room and
        wait for their next turn."""
        return self._no_space_steps

    @property
    def checkpoints(self) -> int:
        """Checkpoints done by the maintenance thread."""
        return self._checkpoints

    @property
    def gc_cycles(self) -> int:
        """GC cycles the GC thread finished (a cycle cut short by ``stop`` is not counted)."""
        return self._gc_cycles

    @property
    def gc_failures(self) -> int:
        """GC cycles that failed without failing the bookie (tried again later)."""
        return self._gc_failures

    def check_invariants(self) -> None:
        assert self._started or not self._threads
        assert len(self._threads) in (0, 3), self._threads
        assert self._gc_wait_ns > 0
        assert self._gc_cycles >= 0 and self._gc_failures >= 0
        assert self._group_wait_ns >= self._group_wait_min_ns > 0
        assert self._journal_idle_ns >= self._group_wait_min_ns
        assert self._flush_interval_ns > 0
        assert self._disk_check_interval_ns > 0
        assert self._forces >= 0
        assert self._checkpoints >= 0
        if self.failed is not None:
            assert self._stop.is_set()

    # --- threads ------------------------------------------------------------------------

    def _on_append(self) -> None:
        # Event.set takes a lock and notifies; skip it when the flag is up already (the
        # journal thread clears it before it looks at the queue, so nothing is missed).
        if not self._wake.is_set():
            self._wake.set()

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BookieIOError as exc:
            # A bookie shut down under the driver refuses its steps: nothing failed then.
            if not self._bookie.closed:
                self._failed_with(exc)
        except BaseException as exc:  # recorded, never lost
            self._failed_with(exc)

    def _failed_with(self, exc: BaseException) -> None:
        self._record(exc)
        self._bookie.fail(exc)
        self._stop.set()
        self._wake.set()

    def _record(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _journal_loop(self) -> None:
        bookie = self._bookie
        wake = self._wake
        while not self._stop.is_set() and not bookie.closed:
            # Clear before looking: an append after the look sets it again, so no wake-up
            # is lost between the look and the wait.
            wake.clear()
            if bookie.should_force():
                # The previous group's Acks complete inside this force, after its write and
                # before its fsync: see Journal.flush(defer_callbacks=True).
                bookie.journal_force(defer_acks=True)
                self._forces += 1
                continue
            # No group follows at once: complete the last group's Acks before sleeping.
            bookie.journal_release_acks()
            wake.wait(self._journal_sleep_ns() / NS_PER_S)
        # Stopping: the last group's Acks (stop() and shutdown() would complete them too).
        bookie.journal_release_acks()

    def _no_room(self, step: Callable[[], object]) -> bool:
        """Run a maintenance step; True when it found no room (NoSpace). Such a step applied
        nothing it cannot apply again (the bookie says so: Bookie._step_failed), so the
        bookie keeps serving and the step waits for its next turn; adds meanwhile get
        no_space from the bookie itself. Any other failure propagates and fails the bookie."""
        try:
            step()
        except NoSpace:
            self._no_space_steps += 1
            return True
        return False

    def _journal_sleep_ns(self) -> int:
        """Until the oldest queued record's group wait runs out (read on the Clock), at least
        ``group_wait_min_ms`` and at most the group wait; ``journal_idle_ms`` with nothing
        queued.
        Appends wake the thread earlier (a byte or entry threshold may be passed)."""
        deadline = self._bookie.force_deadline_ns()
        if deadline is None:
            return self._journal_idle_ns
        left = deadline - self._clock.monotonic_ns()
        return max(self._group_wait_min_ns, min(left, self._group_wait_ns))

    def _maintenance_loop(self) -> None:
        now = self._clock.monotonic_ns()
        next_checkpoint = now + self._flush_interval_ns
        next_disk_check = now + self._disk_check_interval_ns
        while not self._stop.is_set() and not self._bookie.closed:
            now = self._clock.monotonic_ns()
            if now >= next_disk_check:
                self._bookie.check_dirs()
                next_disk_check = now + self._disk_check_interval_ns
            if now >= next_checkpoint:
                next_checkpoint = now + self._flush_interval_ns
                if self._no_room(self._bookie.checkpoint):
                    # Retried after the next disk check, which notices space that returned.
                    next_checkpoint = min(next_checkpoint, next_disk_check)
                else:
                    self._checkpoints += 1
            if self._preallocate:
                self._no_room(self._bookie.preallocate)
            due = min(next_checkpoint, next_disk_check) - self._clock.monotonic_ns()
            self._stop.wait(max(0, min(due, self._maintenance_tick_ns)) / NS_PER_S)

    def _gc_loop(self) -> None:
        next_gc = self._clock.monotonic_ns() + self._gc_wait_ns
        while not self._stop.is_set() and not self._bookie.closed:
            if self._clock.monotonic_ns() >= next_gc:
                self._gc_cycle()
                next_gc = self._clock.monotonic_ns() + self._gc_wait_ns
            due = next_gc - self._clock.monotonic_ns()
            self._stop.wait(max(0, min(due, self._maintenance_tick_ns)) / NS_PER_S)

    def _gc_cycle(self) -> None:
        """One GC cycle, step by step, stopping between phases when the driver stops. A
        failure that left the bookie serving is logged and waits for the next cycle."""
        bookie = self._bookie
        try:
            bookie.gc_begin()
            while not self._stop.is_set():
                copied = bookie.compact_copy()
                if copied.phase == "idle":
                    break
                if copied.new_log is None:
                    continue
                bookie.compact_flush()
                bookie.compact_index()
            else:
                return
        except (NoSpace, BookieIOError) as exc:
            if bookie.failure is not None or bookie.closed:
                raise
            self._gc_failures += 1
            self._log(
                f"garbage collection failed and will run again in {self._gc_wait_ns // NS_PER_MS}"
                f" ms (gcWaitTime): {exc}"
            )
            return
        self._gc_cycles += 1


def _say_nothing(_line: str) -> None:
    """The default log: say nothing."""
