"""The schemas of the campaign's datasets, in plain Python: one row per scenario (``bkref
campaign``) and one per trace (``bkref check-traces``). proofs/campaign/spark.py turns them
into Spark types; docs/campaign.md ("Rows") is generated from the same tables and checked
against them by tests/unit/test_design_docs.py-style tests in tests/unit/proofs/campaign/.

Why plain Python: only one module may import pyspark (docs/design.md, "Architecture and
layering"), and the schema is also what the Python aggregation, the report and the docs
read.

Types are Spark SQL's names: ``int`` (32 bits), ``bigint`` (64), ``double``, ``string``,
``boolean`` and ``map<string,bigint>``. Every field may be null only where it says so.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Field:
    name: str
    type: str
    nullable: bool
    doc: str


def _f(name: str, kind: str, doc: str, *, null: bool = False) -> Field:
    return Field(name, kind, null, doc)


#: One row per scenario of ``bkref campaign`` (proofs.campaign.scenario.ScenarioRow, in its
#: field order).
ROW_FIELDS: tuple[Field, ...] = (
    _f("pass_number", "int", "1 for the first pass, 2 for the steered second pass"),
    _f("seed", "bigint", "the campaign's seed"),
    _f("index", "bigint", "the scenario's index: (seed, index) and the options replay it"),
    _f("steps_asked", "int", "the steps the scenario ran to (--steps)"),
    _f("rules", "int", "workload rules drawn (each runs one or more steps)"),
    _f("focus", "string", "what the scenario favoured (second pass), empty for none"),
    _f("variant", "string", "MODULE:NAME of the Bookie variant checked, empty for bkref's"),
    _f("bookie", "string", "the bookie checked: in-process, or the adapter command"),
    _f("steps", "int", "trace steps run and judged (operations, reads after restarts too)"),
    _f("crashes", "int", "crashes injected (kill -9, power losses)"),
    _f("crash_states", "int", "crash states recovered and judged (crashes + shadow crashes)"),
    _f("restarts", "int", "restarts (each a recovery judged)"),
    _f("adds_acked", "int", "acknowledged adds, each held to durability from then on"),
    _f("reads", "int", "reads judged"),
    _f("verdict", "string", "pass, fail (the bookie is wrong) or error (the checker broke)"),
    _f("failure_kind", "string", "refinement, between_rules, exception, record, ...", null=True),
    _f("message", "string", "why it failed, as its shrunk trace fails", null=True),
    _f("failing_step", "int", "the failing step of the shrunk trace", null=True),
    _f("trace", "string", "the shrunk failing trace, JSON lines (spec/trace.md)", null=True),
    _f("steps_before_shrink", "int", "steps of the failing run before shrinking", null=True),
    _f("message_before_shrink", "string", "why the run failed before shrinking", null=True),
    _f("coverage", "map<string,bigint>", "cells reached: operation/point/plan/fault -> count"),
    _f("probes", "map<string,bigint>", "situations recorded (probes) -> count"),
    _f(
        "promises",
        "map<string,bigint>",
        "promises observed, by the plan of the crash before: promise/plan -> count",
    ),
    _f("started_at", "double", "when the scenario started, seconds since the epoch"),
    _f("seconds", "double", "how long its run took"),
    _f("shrink_seconds", "double", "how long shrinking its failure took"),
    _f("worker", "string", "host:pid of the Python worker that ran it"),
    _f("commit", "string", "the code that ran it: git:<sha>[+dirty] or bkref <version>"),
    _f("replay", "string", "the command that runs it again, locally"),
)

#: One row per trace of ``bkref check-traces``.
TRACE_FIELDS: tuple[Field, ...] = (
    _f("path", "string", "the trace file, relative to the directory given"),
    _f("verdict", "string", "pass, fail (the model or a property refused a step) or error"),
    _f("message", "string", "why it failed, or why it could not be judged", null=True),
    _f("failing_step", "int", "the step the model or a property refused", null=True),
    _f("steps", "int", "steps in the trace (0 when it could not be read)"),
    _f("adds_acked", "int", "acknowledged adds in the trace"),
    _f("crashes", "int", "crash steps in the trace"),
    _f("source", "string", "the trace header's source (who recorded it)", null=True),
    _f("bytes", "bigint", "the file's size"),
    _f("seconds", "double", "how long reading and judging it took"),
    _f("worker", "string", "host:pid of the Python worker that judged it"),
    _f("commit", "string", "the code that judged it"),
)


def markdown_table(fields: tuple[Field, ...]) -> str:
    """The fields as the Markdown table docs/campaign.md shows."""
    lines = ["| column | type | null | meaning |", "| --- | --- | --- | --- |"]
    for field in fields:
        null = "yes" if field.nullable else "no"
        lines.append(f"| `{field.name}` | {field.type} | {null} | {field.doc} |")
    return "\n".join(lines)
