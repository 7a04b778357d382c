"""The lazy disk's cost: fsync'd small writes and bkref adapter adds, on the FUSE mount
(proofs/lazydisk) beside the same on a plain directory, in the same run.

Run: ``.venv/bin/python -m tests.bench.bench_lazydisk [--writes N] [--adds N]``.

- fsync'd writes: a loop of ``os.pwrite`` of 100 bytes then ``os.fdatasync`` on one file,
  writes/s; on a directory of the working directory's disk, on /dev/shm (a tmpfs), and on
  the mount with libfuse's
  single-threaded loop (the default) and its multi-threaded one.
- adapter: ``bkref adapter`` as a child (tests/bench/bench_bookie.py's ``through_adapter``),
  acknowledged adds/s of 1 KiB entries at 1 and 64 outstanding, on the disk and on the mount.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

from proofs.lazydisk.mount import LazyDisk, fuse_unavailable
from tests.bench.bench_bookie import through_adapter


def fsynced_writes(directory: str, writes: int) -> float:
    """pwrite(100 bytes) + fdatasync per iteration, iterations/s."""
    fd = os.open(os.path.join(directory, "f"), os.O_CREAT | os.O_RDWR | os.O_TRUNC)
    record = bytes(100)
    try:
        start = time.perf_counter()
        for index in range(writes):
            os.pwrite(fd, record, index * 100)
            os.fdatasync(fd)
        return writes / (time.perf_counter() - start)
    finally:
        os.close(fd)


def on_disk(run: Callable[[str], float], where: str = ".") -> float:
    with tempfile.TemporaryDirectory(dir=where) as root:
        return run(root)


#: A tmpfs, where fsync costs nothing: the mount's own overhead shows beside it.
TMPFS = "/dev/shm"


def on_mount(run: Callable[[str], float], *, threads: bool) -> float:
    with tempfile.TemporaryDirectory() as root, LazyDisk(root, threads=threads):
        return run(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=3000, help="fsync'd writes per run")
    parser.add_argument("--adds", type=int, default=3000, help="adds per run at 64 outstanding")
    args = parser.parse_args()
    reason = fuse_unavailable()
    if reason is not None:
        raise SystemExit(reason)

    def writes(root: str) -> float:
        return fsynced_writes(root, args.writes)

    disk = on_disk(writes)
    tmpfs = on_disk(writes, TMPFS) if os.path.isdir(TMPFS) else float("nan")
    single = on_mount(writes, threads=False)
    multi = on_mount(writes, threads=True)
    print(
        f"fsync'd 100-byte writes: disk {disk:8.0f}/s | tmpfs {tmpfs:8.0f}/s | mount "
        f"{single:8.0f}/s ({single / disk:.2f}x disk, {single / tmpfs:.2f}x tmpfs) | mount, "
        f"threaded loop {multi:8.0f}/s ({multi / disk:.2f}x disk)"
    )
    for outstanding in (1, 64):
        adds = args.adds if outstanding > 1 else max(200, args.adds // 10)

        def adapter(root: str, outstanding: int = outstanding, adds: int = adds) -> float:
            return through_adapter(root, outstanding, adds, 0)

        plain = on_disk(adapter)
        single = on_mount(adapter, threads=False)
        multi = on_mount(adapter, threads=True)
        print(
            f"adapter, {outstanding:>2} outstanding, {adds} adds of 1 KiB: disk {plain:7.0f}/s | "
            f"mount {single:7.0f}/s ({single / plain:.2f}x) | mount, threaded loop "
            f"{multi:7.0f}/s ({multi / plain:.2f}x)"
        )


if __name__ == "__main__":
    main()
