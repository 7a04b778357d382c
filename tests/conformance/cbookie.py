"""Where the C bookie is, how it is built, and how to start it (tests/conformance/c/bookie.c).

Why: the conformance kit claims to judge any bookie. The C bookie is a second outsider (after
the JavaScript one), written from spec/adapter.md alone with a storage design unlike both
bkref's and bookie.js's (one file per ledger plus a meta file per ledger, and a checksummed
deleted list), and with deliberate bugs behind ``--bug`` flags that the kit must catch. This
module compiles it once per source and compiler (a cache under the temp directory, built
atomically so that concurrent test processes do not see half a binary), gives the command
line the runner and the tests start it with, and says why it cannot run when no C compiler
is installed.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The bookie's single C source file.
C_BOOKIE_SOURCE = Path(__file__).resolve().parent / "c" / "bookie.c"
#: The bug flags bookie.c knows (its header comment says what each does).
BUGS = (
    "ack-before-fsync",
    "delete-before-fsync",
    "stale-cache",
    "serve-torn-tail",
    "forget-fences",
    "ignore-key",
    "admit-while-fencing",
    "lose-last-acked",
)
#: The flags the bookie is built with: C11 and POSIX only, every warning an error.
CFLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror")


class CompileError(RuntimeError):
    """bookie.c did not compile; the message holds the compiler's output."""


def compiler_path() -> str | None:
    """The C compiler: $CC when set (its first word), else ``cc`` or ``gcc`` on PATH."""
    wanted = os.environ.get("CC", "").split()
    for name in (wanted[0] if wanted else "", "cc", "gcc"):
        if name:
            found = shutil.which(name)
            if found:
                return found
    return None


def c_unavailable() -> str | None:
    """None when a C compiler can build the bookie here; else one sentence of why and what to
    install."""
    cc = compiler_path()
    if cc is None:
        return "no C compiler on PATH (cc or gcc): install one (Debian: apt-get install gcc)"
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cc} --version failed ({exc}); install a working C compiler"
    if done.returncode != 0:
        return f"{cc} --version exited {done.returncode}; install a working C compiler"
    return None


def _compiler_version(cc: str) -> str:
    done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout


def c_bookie_binary() -> str:
    """The built bookie, compiled on first use into a cache keyed by the source, the flags and
    the compiler's version. Raises CompileError (with the compiler's output) when it does
    not build, RuntimeError when there is no compiler."""
    reason = c_unavailable()
    cc = compiler_path()
    if reason is not None or cc is None:
        raise RuntimeError(reason or "no C compiler")
    source = C_BOOKIE_SOURCE.read_bytes()
    digest = hashlib.sha256()
    for part in (source, " ".join(CFLAGS).encode(), cc.encode(), _compiler_version(cc).encode()):
        digest.update(part)
        digest.update(b"\0")
    cache = Path(tempfile.gettempdir()) / "bkref-cbookie" / digest.hexdigest()[:24]
    binary = cache / "cbookie"
    if binary.exists():
        return str(binary)
    cache.mkdir(parents=True, exist_ok=True)
    # A unique temp name in the same directory, renamed over: two builders at once each
    # rename a whole binary, and a reader never sees half of one.
    fd, tmp = tempfile.mkstemp(prefix=".cbookie-", dir=cache)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, *CFLAGS, "-o", tmp, str(C_BOOKIE_SOURCE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise CompileError(
                f"{cc} {' '.join(CFLAGS)} {C_BOOKIE_SOURCE} failed "
                f"({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(binary)


def c_bookie_command(*bugs: str) -> str:
    """The CMD that starts the C bookie (``{data_dir}`` is replaced by the runner), with each
    of ``bugs`` as a ``--bug`` flag; builds it first. Raises ValueError for a bug it does not
    have."""
    unknown = [bug for bug in bugs if bug not in BUGS]
    if unknown:
        raise ValueError(f"bookie.c has no bug {unknown}; it has {', '.join(BUGS)}")
    words = [c_bookie_binary(), "{data_dir}"]
    for bug in bugs:
        words += ["--bug", bug]
    return " ".join(w if w == "{data_dir}" else shlex.quote(w) for w in words)


def c_bookie_argv(data_dir: str, *bugs: str) -> list[str]:
    """The argument vector of c_bookie_command with ``data_dir`` in place."""
    return [data_dir if w == "{data_dir}" else w for w in shlex.split(c_bookie_command(*bugs))]
