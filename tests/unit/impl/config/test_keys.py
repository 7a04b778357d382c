"""impl/config/keys.py: the table of keys bkref uses, against BookKeeper and the user page.

The expected defaults below were read off ServerConfiguration.java / AbstractConfiguration.java
by hand (not computed from impl/config/keys.py), so a wrong default in the table fails here.
"""

from __future__ import annotations

import impl.config.bk_keys as bk_config_keys
from impl.config.config import default_config
from impl.config.keys import BKREF_OWN_KEYS, KEYS, KEYS_BY_NAME, describe_allowed
from impl.config.properties import render_value
from tests.paths import ROOT

#: key -> default, as written in the Java source (getter default or ConfigKey defaultValue).
JAVA_DEFAULTS: dict[str, object] = {
    "journalDirectory": "/tmp/bk-txn",  # getJournalDirName
    "journalDirectories": ("/tmp/bk-txn",),  # getJournalDirNames falls back to it
    "ledgerDirectories": ("/tmp/bk-data",),  # getLedgerDirNames
    "logSizeLimit": 1073741824,  # MAX_LOG_SIZE_LIMIT = 1 * 1024 * 1024 * 1024
    "flushEntrylogBytes": 0,
    "entryLogFilePreallocationEnabled": True,
    "entryLogPerLedgerEnabled": False,
    "entrylogMapAccessExpiryTimeInSeconds": 300,  # 5 * 60
    "maximumNumberOfActiveEntryLogs": 500,
    "writeBufferSizeBytes": 65536,
    "readBufferSizeBytes": 512,
    "nettyMaxFrameSizeBytes": 5242880,  # DEFAULT_NETTY_MAX_FRAME_SIZE = 5 * 1024 * 1024
    "minUsableSizeForEntryLogCreation": 1073741824,  # (long) 1.2 * logSizeLimit == 1 * limit
    "diskUsageThreshold": 0.95,
    "diskUsageWarnThreshold": 0.90,
    "diskUsageLwmThreshold": 0.95,  # getDiskUsageThreshold()
    "diskCheckInterval": 10000,  # 10 * 1000
    "flushInterval": 10000,
    "gcWaitTime": 600000,
    "minorCompactionThreshold": 0.2,
    "minorCompactionInterval": 3600,
    "minorCompactionMaxTimeMillis": -1,
    "majorCompactionThreshold": 0.8,
    "majorCompactionInterval": 86400,
    "majorCompactionMaxTimeMillis": -1,
    "isForceGCAllowWhenNoSpace": False,
    "forceAllowCompaction": False,
    "useTransactionalCompaction": False,
    "compactionRate": 1000,
    "compactionRateByEntries": 1000,  # getCompactionRate()
    "compactionRateByBytes": 1000000,
    "isThrottleByBytes": False,
    "journalFormatVersionToWrite": 6,
    "journalMaxSizeMB": 2048,  # 2 * 1024
    "journalMaxBackups": 5,
    "journalPreAllocSizeMB": 16,
    "journalWriteBufferSizeKB": 64,
    "journalAlignmentSize": 512,
    "journalSyncData": True,
    "journalAdaptiveGroupWrites": True,
    "journalMaxGroupWaitMSec": 2,
    "journalBufferedWritesThreshold": 524288,  # 512 * 1024
    "journalBufferedEntriesThreshold": 0,
    "journalFlushWhenQueueEmpty": False,
    "skipReplayJournalInvalidRecord": False,
}

#: bkref's own keys (impl/config/keys.py BKREF_OWN_KEYS) -> default: no Java source.
BKREF_OWN_DEFAULTS: dict[str, object] = {"entryLogSlotsPerLedgerDir": 0}


# --- defaults and the key table -------------------------------------------------------


def test_defaults_equal_java() -> None:
    config = default_config()
    assert {key: config.get(key) for key in JAVA_DEFAULTS} == JAVA_DEFAULTS
    assert set(JAVA_DEFAULTS) == set(KEYS_BY_NAME) - BKREF_OWN_KEYS
    assert {key: config.get(key) for key in BKREF_OWN_KEYS} == BKREF_OWN_DEFAULTS
    assert config.warnings == ()
    assert config.ignored == ()


def test_every_key_bkref_uses_is_a_bookkeeper_key_but_its_own() -> None:
    """bkref's own keys (BKREF_OWN_KEYS) are the only exception, none of them BookKeeper's,
    and each says so in its meaning."""
    assert set(KEYS_BY_NAME) - BKREF_OWN_KEYS <= bk_config_keys.BOOKKEEPER_KEYS
    assert set(KEYS_BY_NAME) >= BKREF_OWN_KEYS
    assert not BKREF_OWN_KEYS & bk_config_keys.BOOKKEEPER_KEYS
    for key in BKREF_OWN_KEYS:
        assert KEYS_BY_NAME[key].doc.startswith("bkref's own key, not BookKeeper's"), key


def test_known_keys_data() -> None:
    known = bk_config_keys.BOOKKEEPER_KEYS
    assert {"bookiePort", "zkServers", "dbStorage_writeCacheMaxSizeMb", "digestType"} <= known
    assert {"journalMaxBackups", "nettyMaxFrameSizeBytes"} <= known
    assert "maxBackupJournals" not in known  # the Java constant's name, not the key
    assert not {"available", "standard", "system"} & known  # constants that are not keys
    assert bk_config_keys.KNOWN_FROM["nettyMaxFrameSizeBytes"] == "AbstractConfiguration"


def test_docs_list_every_key_with_its_default() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for spec in KEYS:
        rows = [line for line in page.splitlines() if line.startswith(f"| `{spec.key}` |")]
        assert len(rows) == 1, spec.key
        if spec.default_from is not None:
            default = f"= `{spec.default_from}`"
        else:
            assert spec.default is not None, spec.key
            default = f"`{render_value(spec.default)}`"
        assert default in rows[0], (spec.key, rows[0])
        allowed = describe_allowed(spec).removesuffix(f" ({spec.unit})")
        assert rows[0].endswith(f"| {allowed} |"), (spec.key, rows[0])
