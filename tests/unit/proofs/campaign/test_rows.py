"""The datasets' schemas (proofs/campaign/rows.py) are the rows' fields, and the tables of
docs/campaign.md are the schemas."""

from __future__ import annotations

import attrs

from proofs.campaign.rows import ROW_FIELDS, TRACE_FIELDS, markdown_table
from proofs.campaign.scenario import ScenarioRow
from proofs.campaign.traces import judge_file
from tests.paths import ROOT


def test_the_scenario_schema_is_the_row_s_fields_in_order() -> None:
    assert [f.name for f in ROW_FIELDS] == [f.name for f in attrs.fields(ScenarioRow)]


def test_the_trace_schema_is_what_a_trace_row_holds(tmp_path: object) -> None:
    row = judge_file((str(ROOT / "docs" / "examples" / "trace.jsonl"), "trace.jsonl"))
    assert list(row) == [f.name for f in TRACE_FIELDS]
    assert row["verdict"] == "pass"


def _documented(tag: str) -> str:
    text = (ROOT / "docs" / "campaign.md").read_text(encoding="utf-8")
    start = text.index(f"<!-- rows:{tag} -->\n") + len(f"<!-- rows:{tag} -->\n")
    return text[start : text.index(f"<!-- /rows:{tag} -->")].strip()


def test_the_guide_shows_the_schemas_as_they_are() -> None:
    assert _documented("scenarios") == markdown_table(ROW_FIELDS)
    assert _documented("traces") == markdown_table(TRACE_FIELDS)
