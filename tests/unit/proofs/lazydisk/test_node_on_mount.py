"""A Node.js program on the lazy disk: the calls a JavaScript bookie makes (fs.openSync 'a',
writeSync, fdatasyncSync, fsync of a directory opened 'r', writeFileSync + renameSync) reach
the simulated disk, and a power loss keeps exactly what was made durable."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from proofs.lazydisk.mount import LazyDisk
from spec.crash import KeepAll, LoseUnsynced

SCRIPT = r"""
const fs = require('fs');
const d = process.argv[1];
fs.mkdirSync(d + '/data');
const fd = fs.openSync(d + '/data/log', 'a');
fs.writeSync(fd, Buffer.from('record-1\n'));
fs.fdatasyncSync(fd);
for (const dir of [d + '/data', d]) {
  const dirFd = fs.openSync(dir, 'r');
  fs.fsyncSync(dirFd);
  fs.closeSync(dirFd);
}
fs.writeSync(fd, Buffer.from('record-2, never fsynced\n'));
fs.writeFileSync(d + '/data/tmp', 'x');
fs.renameSync(d + '/data/tmp', d + '/data/final');
console.log(fs.readdirSync(d + '/data').join(','), fs.statSync(d + '/data/log').size);
"""


@pytest.mark.parametrize("lose", [True, False], ids=["lose-unsynced", "keep-all"])
def test_a_node_program_meets_the_crash_plan(lazy: LazyDisk, lose: bool) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    done = subprocess.run(
        [node, "-e", SCRIPT, lazy.mountpoint], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["final,log", str(len("record-1\nrecord-2, never fsynced\n"))]
    lazy.power_loss(LoseUnsynced() if lose else KeepAll())
    data = os.path.join(lazy.mountpoint, "data")
    with open(os.path.join(data, "log"), "rb") as log:
        content = log.read()
    if lose:
        assert sorted(os.listdir(data)) == ["log"]
        assert content == b"record-1\n"
    else:
        assert sorted(os.listdir(data)) == ["final", "log"]
        assert content == b"record-1\nrecord-2, never fsynced\n"
