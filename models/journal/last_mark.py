"""The checkpoint sub-model: the journal's durable mark and the persisted lastMark.

Spec page: spec/format/journal.md ("lastMark", "Replay"). The model does not know journal
offsets (they depend on record sizes and padding the model does not track); it knows how the
two marks must move, and holds the implementation's observed marks to that:

- the journal's durable mark moves forward exactly when a journal force (or the sync phase
  of a group commit run as steps) makes records durable that were queued, and at no other
  step of a run;
- a checkpoint run as two phases persists exactly the mark its first phase captured (the
  journal's durable mark then), however many records were forced between the phases;
- lastMark moves only at a checkpoint (to the journal's durable mark: after a checkpoint
  nothing that is durable needs replay) and at a restart; it never moves backwards, across
  crashes too (BookKeeper #4740);
- after a restart, lastMark is at least the journal's durable mark when the bookie died:
  recovery replays everything that was durable and persists where replay ended
  (BookKeeper #2087: if it did not, the next restart would replay the same records again);
- a restart after a clean shutdown replays no record.

Not modelled: journal rollover and trimming (which journal files exist), the group-commit
timing (when a force happens is the test's choice).
"""

from __future__ import annotations

from spec.state import Mark


class LastMarkModel:
    """See the module docstring. ``None`` marks are not yet observed."""

    def __init__(self) -> None:
        self.last_mark: Mark | None = None
        self.journal_mark: Mark | None = None
        #: Records appended to the journal since the last force (key, data, fence records),
        #: not yet taken by a group commit's write phase.
        self.queued = 0
        #: Records a group commit's write phase took and its sync phase has not synced.
        self.in_flight = 0
        #: The first phase of a checkpoint ran: "pending" until the next look at the marks
        #: reads the mark it captured (the journal's durable mark, which no step since has
        #: moved), "known" once read, "unknown" when a step moved the journal's mark first.
        self.capture: str | None = None
        self.captured: Mark | None = None
        #: The mark the second phase persisted, for the next look at the marks.
        self.persisting: Mark | None = None
        #: The journal's durable mark when the bookie last died, until the restart checks it.
        self.durable_at_crash: Mark | None = None
        #: Whether the last stop was a clean shutdown (a restart then replays nothing).
        self.clean_stop = False
        #: Entries acknowledged since the last checkpoint: a crash now makes replay bring
        #: them back (for explanations).
        self.journal_only = 0

    def appended(self, records: int) -> None:
        assert records > 0, records
        self.queued += records

    def forced(self, acknowledged: int) -> None:
        """A journal force: everything queued or in flight is durable now."""
        if self.queued or self.in_flight:
            self._journal_moved()
        self.queued = 0
        self.in_flight = 0
        self.journal_only += acknowledged

    def unforced(self) -> int:
        """Records appended and not yet durable in the journal."""
        return self.queued + self.in_flight

    def taken(self) -> None:
        """A group commit's write phase took every queued record as its group."""
        self.in_flight += self.queued
        self.queued = 0

    def synced(self) -> bool:
        """A group commit's sync phase made its group durable: whether it held records."""
        had = self.in_flight > 0
        if had:
            self._journal_moved()
        self.in_flight = 0
        return had

    def acknowledged(self, count: int) -> None:
        """Acks handed out for records made durable earlier (a group commit's ack phase)."""
        self.journal_only += count

    def _journal_moved(self) -> None:
        if self.capture == "pending":
            self.capture = "unknown"

    def capture_mark(self) -> None:
        """A checkpoint's first phase captured the journal's durable mark."""
        self.capture = "pending"
        self.captured = None

    def persist_captured(self) -> None:
        """A checkpoint's second phase persisted the mark its first phase captured."""
        self.persisting = self.captured if self.capture == "known" else None
        self.capture = None
        self.captured = None
        self.journal_only = 0

    def check(
        self,
        step: str,
        *,
        last_mark: Mark,
        journal_mark: Mark,
        strict: bool,
        forced: bool,
        persisted: bool,
    ) -> list[str]:
        """Problems with the observed marks after a step named ``step``, judged over the steps
        since the marks were last checked (a trace may carry a state now and then):
        ``forced``, one of them made queued records durable; ``persisted``, one of them
        persisted lastMark (a checkpoint, a restart). ``strict`` is False while a fault (or
        the first step of a run, or a bookie that forces and checkpoints on its own threads)
        makes the marks' movement unpredictable; the monotonic rules hold regardless.
        Commits the observed marks."""
        problems: list[str] = []
        if self.last_mark is not None and last_mark < self.last_mark:
            problems.append(f"lastMark moved backwards: {self.last_mark} -> {last_mark}")
        if journal_mark < last_mark:
            problems.append(f"the journal's durable mark {journal_mark} is behind {last_mark}")
        previous = self.journal_mark
        if strict and previous is not None:
            if forced and not journal_mark > previous:
                problems.append(
                    f"a journal force made records durable but the journal mark stayed at "
                    f"{previous} (now {journal_mark})"
                )
            if not forced and journal_mark != previous:
                problems.append(
                    f"the journal mark moved from {previous} to {journal_mark} "
                    "though nothing was forced"
                )
        moved = self.last_mark is not None and last_mark != self.last_mark
        if strict and not persisted and moved:
            problems.append(
                f"lastMark moved from {self.last_mark} to {last_mark} "
                f"at a {step}, and no step since the last look persisted a mark"
            )
        if self.capture == "pending":
            self.capture, self.captured = "known", journal_mark
        if self.persisting is not None and strict and last_mark != self.persisting:
            problems.append(
                f"after the checkpoint's second phase lastMark is {last_mark}, not the mark "
                f"{self.persisting} its first phase captured before it flushed the entry logs "
                "and the index: records made durable in the journal after that flush would "
                "be skipped by replay"
            )
        self.persisting = None
        if step == "checkpoint" and strict and last_mark != journal_mark:
            problems.append(
                f"after a checkpoint lastMark {last_mark} is not the journal's "
                f"durable mark {journal_mark}: durable records still need replay"
            )
        if step == "restart" and self.durable_at_crash is not None:
            if last_mark < self.durable_at_crash:
                problems.append(
                    f"after recovery lastMark {last_mark} is behind the journal's "
                    f"durable mark before the stop {self.durable_at_crash}: replay "
                    "did not advance the mark (BookKeeper #2087)"
                )
            self.durable_at_crash = None
        self.last_mark = max(last_mark, self.last_mark) if self.last_mark else last_mark
        self.journal_mark = journal_mark
        return problems

    def checkpointed(self) -> None:
        """A whole checkpoint (or a clean shutdown's): it overtakes a phased one."""
        self.journal_only = 0
        self.capture = None
        self.captured = None
        self.persisting = None

    def stopped(self, *, clean: bool) -> None:
        """The bookie died (or shut down): remember where its journal was durable."""
        self.durable_at_crash = self.journal_mark
        self.clean_stop = clean
        self.queued = 0
        self.in_flight = 0
        self.capture = None
        self.captured = None
        self.persisting = None
        self.journal_mark = None

    def check_invariants(self) -> None:
        assert self.queued >= 0 and self.in_flight >= 0 and self.journal_only >= 0
        assert self.capture in (None, "pending", "known", "unknown"), self.capture
        assert (self.captured is not None) == (self.capture == "known"), self.capture
        if self.last_mark is not None and self.journal_mark is not None:
            assert self.journal_mark >= self.last_mark, (self.journal_mark, self.last_mark)
