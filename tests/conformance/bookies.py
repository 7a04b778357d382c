"""The bookies written apart from bkref, in one table: the conformance kit's own test.

Why: a checker of other people's code earns trust by passing every correct bookie and
catching every broken one, and it can only show that on bookies it did not grow up with.
Each bookie here was written from spec/adapter.md alone, in another language, with a storage
design unlike bkref's (entry logs plus a journal) and unlike each other's:

- ``js``: JavaScript, one append-only checksummed log with group commit (state protocol);
- ``js-bare``: the same bookie claiming the least the spec allows: no optional op, state
  none (the configuration an outsider tried in issue 25);
- ``c``: C, a file per ledger with a separate metadata file, a checksummed deleted list
  (state protocol, BookKeeper's answers);
- ``rust``: Rust, a write-ahead log plus snapshots of an in-memory table (state none).

``command(*bugs)`` starts one with deliberate bugs; ``unavailable()`` says why it cannot run
here (a compiler or Node missing), and what to install.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable

import attrs

from tests.conformance import cbookie, jsbookie, rsbookie

#: How long one ``bkref conform`` of the tests may take.
CONFORM_TIMEOUT_S = 300


def conform(*args: str) -> subprocess.CompletedProcess[str]:
    """``bkref conform ARGS`` as a user runs it, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "proofs.cli.main", "conform", *args],
        capture_output=True,
        text=True,
        timeout=CONFORM_TIMEOUT_S,
        check=False,
    )


@attrs.frozen
class Outsider:
    name: str
    command: Callable[..., str]
    unavailable: Callable[[], str | None]
    bugs: tuple[str, ...]

    def argv(self, data_dir: str, *bugs: str) -> list[str]:
        """The argument vector of ``command(*bugs)`` with ``data_dir`` in place."""
        return [data_dir if w == "{data_dir}" else w for w in shlex.split(self.command(*bugs))]


def _bare(*bugs: str) -> str:
    return jsbookie.js_bookie_command(*bugs) + " --bare"


BOOKIES = (
    Outsider("js", jsbookie.js_bookie_command, jsbookie.node_unavailable, jsbookie.BUGS),
    Outsider("js-bare", _bare, jsbookie.node_unavailable, jsbookie.BUGS),
    Outsider("c", cbookie.c_bookie_command, cbookie.c_unavailable, cbookie.BUGS),
    Outsider("rust", rsbookie.rs_bookie_command, rsbookie.rs_unavailable, rsbookie.BUGS),
)
