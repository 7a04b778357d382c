"""Strict JSON for the line protocols (spec/adapter.md requests, spec/trace.md lines).

Both pages refuse what Python's json module lets through: an object with a key twice (the
later value would silently win) and the constants NaN, Infinity and -Infinity (not JSON,
RFC 8259). The decoder raises StrictJsonError, a ValueError, as json itself does for other
bad input, so a caller catches one exception type and wraps it in its own error.

Numbers too large for the protocols are JSON all the same: an integer of more digits than
Python converts (4300 by default, sys.get_int_max_str_digits) made json raise a ValueError
of Python's own wording for the whole line, so a request whose id was readable was answered
with id null (issue 10). The decoder keeps such a number as a :class:`HugeNumber` (its
text's length and sign), and a field that wants an integer refuses it by name; a number that
does not fit a float (``1e999``) becomes one too rather than an infinity.
"""

from __future__ import annotations

import json
import math

import attrs

#: Longer integer texts are kept as HugeNumber: every int64 is at most 20 characters.
INT_TEXT_MAX = 25


@attrs.frozen
class HugeNumber:
    """A JSON number too large for any field of the protocols, kept by its size only."""

    text_length: int
    #: The number's text when short (``1e999``), else its first characters.
    head: str

    def describe(self) -> str:
        if self.text_length <= INT_TEXT_MAX:
            return f"{self.head} (a number too large for any field)"
        return f"a number of {self.text_length} characters ({self.head}...)"


def _huge(text: str) -> HugeNumber:
    return HugeNumber(len(text), text[:INT_TEXT_MAX] if len(text) > INT_TEXT_MAX else text)


def _parse_int(text: str) -> int | HugeNumber:
    if len(text) > INT_TEXT_MAX:
        return _huge(text)
    return int(text)


def _parse_float(text: str) -> float | HugeNumber:
    value = float(text)
    if math.isinf(value):
        return _huge(text)
    return value


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
STRICT_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicate_keys,
    parse_constant=_no_constant,
    parse_int=_parse_int,
    parse_float=_parse_float,
)


def describe(value: object) -> str:
    """``value`` and its JSON type, short enough for a message."""
    if value is None:
        return "null"
    if isinstance(value, HugeNumber):
        return value.describe()
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    text = json.dumps(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({names.get(type(value), type(value).__name__)})"
