"""Generated damage: the classes the format pages' "Damage" tables name, drawn at any place.

spec/format/journal.md, entry_log.md and ledger_index.md each end with a table of damage, a
row per shape, and tests/unit/impl/bookie/test_damage.py checks each row by hand. This module
draws damage of every class in those tables, aimed where the tables say it matters (sector
and group boundaries, lastMark's own offset, the first and last bytes, the header), so that
the shapes nobody wrote a row for are tried too:

- ``zero``: a range set to zeros (a sector, a few bytes, or from an offset to the end);
- ``truncate``: the file cut at an offset;
- ``flip``: one byte changed;
- ``remove``: the file deleted;
- ``duplicate``: a copy of the file under the next free name of its kind (``<hex>.txn``,
  ``<hex>.log``, ``<hex>.seg``), or under its own name in another directory holding files
  of its kind (a log restored into the wrong ledger directory);
- ``swap``: two files of one kind exchange their bytes;
- ``older``: the file replaced by an older copy of itself (its bytes at an earlier crash
  state of the same run);
- ``several``: two or three of the above on different files.

Besides the drawn ones, :meth:`Generator.aimed` lists damage at every aimed offset without
dice (each journal group zeroed, its first length zeroed, the journal cut there; each
journal's magic zeroed), so that the shapes the survey of a journal must tell apart are
tried at every state, not only when the dice fall there.

A damage is data (``describe`` says it in words, ``to_json`` keeps it with a regression
directory) and applies itself to a crashed SimDisk (``apply``), durably. The oracle that
judges a start on the damaged disk is proofs/damage/oracle.py.
"""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from models.fs.simdisk import SimDisk

#: The sector bkref pads a journal group to (spec/format/journal.md): boundaries worth aiming at.
SECTOR = 512
#: The kinds of single damage, in the order the summary lists them.
KINDS = ("zero", "truncate", "flip", "remove", "duplicate", "swap", "older")
#: Names the duplicate damage can give a copy: a hex id and an extension.
NUMBERED = re.compile(r"^(?P<id>[0-9a-f]+)\.(?P<ext>txn|log|seg)$")


class Damage(Protocol):
    """One damage: what it does in words, as JSON, and to a disk."""

    kind: str

    def paths(self) -> tuple[str, ...]: ...

    def describe(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...

    def apply(self, disk: SimDisk) -> None: ...


def file_kind(path: str) -> str:
    """The kind of a bookie file by its name (for aiming and for the summary)."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".txn"):
        return "journal"
    if name.endswith(".log"):
        return "entry log"
    if name.endswith(".seg") or name.endswith(".seg.tmp"):
        return "index segment"
    if name == "lastMark":
        return "lastMark"
    if name.startswith("bkref-coverage"):
        return "coverage record"
    if name == "deleted-ledgers":
        return "deleted-ledgers"
    if name == "lastId":
        return "lastId"
    if name.startswith("bkref-identity"):
        return "identity stamp"
    if name.startswith("bkref-reserve"):
        return "reserve"
    return "other"


def _put(disk: SimDisk, path: str, data: bytes) -> None:
    """Replace ``path``'s bytes with ``data`` (creating it), durably."""
    handle = disk.open(path, create=True)
    try:
        handle.truncate(0)
        if data:
            handle.pwrite(0, data)
        handle.fsync()
    finally:
        handle.close()
    disk.fsync_dir(path.rsplit("/", 1)[0] or "/")


@attrs.frozen
class Zero:
    path: str
    offset: int
    length: int
    kind = "zero"

    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"zero {self.length} bytes of {self.path} at offset {self.offset}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "offset": self.offset, "length": self.length}

    def apply(self, disk: SimDisk) -> None:
        data = bytearray(disk.read_file(self.path))
        end = min(len(data), self.offset + self.length)
        data[self.offset : end] = bytes(end - self.offset)
        _put(disk, self.path, bytes(data))


@attrs.frozen
class Truncate:
    path: str
    size: int
    kind = "truncate"

    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"cut {self.path} to {self.size} bytes"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "size": self.size}

    def apply(self, disk: SimDisk) -> None:
        _put(disk, self.path, disk.read_file(self.path)[: self.size])


@attrs.frozen
class Flip:
    path: str
    offset: int
    mask: int
    kind = "flip"

    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"flip byte {self.offset} of {self.path} (xor {self.mask:#04x})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "offset": self.offset, "mask": self.mask}

    def apply(self, disk: SimDisk) -> None:
        data = bytearray(disk.read_file(self.path))
        data[self.offset] ^= self.mask
        _put(disk, self.path, bytes(data))


@attrs.frozen
class Remove:
    path: str
    kind = "remove"

    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"remove {self.path}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path}

    def apply(self, disk: SimDisk) -> None:
        disk.unlink(self.path)
        disk.fsync_dir(self.path.rsplit("/", 1)[0] or "/")


@attrs.frozen
class Duplicate:
    path: str
    copy: str
    kind = "duplicate"

    def paths(self) -> tuple[str, ...]:
        return (self.path, self.copy)

    def describe(self) -> str:
        return f"copy {self.path} to {self.copy}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "copy": self.copy}

    def apply(self, disk: SimDisk) -> None:
        _put(disk, self.copy, disk.read_file(self.path))


@attrs.frozen
class Swap:
    path: str
    other: str
    kind = "swap"

    def paths(self) -> tuple[str, ...]:
        return (self.path, self.other)

    def describe(self) -> str:
        return f"swap the bytes of {self.path} and {self.other}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "other": self.other}

    def apply(self, disk: SimDisk) -> None:
        first, second = disk.read_file(self.path), disk.read_file(self.other)
        _put(disk, self.path, second)
        _put(disk, self.other, first)


@attrs.frozen
class Older:
    path: str
    data: bytes = attrs.field(repr=False)
    state: int
    kind = "older"

    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return (
            f"put back {self.path} as it was at crash state {self.state} ({len(self.data)} bytes)"
        )

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "state": self.state, "bytes": len(self.data)}

    def apply(self, disk: SimDisk) -> None:
        _put(disk, self.path, self.data)


@attrs.frozen
class Several:
    parts: tuple[Damage, ...]
    kind = "several"

    def paths(self) -> tuple[str, ...]:
        return tuple(path for part in self.parts for path in part.paths())

    def describe(self) -> str:
        return "; ".join(part.describe() for part in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "parts": [part.to_json() for part in self.parts]}

    def apply(self, disk: SimDisk) -> None:
        for part in self.parts:
            part.apply(disk)


def offsets(size: int, rng: random.Random, aims: Sequence[int] = ()) -> int:
    """An offset in ``[0, size)`` worth damaging: the first or last byte, a sector boundary,
    an aimed offset (lastMark's, for its journal), or anywhere."""
    assert size > 0
    choices = [0, size - 1, rng.randrange(size)]
    sectors = [offset for offset in range(SECTOR, size, SECTOR)]
    if sectors:
        choices += [rng.choice(sectors)] * 2
    choices += [aim for aim in aims if 0 <= aim < size] * 2
    return rng.choice(choices)


class Generator:
    """Draws damage for the files of one crashed disk. ``files``: path to bytes;
    ``older``: per path, its earlier contents (oldest first, each with its crash state);
    ``aims``: per path, offsets worth damaging besides the usual (lastMark's offset in the
    journal it names)."""

    def __init__(
        self,
        files: Mapping[str, bytes],
        older: Mapping[str, Sequence[tuple[int, bytes]]],
        aims: Mapping[str, Sequence[int]],
        rng: random.Random,
    ) -> None:
        self._files = dict(files)
        self._older = older
        self._aims = aims
        self._rng = rng

    def aimed(self) -> list[Damage]:
        """Damage at every aimed offset, drawn by no dice: at each (group starts and
        lastMark's offset in journals) the group zeroed (a sector), its first length zeroed,
        and the file cut there; and every journal's magic and version zeroed."""
        out: list[Damage] = []
        for path in sorted(self._aims):
            data = self._files.get(path)
            if not data:
                continue
            if file_kind(path) == "journal" and len(data) > 8:
                out.append(Zero(path, 0, 8))
            for offset in sorted({a for a in self._aims[path] if 0 < a < len(data)}):
                if offset % SECTOR == 0:
                    out += [Zero(path, offset, SECTOR), Zero(path, offset, 4)]
                    out.append(Truncate(path, offset))
        return out

    def draw(self) -> Damage:
        """One damage: a single one, or (one in six) several on different files."""
        if self._rng.randrange(6) == 0 and len(self._files) > 1:
            count = self._rng.choice((2, 3))
            parts: list[Damage] = []
            taken: set[str] = set()
            for _ in range(count * 4):
                part = self.single()
                if taken.isdisjoint(part.paths()):
                    parts.append(part)
                    taken.update(part.paths())
                if len(parts) == count:
                    break
            if len(parts) > 1:
                return Several(tuple(parts))
            return parts[0]
        return self.single()

    def single(self, kind: str | None = None) -> Damage:
        """One damage of ``kind`` (drawn when None; one that this disk cannot take, such as
        a swap with a single file of its kind, falls back to another kind)."""
        rng = self._rng
        paths = sorted(self._files)
        by_kind: dict[str, list[str]] = {}
        for path in paths:
            by_kind.setdefault(file_kind(path), []).append(path)
        file_kinds = sorted(by_kind)
        for _ in range(50):
            chosen = kind if kind is not None else rng.choice(KINDS)
            # A kind of file first, then one of its files: the few small files (lastMark,
            # the coverage record, deleted-ledgers) are damaged as often as the many logs.
            path = rng.choice(by_kind[rng.choice(file_kinds)])
            data = self._files[path]
            made = self._make(chosen, path, data, paths)
            if made is not None:
                return made
            kind = None
        return Remove(rng.choice(paths))

    def _make(self, kind: str, path: str, data: bytes, paths: Sequence[str]) -> Damage | None:
        rng = self._rng
        size = len(data)
        aims = self._aims.get(path, ())
        if kind == "zero" and size:
            offset = offsets(size, rng, aims)
            length = rng.choice(
                (4, SECTOR, 2 * SECTOR, size - offset, rng.randrange(1, size - offset + 1))
            )
            return Zero(path, offset, max(1, length))
        if kind == "truncate" and size:
            return Truncate(path, offsets(size, rng, aims))
        if kind == "flip" and size:
            return Flip(path, offsets(size, rng, aims), 1 << rng.randrange(8))
        if kind == "remove":
            return Remove(path)
        if kind == "duplicate":
            match = NUMBERED.match(path.rsplit("/", 1)[-1])
            if match is None:
                return None
            directory, name = path.rsplit("/", 1)
            elsewhere = sorted(
                {
                    p.rsplit("/", 1)[0]
                    for p in paths
                    if file_kind(p) == file_kind(path) and not p.startswith(directory + "/")
                }
            )
            if elsewhere and rng.randrange(2) == 0:
                # The same name in another directory holding files of its kind (a log copied
                # or restored into the wrong ledger directory), over whatever is there.
                return Duplicate(path, f"{rng.choice(elsewhere)}/{name}")
            width = len(match["id"])
            number = int(match["id"], 16) + 1
            while True:
                copy = f"{directory}/{number:0{width}x}.{match['ext']}"
                if copy not in self._files:
                    return Duplicate(path, copy)
                number += 1
        if kind == "swap":
            same = [p for p in paths if p != path and file_kind(p) == file_kind(path)]
            same = [p for p in same if self._files[p] != data]
            return Swap(path, rng.choice(same)) if same else None
        if kind == "older":
            earlier = [(state, old) for state, old in self._older.get(path, ()) if old != data]
            if not earlier:
                return None
            state, old = rng.choice(earlier)
            return Older(path, old, state)
        return None


def damage_from_json(data: Mapping[str, Any]) -> Damage:
    """The damage a regression directory's ``damage.json`` describes (``damage_to_json``)."""
    kind = data.get("kind")
    if kind == "zero":
        return Zero(str(data["path"]), int(data["offset"]), int(data["length"]))
    if kind == "truncate":
        return Truncate(str(data["path"]), int(data["size"]))
    if kind == "flip":
        return Flip(str(data["path"]), int(data["offset"]), int(data["mask"]))
    if kind == "remove":
        return Remove(str(data["path"]))
    if kind == "duplicate":
        return Duplicate(str(data["path"]), str(data["copy"]))
    if kind == "swap":
        return Swap(str(data["path"]), str(data["other"]))
    if kind == "older":
        return Older(str(data["path"]), base64.b64decode(str(data["data"])), int(data["state"]))
    if kind == "several":
        return Several(tuple(damage_from_json(part) for part in data["parts"]))
    raise ValueError(f"not a damage: {dict(data)!r}")


def damage_to_json(damage: Damage) -> dict[str, Any]:
    """``to_json`` with an older copy's bytes (what ``damage_from_json`` needs)."""
    if isinstance(damage, Older):
        return {**damage.to_json(), "data": base64.b64encode(damage.data).decode()}
    if isinstance(damage, Several):
        return {"kind": damage.kind, "parts": [damage_to_json(part) for part in damage.parts]}
    return damage.to_json()
