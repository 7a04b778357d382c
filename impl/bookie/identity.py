"""Directory identity and locking: each journal and ledger directory is locked for the life of
the bookie and carries a stamp saying which bkref instance it belongs to and with which
directory set; a start whose configuration does not match the stamps is refused, and
``bkref dirs accept`` (proofs/cli/dirs.py) rewrites them once the operator says so.

Spec page: spec/format/identity.md (the stamp, the rules of a start, what a crash can leave,
the damage table). The stamp's bytes are impl/format/identity.py; what a directory is (empty,
bkref's, BookKeeper's ...) is impl/bookie/directories.py.

Why: two processes on one set of directories each take the other's journal and lastMark for
their own and lose acknowledged entries; a reordered, added or dropped ledger directory moves
where the index is looked for, so recovery rebuilds it from the entry logs (losing fences,
keys and deletes) or loads a stale one. BookKeeper refuses such starts with its cookies
(Cookie.verify, BookieImpl.checkEnvironment); so does bkref, and the stamps also say which
directory holds the ledger index, so the index is found wherever it is and the order of
``ledgerDirectories`` does not decide it.

Locks: ``FileSystem.lock_dir`` on each ``current/`` directory, before anything is read or
written. The OS backend flocks the directory itself rather than a lock file, so locking
changes nothing on the disk (a BookKeeper directory must stay untouched until the user asks)
and leaves nothing behind a crash; a dead process's flock is gone with it.

Stamping is crash-safe in two phases. Each stamp is written as ``bkref-identity.tmp``,
fsynced, renamed into place and its directory fsynced. Phase 1 writes a ``pending`` stamp into
every directory that lacks one of this generation, phase 2 rewrites each as ``sealed``; phase
2 starts only once every phase-1 stamp is durable. So a crash leaves either no stamps (a
first start begins again), or stamps of one generation of which none is sealed (some
directories may lack one: the start finishes phase 1), or all of them present with some
sealed (the start finishes phase 2). Once any stamp of a generation is sealed, a directory
without it was not left so by a crash: it was replaced, wiped or restored from an old copy,
and the start is refused. ``bkref dirs accept`` writes generation n+1 the same way.

Differences from BookKeeper: no ZooKeeper copy of the stamp, and no ``allowStorageExpansion``
(an added directory is always refused until accepted); BookKeeper does not lock its
directories (it relies on the cookie's host and port being unique); instance ids come from
the clock and the directory set, not from ZooKeeper.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence

import attrs

from impl.bookie.directories import DirInfo, DirKind, classify_dir, stamp_path
from impl.bookie.reserve import with_reserve
from impl.clock import Clock
from impl.format.identity import Stamp, StampFormatError, encode_stamp
from impl.format.names import CURRENT_DIR, IDENTITY_FILE_NAME, tmp_file_name
from impl.fs.api import DirLock, FileSystem, join, parent
from spec.errors import DirectoryError, FsError, FsLocked

__all__ = [
    "AcceptPlan",
    "Settled",
    "accept_command",
    "apply_accept",
    "damaged_stamp_message",
    "lock_directories",
    "normalise_dir",
    "plan_accept",
    "release_locks",
    "settle_identity",
]

Say = Callable[[str], None]


def normalise_dir(path: str) -> str:
    """A configured directory as stamps record it: repeated and trailing ``/`` dropped."""
    absolute = path.startswith("/")
    parts = [p for p in path.split("/") if p]
    joined = "/".join(parts)
    return ("/" + joined) if absolute else (joined or path)


def _unique(dirs: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(dirs))


def accept_command(journals: Sequence[str], ledgers: Sequence[str]) -> str:
    """The command that accepts this directory set (printed in every refusal)."""
    return (
        f"bkref dirs accept --set journalDirectories={','.join(journals)} "
        f"--set ledgerDirectories={','.join(ledgers)}"
    )


# --- locks ---------------------------------------------------------------------------------------


def lock_directories(fs: FileSystem, directories: Sequence[str]) -> list[DirLock]:
    """Lock each configured directory's ``current/`` (which must exist). Raises
    DirectoryError naming the directory another process holds, with every lock taken here
    released again."""
    locks: list[DirLock] = []
    for directory in _unique(directories):
        current = join(directory, CURRENT_DIR)
        try:
            locks.append(fs.lock_dir(current))
        except (FsLocked, FsError) as exc:
            release_locks(locks)
            if isinstance(exc, FsLocked):
                raise DirectoryError(
                    f"{current} is locked by another bkref process (a bookie or `bkref dirs "
                    "accept`) using the same directory: two processes on one set of "
                    "directories would each overwrite the other's journal and lastMark and "
                    "lose acknowledged entries. Stop the other process, or give this one "
                    "other directories. Nothing was changed."
                ) from exc
            raise DirectoryError(f"cannot lock {current}: {exc}. Nothing was changed.") from exc
    return locks


def release_locks(locks: Sequence[DirLock]) -> None:
    """Release locks (idempotent; a release that fails is ignored: the lock dies with the
    process anyway)."""
    for lock in locks:
        with contextlib.suppress(FsError, OSError):
            lock.release()


# --- writing stamps ------------------------------------------------------------------------------


def _write_stamp(fs: FileSystem, stamp: Stamp) -> None:
    """Write one stamp crash-safely: temporary file, fsync, rename, fsync of ``current/``."""
    current = join(stamp.directory, CURRENT_DIR)
    try:
        data = encode_stamp(stamp)
    except StampFormatError as exc:
        raise DirectoryError(f"cannot stamp {stamp.directory}: {exc}") from exc
    tmp = join(current, tmp_file_name(IDENTITY_FILE_NAME))

    def write_tmp() -> None:
        if fs.exists(tmp):
            fs.unlink(tmp)
        handle = fs.open(tmp, create=True, exclusive=True)
        try:
            handle.pwrite(0, data)
            handle.fsync()
        finally:
            handle.close()

    # A directory the bookie's data filled to the byte has its reserve to free (issue 26:
    # an accept adding an empty directory could not write this one's stamp).
    with_reserve(fs, [current], write_tmp)
    fs.rename(tmp, join(current, IDENTITY_FILE_NAME))
    fs.fsync_dir(current)


def _sync_stamp(fs: FileSystem, directory: str) -> None:
    """Make a stamp a previous process wrote durable (it may have died before its fsyncs)."""
    handle = fs.open(stamp_path(directory), read_only=True)
    try:
        handle.fsync()
    finally:
        handle.close()
    fs.fsync_dir(join(directory, CURRENT_DIR))


def _sync_ancestors(fs: FileSystem, directories: Sequence[str]) -> None:
    """fsync every directory above each ``current/``, up to the root: a process that died
    between making a directory and fsyncing its parent leaves a name that a crash may still
    take, and with it every stamp below (found by tests/unit/impl/bookie/test_identity.py:
    a killed first start, a second start, then a power loss)."""
    seen: set[str] = set()
    for directory in directories:
        probe = directory
        while probe and probe not in seen:
            seen.add(probe)
            fs.fsync_dir(probe)
            up = parent(probe)
            if up == probe:
                break
            probe = up


def _write_set(
    fs: FileSystem, template: Stamp, directories: Sequence[str], found: dict[str, Stamp | None]
) -> None:
    """The two phases (module docstring) for ``template``'s generation: ``found`` is what
    each directory holds now; stamps of this generation already there are kept (made
    durable first), the rest written. Phase 2 starts once phase 1 is durable, the names of
    the directories above included."""
    for directory in directories:  # phase 1
        have = found.get(directory)
        if have is not None and have.same_set(template) and have.directory == directory:
            _sync_stamp(fs, directory)
            continue
        _write_stamp(fs, attrs.evolve(template, directory=directory, sealed=False))
    _sync_ancestors(fs, directories)
    for directory in directories:  # phase 2
        have = found.get(directory)
        if (
            have is not None
            and have.sealed
            and have.same_set(template)
            and have.directory == directory
        ):
            continue
        _write_stamp(fs, attrs.evolve(template, directory=directory, sealed=True))


def new_instance_id(clock: Clock, journals: Sequence[str], ledgers: Sequence[str]) -> str:
    """A fresh instance id: a hash of the clocks and the directory set. Deterministic under a
    manual clock (the simulated runs replay exactly); on a real machine two instances get
    the same id only if started at the same nanosecond on the same directory set, which
    the locks already exclude."""
    seed = f"{clock.wall_ms()} {clock.monotonic_ns()} {','.join(journals)} {','.join(ledgers)}"
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]


# --- a start -------------------------------------------------------------------------------------


@attrs.frozen
class Settled:
    """What a start learned from the stamps: the instance and the (normalised, configured)
    ledger directory whose ``current/`` holds the ledger index."""

    instance: str
    index_dir: str
    stamped: bool


def _role(directory: str, journals: Sequence[str], ledgers: Sequence[str]) -> str:
    roles = []
    if directory in journals:
        roles.append("journal")
    if directory in ledgers:
        roles.append("ledger")
    return " and ".join(roles) + " directory"


def _list_changes(key: str, configured: Sequence[str], stamped: Sequence[str]) -> list[str]:
    if tuple(configured) == tuple(stamped):
        return []
    added = [d for d in configured if d not in stamped]
    dropped = [d for d in stamped if d not in configured]
    what = []
    if added:
        what.append(f"added {', '.join(added)}")
    if dropped:
        what.append(f"dropped {', '.join(dropped)}")
    if not added and not dropped:
        what.append("the same directories in another order (reordered)")
    return [
        f"{key} is {','.join(configured)} where the stamps say {','.join(stamped)}: "
        + " and ".join(what)
    ]


def damaged_stamp_message(path: str, problem: str, accept: str) -> str:
    """Row D1 of spec/format/identity.md, one decision for a start and for ``bkref inspect``:
    a stamp that does not decode is damage (no crash leaves it), and what to do about it.
    ``accept`` names the accept command (inspect does not know the configured set)."""
    return (
        f"{path}: the bkref identity stamp is damaged ({problem}). A crash never leaves a "
        "damaged stamp (it is renamed into place only once complete and fsynced). Restore it "
        f"from a backup, or move it aside and run {accept}, which re-stamps the directory "
        "after checking what it holds."
    )


def _refusal(problems: Sequence[str], journals: Sequence[str], ledgers: Sequence[str]) -> str:
    """One line (the adapter's start error is one line on stderr)."""
    return (
        "the configured directories do not match their bkref identity stamps "
        "(spec/format/identity.md), nothing was changed: "
        + "; ".join(problems)
        + ". If this change is intended, stop every bookie on these directories and accept "
        f"it with `{accept_command(journals, ledgers)}` (with the rest of the bookie's "
        "configuration, e.g. --conf FILE): it says what it changes and refuses what would lose "
        "data. Otherwise fix the configuration or the mounts."
    )


def settle_identity(
    fs: FileSystem,
    journal_dirs: Sequence[str],
    ledger_dirs: Sequence[str],
    *,
    clock: Clock,
    write_bookkeeper_dirs: bool = False,
    say: Say,
) -> Settled:
    """Compare the configured directories (each ``current/`` exists and is locked) with
    their stamps; stamp them at a first start, finish what an interrupted stamping left, and
    raise DirectoryError for anything else (module docstring, spec/format/identity.md)."""
    journals = _unique([normalise_dir(d) for d in journal_dirs])
    ledgers = _unique([normalise_dir(d) for d in ledger_dirs])
    directories = _unique([*journals, *ledgers])
    infos = {d: classify_dir(fs, d) for d in directories}
    for info in infos.values():
        if info.stamp_problem is not None:
            raise DirectoryError(
                damaged_stamp_message(
                    stamp_path(info.path),
                    info.stamp_problem,
                    f"`{accept_command(journals, ledgers)}`",
                )
                + " Nothing was changed."
            )
    found = {d: infos[d].stamp for d in directories}
    stamps = {d: s for d, s in found.items() if s is not None}
    if not stamps:
        return _first_start(fs, journals, ledgers, infos, clock, write_bookkeeper_dirs, say)
    instances = sorted({s.instance for s in stamps.values()})
    if len(instances) > 1:
        lines = []
        for instance in instances:
            own = [d for d, s in stamps.items() if s.instance == instance]
            sample = stamps[own[0]]
            lines.append(
                f"{', '.join(own)} belong to bkref instance {instance} (stamped with "
                f"journalDirectories={','.join(sample.journal_dirs)} "
                f"ledgerDirectories={','.join(sample.ledger_dirs)})"
            )
        lines.append(
            "directories of different bookies are mixed (a foreign directory); `bkref dirs "
            "accept` takes over a foreign directory only if it holds no data"
        )
        raise DirectoryError(_refusal(lines, journals, ledgers))
    generation = max(s.generation for s in stamps.values())
    top = [s for s in stamps.values() if s.generation == generation]
    reference = top[0]
    if not all(s.same_set(reference) for s in top):
        raise DirectoryError(
            "the stamps of generation "
            f"{generation} in {', '.join(d for d, s in stamps.items() if s in top)} record "
            "different directory sets: no crash leaves that (damage, or stamps copied by "
            f"hand). Check them (spec/format/identity.md) and run "
            f"`{accept_command(journals, ledgers)}`. Nothing was changed."
        )
    sealed = any(s.sealed for s in top)
    problems = _list_changes("journalDirectories", journals, reference.journal_dirs)
    problems += _list_changes("ledgerDirectories", ledgers, reference.ledger_dirs)
    for directory in directories:
        stamp = found[directory]
        role = _role(directory, journals, ledgers)
        if stamp is None:
            if sealed:
                problems.append(
                    f"{role} {directory} has no identity stamp; it is "
                    f"{infos[directory].kind.value} (a new, replaced, wiped or unmounted "
                    "directory)"
                )
        elif stamp.generation < generation:
            if sealed:
                problems.append(
                    f"{role} {directory} holds an older stamp of this bookie (generation "
                    f"{stamp.generation}, the others {generation}): an old copy, or a "
                    "directory dropped by an earlier accept"
                )
        elif stamp.directory != directory:
            problems.append(
                f"{role} {directory} holds the stamp of {stamp.directory} (swapped or "
                "moved directories)"
            )
    if problems:
        raise DirectoryError(_refusal(problems, journals, ledgers))
    if all(s is not None and s.sealed and s.generation == generation for s in found.values()):
        return Settled(reference.instance, reference.index_dir, stamped=False)
    say(
        f"finishing the identity stamps an interrupted start or `bkref dirs accept` left "
        f"(instance {reference.instance}, generation {generation})"
    )
    _write_set(fs, reference, directories, found)
    return Settled(reference.instance, reference.index_dir, stamped=True)


def _first_start(
    fs: FileSystem,
    journals: tuple[str, ...],
    ledgers: tuple[str, ...],
    infos: dict[str, DirInfo],
    clock: Clock,
    write_bookkeeper_dirs: bool,
    say: Say,
) -> Settled:
    """No directory has a stamp: a new bookie, a BookKeeper bookie's directories, or a bkref
    bookie's from before stamps (spec/format/identity.md, "First start")."""
    with_index = [d for d in ledgers if infos[d].has_index]
    if len(with_index) > 1:
        raise DirectoryError(
            f"ledger directories {', '.join(with_index)} each hold a bkref ledger index "
            "(current/bkref-index/), written before identity stamps existed: bkref kept its "
            "index in the first listed ledger directory, so reordering ledgerDirectories left "
            "a stale index behind, and bkref cannot tell which is current. Move the stale one "
            "aside (the one last written by a run with that directory listed first is "
            "current), then start again. Nothing was changed."
        )
    bookkeeper = [
        info for info in infos.values() if info.kind is DirKind.BOOKKEEPER or info.bookkeeper_only
    ]
    if bookkeeper and not (with_index and not any(i.bookkeeper_only for i in bookkeeper)):
        listed = "; ".join(f"{i.path} ({i.evidence()})" for i in bookkeeper)
        if not write_bookkeeper_dirs:
            raise DirectoryError(
                f"{listed}: a BookKeeper bookie's directory (its files, and no bkref identity "
                "stamp). bkref does not change a BookKeeper directory unless asked. Either "
                "copy its data into new bkref directories with `bkref import`, or let bkref "
                "write into it with `bkref adapter --write-bookkeeper-dirs` "
                "(Bookie.open(write_bookkeeper_dirs=True)): bkref then adds its own journal "
                "files, entry logs, lastMark and ledger index (bkref-index/) beside "
                "BookKeeper's, and a BookKeeper bookie started there later does not see what "
                "bkref added. Nothing was changed."
            )
        say(
            f"writing into a BookKeeper bookie's directories, as asked "
            f"(--write-bookkeeper-dirs): {listed}. bkref adds its identity stamp, journal "
            "files, entry logs, lastMark and bkref-index/ there; a BookKeeper bookie started "
            "there later does not see what bkref adds"
        )
    elif with_index:
        say(
            f"these directories were written by bkref before identity stamps: stamping them "
            f"now, with the ledger index in {with_index[0]} (where it is)"
        )
    index_dir = with_index[0] if with_index else ledgers[0]
    template = Stamp(
        instance=new_instance_id(clock, journals, ledgers),
        generation=1,
        sealed=False,
        directory=journals[0],
        journal_dirs=journals,
        ledger_dirs=ledgers,
        index_dir=index_dir,
    )
    directories = _unique([*journals, *ledgers])
    _write_set(fs, template, directories, {})
    return Settled(template.instance, index_dir, stamped=True)


# --- bkref dirs accept -------------------------------------------------------------------------


@attrs.frozen
class AcceptPlan:
    """What ``bkref dirs accept`` would do: ``changes`` (one line each, for the operator),
    ``refusals`` (non-empty: nothing is written), and the stamp set to write."""

    changes: tuple[str, ...]
    refusals: tuple[str, ...]
    template: Stamp | None
    directories: tuple[str, ...]
    found: dict[str, Stamp | None]

    @property
    def nothing_to_do(self) -> bool:
        return self.template is None and not self.refusals


def plan_accept(
    fs: FileSystem,
    journal_dirs: Sequence[str],
    ledger_dirs: Sequence[str],
    *,
    forget: Sequence[str] = (),
) -> AcceptPlan:
    """Work out how the stamps change to accept the configured directory set (each
    ``current/`` exists and is locked). Refuses (``refusals``) what would lose data: a
    dropped directory that holds entry logs, journal files or the index, an added or foreign
    directory that holds data, and a stamped directory that cannot be found, unless named in
    ``forget`` (then its loss is stated); never the index's or the journal's directory."""
    journals = _unique([normalise_dir(d) for d in journal_dirs])
    ledgers = _unique([normalise_dir(d) for d in ledger_dirs])
    forgotten = {normalise_dir(d) for d in forget}
    directories = _unique([*journals, *ledgers])
    infos = {d: classify_dir(fs, d) for d in directories}
    changes: list[str] = []
    refusals: list[str] = []
    for info in infos.values():
        if info.stamp_problem is not None:
            refusals.append(
                f"{stamp_path(info.path)} is damaged ({info.stamp_problem}): move it aside "
                "first (the directory is then re-stamped if it holds this bookie's data)"
            )
    stamps = {d: i.stamp for d, i in infos.items() if i.stamp is not None}
    if not stamps:
        return AcceptPlan(
            (),
            (
                "no configured directory has a bkref identity stamp: there is nothing to "
                "accept (a first start of the bookie stamps its directories)",
            ),
            None,
            directories,
            {},
        )
    # Our instance: the journal directory's (the journal is what makes a bookie), else the
    # one whose stamp sits in the directory holding its index.
    journal_stamp = infos[journals[0]].stamp
    owners = set()
    if journal_stamp is not None:
        owners.add(journal_stamp.instance)
    else:
        for d, s in stamps.items():
            if s.directory == s.index_dir and infos[d].has_index:
                owners.add(s.instance)
    if len(owners) != 1:
        refusals.append(
            "the configured directories hold stamps of several bkref instances, the journal "
            "directory none, and no single one holds its ledger index: "
            + "; ".join(f"{d}: {s.instance}" for d, s in stamps.items())
        )
        return AcceptPlan(tuple(changes), tuple(refusals), None, directories, {})
    (instance,) = owners
    own = {d: s for d, s in stamps.items() if s.instance == instance}
    generation = max(s.generation for s in own.values())
    reference = next(s for s in own.values() if s.generation == generation)
    # Where each stamped directory of the reference set is now.
    where: dict[str, str] = {}
    for d, s in own.items():
        if s.generation == generation and s.directory not in where:
            where[s.directory] = d
    for d in directories:
        stamp = infos[d].stamp
        info = infos[d]
        role = _role(d, journals, ledgers)
        if stamp is None:
            stamped_here = d in (*reference.journal_dirs, *reference.ledger_dirs)
            if stamped_here and d not in where and info.data:
                where[d] = d
                changes.append(
                    f"{role} {d}: re-stamped (its stamp was missing; it holds {info.evidence()})"
                )
            elif info.kind in (DirKind.EMPTY, DirKind.NOT_A_BOOKIE, DirKind.MISSING):
                changes.append(f"{role} {d}: added ({info.kind.value})")
            else:
                refusals.append(
                    f"{role} {d} is {info.kind.value} ({info.evidence()}): only an empty "
                    "directory can be added; copy a BookKeeper bookie's data with `bkref "
                    "import`"
                )
        elif stamp.instance != instance:
            if info.data:
                refusals.append(
                    f"{role} {d} belongs to another bkref bookie (instance {stamp.instance}) "
                    f"and holds its data ({info.evidence()}): taking it over would mix two "
                    "bookies' entry logs. Give this bookie another directory"
                )
            else:
                changes.append(
                    f"{role} {d}: taken over from bkref instance {stamp.instance} (it holds "
                    "no data)"
                )
        elif stamp.generation < generation and where.get(stamp.directory) != d:
            if info.data:
                refusals.append(
                    f"{role} {d} holds an older stamp of this bookie (generation "
                    f"{stamp.generation}, now {generation}) and data ({info.evidence()}): an "
                    "old copy whose files may be stale. Move it aside"
                )
            else:
                changes.append(f"{role} {d}: added (an old directory of this bookie, empty)")
        elif stamp.directory != d:
            changes.append(f"{role} {d}: was stamped as {stamp.directory} (moved or swapped)")
    for recorded in _unique([*reference.journal_dirs, *reference.ledger_dirs]):
        if recorded in where:
            continue
        what = "journal directory" if recorded in reference.journal_dirs else "ledger directory"
        held_index = recorded == reference.index_dir
        seen = classify_dir(fs, recorded) if recorded not in directories else infos[recorded]
        visible = seen.stamp is not None and seen.stamp.instance == instance
        if held_index or recorded in reference.journal_dirs:
            lost = "the ledger index (keys, fences, deletes)" if held_index else "the journal"
            if not visible or seen.data:
                refusals.append(
                    f"{what} {recorded} is not in the new set and holds (or held) {lost}: "
                    "dropping it loses acknowledged data. Keep it (or move the directory "
                    "itself, with its stamp, and configure the new path)"
                )
                continue
        if visible and not seen.data:
            changes.append(f"{what} {recorded}: dropped (it holds no entry logs)")
        elif visible:
            refusals.append(
                f"{what} {recorded}: dropping it would lose its data ({seen.evidence()}); "
                "keep it in ledgerDirectories"
            )
        elif recorded in forgotten:
            changes.append(
                f"{what} {recorded}: forgotten as asked (--forget); every entry in the entry "
                "logs it held is lost"
            )
        else:
            refusals.append(
                f"{what} {recorded} of this bookie is not found (missing, unmounted, or wiped: "
                "bkref cannot tell what it held). Mount or restore it; if its entry logs are "
                f"gone for good, add `--forget {recorded}` to accept losing them"
            )
    index_dir = where.get(reference.index_dir)
    if index_dir is not None and index_dir not in ledgers:
        refusals.append(f"the ledger index lives in {index_dir}, which is not a ledger directory")
    if refusals or index_dir is None:
        if index_dir is None and not refusals:
            refusals.append(f"the ledger index directory {reference.index_dir} is not found")
        return AcceptPlan(tuple(changes), tuple(refusals), None, directories, {})
    changes += _list_changes("journalDirectories", journals, reference.journal_dirs)
    changes += _list_changes("ledgerDirectories", ledgers, reference.ledger_dirs)
    current = {d: infos[d].stamp for d in directories}
    unchanged = (
        journals == reference.journal_dirs
        and ledgers == reference.ledger_dirs
        and all(
            s is not None and s.sealed and s.same_set(reference) and s.directory == d
            for d, s in current.items()
        )
    )
    if unchanged:
        return AcceptPlan((), (), None, directories, current)
    if index_dir != reference.index_dir:
        changes.append(f"the ledger index is in {index_dir} (it moved with its directory)")
    else:
        changes.append(f"the ledger index stays in {index_dir}")
    template = Stamp(
        instance=instance,
        generation=generation + 1,
        sealed=False,
        directory=directories[0],
        journal_dirs=journals,
        ledger_dirs=ledgers,
        index_dir=index_dir,
    )
    return AcceptPlan(tuple(changes), (), template, directories, current)


def apply_accept(fs: FileSystem, plan: AcceptPlan) -> None:
    """Write the plan's stamps (two phases: module docstring)."""
    assert plan.template is not None and not plan.refusals, plan
    _write_set(fs, plan.template, plan.directories, dict(plan.found))
