"""The damage check: generated damage on crash states, judged by one oracle.

The states are the bookie crash check's (proofs/crash/bookie_check.py): its scripted workload
(adds over three ledgers, group commits and checkpoints phase by phase, a fence, a wrong key,
a write close, rotations), with a fourth ledger added and deleted (acknowledged), runs
through the refinement harness, so the model judges every step; the machine then dies at
``states`` crash sites (half of them just before a checkpoint, where the most acknowledged
data lives only in the journal, the rest spread evenly over the run, the last one after the
final step), and
each crash loses what was not synced (LoseUnsynced). Each crashed disk is first started as it
is: the oracle must find it intact, or the oracle (not the bookie) is wrong and the run
stops. Then ``damages`` damages are drawn for it (proofs/damage/generate.py: every class of
the format pages' tables, aimed at sector boundaries and lastMark's offset; older copies come
from the earlier states), after the damage aimed without dice at every group start and at
lastMark (``Generator.aimed``), each applied to a fresh copy of the crashed disk, and a bookie is
started on it and judged (proofs/damage/oracle.py: refused with a typed error naming a file
and nothing changed, or started with everything acknowledged intact).

A damaged disk that breaks the oracle is written out with ``keep`` (a directory per failure:
the files, ``damage.json`` with the damage, the acknowledged adds, fences, keys and deletes,
and the verdict), and ``bkref damage-check --replay DIR`` judges it again.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import load_config
from impl.format.names import RESERVE_FILE_NAME
from impl.journal.last_mark import read_last_mark
from impl.limits import TEST_LIMITS
from models.fs.simdisk import SimDisk
from proofs.crash.bookie_check import KEY, MANAGERS, crash_settings, record, workload
from proofs.crash.bookie_check import _interrupted as interrupted
from proofs.crash.explorer import disk_image, restore_disk
from proofs.damage.generate import (
    Damage,
    Generator,
    damage_from_json,
    damage_to_json,
    file_kind,
)
from proofs.damage.inspect_verdict import inspect_problems
from proofs.damage.oracle import (
    VERDICTS,
    VIOLATION,
    Acknowledged,
    Verdict,
    group_starts,
    journal_payloads,
    judge,
)
from proofs.harness.refinement import (
    JOURNAL_DIR,
    LEDGER_DIRS,
    InProcessBookie,
    Refinement,
    RefinementFailure,
    fresh_disk,
)
from spec.crash import LoseUnsynced
from spec.errors import BkrefError
from spec.operations import (
    Add,
    Checkpoint,
    CheckpointFlush,
    Crash,
    Delete,
    JournalForce,
    Operation,
    Shutdown,
)

#: The steps a state is taken just before (half of the states).
CHECKPOINTS = (Checkpoint, CheckpointFlush)
#: The ledger the workload deletes (its own: the crash check's workload uses 1 to 3).
DELETED_LEDGER = 4


class DamageCheckError(BkrefError):
    """The damage check could not run (its own workload failed, or the oracle found an
    undamaged crash state wrong): a defect of the check, not a verdict on the bookie."""


def damage_workload(seed: int, adds: int) -> list[Operation]:
    """The bookie crash check's workload with a ledger of its own (DELETED_LEDGER: three
    adds a quarter of the way through, acknowledged) deleted three quarters of the way
    through, and no clean shutdown at the end (the machine dies). The workload's fenced
    ledger (3) stays, so fences are judged too."""
    ops = workload(seed, adds)
    if isinstance(ops[-1], Shutdown):
        ops = ops[:-1]
    first, at = len(ops) // 4, (len(ops) * 3) // 4
    rng = random.Random(seed)
    own = [Add(DELETED_LEDGER, entry, KEY, rng.randbytes(40)) for entry in range(3)]
    return [
        *ops[:first],
        *own,
        JournalForce(),
        *ops[first:at],
        Delete(DELETED_LEDGER),
        JournalForce(),
        *ops[at:],
    ]


def settings(manager: str = "single") -> dict[str, str]:
    """The bookie's settings: the crash check's, with ``manager``'s entry logs."""
    return crash_settings(manager)


def opener(seed: int, manager: str = "single") -> Callable[[SimDisk], Bookie]:
    """A start of bkref's bookie on a disk, as the harness starts it."""
    config = load_config(None, "damage check", [f"{k}={v}" for k, v in settings(manager).items()])

    def open_bookie(disk: SimDisk) -> Bookie:
        return Bookie.open(
            disk, config, clock=ManualClock(), rng=random.Random(seed), limits=TEST_LIMITS
        )

    return open_bookie


@attrs.frozen
class CrashState:
    """One crashed disk and what was acknowledged before the crash."""

    number: int
    where: str
    image: bytes = attrs.field(repr=False)
    acknowledged: Acknowledged


@attrs.frozen
class Failure:
    state: int
    where: str
    damage: Damage
    verdict: Verdict
    kept: str | None = None


@attrs.define
class DamageReport:
    seed: int
    manager: str = "single"
    states: int = 0
    damages: int = 0
    #: (damage kind, verdict) -> how many.
    cells: Counter[tuple[str, str]] = attrs.field(factory=Counter)
    #: (file kind, verdict) -> how many (a several damage counts for each file it touched).
    files: Counter[tuple[str, str]] = attrs.field(factory=Counter)
    undetectable_rows: Counter[str] = attrs.field(factory=Counter)
    failures: list[Failure] = attrs.field(factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary_lines(self) -> list[str]:
        lines = [f"{'damage':<10}" + "".join(f"{v:>20}" for v in VERDICTS)]
        kinds = sorted({kind for kind, _ in self.cells})
        for kind in kinds:
            lines.append(f"{kind:<10}" + "".join(f"{self.cells[(kind, v)]:>20}" for v in VERDICTS))
        lines.append("")
        lines.append(f"{'file':<18}" + "".join(f"{v:>20}" for v in VERDICTS))
        for kind in sorted({kind for kind, _ in self.files}):
            lines.append(f"{kind:<18}" + "".join(f"{self.files[(kind, v)]:>20}" for v in VERDICTS))
        if self.undetectable_rows:
            rows = ", ".join(f"{row}: {n}" for row, n in sorted(self.undetectable_rows.items()))
            lines.append(f"undetectable by the formats (the tables' rows): {rows}")
        verdict = "PASS" if self.ok else f"FAIL ({len(self.failures)} violations)"
        lines.append(
            f"damage-check seed {self.seed}, manager {self.manager}: {self.states} crash "
            f"states, {self.damages} damaged starts, {verdict} in {self.seconds:.1f} s"
        )
        return lines


def crash_states(seed: int, adds: int, count: int, manager: str = "single") -> list[CrashState]:
    """``count`` crashed disks, spread evenly over the workload's run (the last after its
    final step), with what was acknowledged at each crash."""
    ops = damage_workload(seed, adds)
    recording = record(ops, settings(manager), seed)
    if recording.failure is not None:
        raise DamageCheckError(
            f"the damage workload failed before any damage: {recording.failure.message}"
        )
    sites = [site for site in recording.sites if site.step is not None and site.after_ops == 0]
    # Half of the states just before a checkpoint, where the most acknowledged data lives
    # only in the journal (several groups after lastMark: the later-group rule matters),
    # the rest spread evenly over the run.
    before = [site for site in sites if isinstance(ops[site.step or 0], CHECKPOINTS)]
    half = min(len(before), (count - 1) // 2)
    picked = {before[(len(before) - 1) * k // max(1, half - 1)] for k in range(half)}
    spread = count - 1 - len(picked)
    evenly = [sites[(len(sites) - 1) * k // max(1, spread - 1)] for k in range(spread)]
    for site in evenly + sites:  # evenly spread first; the next free site where two meet
        if len(picked) >= min(count - 1, len(sites)):
            break
        picked.add(site)
    chosen = sorted(picked, key=lambda site: site.op_index)
    states: list[CrashState] = []
    for number, site in enumerate(chosen):
        harness, sut = interrupted(ops, site, settings(manager), seed, recording.start_images)
        states.append(_crashed(number, site.describe(ops), harness, sut))
    # The last state: after every step (a final force made everything acknowledged durable).
    sut = InProcessBookie(settings(manager), seed=seed)
    harness = Refinement(sut, settings(manager), source=f"bkref damage-check, seed {seed}")
    for op in ops:
        harness.run(op)
    states.append(_crashed(len(chosen), "after the last step", harness, sut))
    return states


def _crashed(number: int, where: str, harness: Any, sut: Any) -> CrashState:
    try:
        harness.run(Crash(LoseUnsynced()))
    except RefinementFailure as failure:
        raise DamageCheckError(
            f"crash state {number} ({where}) failed before any damage: {failure.message}"
        ) from failure
    acknowledged = Acknowledged.of(harness.trace())
    return CrashState(number, where, disk_image(sut.disk), acknowledged)


def _inspector(disk: SimDisk) -> list[str]:
    return inspect_problems(disk, JOURNAL_DIR, LEDGER_DIRS)


def _aims(disk: SimDisk, files: Mapping[str, bytes]) -> dict[str, list[int]]:
    """Offsets worth damaging besides the usual: in every journal, where each group starts
    (after a padding record, spec/format/journal.md) and each record's length field; in the
    journal lastMark names, the mark itself."""
    aims: dict[str, list[int]] = {}
    for path, data in files.items():
        if file_kind(path) == "journal":
            payloads = journal_payloads(data)
            aims[path] = [start - 4 for start, _end in payloads]
            aims[path] += [offset for offset in group_starts(data)] * 3
    try:
        mark = read_last_mark(disk, [f"{d}/current" for d in LEDGER_DIRS])
    except BkrefError:
        return aims
    name = f"{JOURNAL_DIR}/current/{mark.journal_id:x}.txn"
    aims.setdefault(name, []).extend([mark.offset, mark.offset - 4] * 3)
    return aims


def run_damage_check(
    *,
    seed: int = 1,
    states: int = 6,
    damages: int = 40,
    adds: int = 40,
    manager: str = "single",
    keep: str | None = None,
    inspect: bool = True,
    aim: bool = True,
    progress: Callable[[str], None] | None = None,
) -> DamageReport:
    """The check (module docstring). ``progress`` gets a line per crash state. ``aim``:
    each state also takes the generator's aimed damage (``Generator.aimed``), before the
    ``damages`` drawn ones."""
    started = time.monotonic()
    report = DamageReport(seed, manager)
    open_bookie = opener(seed, manager)
    inspector = _inspector if inspect else None
    older: dict[str, list[tuple[int, bytes]]] = {}
    rng = random.Random(seed)
    for state in crash_states(seed, adds, states, manager):
        disk = restore_disk(state.image)
        files = disk.current_snapshot()
        baseline = judge(
            open_bookie, restore_disk(state.image), _NOTHING, state.acknowledged, files
        )
        if baseline.verdict not in ("intact",):
            raise DamageCheckError(
                f"crash state {state.number} ({state.where}), undamaged, was judged "
                f"{baseline.verdict}: {'; '.join(baseline.problems) or baseline.refusal}; the "
                "oracle or the workload is wrong, not the damage"
            )
        generator = Generator(files, older, _aims(disk, files), rng)
        found = 0
        aimed = generator.aimed() if aim else []
        for number in range(len(aimed) + damages):
            damage = aimed[number] if number < len(aimed) else generator.draw()
            damaged = restore_disk(state.image)
            damage.apply(damaged)
            verdict = judge(
                open_bookie, damaged, damage, state.acknowledged, files, inspect=inspector
            )
            report.damages += 1
            report.cells[(damage.kind, verdict.verdict)] += 1
            for path in dict.fromkeys(damage.paths()):
                report.files[(file_kind(path), verdict.verdict)] += 1
            if verdict.row:
                report.undetectable_rows[verdict.row] += 1
            if verdict.verdict == VIOLATION:
                found += 1
                kept = None
                if keep is not None:
                    kept = keep_state(keep, state, damage, verdict, seed, manager)
                report.failures.append(Failure(state.number, state.where, damage, verdict, kept))
        for path, data in files.items():
            older.setdefault(path, []).append((state.number, data))
        report.states += 1
        if progress is not None:
            progress(
                f"crash state {state.number} ({state.where}): {len(aimed) + damages} damaged "
                "starts, "
                f"{found} violations"
            )
    report.seconds = time.monotonic() - started
    return report


@attrs.frozen
class _NoDamage:
    kind = "none"

    def paths(self) -> tuple[str, ...]:
        return ()

    def describe(self) -> str:
        return "no damage"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "none"}

    def apply(self, disk: SimDisk) -> None:
        del disk


_NOTHING = _NoDamage()


def directories(disk: SimDisk) -> list[str]:
    """Every directory of ``disk`` (parents first)."""
    found: list[str] = []
    pending = ["/"]
    while pending:
        directory = pending.pop(0)
        for name in sorted(disk.listdir(directory)):
            path = directory.rstrip("/") + "/" + name
            if disk.is_dir(path):
                found.append(path)
                pending.append(path)
    return found


def disk_of(dirs: Sequence[str], files: Mapping[str, bytes]) -> SimDisk:
    """A simulated disk holding ``dirs`` and ``files``, all durable."""
    disk = fresh_disk()
    for directory in dirs:
        if not disk.exists(directory):
            disk.mkdir(directory)
    for path, data in files.items():
        handle = disk.open(path, create=True)
        try:
            if data:
                handle.pwrite(0, data)
            handle.fsync()
        finally:
            handle.close()
    for directory in ["/", *dirs]:
        disk.fsync_dir(directory)
    return disk


def keep_state(
    keep: str, state: CrashState, damage: Damage, verdict: Verdict, seed: int, manager: str
) -> str:
    """Write a failing damaged start as a regression directory: ``before/`` (the crashed
    disk's files, undamaged, but the reserves a damage does not name), ``damage.json`` (the
    damage, what was acknowledged, the verdict). ``bkref damage-check --replay DIR`` judges
    it again."""
    base = Path(keep)
    base.mkdir(parents=True, exist_ok=True)
    directory = base / f"seed{seed}-{manager}-state{state.number}-{len(list(base.iterdir()))}"
    directory.mkdir()
    disk = restore_disk(state.image)
    for path, data in disk.current_snapshot().items():
        if path.rsplit("/", 1)[-1] == RESERVE_FILE_NAME and path not in damage.paths():
            continue  # zeros a start lays again (spec/format/identity.md, "A full disk")
        target = directory / "before" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    ack = state.acknowledged
    meta = {
        "seed": seed,
        "manager": manager,
        "state": state.number,
        "where": state.where,
        "directories": directories(disk),
        "damage": damage_to_json(damage),
        "described": damage.describe(),
        "verdict": verdict.verdict,
        "problems": list(verdict.problems),
        "acknowledged": {
            "adds": [
                [ledger, entry, base64.b64encode(data).decode()]
                for (ledger, entry), data in sorted(ack.adds.items())
            ],
            "fences": sorted(ack.fences),
            "keys": {
                str(ledger): base64.b64encode(key).decode() for ledger, key in ack.keys.items()
            },
            "deletes": sorted(ack.deletes),
        },
    }
    (directory / "damage.json").write_text(json.dumps(meta, indent=1) + "\n")
    return str(directory)


@attrs.frozen
class Kept:
    """A regression directory read back: the undamaged disk, the damage, what was
    acknowledged, and the seed and manager the bookie starts with."""

    seed: int
    manager: str
    described: str
    dirs: tuple[str, ...]
    files: Mapping[str, bytes]
    damage: Damage
    acknowledged: Acknowledged


def read_kept(directory: str) -> Kept:
    """A regression directory (``keep_state``); DamageCheckError when it is not one."""
    root = Path(directory)
    try:
        meta = json.loads((root / "damage.json").read_text())
        ack = meta["acknowledged"]
        acknowledged = Acknowledged(
            {(int(led), int(ent)): base64.b64decode(d) for led, ent, d in ack["adds"]},
            frozenset(int(led) for led in ack["fences"]),
            {int(led): base64.b64decode(key) for led, key in ack["keys"].items()},
            frozenset(int(led) for led in ack["deletes"]),
        )
        damage = damage_from_json(meta["damage"])
        before = root / "before"
        files = {
            "/" + str(path.relative_to(before)): path.read_bytes()
            for path in sorted(before.rglob("*"))
            if path.is_file()
        }
        return Kept(
            int(meta["seed"]),
            str(meta.get("manager", "single")),
            str(meta.get("described", "")),
            tuple(meta["directories"]),
            files,
            damage,
            acknowledged,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamageCheckError(
            f"{directory}: not a damage-check regression directory: {exc}"
        ) from exc


def replay_kept(directory: str, *, inspect: bool = True) -> Verdict:
    """Judge a regression directory's damaged start again."""
    kept = read_kept(directory)
    if kept.manager not in MANAGERS:
        raise DamageCheckError(f"{directory}: unknown manager {kept.manager!r}")
    disk = disk_of(kept.dirs, kept.files)
    kept.damage.apply(disk)
    return judge(
        opener(kept.seed, kept.manager),
        disk,
        kept.damage,
        kept.acknowledged,
        kept.files,
        inspect=_inspector if inspect else None,
    )


def describe_failure(failure: Failure) -> str:
    text = (
        f"crash state {failure.state} ({failure.where}): {failure.damage.describe()}: "
        + "; ".join(failure.verdict.problems)
    )
    if failure.kept:
        text += f" (kept in {failure.kept})"
    return text
