"""Where the JavaScript bookie is and how to start it (tests/conformance/js/bookie.js).

Why: the conformance kit (spec/adapter.md, ``bkref record``/``check-trace`` and the
``bkref conform`` runner) claims to judge any bookie, in any language. The JavaScript bookie
is the proof: a second implementation written from spec/adapter.md alone, with deliberate
bugs behind ``--bug`` flags that the kit must catch. This module gives the command line the
runner and the tests start it with, and says why it cannot run when Node is missing.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

#: The bookie's script.
JS_BOOKIE = str(Path(__file__).resolve().parent / "js" / "bookie.js")
#: The bug flags bookie.js knows (its header comment says what each does).
BUGS = ("ack-before-fsync", "forget-fences", "stale-cache", "unsynced-recovery")
#: The oldest Node the bookie is written for (zlib.crc32 is used when there, else a table).
NODE_MAJOR_MIN = 18


def node_path() -> str | None:
    """The ``node`` executable on PATH, else None."""
    return shutil.which("node")


def js_bookie_command(*bugs: str) -> str:
    """The CMD that starts the JavaScript bookie (``{data_dir}`` is replaced by the runner),
    with each of ``bugs`` as a ``--bug`` flag. Raises ValueError for a bug it does not have."""
    unknown = [bug for bug in bugs if bug not in BUGS]
    if unknown:
        raise ValueError(f"bookie.js has no bug {unknown}; it has {', '.join(BUGS)}")
    node = node_path() or "node"
    words = [node, JS_BOOKIE, "{data_dir}"]
    for bug in bugs:
        words += ["--bug", bug]
    return " ".join(w if w == "{data_dir}" else shlex.quote(w) for w in words)


def js_bookie_argv(data_dir: str, *bugs: str) -> list[str]:
    """The argument vector of js_bookie_command with ``data_dir`` in place."""
    return [data_dir if w == "{data_dir}" else w for w in shlex.split(js_bookie_command(*bugs))]


def node_unavailable() -> str | None:
    """None when Node can run the bookie here; else one sentence of why and what to install."""
    node = node_path()
    if node is None:
        return "node is not on PATH: install Node.js 18 or later (Debian: apt-get install nodejs)"
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{node} --version failed ({exc}); install Node.js 18 or later"
    version = done.stdout.strip().lstrip("v")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        return f"{node} --version printed {done.stdout.strip()!r}, not a Node version"
    if major < NODE_MAJOR_MIN:
        return f"{node} is Node {version}; bookie.js needs Node {NODE_MAJOR_MIN} or later"
    return None
