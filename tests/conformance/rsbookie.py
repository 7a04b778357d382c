"""Where the Rust bookie is, how it is built, and how to start it (tests/conformance/rust/).

Why: the conformance kit must be tested by bookies it did not grow up with. rsbookie is a
second outsider beside the JavaScript bookie, written from spec/adapter.md alone, in another
language and with another storage design (a write-ahead log plus snapshots of an in-memory
table), with eight deliberate bugs behind ``--bug`` flags that the kit must catch. This
module compiles its one source file with a plain ``rustc`` (no cargo, no crates), caches the
binary, gives the command line the runner and the tests start it with, and says why it cannot
run when no compiler is there.

The binary is cached under the system temp directory, keyed by a hash of the source and of
the compiler's version, and built atomically (into a temporary file, then renamed), so two
test processes that build at once each get a whole binary and neither sees half of one.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The bookie's one source file.
RS_BOOKIE_SOURCE = Path(__file__).resolve().parent / "rust" / "bookie.rs"
#: The bug flags bookie.rs knows (its header comment says what each does).
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
#: Where a rustup install puts rustc when its bin directory is not on PATH.
CARGO_RUSTC = Path.home() / ".cargo" / "bin" / "rustc"
#: What to install when there is no compiler.
INSTALL = "install Rust (Debian: apt-get install rustc; it needs 1.63 or later)"
COMPILE_TIMEOUT_S = 600


class BuildError(RuntimeError):
    """rustc refused bookie.rs; the message holds the compiler's output."""


def rustc_path() -> str | None:
    """rustc on PATH, else ~/.cargo/bin/rustc when it is there, else None."""
    found = shutil.which("rustc")
    if found is not None:
        return found
    return str(CARGO_RUSTC) if os.access(CARGO_RUSTC, os.X_OK) else None


def _rustc_version(rustc: str) -> str:
    done = subprocess.run(
        [rustc, "--version", "--verbose"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise OSError(f"{rustc} --version failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def rs_unavailable() -> str | None:
    """None when rustc can build the bookie here; else one sentence of why and what to install."""
    rustc = rustc_path()
    if rustc is None:
        return f"rustc is not on PATH nor in {CARGO_RUSTC.parent}: {INSTALL}"
    try:
        _rustc_version(rustc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{rustc} does not run ({exc}): {INSTALL}"
    return None


def cache_dir() -> Path:
    """Where built binaries are kept, one per source and compiler."""
    return Path(tempfile.gettempdir()) / "bkref-rsbookie"


def rs_bookie_binary() -> Path:
    """The compiled bookie, built on first use. Raises BuildError when rustc refuses the
    source (with its output), RuntimeError when there is no compiler."""
    rustc = rustc_path()
    if rustc is None:
        raise RuntimeError(f"rustc is not on PATH nor in {CARGO_RUSTC.parent}: {INSTALL}")
    source = RS_BOOKIE_SOURCE.read_bytes()
    digest = hashlib.sha256(source + b"\0" + _rustc_version(rustc).encode()).hexdigest()[:20]
    binary = cache_dir() / f"rsbookie-{digest}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    # The temporary output gets its own directory: rustc writes helper files beside it.
    with tempfile.TemporaryDirectory(prefix="build-", dir=binary.parent) as build:
        out = Path(build) / "rsbookie"
        done = subprocess.run(
            [rustc, "--edition", "2021", "-O", "-o", str(out), str(RS_BOOKIE_SOURCE)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
            cwd=build,
        )
        if done.returncode != 0 or not out.exists():
            raise BuildError(
                f"{rustc} could not compile {RS_BOOKIE_SOURCE} (exit {done.returncode}):\n"
                f"{done.stderr}{done.stdout}"
            )
        os.replace(out, binary)
    return binary


def rs_bookie_command(*bugs: str) -> str:
    """The CMD that starts the Rust bookie (``{data_dir}`` is replaced by the runner), with each
    of ``bugs`` as a ``--bug`` flag; builds the bookie first if needed. Raises ValueError for a
    bug it does not have."""
    unknown = [bug for bug in bugs if bug not in BUGS]
    if unknown:
        raise ValueError(f"bookie.rs has no bug {unknown}; it has {', '.join(BUGS)}")
    words = [str(rs_bookie_binary()), "{data_dir}"]
    for bug in bugs:
        words += ["--bug", bug]
    return " ".join(w if w == "{data_dir}" else shlex.quote(w) for w in words)


def rs_bookie_argv(data_dir: str, *bugs: str) -> list[str]:
    """The argument vector of rs_bookie_command with ``data_dir`` in place."""
    return [data_dir if w == "{data_dir}" else w for w in shlex.split(rs_bookie_command(*bugs))]
