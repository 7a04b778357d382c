"""A write buffer in front of one open file (BookKeeper's BufferedChannel).

Spec page: spec/format/entry_log.md ("Header", "Records and locations"). BookKeeper
writes every entry log through ``BufferedChannel``: bytes are copied into a buffer of
``writeBufferSizeBytes`` and written to the file when the buffer fills, on ``flush`` and on
``forceWrite``; with ``flushEntrylogBytes > 0`` a write that brings the bytes not yet forced
to that bound flushes and forces at once (``updatePositionAndFlushIfNeeded``).

Three positions, always ``durable <= flushed <= position``:

- ``position``: the logical end, where the next write lands (buffered bytes included);
- ``flushed_position``: the file offset of the buffer's first byte, i.e. everything before it
  has been handed to the file system (``getFileChannelPosition``);
- ``durable_position``: the flushed position captured by the last successful force.

Deviation from BookKeeper, on purpose: a write is atomic with respect to a failed I/O. Java
copies part of a buffer, flushes, copies the rest, so an ENOSPC in the middle leaves half a
record accepted. Here :meth:`BufferedChannel.write_record` computes the file write first and
commits the new buffer and positions only after the file system accepted it: on FsNoSpace or
FsIOError nothing of ``data`` is accepted, the buffer keeps its bytes and a retry works. The
bytes a failed write may have left past ``flushed_position`` are beyond the logical end; the
next successful write overwrites them. The file contents at every flushed position are the
same as Java's (the buffer is written out in whole ``write_capacity_bytes`` chunks).

Reads (:meth:`pread`, :meth:`size`) see the write buffer too, so the reader functions of
impl/entrylog/reader.py work on the active log (DefaultEntryLogger.readFromLogChannel).

Not verified here: what a failed force leaves on disk. After FsIOError from fsync the file
system may have dropped the file's unsynced data (spec.errors.FsIOError); this channel keeps
believing the flushed bytes are in the file, as BookKeeper does. Callers must treat such a log
as damaged. ``close()`` does not flush (as in Java); the entry logger flushes first.
"""

from __future__ import annotations

from impl.fs.api import FileHandle
from spec.errors import FsClosed


class BufferedChannel:
    """Buffered appends to one file, with reads that see the buffer.

    ``write_capacity_bytes`` is writeBufferSizeBytes; ``unpersisted_bound_bytes`` is
    flushEntrylogBytes (0 disables forced flushes); ``start_position`` is where the first
    write lands (default: the file's current size, like ``fc.position()`` after open).
    """

    def __init__(
        self,
        handle: FileHandle,
        write_capacity_bytes: int,
        unpersisted_bound_bytes: int = 0,
        start_position: int | None = None,
    ) -> None:
        assert write_capacity_bytes > 0, write_capacity_bytes
        assert unpersisted_bound_bytes >= 0, unpersisted_bound_bytes
        start = handle.size() if start_position is None else start_position
        assert start >= 0, start
        self._handle = handle
        self._capacity_bytes = write_capacity_bytes
        self._bound_bytes = unpersisted_bound_bytes
        self._buffer = bytearray()
        self._flushed_position = start
        self._position = start
        self._durable_position = start
        self._unpersisted_bytes = 0
        self._closed = False

    # --- observation -------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The name the file was opened by."""
        return self._handle.path

    @property
    def position(self) -> int:
        """Where the next write lands: flushed bytes plus buffered bytes."""
        return self._position

    @property
    def flushed_position(self) -> int:
        """Everything before this offset has been written to the file (not necessarily
        durable)."""
        return self._flushed_position

    @property
    def durable_position(self) -> int:
        """The flushed position captured by the last successful force."""
        return self._durable_position

    @property
    def buffered_bytes(self) -> int:
        """Bytes accepted but still only in memory."""
        return len(self._buffer)

    @property
    def unpersisted_bytes(self) -> int:
        """Bytes written since the last force (tracked only with a bound, as in Java)."""
        return self._unpersisted_bytes

    @property
    def closed(self) -> bool:
        return self._closed

    # --- writing -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Append ``data`` (BufferedChannel.write). Same as :meth:`write_record`."""
        self.write_record(data)

    def write_record(self, data: bytes) -> None:
        """Append all of ``data`` or, if the file system fails, none of it.

        Full buffers are written out in whole chunks; with a bound, reaching it writes out
        everything and forces (fdatasync) before the write is accepted.
        """
        if self._closed:
            raise FsClosed(self._handle.path)
        size = len(data)
        assert size > 0, "empty write"
        bound = self._bound_bytes
        force_now = bound > 0 and self._unpersisted_bytes + size >= bound
        if not force_now and len(self._buffer) + size < self._capacity_bytes:
            # Fast path (every add but one per buffer): the buffer does not fill up, so no
            # I/O and nothing can fail.
            self._buffer += data
            self._position += size
            if bound > 0:
                self._unpersisted_bytes += size
            return
        # The buffer is never full (check_invariants), so what goes out now is the whole
        # buffer and a prefix of ``data``: one copy into the bytes written, none of the rest.
        buffered = len(self._buffer)
        out_bytes = _bytes_to_write_out(buffered + size, self._capacity_bytes, force_now)
        assert buffered <= out_bytes <= buffered + size, (buffered, out_bytes, size)
        cut = out_bytes - buffered
        view = memoryview(data)
        if out_bytes > 0:
            self._handle.pwrite(self._flushed_position, b"".join((self._buffer, view[:cut])))
        if force_now:
            self._handle.fdatasync()
        # The file system accepted the write: commit.
        self._buffer = bytearray(view[cut:])
        self._flushed_position += out_bytes
        self._position += size
        if force_now:
            self._durable_position = self._flushed_position
            self._unpersisted_bytes = len(self._buffer)
        elif bound > 0:
            self._unpersisted_bytes += size
        assert self._position == self._flushed_position + len(self._buffer)

    def flush(self) -> None:
        """Write the buffer to the file (no fsync). On failure nothing changes."""
        self._require_open()
        if not self._buffer:
            return
        self._handle.pwrite(self._flushed_position, bytes(self._buffer))
        self._flushed_position += len(self._buffer)
        self._buffer.clear()
        assert self._flushed_position == self._position

    def force(self, force_metadata: bool) -> int:
        """fsync (``force_metadata``) or fdatasync what was flushed; return the position made
        durable (BufferedChannel.forceWrite: bytes flushed later may or may not be)."""
        self._require_open()
        durable = self._flushed_position
        if force_metadata:
            self._handle.fsync()
        else:
            self._handle.fdatasync()
        self._durable_position = durable
        if self._bound_bytes > 0:
            self._unpersisted_bytes = len(self._buffer)
        return durable

    def flush_and_force(self, force_metadata: bool = False) -> int:
        """flush then force (flushAndForceWrite); return the durable position."""
        self.flush()
        durable = self.force(force_metadata)
        assert durable == self._position, (durable, self._position)
        return durable

    def write_in_place(self, offset: int, data: bytes) -> None:
        """Overwrite already flushed bytes directly in the file (the ledgers-map location in
        the header: ``fileChannel.write(mapInfo, LEDGERS_MAP_OFFSET_POSITION)``)."""
        self._require_open()
        assert offset >= 0, offset
        assert offset + len(data) <= self._flushed_position, (offset, self._flushed_position)
        self._handle.pwrite(offset, data)

    # --- reading -----------------------------------------------------------------------

    def size(self) -> int:
        """The logical size: flushed plus buffered bytes."""
        self._require_open()
        return self._position

    def pread(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset``, from the file below the flushed position and
        from the buffer above it; shorter only at the logical end (or if the file was cut
        under us)."""
        self._require_open()
        assert offset >= 0, offset
        assert length >= 0, length
        end = min(offset + length, self._position)
        if offset >= end:
            return b""
        out = bytearray()
        if offset < self._flushed_position:
            file_end = min(end, self._flushed_position)
            chunk = self._handle.pread(offset, file_end - offset)
            out += chunk
            if len(chunk) < file_end - offset:
                return bytes(out)
        if end > self._flushed_position:
            low = max(offset, self._flushed_position) - self._flushed_position
            out += self._buffer[low : end - self._flushed_position]
        assert len(out) == end - offset
        return bytes(out)

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Release the file handle. Buffered bytes are dropped, as in Java: flush first."""
        if self._closed:
            return
        self._closed = True
        self._handle.close()

    def check_invariants(self) -> None:
        """Assert every internal relation of the channel."""
        assert self._capacity_bytes > 0
        assert self._bound_bytes >= 0
        assert self._durable_position >= 0
        assert self._durable_position <= self._flushed_position
        assert self._flushed_position <= self._position
        assert self._position == self._flushed_position + len(self._buffer)
        # A full buffer is always written out at once (copyIntoWriteBuffer).
        assert len(self._buffer) < self._capacity_bytes
        if self._bound_bytes == 0:
            assert self._unpersisted_bytes == 0
        else:
            assert len(self._buffer) <= self._unpersisted_bytes
            assert self._unpersisted_bytes < self._bound_bytes
            assert self._unpersisted_bytes == self._position - self._durable_position

    def _require_open(self) -> None:
        if self._closed:
            raise FsClosed(self._handle.path)


def _bytes_to_write_out(pending_bytes: int, capacity_bytes: int, everything: bool) -> int:
    """How many of the pending bytes go to the file now: all of them, or the whole
    buffer-sized chunks (Java flushes each time the buffer becomes full)."""
    assert pending_bytes >= 0
    assert capacity_bytes > 0
    if everything:
        return pending_bytes
    return pending_bytes - pending_bytes % capacity_bytes
