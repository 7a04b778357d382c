"""The damage check: generated damage on crash states, judged by one oracle.

The states are the bookie crash check's (proofs/crash/bookie_check.py): its scripted workload
(adds over three ledgers, group commits and checkpoints phase by phase, a fence, a wrong key,
a write close, rotations), with one acknowledged delete added (ledger 3, after its fence), runs
through the refinement harness, so the model judges every step; the machine then dies at
``states`` crash sites spread evenly over the run (the last one after the final step), and
each crash loses what was not synced (LoseUnsynced). Each crashed disk is first started as it
is: the oracle must find it intact, or the oracle (not the bookie) is wrong and the run
stops. Then ``damages`` damages are drawn for it (proofs/damage/generate.py: every class of
the format pages' tables, aimed at sector boundaries and lastMark's offset; older copies come
from the earlier states), each applied to a fresh copy of the crashed disk, and a bookie is
started on it and judged (proofs/damage/oracle.py: refused with a typed error naming a file
and nothing changed, or started with everything acknowledged intact).

A damaged disk that breaks the oracle is written out with ``keep`` (a directory per failure:
the files, ``damage.json`` with the damage, the acknowledged adds, fences, keys and deletes,
and the verdict), and ``bkref damage-check --replay DIR`` judges it again.
"""

from __future__ import annotations

import base64
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from impl.bookie.bookie import Bookie
from impl.clock import ManualClock
from impl.config.config import ServerConfig, load_config
from impl.journal.last_mark import read_last_mark
from impl.limits import TEST_LIMITS
from models.fs.simdisk import SimDisk
from proofs.crash.bookie_check import _interrupted as interrupted
from proofs.crash.bookie_check import crash_settings, record, workload
from proofs.crash.explorer import disk_image, restore_disk
from proofs.damage.generate import Damage, Generator, file_kind
from proofs.damage.inspect_verdict import inspect_problems
from proofs.damage.oracle import VERDICTS, VIOLATION, Acknowledged, Verdict, judge
from proofs.harness.refinement import (
    JOURNAL_DIR,
    LEDGER_DIRS,
    InProcessBookie,
    Refinement,
    RefinementFailure,
)
from spec.crash import LoseUnsynced
from spec.errors import BkrefError
from spec.operations import Crash, Delete, JournalForce, Operation, Shutdown

#: The ledger the workload deletes (fenced halfway, no add after).
DELETED_LEDGER = 3


class DamageCheckError(BkrefError):
    """The damage check could not run (its own workload failed, or the oracle found an
    undamaged crash state wrong): a defect of the check, not a verdict on the bookie."""


def damage_workload(seed: int, adds: int) -> list[Operation]:
    """The bookie crash check's workload with an acknowledged delete of DELETED_LEDGER three
    quarters of the way through, and no clean shutdown at the end (the machine dies)."""
    ops = workload(seed, adds)
    if isinstance(ops[-1], Shutdown):
        ops = ops[:-1]
    at = (len(ops) * 3) // 4
    return [*ops[:at], Delete(DELETED_LEDGER), JournalForce(), *ops[at:]]


def settings() -> dict[str, str]:
    """The bookie's settings: the crash check's, single entry-log manager."""
    return crash_settings("single")


def _config() -> ServerConfig:
    return load_config(None, "damage check", [f"{k}={v}" for k, v in settings().items()])


def opener(seed: int) -> Callable[[SimDisk], Bookie]:
    """A start of bkref's bookie on a disk, as the harness starts it."""
    config = _config()

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
            f"damage-check seed {self.seed}: {self.states} crash states, {self.damages} damaged "
            f"starts, {verdict} in {self.seconds:.1f} s"
        )
        return lines


def crash_states(seed: int, adds: int, count: int) -> list[CrashState]:
    """``count`` crashed disks, spread evenly over the workload's run (the last after its
    final step), with what was acknowledged at each crash."""
    ops = damage_workload(seed, adds)
    recording = record(ops, settings(), seed)
    if recording.failure is not None:
        raise DamageCheckError(
            f"the damage workload failed before any damage: {recording.failure.message}"
        )
    sites = [site for site in recording.sites if site.step is not None and site.after_ops == 0]
    chosen = [sites[(len(sites) - 1) * k // max(1, count - 1)] for k in range(count - 1)]
    states: list[CrashState] = []
    for number, site in enumerate(chosen):
        harness, sut = interrupted(ops, site, settings(), seed, recording.start_images)
        states.append(_crashed(number, site.describe(ops), harness, sut))
    # The last state: after every step (a final force made everything acknowledged durable).
    sut = InProcessBookie(settings(), seed=seed)
    harness = Refinement(sut, settings(), source=f"bkref damage-check, seed {seed}")
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


def _aims(disk: SimDisk) -> dict[str, list[int]]:
    """lastMark's offset in the journal it names (the mark itself is worth damaging)."""
    try:
        mark = read_last_mark(disk, [f"{d}/current" for d in LEDGER_DIRS])
    except BkrefError:
        return {}
    name = f"{JOURNAL_DIR}/current/{mark.journal_id:x}.txn"
    return {name: [mark.offset, mark.offset - 4]}


def run_damage_check(
    *,
    seed: int = 1,
    states: int = 6,
    damages: int = 40,
    adds: int = 40,
    keep: str | None = None,
    inspect: bool = True,
    progress: Callable[[str], None] | None = None,
) -> DamageReport:
    """The check (module docstring). ``progress`` gets a line per crash state."""
    started = time.monotonic()
    report = DamageReport(seed)
    open_bookie = opener(seed)
    inspector = _inspector if inspect else None
    older: dict[str, list[tuple[int, bytes]]] = {}
    rng = random.Random(seed)
    for state in crash_states(seed, adds, states):
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
        generator = Generator(files, older, _aims(disk), rng)
        found = 0
        for _ in range(damages):
            damage = generator.draw()
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
                    kept = keep_state(keep, state, damage, verdict, damaged, seed)
                report.failures.append(Failure(state.number, state.where, damage, verdict, kept))
        for path, data in files.items():
            older.setdefault(path, []).append((state.number, data))
        report.states += 1
        if progress is not None:
            progress(
                f"crash state {state.number} ({state.where}): {damages} damaged starts, "
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


def keep_state(
    keep: str, state: CrashState, damage: Damage, verdict: Verdict, disk: SimDisk, seed: int
) -> str:
    """Write the damaged disk as it was before the start (the files), with damage.json."""
    directory = (
        Path(keep)
        / f"seed{seed}-state{state.number}-{len(os.listdir(keep)) if os.path.isdir(keep) else 0}"
    )
    directory.mkdir(parents=True, exist_ok=False)
    files = restore_disk(state.image)
    damage.apply(files)
    for path, data in files.current_snapshot().items():
        target = directory / "files" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    ack = state.acknowledged
    meta = {
        "seed": seed,
        "state": state.number,
        "where": state.where,
        "damage": damage.to_json(),
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
    del disk
    return str(directory)


def describe_failure(failure: Failure) -> str:
    text = (
        f"crash state {failure.state} ({failure.where}): {failure.damage.describe()}: "
        + "; ".join(failure.verdict.problems)
    )
    if failure.kept:
        text += f" (kept in {failure.kept})"
    return text
