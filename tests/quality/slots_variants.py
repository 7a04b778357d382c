"""Known-bad variants of bkref's slots entry-log manager (impl/entrylog/slots.py).

Kept apart from tests/quality/refinement_variants.py (near its size limit); the same rules
apply: each variant differs from the implementation in exactly the way its name says, lives
here and never in impl/, and tests/quality/test_layout_rules_catch.py runs the unchanged
refinement machine against it.
"""

from __future__ import annotations

from typing import Any

import pytest

from impl.entrylog.manager import LogChannel, LogDescription, LogState
from impl.entrylog.slots import Slot, SlotsEntryLogManager

_NEW_LOG = SlotsEntryLogManager._new_log
_DESCRIBE = SlotsEntryLogManager.describe
_FORCE_CURRENT = SlotsEntryLogManager._force_current


def _new_log_leaking_the_old(self: SlotsEntryLogManager, slot: Slot) -> LogChannel:
    """A slot's rotation at logSizeLimit that starts the slot's new log and leaves the old
    one open beside it: never sealed, still active, one more active log than slots."""
    old = slot.log
    if old is None or old.map_offset is not None:
        return _NEW_LOG(self, slot)
    new = self._allocate(slot.directory)
    del self._by_log[old.log_id]
    slot.log = new
    self._by_log[new.log_id] = slot
    leaked: list[Any] = self.__dict__.setdefault("_leaked", [])
    leaked.append(old)
    return new


def _describe_with_the_leaked(self: SlotsEntryLogManager) -> list[LogDescription]:
    leaked = [log.describe(LogState.ACTIVE) for log in self.__dict__.get("_leaked", [])]
    return sorted(_DESCRIBE(self) + leaked, key=lambda d: d.log_id)


def _force_current_and_the_leaked(self: SlotsEntryLogManager) -> None:
    """Checkpoints still force the leaked logs: no entry is lost, so the layout rule, not a
    durability check, is what must catch the variant."""
    _FORCE_CURRENT(self)
    for log in self.__dict__.get("_leaked", []):
        log.channel.flush_and_force(True)


def apply_more_active_logs_than_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot rotated at logSizeLimit opens its new log but never seals the old one, which
    stays active: soon more active logs than ledger directories x entryLogSlotsPerLedgerDir
    (R-LOG-ACTIVE), the old ones never sealed nor collected (checkpoints still force them:
    nothing acknowledged is lost)."""
    monkeypatch.setattr(SlotsEntryLogManager, "_new_log", _new_log_leaking_the_old)
    monkeypatch.setattr(SlotsEntryLogManager, "_force_current", _force_current_and_the_leaked)
    monkeypatch.setattr(SlotsEntryLogManager, "describe", _describe_with_the_leaked)
