"""The clock seam: the engine never reads time itself.

``Clock`` is what the engine takes; ``SystemClock`` is the real one (this module is one of
impl/'s explicit seams, allowed to import ``time``); ``ManualClock`` is for tests and the
simulated runs, advanced by hand so every schedule replays exactly.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds for timestamps (journal ids) and a monotonic clock for waits."""

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (BookKeeper names journals by this)."""
        ...

    def monotonic_ns(self) -> int:
        """A monotonic reading in nanoseconds, for group-commit waits and timers."""
        ...

    def sleep_ns(self, ns: int) -> None:
        """Wait ``ns`` nanoseconds (the compaction throttle): a real sleep, or on a manual
        clock a move of the clock, so a throttled compaction replays exactly."""
        ...


class SystemClock:
    """The real clock."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_ns(self, ns: int) -> None:
        if ns > 0:
            time.sleep(ns / 1_000_000_000)


class ManualClock:
    """A clock that moves only when told to. Thread-safe."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ns: int = 0) -> None:
        self._lock = threading.Lock()
        self._wall_ms = wall_ms
        self._monotonic_ns = monotonic_ns

    def wall_ms(self) -> int:
        with self._lock:
            return self._wall_ms

    def monotonic_ns(self) -> int:
        with self._lock:
            return self._monotonic_ns

    def sleep_ns(self, ns: int) -> None:
        """Move both readings forward by ``ns`` (the wall clock by whole milliseconds)."""
        assert ns >= 0, ns
        with self._lock:
            self._monotonic_ns += ns
            self._wall_ms += ns // 1_000_000

    def advance_ms(self, ms: int) -> None:
        """Move both readings forward by ``ms`` milliseconds."""
        assert ms >= 0, ms
        with self._lock:
            self._wall_ms += ms
            self._monotonic_ns += ms * 1_000_000
