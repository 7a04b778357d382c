"""The ready line of a bookie, read as what it claims to support.

Spec pages: spec/adapter.md ("Start", "Capabilities"), docs/conformance.md ("The levels").

Why a parser of its own and a strict one: ``bkref conform`` holds a bookie to exactly what its
ready line says (every op it lists must work, every op it does not list must be refused with
``unsupported``; the state it names is compared with the model), so a claim the runner misread
would either excuse a bug or blame a bookie for a check it never asked for. A ready line that
cannot be read as one consistent claim is therefore not guessed at: it is a
:class:`CapabilityError` naming the field, and the runner stops with exit status 2 before any
scenario.

A version 1 ready line (``"version":1`` and only the limits) still works: it claims the core
ops only, no state, and either answer profile (results.Capabilities of version 1).
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from impl.config.keys import KEYS_BY_NAME
from proofs.conform.results import Capabilities
from spec.errors import BkrefError
from spec.profile import ANSWER_PROFILES, STATE_PROFILES
from spec.strict_json import STRICT_DECODER

#: The optional ops a bookie may claim (add, read, fence, delete and shutdown are required of
#: every bookie).
OPTIONAL_OPS = ("checkpoint", "gc", "inspect", "write_close")
#: The versions of spec/adapter.md this runner speaks.
VERSIONS = (1, 2)
#: The limits every ready line carries (spec/adapter.md "Start").
LIMIT_FIELDS = ("max_data_bytes", "max_key_bytes", "max_line_bytes")
#: The fields of a version 2 ready line besides version 1's; ``format`` may be absent.
V2_REQUIRED = ("bookie", "ops", "state", "answers")
V2_FIELDS = (*V2_REQUIRED, "format", "config")


class CapabilityError(BkrefError):
    """A ready line that is not a consistent claim: the message names the field, says what
    it holds and what spec/adapter.md wants there."""


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_ready(line: bytes) -> Capabilities:
    """What the ready line ``line`` (one line of the bookie's stdout) claims. Raises
    CapabilityError when it is not a ready line of version 1 or 2, or a field is malformed
    or contradicts another."""
    document = _document(line)
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in VERSIONS:
        raise CapabilityError(
            f"ready line: field 'version' is {_describe(version)}; this runner speaks "
            f"version 1 or 2 of spec/adapter.md"
        )
    for name in LIMIT_FIELDS:
        value = document.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise CapabilityError(
                f"ready line: field {name!r} is {_describe(value)}; it must be a positive "
                "integer (spec/adapter.md, Start)"
            )
    if version == 1:
        extra = [name for name in V2_FIELDS if name in document]
        if extra:
            raise CapabilityError(
                f"ready line: field {extra[0]!r} is a version 2 field in a version 1 ready "
                'line; send "version":2 to claim capabilities'
            )
        return Capabilities(version=1, ops=frozenset(), state="none", answers="either")
    return _v2(document)


def _document(line: bytes) -> dict[str, Any]:
    text = line.rstrip(b"\n").rstrip(b"\r")
    try:
        document = STRICT_DECODER.decode(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CapabilityError(
            f"the first line on standard output is not JSON: {text[:80]!r}; a bookie's first "
            "line must be its ready line (spec/adapter.md, Start), and logs go to stderr"
        ) from None
    if not isinstance(document, dict):
        raise CapabilityError(f"the ready line is not a JSON object: {text[:80]!r}")
    for name, wanted in (("id", None), ("ok", True), ("event", "ready")):
        value = document.get(name, "<absent>")
        if not (value is wanted if wanted is None or wanted is True else value == wanted):
            raise CapabilityError(
                f"ready line: field {name!r} is {_describe(value)}; "
                f"a ready line has {name} {wanted!r} (spec/adapter.md, Start)"
            )
    return document


def _v2(document: dict[str, Any]) -> Capabilities:
    for name in V2_REQUIRED:
        if name not in document:
            raise CapabilityError(
                f"ready line: field {name!r} is missing; version 2 requires "
                f"{', '.join(V2_REQUIRED)} (spec/adapter.md, Capabilities)"
            )
    bookie = document["bookie"]
    if not isinstance(bookie, str):
        raise CapabilityError(f"ready line: field 'bookie' is {_describe(bookie)}; give a string")
    ops = document["ops"]
    if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
        raise CapabilityError(
            f"ready line: field 'ops' is {_describe(ops)}; give a list of op names from "
            f"{', '.join(OPTIONAL_OPS)}"
        )
    for op in ops:
        if op not in OPTIONAL_OPS:
            raise CapabilityError(
                f"ready line: field 'ops' names {op!r}, which is not an optional op; list only "
                f"{', '.join(OPTIONAL_OPS)} (add, read, fence, delete, shutdown are required)"
            )
    if len(set(ops)) != len(ops):
        raise CapabilityError(f"ready line: field 'ops' names an op twice: {_describe(ops)}")
    state = document["state"]
    if not isinstance(state, str) or state not in STATE_PROFILES:
        raise CapabilityError(
            f"ready line: field 'state' is {_describe(state)}; give one of "
            f"{', '.join(STATE_PROFILES)}"
        )
    if state != "none" and "inspect" not in ops:
        raise CapabilityError(
            f"ready line: field 'state' is {state!r} but 'ops' does not list inspect; "
            "a state is given through inspect (or say state none)"
        )
    answers = document["answers"]
    if not isinstance(answers, str) or answers not in ANSWER_PROFILES:
        raise CapabilityError(
            f"ready line: field 'answers' is {_describe(answers)}; give one of "
            f"{', '.join(ANSWER_PROFILES)}"
        )
    journal_dirs, ledger_dirs = _format(document.get("format"))
    config = _config(document.get("config"))
    return Capabilities(
        version=2,
        ops=frozenset(ops),
        state=state,
        answers=answers,
        journal_dirs=journal_dirs,
        ledger_dirs=ledger_dirs,
        bookie=bookie,
        config=config,
    )


def _config(value: object) -> tuple[tuple[str, str], ...]:
    """The ``config`` field: the configuration keys the model judges the bookie with (the
    entry-log manager, logSizeLimit, the GC thresholds, ...), by the names of
    impl/config/keys.py, each value a string as in a ``bk_server.conf``."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise CapabilityError(
            f"ready line: field 'config' is {_describe(value)}; give an object of key names "
            'and string values, as in a bk_server.conf: {"logSizeLimit": "1400", ...}'
        )
    for key in value:
        if key not in KEYS_BY_NAME:
            close = difflib.get_close_matches(key, KEYS_BY_NAME, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CapabilityError(
                f"ready line: field 'config' names {key!r}, which is no configuration key "
                f"bkref knows{hint}; `bkref config` lists them"
            )
    return tuple(sorted(value.items()))


def _format(value: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if value is None:
        return (), ()
    if not isinstance(value, dict):
        raise CapabilityError(
            f"ready line: field 'format' is {_describe(value)}; give an object "
            '{"journal_dirs": [...], "ledger_dirs": [...]} or leave it out'
        )
    unknown = sorted(set(value) - {"journal_dirs", "ledger_dirs"})
    if unknown:
        raise CapabilityError(
            f"ready line: field 'format.{unknown[0]}' is not known; format has journal_dirs "
            "and ledger_dirs"
        )
    found: list[tuple[str, ...]] = []
    for name in ("journal_dirs", "ledger_dirs"):
        dirs = value.get(name)
        if (
            not isinstance(dirs, list)
            or not dirs
            or not all(isinstance(d, str) and d and os.path.isabs(d) for d in dirs)
        ):
            raise CapabilityError(
                f"ready line: field 'format.{name}' is {_describe(dirs)}; give a non-empty "
                "list of absolute directory paths"
            )
        found.append(tuple(dirs))
    return found[0], found[1]
