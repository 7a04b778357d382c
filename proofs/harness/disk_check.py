"""The disk check: after every step of the in-process bookie, what its files hold (read by
proofs/harness/disk_view.py, not by the bookie) against the model's entry-log sub-model
(models/entrylog/manager.py), and the durable files against each other.

Why: the model's comparison (models/bookie/bookie.py ``BookieModel.compare``) sees the bookie's
own counters, so a record the write path drops or doubles on its way to the file, or a ledgers
map that disagrees with the records, passes it. Here the bytes themselves are held to the
model. The check lives in the harness because models/ must not know the disk layout.

What holds, per entry log of this run (written since the last restart):

- every ledger with records in the file was named by some add (no bytes from nowhere);
- its durable records are no more than its current ones, per ledger;
- when its header says it is sealed, the ledgers map reads whole and equals the scan;
- the durable contents hold at least the model's durable bytes, per ledger;
- the file holds no more of a ledger than the model says was written; a rotated or flushed
  log holds exactly that, and is sealed; the active log may lag (the write buffer holds what
  is not in the file yet), except when the model says all it wrote is durable (a checkpoint
  flushed the buffer): then exactly. While a fault is active (the model is *relaxed*: it
  follows the bookie's own counters) only the upper bound holds, since a failed fsync takes
  unsynced bytes back out of the file.

Right after a restart the model adopts what the bookie reports, so instead the files are held
to what the crash allowed (``CrashOutcomes.logs``, with the scan in place of the bookie's
count): each log the model knew still holds at least its fsynced bytes, and exactly its
written bytes when all of them were fsynced; and everything is durable (recovery fsyncs the
previous run's files). From then on the logs of earlier runs (every log but the active one at
that point) must never change: after a crash their bytes may hold garbage the scan reads past
a hole, or a map that disagrees with a torn scan, so only their stability is checked.

The durable files (:meth:`DiskCheck.check_durable`), whatever the model says: every location
of the durable ledger index points at a durable entry-log record with its ledger and entry
ids, and the durable lastMark lies on a record boundary of its durable journal. Both are
re-checked only when a durable file they read changed. So the durable index never names a
log a GC or a compaction removed, for a live ledger (deleted ledgers' locations are dropped
with the deleted-ledgers list).

Garbage collection and compaction (spec/protocol/compaction.md): a log of an earlier run may
leave the disk only when the model removed it (a dead log, a compacted source) or, after a
crash, when the crash outcomes say it may be gone (``LogConstraints.may_be_gone``). After
every recovery the ledger directories hold no ``.compacting`` and no ``.compacted`` file, and
nothing but entry logs (lower-case hex names: BookKeeper #4804 named a recovered log in
decimal) and the fixed files: so repeated failed compactions cannot grow the disk. A
compaction phase that failed and rolled back leaves no compaction file either.
"""

from __future__ import annotations

from models.bookie.bookie import GC_STEPS, BookieModel, Divergence
from models.entrylog.manager import LogModel
from models.fs.simdisk import FileVersion
from proofs.harness.disk_view import (
    COMPACTED_SUFFIX,
    COMPACTING_SUFFIX,
    FIXED_LEDGER_FILES,
    INDEX_DIR_NAME,
    DiskView,
    IndexError_,
    LedgerBytes,
    LogFile,
    log_id_of,
    record_at,
)
from spec.operations import Add, CompactCopy, CompactFlush, Operation, Restart, Result


class DiskCheck:
    """See the module docstring. ``check`` after every judged step."""

    def __init__(self, view: DiskView) -> None:
        self.view = view
        #: Ledgers some add named, whatever its answer: any other ledger's bytes come from
        #: nowhere.
        self.named: set[int] = set()
        #: The next check with the bookie up is the first of a run.
        self.run_starts = True
        #: Logs of earlier runs: their scans (current, durable) when the run started.
        self.inherited: dict[int, tuple[LedgerBytes, LedgerBytes | None]] = {}
        self._durable_key: object = None
        #: Per log of this run, what its last check that passed saw: the LogFile, the named
        #: set (by identity: it only grows), the model's state of the log and ``relaxed``,
        #: and copies of the model's written and durable bytes (see ``_check_logs``).
        self._passed: dict[
            int, tuple[LogFile, set[int], tuple[str, bool], dict[int, int], dict[int, int]]
        ] = {}
        #: The index locations whose durable record was read and held the right ids, with
        #: the durable version of its entry log then: (ledger, entry, location, version).
        self._located: set[tuple[int, int, int, FileVersion]] = set()

    def check(self, index: int, op: Operation, result: Result, model: BookieModel) -> None:
        """Check the disk after step ``index``; raises Divergence."""
        if isinstance(op, Add):
            self.named.add(op.ledger)
        if isinstance(op, Restart) and result.ok:
            self.run_starts = True
        self.check_durable(index)
        if result.crashed and isinstance(op, GC_STEPS):
            # Died in the middle of a GC step: which logs it removed or linked is for the
            # crash and the recovery to show (the crash outcomes and the run-start check).
            return
        if model.up:
            logs = self.view.logs()
            if self.run_starts:
                self._check_run_start(index, logs, model)
            elif (
                isinstance(op, CompactCopy | CompactFlush)
                and result.error is not None
                and not model.faulted
            ):
                # A phase that failed on its own rolled back. A bookie that failed before (a
                # fault fired: model.faulted) refuses the step without touching the disk, and
                # its compaction files are for the restart to remove (_check_run_start).
                self._check_no_compaction_files(index, "a compaction phase failed and rolled back")
            self._check_logs(index, logs, model)

    def check_first_state(self, model: BookieModel) -> None:
        """Before the first step, on the bookie as it was opened (index -1)."""
        self.check_durable(-1)
        if model.up:
            self._check_run_start(-1, self.view.logs(), model)

    # --- the entry logs -------------------------------------------------------------------

    def _check_no_compaction_files(self, index: int, when: str) -> None:
        for directory, names in self.view.ledger_dir_files().items():
            for name in names:
                if name.endswith((COMPACTING_SUFFIX, COMPACTED_SUFFIX)):
                    raise Divergence(
                        index,
                        f"disk: {directory}/{name} is left after {when}: recovery removes every "
                        ".compacting and finishes every .compacted (spec/protocol/compaction.md)",
                    )

    def _check_files_after_recovery(self, index: int, model: BookieModel) -> None:
        """No compaction leftover, and nothing but entry logs with canonical names and the
        fixed files: what the model does not explain would grow the disk forever."""
        self._check_no_compaction_files(index, "recovery")
        for directory, names in self.view.ledger_dir_files().items():
            for name in names:
                if name in FIXED_LEDGER_FILES or name == INDEX_DIR_NAME:
                    continue
                if name.endswith(".tmp") and name[: -len(".tmp")] in FIXED_LEDGER_FILES:
                    continue  # a fixed file's next version, written first under .tmp
                log_id = log_id_of(name)
                if log_id is not None and name == f"{log_id:x}.log":
                    continue
                why = (
                    f"an entry log name that is not lower-case hex (id {log_id}: "
                    "BookKeeper #4804 named a recovered log in decimal)"
                    if log_id is not None
                    else "a file no bookie state explains"
                )
                raise Divergence(index, f"disk: after recovery {directory}/{name} is {why}")

    def _check_run_start(self, index: int, logs: dict[int, LogFile], model: BookieModel) -> None:
        self.run_starts = False
        self._check_files_after_recovery(index, model)
        outcomes = model.outcomes
        for log_id, (current, _) in self.inherited.items():
            found = logs.get(log_id)
            if found is None and outcomes is not None and outcomes.logs.may_be_gone(log_id):
                continue  # a GC step the crash cut short deleted it, or compacted it away
            if found is None or found.current != current:
                raise Divergence(
                    index,
                    f"disk: entry log {log_id} of an earlier run changed in the crash: records "
                    f"{_sizes(current)} -> {_sizes(None if found is None else found.current)}",
                )
        if outcomes is not None:
            for log_id, durable, written in outcomes.logs.logs:
                if log_id in self.inherited:
                    continue  # the model has the bookie's reading of it, not the records
                found = logs.get(log_id)
                if found is None and outcomes.logs.may_be_gone(log_id):
                    continue
                if found is None:
                    raise Divergence(index, f"disk: entry log {log_id} vanished in the crash")
                problem = outcomes.logs.log_problem(durable, written, dict(found.current))
                if problem is not None:
                    raise Divergence(
                        index, f"disk: entry log {log_id} ({found.path}) after the crash {problem}"
                    )
        for log_id, found in logs.items():
            if found.durable != found.current:
                raise Divergence(
                    index,
                    f"disk: after recovery entry log {log_id} ({found.path}) is not durable: "
                    f"records {_sizes(found.current)}, durable {_sizes(found.durable)}",
                )
        # The active logs take this run's adds (one, or one per ledger with an entry log per
        # ledger); every other log is an earlier run's, and never changes.
        active = {i for i, log in model.logs.logs.items() if log.state == "active"}
        active.add(-1 if model.logs.current is None else model.logs.current)
        self.inherited = {
            log_id: self.inherited.get(log_id, (found.current, found.durable))
            for log_id, found in logs.items()
            if log_id not in active
        }
        # Their ledgers are on the disk: a compaction copies them whatever they are (a scan
        # may read garbage records past a hole in a log a crash tore).
        for found in logs.values():
            self.named |= set(found.current)

    def _check_logs(self, index: int, logs: dict[int, LogFile], model: BookieModel) -> None:
        relaxed = model.logs.relaxed
        for log_id in [i for i in self.inherited if i not in logs]:
            if log_id in model.logs.logs:
                raise Divergence(index, f"disk: entry log {log_id} of an earlier run has no file")
            del self.inherited[log_id]  # the model removed it: a GC deleted or compacted it
        for log_id, found in logs.items():
            kept = self.inherited.get(log_id)
            if kept is not None:
                if (found.current, found.durable) != kept:
                    raise Divergence(
                        index,
                        f"disk: entry log {log_id} ({found.path}) of an earlier run changed: "
                        f"records {_sizes(kept[0])} -> {_sizes(found.current)}",
                    )
                continue
            log = model.logs.logs.get(log_id)
            passed = self._passed.get(log_id)
            if (
                passed is not None
                and passed[0] is found
                and passed[1] is self.named
                and log is not None
                and passed[2] == (log.state, relaxed)
                and passed[3] == log.written
                and passed[4] == log.durable
            ):
                # The same file (an immutable LogFile: the view makes a new one whenever the
                # file's current or durable bytes change) and the same model of it passed
                # before; the named ledgers only grow, so the same checks pass again.
                continue
            _check_file(index, found, self.named)
            if log is None:
                # A compaction's new log linked by an index phase that then failed (the
                # bookie fails; recovery finishes it) holds copied records the model has not
                # placed yet.
                if found.current and log_id not in model.logs.taken:
                    raise Divergence(
                        index,
                        f"disk: entry log {log_id} ({found.path}) holds records "
                        f"{_sizes(found.current)}; the model has no such log",
                    )
                continue
            _check_against_model(index, found, log, relaxed=relaxed)
            self._passed[log_id] = (
                found,
                self.named,
                (log.state, relaxed),
                dict(log.written),
                dict(log.durable),
            )
        for log_id, log in model.logs.logs.items():
            if log_id not in logs and log.written and log_id not in model.logs.provisional:
                raise Divergence(index, f"disk: entry log {log_id} has no file")

    # --- the durable files ----------------------------------------------------------------

    def check_durable(self, index: int) -> None:
        """The durable index points at durable records; the durable lastMark lies within
        the durable journal, on a record boundary. Raises Divergence."""
        view = self.view
        key = view.version_key(view.durable_directories, durable=True)
        if key == self._durable_key:
            return
        self._check_index(index)
        self._check_last_mark(index)
        self._durable_key = key
        view.forget_unused()

    def _check_index(self, index: int) -> None:
        view = self.view
        try:
            locations = view.durable_index()
        except IndexError_ as exc:
            raise Divergence(index, f"disk: the durable ledger index is unreadable: {exc}") from exc
        if not locations:
            return
        logs = view.durable_log_versions()
        contents: dict[int, bytes] = {}
        checked = self._located
        self._located = set()
        for (ledger, entry), location in sorted(locations.items()):
            log_id, offset = location >> 32, location & 0xFFFFFFFF
            version = logs.get(log_id)
            if version is None:
                found: tuple[int, int] | str = f"entry log {log_id} is not durable"
            elif (ledger, entry, location, version) in checked:
                # Its record was read at this very location in these very durable bytes (a
                # version changes whenever the bytes do): the same read finds the same ids.
                self._located.add((ledger, entry, location, version))
                continue
            else:
                data = contents.get(log_id)
                if data is None:
                    data = contents[log_id] = view.durable_bytes(version)
                found = record_at(data, offset)
            if found == (ledger, entry):
                assert version is not None
                self._located.add((ledger, entry, location, version))
            else:
                what = found if isinstance(found, str) else f"the record of {found[0]}:{found[1]}"
                raise Divergence(
                    index,
                    f"disk: the durable index puts entry {ledger}:{entry} at entry log "
                    f"{log_id} offset {offset}; the durable bytes there hold {what}",
                )

    def _check_last_mark(self, index: int) -> None:
        view = self.view
        mark = view.durable_last_mark()
        if mark is None or mark == (0, 0):
            return
        journal_id, offset = mark
        journals = view.durable_journals()
        version = journals.get(journal_id)
        if version is None:
            raise Divergence(
                index,
                f"disk: the durable lastMark {mark} names journal {journal_id:x}, which is not "
                f"durable (durable journals: {sorted(f'{j:x}' for j in journals)})",
            )
        length, boundaries = view.journal_length_and_boundaries(version)
        if offset > length or offset not in boundaries:
            raise Divergence(
                index,
                f"disk: the durable lastMark {mark} is not a record boundary within the "
                f"{length} durable bytes of journal {journal_id:x}",
            )


def _check_file(index: int, found: LogFile, named: set[int]) -> None:
    """What holds of a log of this run whatever the model says."""
    nowhere = sorted(set(found.current) - named)
    if nowhere:
        raise Divergence(
            index,
            f"disk: entry log {found.log_id} ({found.path}) holds records of ledgers "
            f"{nowhere}, which no add named",
        )
    durable = found.durable or {}
    for ledger, size in durable.items():
        if size > found.current.get(ledger, 0):
            raise Divergence(
                index,
                f"disk: entry log {found.log_id} ({found.path}) holds {size} durable bytes "
                f"of ledger {ledger} but {found.current.get(ledger, 0)} in its current contents",
            )
    problem = found.map_problem()
    if problem is not None:
        raise Divergence(
            index, f"disk: entry log {found.log_id} ({found.path}) is sealed, but {problem}"
        )


def _check_against_model(index: int, found: LogFile, log: LogModel, *, relaxed: bool) -> None:
    """A log of this run against the model's LogModel of it (see the module docstring)."""
    where = f"disk: entry log {found.log_id} ({found.path}, {log.state})"
    have, written = found.current, log.written
    durable = found.durable or {}
    for ledger, size in log.durable.items():
        if durable.get(ledger, 0) < size:
            raise Divergence(
                index,
                f"{where} holds {durable.get(ledger, 0)} durable bytes of ledger {ledger}; "
                f"the model made {size} durable (fsynced)",
            )
    for ledger, size in have.items():
        if size > written.get(ledger, 0):
            raise Divergence(
                index,
                f"{where} holds {size} bytes of ledger {ledger}; the model wrote only "
                f"{written.get(ledger, 0)} to it (a record from nowhere, or written twice)",
            )
    if relaxed:
        return
    exact = log.state != "active" or log.durable == written
    if exact and dict(have) != written:
        lost = {k: v - have.get(k, 0) for k, v in written.items() if have.get(k, 0) != v}
        raise Divergence(
            index,
            f"{where} holds records {_sizes(have)}; the model wrote {_sizes(written)} "
            f"(bytes missing per ledger: {_sizes(lost)}: lost below the bookie's counters)",
        )
    if log.state != "active" and not found.sealed:
        raise Divergence(index, f"{where} is not sealed: its header points to no ledgers map")


def _sizes(sizes: LedgerBytes | None) -> str:
    if sizes is None:
        return "(no file, or no durable name)"
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items())) + "}"
