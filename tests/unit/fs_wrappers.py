"""A FileSystem (and a FileHandle) that forwards every call to another one, for tests that wrap
a file system to observe or fault a few operations: subclasses override just those."""

from __future__ import annotations

from impl.fs.api import DirLock, FileHandle, FileSystem
from spec.fs import DiskSpace


class ForwardingFs:
    """Every FileSystem operation goes to ``inner`` unchanged."""

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner

    def open(
        self, path: str, *, create: bool = False, exclusive: bool = False, read_only: bool = False
    ) -> FileHandle:
        return self.inner.open(path, create=create, exclusive=exclusive, read_only=read_only)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def mkdir(self, path: str) -> None:
        self.inner.mkdir(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        self.inner.link(src, dst)

    def unlink(self, path: str) -> None:
        self.inner.unlink(path)

    def fsync_dir(self, path: str) -> None:
        self.inner.fsync_dir(path)

    def disk_space(self, path: str) -> DiskSpace:
        return self.inner.disk_space(path)

    def lock_dir(self, path: str) -> DirLock:
        return self.inner.lock_dir(path)


class ForwardingHandle:
    """Every FileHandle operation goes to ``inner`` unchanged."""

    def __init__(self, inner: FileHandle) -> None:
        self.inner = inner

    @property
    def path(self) -> str:
        return self.inner.path

    def pwrite(self, offset: int, data: bytes) -> None:
        self.inner.pwrite(offset, data)

    def append(self, data: bytes) -> int:
        return self.inner.append(data)

    def pread(self, offset: int, length: int) -> bytes:
        return self.inner.pread(offset, length)

    def size(self) -> int:
        return self.inner.size()

    def truncate(self, length: int) -> None:
        self.inner.truncate(length)

    def fsync(self) -> None:
        self.inner.fsync()

    def fdatasync(self) -> None:
        self.inner.fdatasync()

    def close(self) -> None:
        self.inner.close()
