"""One bookie process under ``bkref conform``: started from a command line, read line by line,
killed as a group.

Spec pages: spec/adapter.md ("Start", "Framing"), docs/conformance.md ("What the runner
does").

Why it is shaped so:

- CMD is one string, as a user types it (``"./mybookie {data_dir}"``): it is split with
  :func:`shlex.split` first and ``{data_dir}`` is replaced in each word after, so a data
  directory with a space in its path stays one argument. ``BKREF_DATA_DIR`` carries the same
  path for a bookie that prefers the environment.
- ``start_new_session=True``: the bookie may be a shell script that starts the real bookie,
  or a bookie with helper processes; a crash must kill all of them at once, so the runner
  SIGKILLs the process group (``os.killpg``), as a power cut or an OOM kill would, and reaps
  the leader.
- Standard output is read by a thread into a queue, so that the runner's every wait has a
  timeout (a bookie that stops answering is a failure, never a hang); standard error goes to
  a file, whose tail is shown when the bookie fails (it is untrusted text: the reports escape
  it).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from impl.limits import LIMITS
from spec.errors import BkrefError

#: How long a bookie may take to write its ready line (``--start-timeout``).
DEFAULT_START_TIMEOUT_S = 30.0
#: How much of the bookie's stderr a failure shows.
STDERR_TAIL_BYTES = 4000
STDERR_TAIL_LINES = 30
#: How long a stopping bookie may take to exit after its stdin closed or a shutdown.
EXIT_TIMEOUT_S = 30.0
#: The end of standard output, as an item of the line queue.
EOF = b""
#: How a failure for an answer that never came begins (the runner's ``_wait``): such a
#: scenario is not shrunk, since every re-run would wait the whole response timeout for a
#: bookie that is simply not answering (issue 26: 20 minutes for the quick profile).
NO_RESPONSE = "no response within"


def no_response(message: str) -> bool:
    """Whether a failure's message says an answer never came (:data:`NO_RESPONSE`)."""
    return message.startswith(NO_RESPONSE)


#: Every bookie started and not yet killed or exited, so that SIGTERM or SIGINT to the
#: runner kills them (their process groups) before it exits (:func:`kill_all`).
_LIVE: set[BookieProcess] = set()
_LIVE_LOCK = threading.Lock()


def kill_all() -> int:
    """SIGKILL the process group of every bookie still running; how many there were."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for process in live:
        process.kill()
    return len(live)


class CannotRun(BkrefError):
    """The bookie could not be started or did not write a ready line: the message says why,
    and ``stderr_tail`` holds the end of what it wrote on standard error."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        text = message
        if stderr_tail.strip():
            text += "\nthe bookie's standard error ended with:\n" + stderr_tail.rstrip()
        super().__init__(text)
        self.reason = message
        self.stderr_tail = stderr_tail


def command_words(command: str, data_dir: str) -> list[str]:
    """The argv of ``command`` for ``data_dir`` (``{data_dir}`` replaced in each word)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise CannotRun(f"the adapter command cannot be split into words: {exc}") from None
    if not words:
        raise CannotRun("the adapter command is empty; give the command that starts the bookie")
    return [word.replace("{data_dir}", data_dir) for word in words]


def read_tail(path: str) -> str:
    """The last lines of the file at ``path`` (empty when it cannot be read)."""
    try:
        with open(path, "rb") as source:
            source.seek(0, os.SEEK_END)
            size = source.tell()
            source.seek(max(0, size - STDERR_TAIL_BYTES))
            data = source.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


class BookieProcess:
    """A started bookie: write request lines, take response lines with a timeout, kill."""

    def __init__(
        self,
        command: str,
        data_dir: str,
        stderr_path: str,
        *,
        cwd: str | None = None,
        line_max_bytes: int = LIMITS.input_line_max_bytes,
    ) -> None:
        """``line_max_bytes``: the longest line read from the bookie's standard output
        (``Limits.input_line_max_bytes``)."""
        self.command = command
        self._line_max_bytes = line_max_bytes
        self.argv = command_words(command, data_dir)
        self.stderr_path = stderr_path
        self.lines: queue.Queue[bytes] = queue.Queue()
        env = dict(os.environ, BKREF_DATA_DIR=data_dir)
        with open(stderr_path, "ab") as stderr:
            try:
                self.child = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
            except OSError as exc:
                raise CannotRun(
                    f"cannot start {shlex.join(self.argv)}: {exc.strerror or exc}; check the "
                    "--adapter command (the program, its path, its permissions)"
                ) from None
        self._reader = threading.Thread(target=self._read, name="conform-stdout", daemon=True)
        self._reader.start()
        self.killed = False
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _read(self) -> None:
        stdout = self.child.stdout
        assert stdout is not None
        fd = stdout.fileno()
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                if pending:
                    self.lines.put(pending)
                self.lines.put(EOF)
                return
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                self.lines.put(line + b"\n")
            if len(pending) > self._line_max_bytes:
                # A line that never ends: say so as a line the runner refuses (not JSON),
                # and read no more (the bookie then blocks on a full pipe until it is
                # killed) rather than hold it all in memory.
                self.lines.put(b"<a line longer than %d bytes>\n" % self._line_max_bytes)
                self.lines.put(EOF)
                return

    @property
    def pid(self) -> int:
        return self.child.pid

    def stderr_tail(self) -> str:
        return read_tail(self.stderr_path)

    def send(self, line: bytes) -> bool:
        """Write one request line; False when the bookie no longer reads its stdin."""
        stdin = self.child.stdin
        assert stdin is not None
        try:
            stdin.write(line)
            stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    def take(self, timeout: float) -> bytes | None:
        """The next stdout line (EOF, b"", at the end), or None after ``timeout`` seconds."""
        try:
            return self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def take_now(self) -> list[bytes]:
        """Every line already read, without waiting."""
        out: list[bytes] = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def close_stdin(self) -> None:
        stdin = self.child.stdin
        if stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                stdin.close()

    def kill(self, *, then: Callable[[], None] = lambda: None) -> int:
        """SIGKILL the process group and reap the leader; its (negative) exit code. ``then``
        runs between the signal and the wait (a lazy disk's fsync barrier is taken down
        there: a process blocked in a held fsync cannot exit until it is)."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.child.kill()
        then()
        code = self.child.wait()
        self._forget()
        self._reader.join(timeout=5)
        self.close_stdin()
        return code

    def wait_exit(self, timeout: float = EXIT_TIMEOUT_S) -> int | None:
        """The exit code once the leader exits, or None after ``timeout`` seconds (it then
        still runs: the caller kills it)."""
        try:
            code = self.child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=5)
        return code

    def reap_group(self) -> None:
        """Kill whatever is left of the process group (helpers the leader started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, signal.SIGKILL)
        if self.child.poll() is not None:
            self._forget()

    def _forget(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)


def wait_ready(process: BookieProcess, timeout: float) -> bytes:
    """The bookie's first stdout line (its ready line); CannotRun when it ends first or
    writes nothing within ``timeout`` seconds (the process is then killed)."""
    deadline = time.monotonic() + timeout
    line = process.take(deadline - time.monotonic())
    if line is None:
        process.kill()
        raise CannotRun(
            f"the bookie wrote no ready line within {timeout:g} s "
            f"({shlex.join(process.argv)}); raise --start-timeout if it is slow to start",
            process.stderr_tail(),
        )
    if line == EOF:
        code = process.wait_exit(5)
        if code is None:
            code = process.kill()
        raise CannotRun(
            f"the bookie ended (exit status {code}) before its ready line "
            f"({shlex.join(process.argv)})",
            process.stderr_tail(),
        )
    return line


def hello(process: BookieProcess, start_timeout: float, response_timeout: float) -> bytes:
    """The ready line, then a ``shutdown`` request that must be answered (ok, or an error for
    an op the bookie does not offer: any response line of id 1) within ``response_timeout``
    seconds: a bookie that writes its ready line and then answers nothing is found here, in
    one timeout, and CannotRun says so (issue 26: it was found only after every scenario
    and its shrinking had waited out the timeout). The process then exits or is killed."""
    line = wait_ready(process, start_timeout)
    deadline = time.monotonic() + response_timeout
    answered = False
    if process.send(b'{"id":1,"op":"shutdown"}\n'):
        while not answered:
            got = process.take(deadline - time.monotonic())
            if got is None or got == EOF:
                break
            try:
                document = json.loads(got)
            except ValueError:
                continue  # not a response: the runner's scenarios judge such lines
            answered = isinstance(document, dict) and document.get("id") == 1
    process.close_stdin()
    if not answered:
        process.kill()
        raise CannotRun(
            f"the bookie wrote its ready line and then answered nothing: no response to a "
            f"shutdown request within {response_timeout:g} s ({shlex.join(process.argv)}); "
            "every request must get one line back (spec/adapter.md, Framing), an error for an "
            "op it does not offer",
            process.stderr_tail(),
        )
    if process.wait_exit(response_timeout) is None:
        process.kill()
    return line


def argv_of(words: Sequence[str]) -> str:
    return shlex.join(words)
