"""A child process spoken to in lines, for the tests that drive a protocol through pipes (the
recorder's, tests/unit/proofs/cli/test_record.py, and the JavaScript bookie's,
tests/conformance/test_js_bookie.py): lines written to its stdin, its stdout lines read by a
thread into a queue so that every read has a timeout, its stderr in a numbered file, and the
child killed on exit if it still runs."""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import pytest


class LineChild:
    def __init__(
        self,
        argv: Sequence[str],
        stderr_dir: Path,
        stderr_name: str,
        timeout_s: float,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        number = len(list(stderr_dir.glob(f"{stderr_name}-*.txt")))
        self.stderr_path = stderr_dir / f"{stderr_name}-{number}.txt"
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        self.timeout_s = timeout_s
        self.child = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            cwd=cwd, env=env,
        )  # fmt: skip
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.child.stdout is not None
        while line := self.child.stdout.readline():
            self._lines.put(line)
        self._lines.put(None)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait(self.timeout_s)
        self._stderr.close()

    def write(self, data: bytes) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write(data)
        self.child.stdin.flush()

    def raw(self, timeout_s: float | None = None) -> bytes:
        """The next stdout line; fails the test when none comes in time or the output ended."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        try:
            line = self._lines.get(timeout=wait)
        except queue.Empty:
            pytest.fail(f"no line within {wait} s; stderr:\n{self.stderr()}")
        if line is None:
            pytest.fail(f"the output ended; stderr:\n{self.stderr()}")
        return line

    def ended(self) -> bool:
        """Whether the output ended with no further line (waits for the end; a line that
        comes instead is the answer False)."""
        try:
            return self._lines.get(timeout=self.timeout_s) is None
        except queue.Empty:
            pytest.fail(f"the output did not end within {self.timeout_s} s")

    def close(self) -> int:
        """Close the child's stdin (the end of its input) and wait for its exit status."""
        assert self.child.stdin is not None
        self.child.stdin.close()
        return self.child.wait(self.timeout_s)

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")
