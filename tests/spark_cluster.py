"""A Spark standalone cluster on localhost, from the pyspark installation: a master and one
worker started with ``spark-class`` (the recipe of docs/campaign.md, "A real cluster"), for
the pipeline's cluster test and its benchmark. Both processes are stopped on leaving, and
their logs are kept in the directory given."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

#: How long the master and the worker may take to come up.
START_TIMEOUT_S = 120.0


def spark_home() -> Path:
    """The Spark installation inside the pyspark package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.frozen
class Cluster:
    url: str
    master_log: Path
    worker_log: Path


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise RuntimeError(f"the Spark {what} did not come up; its log ends:\n{tail}")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [str(spark_home() / "bin" / "spark-class"), *args]
    with open(log, "wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


@contextlib.contextmanager
def standalone(directory: Path, *, cores: int = 2, memory: str = "1g") -> Iterator[Cluster]:
    """A master and a worker of ``cores`` cores on 127.0.0.1, running until the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log, worker_log = directory / "master.log", directory / "worker.log"
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())),
        ],
        master_log,
        env,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(master_log, "I have been elected leader", master, "master")
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                *("--webui-port", str(free_port()), "--work-dir", str(directory / "work")),
            ],
            worker_log,
            env,
        )
        _wait_for(worker_log, "Successfully registered with master", worker, "worker")
        yield Cluster(url, master_log, worker_log)
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
