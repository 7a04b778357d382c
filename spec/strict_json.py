"""Strict JSON for the line protocols (spec/adapter.md requests, spec/trace.md lines).

Both pages refuse what Python's json module lets through: an object with a key twice (the
later value would silently win) and the constants NaN, Infinity and -Infinity (not JSON,
RFC 8259). The decoder raises StrictJsonError, a ValueError, as json itself does for other
bad input, so a caller catches one exception type and wraps it in its own error.
"""

from __future__ import annotations

import json


class StrictJsonError(ValueError):
    """The text is JSON to Python but not to the protocol: a key twice, or a constant."""


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise StrictJsonError(
                    f"the field {key!r} appears more than once in one object; keep one"
                )
            seen.add(key)
    return document


def _no_constant(name: str) -> object:
    raise StrictJsonError(f"{name} is not JSON")


#: Stateless, so one is shared by every thread.
STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)


def describe(value: object) -> str:
    """``value`` and its JSON type, short enough for a message."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    text = json.dumps(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({names.get(type(value), type(value).__name__)})"
