"""The live line a long campaign shows while it runs: a bar, scenarios done of the pass,
scenarios per second, steps and crash states per second, failures so far, and the time
left.

Why it is shaped so: on a terminal the line is redrawn in place (a carriage return) at most
a few times a second; into a file or a CI log, where a redrawn line is noise, a whole line is
written each time another tenth of the pass is done or every REPORT_EVERY_S seconds, and at
the end. :func:`render` is pure, so what the line says is tested without a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

#: Seconds between two lines when the stream is not a terminal.
REPORT_EVERY_S = 10.0
#: Characters of the bar.
BAR_WIDTH = 24


def render(label: str, total: int, counts: Sequence[int], elapsed_s: float) -> str:
    """The progress line for ``counts`` = (scenarios done, failed, errors, steps, crash
    states) of ``total`` after ``elapsed_s`` seconds."""
    done, failed, errors, steps, crash_states = (list(counts) + [0] * 5)[:5]
    filled = 0 if total <= 0 else min(BAR_WIDTH, BAR_WIDTH * done // total)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    left = f"{(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
    parts = [
        f"{label} [{bar}] {done:,}/{total:,} scenarios",
        f"{rate:.1f}/s",
        f"steps {_per_s(steps, elapsed_s)}/s",
        f"crash states {_per_s(crash_states, elapsed_s)}/s",
        f"failures {failed}",
    ]
    if errors:
        parts.append(f"errors {errors}")
    if left:
        parts.append(left)
    return "  ".join(parts)


def _per_s(count: int, elapsed_s: float) -> str:
    return f"{count / elapsed_s:,.0f}" if elapsed_s > 0 else "0"


class ProgressLine:
    """Shows :func:`render` on ``stream`` as counts come in (:meth:`update`), until
    :meth:`finish`."""

    def __init__(
        self,
        label: str,
        total: int,
        stream: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.started = clock()
        self._last_line_at = self.started
        self._last_tenth = -1
        self._counts: tuple[int, ...] = (0, 0, 0, 0, 0)
        self._width = 0

    def update(self, counts: Sequence[int]) -> None:
        self._counts = tuple(counts)
        now = self.clock()
        line = render(self.label, self.total, self._counts, now - self.started)
        if self.tty:
            pad = " " * max(0, self._width - len(line))
            self.stream.write("\r" + line + pad)
            self._width = len(line)
            self.stream.flush()
            return
        tenth = 0 if self.total <= 0 else 10 * self._counts[0] // self.total
        if tenth > self._last_tenth or now - self._last_line_at >= REPORT_EVERY_S:
            self._last_tenth = tenth
            self._last_line_at = now
            self.stream.write(line + "\n")
            self.stream.flush()

    def finish(self) -> str:
        """End the line; return its last text."""
        line = render(self.label, self.total, self._counts, self.clock() - self.started)
        if self.tty:
            self.stream.write("\r" + line + " " * max(0, self._width - len(line)) + "\n")
        elif self._last_tenth < 10:
            self.stream.write(line + "\n")
        self.stream.flush()
        return line
