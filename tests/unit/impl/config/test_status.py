"""impl/config/keys.py, NOT_BUILT and status_of: every key bkref reads has a status, and the
status is true.

How strong: "implemented" is checked statically. Every implemented key's ServerConfig
accessor (or a derived accessor, or the accessor of a key whose default is taken from it)
must be read as an attribute somewhere in the engine, impl/ outside impl/config/, and every
key that is not built must not be read there. That proves the value reaches engine code, not
that the engine does the right thing with it (the engine's own tests do that); it does catch
a key that is parsed and never used, and a status left stale after a key gets implemented.
The warnings and the refusal are checked by loading configurations.
"""

from __future__ import annotations

import ast
import re

import pytest

from impl.config.bk_keys import BOOKKEEPER_KEYS
from impl.config.config import default_config, load_config
from impl.config.keys import KEYS, KEYS_BY_NAME, NOT_BUILT, Status, status_of
from spec.errors import ConfigError
from tests.paths import ROOT

#: Accessors computed from a key's accessor (ServerConfig's derived properties).
DERIVED: dict[str, tuple[str, ...]] = {
    "nettyMaxFrameSizeBytes": ("max_sane_entry_size_bytes",),
    "journalMaxSizeMB": ("journal_max_size_bytes",),
    "journalPreAllocSizeMB": ("journal_pre_alloc_size_bytes",),
    "journalWriteBufferSizeKB": ("journal_write_buffer_size_bytes",),
}

#: A value that differs from the harmless one, for each key that is not built.
NON_DEFAULT: dict[str, str] = {
    "readBufferSizeBytes": "4096",
    "minUsableSizeForEntryLogCreation": "1000",
    "diskUsageLwmThreshold": "0.8",
    "useTransactionalCompaction": "false",
    "journalPreAllocSizeMB": "32",
    "journalWriteBufferSizeKB": "128",
    "journalAdaptiveGroupWrites": "false",
}


def _engine_attributes() -> set[str]:
    """Every attribute name read in the engine, impl/ outside impl/config/."""
    names: set[str] = set()
    for path in (ROOT / "impl").rglob("*.py"):
        if "config" in path.relative_to(ROOT / "impl").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def _accessors(key: str) -> set[str]:
    """The accessors through which the engine can read ``key``'s value."""
    found = {KEYS_BY_NAME[key].attr, *DERIVED.get(key, ())}
    for spec in KEYS:
        if spec.default_from == key:
            found |= _accessors(spec.key)
    return found


def test_every_key_has_a_status_and_not_built_keys_are_keys() -> None:
    assert set(NOT_BUILT) <= set(KEYS_BY_NAME)
    statuses = {spec.key: status_of(spec.key) for spec in KEYS}
    # No key is refused today (entryLogPerLedgerEnabled was until per-ledger logs were built).
    assert set(statuses.values()) == {Status.IMPLEMENTED, Status.IGNORED}
    for key in (
        "entryLogPerLedgerEnabled",
        "entrylogMapAccessExpiryTimeInSeconds",
        "maximumNumberOfActiveEntryLogs",
    ):
        assert statuses[key] is Status.IMPLEMENTED, key
    assert set(NON_DEFAULT) == set(NOT_BUILT)
    for key, not_built in NOT_BUILT.items():
        if not_built.status is Status.REFUSED:
            # A refused key's default must be the harmless value, or no config would load.
            assert not_built.harmless == KEYS_BY_NAME[key].default, key


@pytest.mark.parametrize("spec", KEYS, ids=lambda spec: spec.key)
def test_status_agrees_with_what_the_engine_reads(spec: object) -> None:
    assert hasattr(spec, "key")
    key: str = spec.key
    read = _accessors(key) & _engine_attributes()
    if status_of(key) is Status.IMPLEMENTED:
        assert read, f"{key} is called implemented but the engine never reads {_accessors(key)}"
    else:
        assert not read, f"{key} is read by the engine ({read}): update NOT_BUILT"


def test_defaults_give_no_warning() -> None:
    assert default_config().warnings == ()


@pytest.mark.parametrize("key", sorted(NOT_BUILT))
def test_a_not_built_key_set_is_warned_about_or_refused(key: str) -> None:
    setting = f"{key}={NON_DEFAULT[key]}"
    if NOT_BUILT[key].status is Status.REFUSED:
        with pytest.raises(ConfigError) as error:
            load_config(None, "", [setting])
        message = str(error.value)
        assert message.startswith(f"{setting} (--set): not implemented by bkref")
        assert "remove the setting" in message
        return
    config = load_config(None, "", [setting])
    matching = [w for w in config.warnings if w.startswith(f"{setting} (--set): ")]
    assert len(matching) == 1, config.warnings
    assert "accepted but has no effect in bkref" in matching[0]


def test_per_ledger_entry_logs_and_their_tuning_load_without_a_word() -> None:
    config = load_config(
        None,
        "",
        [
            "entryLogPerLedgerEnabled=true",
            "entrylogMapAccessExpiryTimeInSeconds=60",
            "maximumNumberOfActiveEntryLogs=7",
        ],
    )
    assert config.warnings == ()
    assert config.entry_log_per_ledger_enabled is True
    assert config.entrylog_map_access_expiry_time_s == 60
    assert config.maximum_number_of_active_entry_logs == 7


def test_per_ledger_entry_logs_with_transactional_compaction_asked_for_are_refused() -> None:
    """BookKeeper refuses the pair at start (ServerConfiguration.validate), so bkref does
    too, though it compacts transactionally in per-ledger mode as in any mode."""
    with pytest.raises(ConfigError, match="BookKeeper refuses both together"):
        load_config(None, "", ["entryLogPerLedgerEnabled=true", "useTransactionalCompaction=true"])


def test_a_refused_key_is_still_refused_when_one_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key is refused today; the refusal path stays working for the next one."""
    import impl.config.config as config_module
    from impl.config.keys import NotBuilt

    refused = NotBuilt(Status.REFUSED, "not built in this test", harmless=300)
    table = {**NOT_BUILT, "entrylogMapAccessExpiryTimeInSeconds": refused}
    monkeypatch.setattr(config_module, "NOT_BUILT", table)
    assert load_config(None, "", []).warnings == ()
    with pytest.raises(ConfigError) as error:
        load_config(None, "", ["entrylogMapAccessExpiryTimeInSeconds=60"])
    message = str(error.value)
    assert message.startswith("entrylogMapAccessExpiryTimeInSeconds=60 (--set): not implemented")
    assert "set entrylogMapAccessExpiryTimeInSeconds=300" in message


def test_the_harmless_value_given_is_not_warned_about() -> None:
    config = load_config(
        None,
        "",
        [
            "entryLogPerLedgerEnabled=false",
            "journalAdaptiveGroupWrites=true",
            "diskUsageThreshold=0.5",
            "diskUsageWarnThreshold=0.5",
            "diskUsageLwmThreshold=0.5",
        ],
    )
    assert config.warnings == ()


def test_a_compaction_key_in_a_file_is_warned_about_with_its_line() -> None:
    config = load_config("# c\nuseTransactionalCompaction=false\n", "bk.conf", [])
    assert len(config.warnings) == 1
    assert config.warnings[0].startswith(
        "useTransactionalCompaction=false (bk.conf:2): accepted but has no"
    )
    assert "bkref always compacts transactionally" in config.warnings[0]


def test_transactional_compaction_asked_for_is_not_warned_about() -> None:
    config = load_config(None, "", ["useTransactionalCompaction=true", "gcWaitTime=1000"])
    assert config.warnings == ()


def test_db_ledger_storage_entry_location_compaction_is_named_as_such() -> None:
    config = load_config(None, "", ["entryLocationCompactionInterval=3600"])
    assert config.ignored_keys == ("entryLocationCompactionInterval",)
    (warning,) = config.warnings
    assert warning.startswith("entryLocationCompactionInterval=3600 (--set): ignored:")
    assert "DbLedgerStorage" in warning


def test_journal_sync_data_false_is_warned_about() -> None:
    config = load_config(None, "", ["journalSyncData=false"])
    assert any("bkref still syncs before every acknowledgement" in w for w in config.warnings)


def test_the_configuration_page_gives_every_key_its_status() -> None:
    """docs/configuration.md, "Keys bkref uses": one row per key, with the code's status."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (implemented|ignored|refused) \|", page, re.M))
    assert rows == {spec.key: status_of(spec.key).value for spec in KEYS}


def test_the_readme_counts_the_keys_not_built() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"({len(NOT_BUILT)} are read but not built:" in readme


def test_every_other_key_bkref_accepts_is_listed_as_ignored() -> None:
    """The keys BookKeeper knows that are not in KEYS are accepted too: their status is
    "ignored" (listed so by bkref config), and no key is both."""
    others = sorted(BOOKKEEPER_KEYS - set(KEYS_BY_NAME))
    assert len(others) > 250
    config = load_config(None, "", [f"{key}=x" for key in others])
    assert config.ignored_keys == tuple(others)
    # Only the keys whose silent ignoring would surprise an operator are warned about
    # (test_ignored_keys_an_operator_would_miss_are_warned_about_or_refused).
    assert [w.split("=", 1)[0] for w in config.warnings] == [
        "entryLocationCompactionInterval",
        "indexDirectories",
        "ledgerStorageClass",
    ]


def test_ignored_keys_an_operator_would_miss_are_warned_about_or_refused() -> None:
    """Keys bkref does not parse, whose silent ignoring would surprise: another ledger
    storage and separate index directories are warned about; a bookie forced read-only is
    refused (bkref has no read-only mode: it would take writes)."""
    db = "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage"
    warned = load_config(f"ledgerStorageClass={db}\nindexDirectories=/idx\n", "f", []).warnings
    assert any(w.startswith(f"ledgerStorageClass={db} (f:1): ignored") for w in warned)
    assert any(w.startswith("indexDirectories=/idx (f:2): ignored") for w in warned)
    sorted_storage = "org.apache.bookkeeper.bookie.SortedLedgerStorage"
    quiet = load_config(
        f"ledgerStorageClass={sorted_storage}\nforceReadOnlyBookie=false\n", "f", []
    )
    assert quiet.warnings == ()
    with pytest.raises(ConfigError, match=r"forceReadOnlyBookie=true .*no read-only mode"):
        load_config("forceReadOnlyBookie=true\n", "f", [])
