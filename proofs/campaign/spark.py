"""Everything bkref does with Spark, and the only module that imports pyspark (docs/design.md,
"Architecture and layering": nothing else pays Spark's start-up or needs a JVM).

Spec pages: docs/campaign.md (the guide: masters, the dataset, running on a cluster).

Why it is shaped so:

- **Start-up.** Java is checked before a JVM is started (:func:`java_problem`: a missing or
  too old Java is a :class:`SparkUnavailable` that says what to install), and the JVM that
  PySpark starts gets a file for its standard output and error (``spark.log`` in the output
  directory) and a log4j configuration that writes there, so Spark's own log lines, its
  console progress bar and its warnings never reach the user's terminal; the file's last
  lines are shown when Spark fails. On a local master Spark binds to 127.0.0.1.
- **Work.** A pass is one job: the scenario specs are split into tasks of a few scenarios
  each (:func:`scenarios_per_task`: small enough that the terminal's progress moves and the
  cores stay busy to the end, large enough that Spark's per-task cost stays small); each
  task runs its scenarios in a Python worker (proofs/campaign/scenario.py, or
  proofs/campaign/external.py for a bookie behind an adapter) and yields rows, which Spark
  writes as Parquet straight from the executors (``scenarios/`` in the output directory, the
  schema proofs/campaign/rows.py). A Python accumulator adds up each finished task's counts,
  which the driver polls for the progress line while the job runs.
- **Aggregation.** The summary is computed by Spark SQL over the dataset
  (:func:`aggregate_pass`), never by collecting rows to the driver: only the counts and the
  failing rows (at most FAILURES_KEPT) come back. The same aggregates are computed in plain
  Python by proofs/campaign/summary.py, and a test holds the two equal.
- **Traces.** ``bkref check-traces`` lists the files on the driver and lets each task read
  and judge its own (a shared file system on a cluster), so an unreadable or malformed file
  is a row with an ``error`` verdict, never a failed job.

Not built: shipping bkref's code to a cluster's workers (each worker's Python must have the
same bkref installed; every row records the commit that ran it and the driver refuses rows
from another commit), dynamic allocation settings, and Spark Connect.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyspark import AccumulatorParam, SparkConf, SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from proofs.campaign.errors import SparkUnavailable
from proofs.campaign.rows import ROW_FIELDS, TRACE_FIELDS, Field
from proofs.campaign.summary import (
    FAILURES_KEPT,
    SUMMED,
    Aggregates,
    Totals,
)

#: The oldest Java Spark 4 runs on.
JAVA_MIN = 17
#: The log4j configuration of the driver JVM: warnings and errors only, to its standard
#: error (which is spark.log).
LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""
#: How often the driver redraws the progress line while a job runs.
POLL_SECONDS = 0.5
#: The log file of the JVM this process started (PySpark starts one JVM per process and
#: every later session reuses it, with its log).
_JVM_LOG: str | None = None


# --- start-up -----------------------------------------------------------------------------


def java_command() -> str | None:
    """The java Spark will run: $JAVA_HOME/bin/java when JAVA_HOME is set, else the one on
    PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def java_major(version_output: str) -> int | None:
    """The major version in ``java -version``'s output (8 for "1.8.0_392", 17 for
    "17.0.15"), or None."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if found is None:
        return None
    major = int(found.group(1))
    if major == 1 and found.group(2) is not None:
        return int(found.group(2))
    return major


_INSTALL_JAVA = (
    "install Java 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set "
    "JAVA_HOME to one"
)


def java_problem() -> str | None:
    """Why Spark cannot start on this machine's Java, or None."""
    java = java_command()
    where = "JAVA_HOME" if os.environ.get("JAVA_HOME") else "PATH"
    if java is None:
        return f"no java on PATH: Spark needs a JVM; {_INSTALL_JAVA}"
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"cannot run {java} (from {where}): {exc.strerror or exc}; {_INSTALL_JAVA}"
    except subprocess.TimeoutExpired:
        return f"{java} -version did not answer in 60 s"
    major = java_major(done.stderr + done.stdout)
    if major is None:
        return f"{java} (from {where}) did not say its version; {_INSTALL_JAVA}"
    if major < JAVA_MIN:
        return f"{java} (from {where}) is Java {major}; Spark 4 needs {JAVA_MIN}+; {_INSTALL_JAVA}"
    return None


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            return "".join(log.readlines()[-lines:])
    except OSError:
        return ""


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


@contextlib.contextmanager
def session(master: str, log_dir: str, *, app_name: str = "bkref") -> Iterator[SparkSession]:
    """A Spark session on ``master`` whose JVM writes to ``log_dir``/spark.log; stopped on
    leaving. When this process already runs a SparkContext on ``master`` (a notebook's, a
    test's), that one is used and left running. Raises SparkUnavailable (Java missing or too
    old, Spark failing to start, another master already running here)."""
    active = SparkContext._active_spark_context
    if active is not None:
        # One SparkContext per process: a caller's own (a notebook, a test) is used as it is.
        if active.master != master:
            raise SparkUnavailable(
                f"this process already runs Spark on {active.master}; cannot start {master}"
            )
        yield SparkSession(active)
        return
    problem = java_problem()
    if problem is not None:
        raise SparkUnavailable(problem)
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, "spark.log")
    log4j = os.path.join(log_dir, "log4j2.properties")
    with open(log4j, "w", encoding="utf-8") as out:
        out.write(LOG4J)
    conf = SparkConf().setMaster(master).setAppName(app_name)
    for key, value in _conf(master, log4j).items():
        conf.set(key, value)
    if is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    launch_env = _worker_path(master)
    from pyspark.java_gateway import launch_gateway

    global _JVM_LOG
    with open(log_path, "ab") as log:
        try:
            gateway = None
            if SparkContext._gateway is None:  # a JVM per process: PySpark keeps the first
                with _environment(launch_env):
                    gateway = launch_gateway(  # type: ignore[no-untyped-call]
                        conf, popen_kwargs={"stdout": log, "stderr": log}
                    )
                _JVM_LOG = log_path
            else:
                log.write(f"(Spark's JVM is this process's first; its log: {_JVM_LOG})\n".encode())
            context = SparkContext(conf=conf, gateway=gateway)
        except Exception as exc:
            raise SparkUnavailable(
                f"Spark did not start on {master}: {_first_line(exc)}\n"
                f"the last lines of {_JVM_LOG or log_path}:\n{_tail(_JVM_LOG or log_path)}"
            ) from None
    spark = SparkSession(context)
    try:
        yield spark
    finally:
        with contextlib.suppress(Exception):
            spark.stop()


def _worker_path(master: str) -> dict[str, str]:
    """The environment a local master's JVM is started with: PYTHONPATH holding the driver's
    import path, so the Python workers it starts import what the driver imports (a
    ``--variant`` from a directory on the driver's path, a test's modules). A cluster's
    executors are other machines: what they import is their own installation's."""
    if not is_local(master):
        return {}
    entries = [p for p in sys.path if p and os.path.isdir(p)]
    entries += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(entries))}


@contextlib.contextmanager
def _environment(changes: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _conf(master: str, log4j: str) -> dict[str, str]:
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONHASHSEED": "0",
        # The aggregations shuffle a few thousand rows at most: 200 partitions is Spark's
        # default for big data, and costs seconds here.
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.session.timeZone": "UTC",
        **({"spark.driver.host": "127.0.0.1"} if is_local(master) else {}),
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def cores(spark: SparkSession) -> int:
    """The parallel task slots Spark offers."""
    return int(spark.sparkContext.defaultParallelism)


# --- schemas ------------------------------------------------------------------------------

_TYPES: Mapping[str, Any] = {
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
    "map<string,bigint>": T.MapType(T.StringType(), T.LongType(), valueContainsNull=False),
}


def schema_of(fields: Sequence[Field]) -> T.StructType:
    """The Spark schema of a table of proofs/campaign/rows.py."""
    return T.StructType([T.StructField(f.name, _TYPES[f.type], f.nullable) for f in fields])


# --- running a pass -----------------------------------------------------------------------


class _Sums(AccumulatorParam[tuple[int, ...]]):
    """Adds up (scenarios, failed, errors, steps, crash states) over finished tasks."""

    def zero(self, value: tuple[int, ...]) -> tuple[int, ...]:
        return (0,) * len(value)

    def addInPlace(self, first: tuple[int, ...], second: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(a + b for a, b in zip(first, second, strict=True))


#: What a task runs: one item (a scenario spec, a trace path) in, one row record out.
RowFunction = Callable[[Any], Mapping[str, Any]]


def _task(function: RowFunction, names: tuple[str, ...], sums: Any) -> Callable[..., Any]:
    """The function each task applies to its items: rows out, counts into ``sums``."""

    def run(items: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        done = [0, 0, 0, 0, 0]
        for item in items:
            record = function(item)
            done[0] += 1
            done[1] += record.get("verdict") == "fail"
            done[2] += record.get("verdict") == "error"
            done[3] += int(record.get("steps", 0))
            done[4] += int(record.get("crash_states", 0))
            yield tuple(record[name] for name in names)
        sums.add(tuple(done))

    return run


def scenarios_per_task(items: int, slots: int) -> int:
    """Items per task: about sixteen tasks per slot, between 1 and 64 items each."""
    if items <= 0:
        return 1
    return max(1, min(64, items // max(1, slots * 16)))


Progress = Callable[[tuple[int, ...]], None]


def run_job(
    spark: SparkSession,
    items: Sequence[Any],
    function: RowFunction,
    fields: Sequence[Field],
    path: str,
    progress: Progress | None = None,
) -> None:
    """Apply ``function`` to every item on the cluster and append the rows to the Parquet
    dataset at ``path``, calling ``progress`` with the counts so far every POLL_SECONDS.
    Raises SparkUnavailable when the job fails (a task raised: its Python error is in the
    message)."""
    context = spark.sparkContext
    sums = context.accumulator((0, 0, 0, 0, 0), _Sums())
    slots = cores(spark)
    per_task = scenarios_per_task(len(items), slots)
    tasks = max(1, -(-len(items) // per_task))
    names = tuple(f.name for f in fields)
    rdd = context.parallelize(list(items), tasks).mapPartitions(_task(function, names, sums))
    frame = spark.createDataFrame(rdd, schema_of(fields), verifySchema=False)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            frame.write.mode("append").parquet(path)
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=write, name="bkref-spark-job", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_SECONDS)
            if progress is not None:
                progress(sums.value)
    except KeyboardInterrupt:
        context.cancelAllJobs()
        worker.join(30)
        raise
    if failure:
        raise SparkUnavailable(f"the Spark job failed: {_job_error(failure[0])}")
    if progress is not None:
        progress(sums.value)


def _job_error(exc: BaseException) -> str:
    """The Python error a failed task raised (the last line of the worker's traceback,
    ``module.Error: message``) when the Java exception carries one, else its first line."""
    text = str(exc)
    if "Traceback (most recent call last):" in text:
        tail = text.rsplit("Traceback (most recent call last):", 1)[1]
        raised = [
            line for line in tail.splitlines() if re.match(r"^[\w.]+(Error|Exception)\b", line)
        ]
        if raised:
            return raised[-1]
    return _first_line(exc)


# --- aggregation --------------------------------------------------------------------------


def read(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.parquet(path)


def aggregate_pass(frame: DataFrame, *, start: float, bucket_seconds: float) -> Aggregates:
    """The Aggregates of the rows in ``frame`` (the scenarios dataset, filtered), computed
    by Spark (proofs/campaign/summary.py aggregate computes the same in Python)."""
    sums = [F.coalesce(F.sum(name), F.lit(0)).alias(name) for name in SUMMED]
    verdict = F.col("verdict")
    head = frame.agg(
        F.count(F.lit(1)).alias("scenarios"),
        F.coalesce(F.sum(F.when(verdict == "pass", 1).otherwise(0)), F.lit(0)).alias("passed"),
        F.coalesce(F.sum(F.when(verdict == "fail", 1).otherwise(0)), F.lit(0)).alias("failed"),
        F.coalesce(F.sum(F.when(verdict == "error", 1).otherwise(0)), F.lit(0)).alias("errors"),
        F.coalesce(F.sum("seconds"), F.lit(0.0)).alias("seconds"),
        F.coalesce(F.sum("shrink_seconds"), F.lit(0.0)).alias("shrink_seconds"),
        *sums,
    ).collect()[0]
    totals = Totals(
        scenarios=int(head["scenarios"]),
        passed=int(head["passed"]),
        failed=int(head["failed"]),
        errors=int(head["errors"]),
        seconds=float(head["seconds"]),
        shrink_seconds=float(head["shrink_seconds"]),
        **{name: int(head[name]) for name in SUMMED},
    )
    finished = F.col("started_at") + F.col("seconds") + F.col("shrink_seconds")
    bucket = F.greatest(F.lit(0), F.floor((finished - F.lit(start)) / F.lit(bucket_seconds)))
    timeline = {
        int(row["bucket"]): (int(row["n"]), int(row["steps"]), int(row["crash_states"]))
        for row in frame.groupBy(bucket.alias("bucket"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("steps").alias("steps"),
            F.sum("crash_states").alias("crash_states"),
        )
        .collect()
    }
    failing = (
        frame.where(verdict != "pass")
        .orderBy("pass_number", "index")
        .limit(FAILURES_KEPT)
        .collect()
    )
    commits = tuple(sorted(row["commit"] for row in frame.select("commit").distinct().collect()))
    return Aggregates(
        totals=totals,
        probes=_summed_map(frame, "probes"),
        cells=_summed_map(frame, "coverage"),
        promises=_summed_map(frame, "promises"),
        timeline=timeline,
        failures=tuple(row.asDict(recursive=True) for row in failing),
        commits=commits,
        workers=tuple(sorted(r["worker"] for r in frame.select("worker").distinct().collect())),
    )


def _summed_map(frame: DataFrame, column: str) -> dict[str, int]:
    exploded = frame.select(F.explode(column).alias("key", "value"))
    totals = exploded.groupBy("key").agg(F.sum("value").alias("total")).collect()
    return {row["key"]: int(row["total"]) for row in totals}


def where_pass(frame: DataFrame, number: int) -> DataFrame:
    return frame.where(F.col("pass_number") == number)


def trace_rows(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """Every row of a check-traces dataset (one per trace: small), ordered by path."""
    return [row.asDict() for row in read(spark, path).orderBy("path").collect()]


__all__ = [
    "JAVA_MIN",
    "ROW_FIELDS",
    "TRACE_FIELDS",
    "SparkUnavailable",
    "aggregate_pass",
    "cores",
    "java_problem",
    "read",
    "run_job",
    "session",
    "trace_rows",
    "where_pass",
]
