"""``bkref dirs accept``: accept a changed set of journal and ledger directories by rewriting
their identity stamps, after checking that nothing acknowledged is lost.

Why: a bookie refuses to start when its configured directories are not the ones its stamps
name (an added, dropped, reordered, swapped or foreign directory: spec/format/identity.md),
because starting anyway loses fences, keys, deletes or entries. When the change is what the
operator meant, this command says so explicitly: it prints every change, refuses what would
lose data (a dropped directory holding entry logs, the journal or the index; an added or
foreign directory holding data; a stamped directory it cannot find, unless ``--forget``
names it), and only then writes the new stamps (impl/bookie/identity.py, two phases, so a
crash in the middle leaves a state the next start or a second run finishes).

It locks every directory first, so it refuses to run beside a bookie on the same
directories. Exit status: 0 when the stamps were written (or nothing had changed), 1 when it
refused (no stamp was written), 2 for a configuration that cannot be used.
"""

from __future__ import annotations

import argparse
import sys

from proofs.cli.config import add_config_arguments, config_from_args

EXIT_OK = 0
EXIT_REFUSED = 1

PREFIX = "bkref dirs accept: "


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dirs_command", metavar="ACTION", required=True)
    accept = sub.add_parser(
        "accept",
        help="rewrite the identity stamps for the configured directory set",
        description=(
            "Accept the configured journalDirectories and ledgerDirectories as this bookie's "
            "directories: print what changed against the identity stamps, refuse what would "
            "lose data, then rewrite the stamps (spec/format/identity.md). Run it with the "
            "bookie stopped, with the bookie's configuration."
        ),
    )
    add_config_arguments(accept)
    accept.add_argument(
        "--forget",
        metavar="DIR",
        action="append",
        default=[],
        help=(
            "a stamped ledger directory that is gone for good (missing or wiped): accept "
            "losing the entries its entry logs held (never the journal's or the index's "
            "directory)"
        ),
    )
    accept.add_argument(
        "--dry-run", action="store_true", help="print what would change; write nothing"
    )
    parser.epilog = accept.epilog = (
        "Exit status: 0 when the stamps were written or nothing changed, 1 when refused "
        "(no stamp written), 2 for a configuration that cannot be used."
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)  # ConfigError: exit 2 (proofs/cli/main.py)
    from impl.bookie.identity import (
        apply_accept,
        lock_directories,
        normalise_dir,
        plan_accept,
        release_locks,
    )
    from impl.bookie.layout import ensure_durable_dir
    from impl.format.names import CURRENT_DIR
    from impl.fs.api import join
    from impl.fs.os_backend import OsFileSystem

    fs = OsFileSystem()
    journals = [normalise_dir(d) for d in config.journal_directories]
    ledgers = [normalise_dir(d) for d in config.ledger_directories]
    for directory in dict.fromkeys([*journals, *ledgers]):
        ensure_durable_dir(fs, join(directory, CURRENT_DIR))  # as the bookie makes them
    locks = lock_directories(fs, [*journals, *ledgers])  # DirectoryError: exit 1
    try:
        plan = plan_accept(fs, journals, ledgers, forget=args.forget)
        for line in plan.changes:
            print(f"change: {line}")
        if plan.refusals:
            for line in plan.refusals:
                print(f"{PREFIX}refused: {line}", file=sys.stderr)
            print(f"{PREFIX}no stamp was written", file=sys.stderr)
            return EXIT_REFUSED
        if plan.template is None:
            print("nothing to accept: the directories match their identity stamps")
            return EXIT_OK
        if args.dry_run:
            print("dry run: no stamp was written")
            return EXIT_OK
        apply_accept(fs, plan)
        print(
            f"accepted: the stamps now say journalDirectories={','.join(journals)} "
            f"ledgerDirectories={','.join(ledgers)} (generation {plan.template.generation})"
        )
        return EXIT_OK
    finally:
        release_locks(locks)
