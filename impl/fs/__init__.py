"""The FileSystem seam: the only way the engine touches durable storage."""

from impl.fs.api import DiskSpace, FileHandle, FileSystem, join, parent, split

__all__ = ["DiskSpace", "FileHandle", "FileSystem", "join", "parent", "split"]
