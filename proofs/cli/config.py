"""``bkref config``: print the effective configuration, validated, with where each value came
from (default, file:line or --set) and the BookKeeper keys that were given but are ignored.

Why: a BookKeeper operator points bkref at their own ``bk_server.conf`` and sees at once what
bkref will use, what it ignores, and which value is wrong. The shared options ``--conf`` and
``--set`` live here (add_config_arguments, config_from_args) so every command that needs a
configuration takes them the same way. Keys and defaults: impl/config/keys.py; reading the
file: impl/config/properties.py; loading and validation: impl/config/config.py; the user page:
docs/configuration.md.

Exit status: 0 when the configuration is valid, 2 when it is not (missing or unreadable file,
bad value, unknown key), with one line on stderr. Warnings (BookKeeper accepts the setting but
it is probably not meant) go to stderr and do not change the exit status.

The file is decoded as ISO-8859-1, as Commons Configuration reads .properties files, so any
byte sequence reads; non-ASCII text belongs in ``\\uXXXX`` escapes, as in BookKeeper.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from impl.config.config import ServerConfig, load_config
from impl.config.keys import KEYS_BY_NAME, NOT_BUILT, status_of
from impl.config.properties import render_value
from impl.limits import LIMITS
from proofs.cli.input_file import InputError, read_input
from spec.errors import ConfigError

#: Exit status for a configuration that cannot be used (as argparse uses for bad arguments).
EXIT_BAD_CONFIG = 2
#: Encoding of .properties files in Commons Configuration (PropertiesConfiguration).
PROPERTIES_ENCODING = "iso-8859-1"


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--conf FILE`` and ``--set key=value`` (repeatable) to a command's parser."""
    parser.add_argument(
        "--conf",
        metavar="FILE",
        help="a bk_server.conf-style file (BookKeeper key names); default: BookKeeper's defaults",
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one key after the file (repeatable; the last --set of a key wins)",
    )


def read_conf_file(path: str) -> str:
    """The text of a configuration file, read bounded (proofs/cli/input_file.py: at most
    ``Limits.conf_file_max_bytes``, never waiting for ever on a FIFO; process substitution
    works). Raises ConfigError saying why it cannot be read."""
    if not os.path.lexists(path):
        raise ConfigError(f"{path}: no such configuration file; check the --conf path")
    try:
        data = read_input(
            path,
            what="a bk_server.conf file to --conf",
            max_bytes=LIMITS.conf_file_max_bytes,
            field="conf_file_max_bytes",
        )
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return data.decode(PROPERTIES_ENCODING)


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The configuration named by ``--conf`` and ``--set``. Raises ConfigError."""
    conf: str | None = args.conf
    overrides: list[str] = args.set
    text = None if conf is None else read_conf_file(conf)
    return load_config(text, conf or "", overrides)


def configure(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.epilog = (
        "Each key's status says whether bkref acts on it: implemented; ignored (accepted, no "
        "effect, a warning on stderr when set); refused (only the default is accepted). "
        "Exit status: 0 when the configuration is valid, 2 when it is not (missing file, bad "
        "value, unknown key, a refused key set). Keys BookKeeper knows but bkref does not use "
        "are accepted and listed as ignored."
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ConfigError as exc:
        print(f"bkref config: error: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    for warning in config.warnings:
        print(f"bkref config: warning: {warning}", file=sys.stderr)
    print(to_json(config) if args.json else to_table(config))
    return 0


def to_table(config: ServerConfig) -> str:
    """Aligned ``key  value  status  source`` lines, what the keys that are not built do
    instead, then the ignored keys."""
    rows = [
        (s.key, render_value(s.value), status_of(s.key).value, str(s.source))
        for s in config.settings
    ]
    lines = [
        f"# effective configuration: {len(rows)} keys bkref reads; status: implemented, "
        "ignored (accepted, no effect; a warning when set), refused (only the default)"
    ]
    lines += _aligned(rows)
    lines.append("")
    lines.append(f"# not built: {len(NOT_BUILT)} keys bkref reads but does not act on")
    width = max(len(key) for key in NOT_BUILT)
    for key, not_built in NOT_BUILT.items():
        lines.append(f"#   {key:<{width}}  {not_built.status.value}: {not_built.instead}")
    lines.append("")
    if config.ignored:
        ignored = [
            (i.key, render_value(i.items), f"{i.source} ({i.known_from})") for i in config.ignored
        ]
        lines.append(f"# ignored: {len(ignored)} BookKeeper keys given that bkref does not use")
        lines += _aligned(ignored)
    else:
        lines.append("# ignored: none")
    return "\n".join(lines)


def _aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell (the value column to 40 at most); the last
    column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    widths[1] = min(widths[1], 40)
    return [
        "  ".join(
            [f"{cell:<{width}}" for cell, width in zip(row, widths, strict=False)] + [row[-1]]
        ).rstrip()
        for row in rows
    ]


def to_json(config: ServerConfig) -> str:
    """The configuration as one JSON object: values (typed), ignored keys, warnings."""
    document = {
        "values": [
            {
                "key": s.key,
                "value": list(s.value) if isinstance(s.value, tuple) else s.value,
                "unit": KEYS_BY_NAME[s.key].unit,
                "source": str(s.source),
                "status": status_of(s.key).value,
                "instead": _instead(s.key),
            }
            for s in config.settings
        ],
        "ignored": [
            {
                "key": i.key,
                "value": render_value(i.items),
                "source": str(i.source),
                "known_from": i.known_from,
                "status": "ignored",
            }
            for i in config.ignored
        ],
        "warnings": list(config.warnings),
    }
    return json.dumps(document, indent=2)


def _instead(key: str) -> str | None:
    """What bkref does instead of a key that is not built (None for an implemented key)."""
    not_built = NOT_BUILT.get(key)
    return None if not_built is None else not_built.instead
