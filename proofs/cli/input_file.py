"""Reading a file a user names to a command, bounded: a size, a line length, and never a wait
for ever.

Spec page: none (docs/design.md, "Limits"; docs/configuration.md, "`bkref config`"). Issue
26, item 4: ``bkref config --conf /dev/zero`` reached 5.7 GB in 8 s and ``check-trace
/dev/zero`` 6.4 GB; ``--conf`` (config, adapter, dirs accept, import), ``check-trace`` and
``explain`` on a FIFO with no writer blocked for ever. Every command that reads a file the user
names reads it here (``read_input``), so each bound is one field of ``Limits``
(impl/limits.py) and each refusal one typed line (``InputError``) that says what was wrong
and what to give instead.

How a FIFO without a writer is told from process substitution (``--conf <(...)``), which must
keep working: the file is opened with O_NONBLOCK, so the open never waits. A pipe whose writer
has nothing yet answers a read with EAGAIN, and the read waits for data (up to
``input_idle_ms`` without a byte). A read that returns nothing at once from a FIFO means no
writer has it open: it gets ``input_writer_wait_ms`` to find one (poll), and then the
command says so, unless the name is the shell's ``/dev/fd/N`` (process substitution whose
writer already finished with nothing to say: the input is empty).

Not bounded here: a writer that sends a byte now and then for ever (each wait is bounded, and
the size bound ends it).
"""

from __future__ import annotations

import os
import select
import stat
import sys

from impl.limits import LIMITS, Limits

#: Bytes read per call.
_CHUNK_BYTES = 1 << 16


class InputError(Exception):
    """A named input cannot be used: one line, what was wrong and what to give instead."""


def read_input(
    path: str, *, what: str, max_bytes: int, field: str, limits: Limits = LIMITS
) -> bytes:
    """The bytes of the file ``path`` names (``what`` it should be, for messages), at most
    ``max_bytes`` (``field``: the Limits field that says so) and no line longer than
    ``limits.input_line_max_bytes``. Raises InputError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{path}: No such file or directory; give {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open it: {exc.strerror or exc}; give {what}") from None
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise InputError(f"{path}: is a directory; give {what}")
        if stat.S_ISREG(mode.st_mode) and mode.st_size > max_bytes:
            raise InputError(_too_big(path, what, max_bytes, field))
        fifo = stat.S_ISFIFO(mode.st_mode)
        data = _read_bounded(fd, path, what, max_bytes, field, fifo=fifo, limits=limits)
    finally:
        os.close(fd)
    check_lines(data, path, what, limits)
    return data


def read_stdin(*, what: str, max_bytes: int, field: str, limits: Limits = LIMITS) -> bytes:
    """Standard input, to its end, bounded as ``read_input`` bounds a file (it waits for its
    writer: at a terminal, the user types it)."""
    chunks: list[bytes] = []
    total = 0
    source = sys.stdin.buffer
    while True:
        chunk = (
            source.read1(_CHUNK_BYTES) if hasattr(source, "read1") else source.read(_CHUNK_BYTES)
        )
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise InputError(_too_big("<stdin>", what, max_bytes, field))
        chunks.append(chunk)
    data = b"".join(chunks)
    check_lines(data, "<stdin>", what, limits)
    return data


def check_lines(data: bytes, path: str, what: str, limits: Limits = LIMITS) -> None:
    """Raise InputError when a line of ``data`` is longer than ``input_line_max_bytes``."""
    bound = limits.input_line_max_bytes
    if len(data) <= bound:
        return
    start, number = 0, 1
    while start < len(data):
        end = data.find(b"\n", start)
        stop = len(data) if end < 0 else end
        if stop - start > bound:
            raise InputError(
                f"{path}: line {number} is longer than {bound} bytes "
                f"(Limits.input_line_max_bytes): not {what}"
            )
        if end < 0:
            return
        start, number = end + 1, number + 1


def _too_big(path: str, what: str, max_bytes: int, field: str) -> str:
    return f"{path}: more than {max_bytes} bytes (Limits.{field}): not {what}"


def _read_bounded(
    fd: int, path: str, what: str, max_bytes: int, field: str, *, fifo: bool, limits: Limits
) -> bytes:
    chunks: list[bytes] = []
    total = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    waited_for_writer = False
    while True:
        try:
            chunk = os.read(fd, _CHUNK_BYTES)
        except BlockingIOError:
            # A writer is there with nothing yet (a pipe, a terminal): wait for data.
            if not poller.poll(limits.input_idle_ms):
                raise InputError(
                    f"{path}: nothing came for {limits.input_idle_ms / 1000:g} s "
                    f"(Limits.input_idle_ms); give {what}"
                ) from None
            continue
        except OSError as exc:
            raise InputError(
                f"{path}: cannot read it: {exc.strerror or exc}; give {what}"
            ) from None
        if not chunk:
            if fifo and not chunks and not waited_for_writer:
                # Nothing at once from a FIFO: no writer has it open (yet).
                waited_for_writer = True
                if poller.poll(limits.input_writer_wait_ms):
                    continue  # a writer came: its data, or its end
                if _process_substitution(path):
                    return b""
                raise InputError(
                    f"{path}: a FIFO with no writer (none came in "
                    f"{limits.input_writer_wait_ms / 1000:g} s, Limits.input_writer_wait_ms): "
                    f"nothing to read; give {what}, or write into the FIFO"
                )
            break
        total += len(chunk)
        if total > max_bytes:
            raise InputError(_too_big(path, what, max_bytes, field))
        chunks.append(chunk)
    return b"".join(chunks)


def _process_substitution(path: str) -> bool:
    """A name the shell gives process substitution (bash, zsh: /dev/fd/N, /proc/self/fd/N)."""
    return path.startswith(("/dev/fd/", "/proc/self/fd/"))
