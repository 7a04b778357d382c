"""parse_ready: version 1 and 2 ready lines, and every malformed field named."""

from __future__ import annotations

import json

import pytest

from proofs.conform.capabilities import CapabilityError, parse_ready

V1 = {
    "id": None,
    "ok": True,
    "event": "ready",
    "version": 1,
    "max_data_bytes": 5242364,
    "max_key_bytes": 1024,
    "max_line_bytes": 41955304,
}
V2 = {
    **V1,
    "version": 2,
    "bookie": "bkref 0.1",
    "ops": ["checkpoint", "gc", "inspect"],
    "state": "full",
    "answers": "bkref",
    "format": {"journal_dirs": ["/abs/journal"], "ledger_dirs": ["/abs/ledgers"]},
}


def line(document: object) -> bytes:
    return json.dumps(document).encode() + b"\n"


def test_version_1_claims_the_core_only() -> None:
    caps = parse_ready(line(V1))
    assert (caps.version, caps.ops, caps.state, caps.answers) == (1, frozenset(), "none", "either")
    assert caps.levels == ("protocol",)


def test_version_2_claims_what_it_says() -> None:
    caps = parse_ready(line(V2))
    assert caps.version == 2
    assert caps.ops == frozenset({"checkpoint", "gc", "inspect"})
    assert (caps.state, caps.answers, caps.bookie) == ("full", "bkref", "bkref 0.1")
    assert caps.journal_dirs == ("/abs/journal",)
    assert caps.ledger_dirs == ("/abs/ledgers",)
    assert caps.levels == ("protocol", "structural", "format")


def test_a_ready_line_may_declare_the_configuration_the_model_judges_with() -> None:
    """spec/adapter.md, "Capabilities", ``config``: e.g. an entry log per ledger, so that a
    bookie claiming state full is judged by that manager's layout rules."""
    config = {"entryLogPerLedgerEnabled": "true", "logSizeLimit": "1400"}
    caps = parse_ready(line({**V2, "ops": [*V2["ops"], "write_close"], "config": config}))  # type: ignore[misc]
    assert caps.config == (("entryLogPerLedgerEnabled", "true"), ("logSizeLimit", "1400"))
    assert "write_close" in caps.ops
    assert parse_ready(line(V2)).config == ()


def test_version_2_without_format_or_state() -> None:
    document = {**V2, "ops": [], "state": "none", "answers": "either"}
    del document["format"]
    caps = parse_ready(line(document))
    assert caps.levels == ("protocol",)
    assert parse_ready(line({**document, "format": None})).ledger_dirs == ()


BAD: list[tuple[str, dict[str, object], str]] = [
    ("version", {**V2, "version": 3}, "'version'"),
    ("version type", {**V2, "version": "2"}, "'version'"),
    ("version bool", {**V2, "version": True}, "'version'"),
    ("limit", {**V2, "max_data_bytes": -1}, "'max_data_bytes'"),
    ("limit type", {**V2, "max_key_bytes": 1.5}, "'max_key_bytes'"),
    ("limit missing", {k: v for k, v in V2.items() if k != "max_line_bytes"}, "max_line_bytes"),
    ("event", {**V2, "event": "hello"}, "'event'"),
    ("ok", {**V2, "ok": 1}, "'ok'"),
    ("id", {**V2, "id": 0}, "'id'"),
    ("bookie missing", {k: v for k, v in V2.items() if k != "bookie"}, "'bookie'"),
    ("bookie type", {**V2, "bookie": 7}, "'bookie'"),
    ("ops type", {**V2, "ops": "gc"}, "'ops'"),
    ("ops unknown", {**V2, "ops": ["gc", "compact"]}, "'compact'"),
    ("ops required op", {**V2, "ops": ["add"]}, "'add'"),
    ("ops twice", {**V2, "ops": ["gc", "gc", "inspect"]}, "twice"),
    ("state unknown", {**V2, "state": "some"}, "'state'"),
    ("state without inspect", {**V2, "ops": ["gc"]}, "inspect"),
    ("answers unknown", {**V2, "answers": "mine"}, "'answers'"),
    ("answers type", {**V2, "answers": None}, "'answers'"),
    ("format type", {**V2, "format": []}, "'format'"),
    (
        "format field",
        {**V2, "format": {"journal_dirs": ["/a"], "ledger_dirs": ["/b"], "x": 1}},
        "format.x",
    ),
    (
        "format relative",
        {**V2, "format": {"journal_dirs": ["a"], "ledger_dirs": ["/b"]}},
        "format.journal_dirs",
    ),
    (
        "format empty",
        {**V2, "format": {"journal_dirs": ["/a"], "ledger_dirs": []}},
        "format.ledger_dirs",
    ),
    ("v2 field in v1", {**V1, "ops": []}, "'ops'"),
    ("config type", {**V2, "config": ["logSizeLimit=1400"]}, "'config'"),
    ("config value type", {**V2, "config": {"logSizeLimit": 1400}}, "'config'"),
    ("config unknown key", {**V2, "config": {"logSizeLimt": "1400"}}, "'logSizeLimit'"),
    ("config in v1", {**V1, "config": {}}, "'config'"),
    ("write_close twice", {**V2, "ops": ["write_close", "write_close"]}, "twice"),
]


@pytest.mark.parametrize(("document", "names"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_malformed_fields_are_named(document: dict[str, object], names: str) -> None:
    with pytest.raises(CapabilityError, match=names.replace(".", r"\.")):
        parse_ready(line(document))


@pytest.mark.parametrize("raw", [b"not json\n", b"[1]\n", b"\xff\n", b'{"id":null,"id":null}\n'])
def test_a_first_line_that_is_not_a_ready_object(raw: bytes) -> None:
    with pytest.raises(CapabilityError):
        parse_ready(raw)
