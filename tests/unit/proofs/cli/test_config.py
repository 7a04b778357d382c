"""proofs/cli/config.py: ``bkref config`` output, exit codes, and the shared --conf/--set.

The command runs through proofs.cli.main.main, the console script's entry point, with the command
table cut down to ``config`` so this test does not depend on other commands' modules.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import proofs.cli.main as cli
from impl.config.config import ServerConfig
from impl.config.keys import KEYS
from proofs.cli.config import add_config_arguments, config_from_args
from spec.errors import ConfigError
from tests.paths import TEST_DATA

FIXTURE = TEST_DATA / "bk_server.conf"


def _line_of(prefix: str) -> int:
    """The 1-based number of the fixture's line that starts with ``prefix``."""
    lines = FIXTURE.read_text(encoding="iso-8859-1").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(prefix))


@pytest.fixture(autouse=True)
def only_config_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", tuple(c for c in cli.COMMANDS if c[0] == "config"))


def bkref(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_defaults_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = bkref(capsys)
    assert (code, err) == (0, "")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:1].isalpha()}
    assert set(rows) == {spec.key for spec in KEYS}
    assert rows["logSizeLimit"] == ["1073741824", "implemented", "default"]
    assert rows["diskUsageLwmThreshold"] == [
        "0.95",
        "ignored",
        "default",
        "(=",
        "diskUsageThreshold)",
    ]
    assert rows["entryLogPerLedgerEnabled"] == ["false", "implemented", "default"]
    assert "#   useTransactionalCompaction " in out  # what bkref does instead, when not built
    assert rows["gcWaitTime"] == ["600000", "implemented", "default"]
    assert "# ignored: none" in out


def test_conf_file_and_set(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = bkref(
        capsys, "--conf", str(FIXTURE), "--set", "useTransactionalCompaction=false"
    )
    assert code == 0
    assert err == (
        "bkref config: warning: useTransactionalCompaction=false (--set): accepted but has no "
        "effect in bkref: bkref always compacts transactionally (BP-6: a .compacting log, then "
        ".compacted, then the index); BookKeeper's in-place compactor "
        "(useTransactionalCompaction=false) is not built\n"
    )
    lines = out.splitlines()
    journal = next(line for line in lines if line.startswith("journalDirectories "))
    assert journal.split()[1:] == [
        "/tmp/bk-txn",
        "implemented",
        f"{FIXTURE}:{_line_of('journalDirectories=')}",
    ]
    gc = next(line for line in lines if line.startswith("useTransactionalCompaction "))
    assert gc.split()[1:] == ["false", "ignored", "--set"]
    port = next(line for line in lines if line.startswith("bookiePort "))
    assert port.split()[1:] == [
        "3181",
        f"{FIXTURE}:{_line_of('bookiePort=')}",
        "(ServerConfiguration)",
    ]
    assert "# ignored: 26 BookKeeper keys given that bkref does not use" in out


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = bkref(
        capsys, "--conf", str(FIXTURE), "--set", "ledgerDirectories=/a,/b", "--json"
    )
    assert code == 0
    document = json.loads(out)
    values = {row["key"]: row for row in document["values"]}
    assert values["ledgerDirectories"] == {
        "key": "ledgerDirectories",
        "value": ["/a", "/b"],
        "unit": "paths",
        "source": "--set",
        "status": "implemented",
        "instead": None,
    }
    assert values["gcWaitTime"]["status"] == "implemented"
    assert values["useTransactionalCompaction"]["status"] == "ignored"
    assert "always compacts transactionally" in values["useTransactionalCompaction"]["instead"]
    assert values["logSizeLimit"]["value"] == 1073741824
    assert values["journalSyncData"]["value"] is True
    assert values["diskUsageThreshold"]["value"] == 0.95
    ignored = {row["key"]: row for row in document["ignored"]}
    assert ignored["zkServers"]["value"] == "localhost:2181"
    assert ignored["zkServers"]["known_from"] == "AbstractConfiguration"
    assert ignored["zkServers"]["status"] == "ignored"
    assert document["warnings"] == []


def test_warnings_go_to_stderr_and_keep_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = bkref(capsys, "--set", "logSizeLimit=100")
    assert code == 0
    assert err.startswith("bkref config: warning: logSizeLimit=100 (--set): below 1044 bytes")
    assert "logSizeLimit" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--conf", "/no/such/bk_server.conf"), "/no/such/bk_server.conf: no such configuration"),
        (("--set", "logSizeLimit=abc"), "--set: bad value 'abc' for logSizeLimit"),
        (("--set", "logSizeLimt=1"), "did you mean 'logSizeLimit'?"),
        (("--set", "logSizeLimit"), "--set 'logSizeLimit': expected key=value"),
        (("--set", "diskUsageWarnThreshold=0.99"), "diskUsageWarnThreshold is above"),
    ],
)
def test_errors_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = bkref(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("bkref config: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_directory_as_conf_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = bkref(capsys, "--conf", str(tmp_path))
    assert code == 2
    assert "is a directory" in err


def test_bad_value_in_file_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_bytes(b"# mine\nledgerDirectories=/d\nflushInterval=-5\n")
    code, _, err = bkref(capsys, "--conf", str(conf))
    assert code == 2
    assert f"{conf}:3: bad value '-5' for flushInterval: out of range" in err


def test_file_is_read_as_latin1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_bytes(b"# caf\xe9 \xff\nledgerDirectories=/d\xe9,/e\\u00e9\n")
    code, out, _ = bkref(capsys, "--conf", str(conf), "--json")
    assert code == 0
    values = {row["key"]: row["value"] for row in json.loads(out)["values"]}
    assert values["ledgerDirectories"] == ["/d\u00e9", "/e\u00e9"]


def test_shared_arguments_work_on_another_parser(tmp_path: Path) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_text("logSizeLimit=4096\n", encoding="ascii")
    parser = argparse.ArgumentParser(prog="bkref other")
    add_config_arguments(parser)
    config = config_from_args(parser.parse_args(["--conf", str(conf), "--set", "gcWaitTime=7"]))
    assert isinstance(config, ServerConfig)
    assert (config.log_size_limit_bytes, config.gc_wait_time_ms) == (4096, 7)
    assert config_from_args(parser.parse_args([])) == config_from_args(
        parser.parse_args(["--set", "logSizeLimit=1073741824"])
    )
    with pytest.raises(ConfigError, match="no such configuration file"):
        config_from_args(parser.parse_args(["--conf", str(tmp_path / "missing.conf")]))
