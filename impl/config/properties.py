"""Java ``.properties`` text as BookKeeper reads it: lines, escapes, list items, typed values.

Why: a real ``bk_server.conf`` must load in bkref exactly as it loads in BookKeeper, which
reads it with Apache Commons Configuration 2's PropertiesConfiguration and a ``,`` list
delimiter (AbstractConfiguration/ConfigurationUtil). This module is that reader and its
inverse, with no notion of which keys exist (impl/config/keys.py) or what they mean
(impl/config/config.py). User page: docs/configuration.md.

Reading, as Commons Configuration does it (PropertiesReader, DefaultListDelimiterHandler):
- lines end at ``\\n``, ``\\r\\n`` or ``\\r``; a line that is blank or whose first non-blank
  character is ``#`` or ``!`` is a comment, even in the middle of a continuation;
- each line is trimmed; a line ending in an odd number of backslashes continues on the next;
  a continuation still open at the end of the file is dropped (BookKeeper drops it too; the
  loader warns);
- ``key=value``, ``key: value`` and ``key value`` all work; key and value are trimmed;
- the value is unescaped (``\\t \\n \\r \\f \\b \\uXXXX``; ``\\`` before one of ``:#=!\\'"``
  gives that character; before anything else the backslash stays), then split at every ``,``
  not escaped as ``\\,`` and each item trimmed.

Typed values are read as Commons Configuration's PropertyConverter and BooleanUtils read them.

Pure: the caller reads the file and passes its text (proofs/cli/config.py).

Not verified / not supported: the quirk that BookKeeper re-splits ``\\,``-escaped commas when
it copies the file into its composite configuration.
"""

from __future__ import annotations

import re

import attrs

from spec.errors import ConfigError

#: A typed value, as Commons Configuration's getters return it for the types bkref reads.
Value = bool | int | float | str | tuple[str, ...]

#: Property keys Commons Configuration treats as "load this other file".
INCLUDE_KEYS = frozenset({"include", "includeoptional"})


# --- reading .properties text ----------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WS = "[ \\t\\n\\x0b\\f\\r]"
#: PropertiesReader.PROPERTY_PATTERN: key, optional separator, value.
_PROPERTY = re.compile(
    rf"((?:[^ \t\n\x0b\f\r\\=:]|\\.)*)({_WS}*(?:{_WS}+|[=:]){_WS}*)?(.*)", re.DOTALL
)
#: Characters whose escape PropertiesConfiguration.unescapeJava drops ("needsUnescape").
_UNESCAPE_CHARACTERS = ":#=!\\'\""
_SIMPLE_ESCAPES = {"r": "\r", "f": "\f", "t": "\t", "n": "\n", "b": "\b"}
_JAVA_TRIMMED = "".join(chr(code) for code in range(0x21))


@attrs.frozen
class PropertyLine:
    """One property read from the text: its key, its value split into items, its line."""

    key: str
    items: tuple[str, ...]
    line: int


@attrs.frozen
class PropertiesText:
    """The properties of a text, in order, and the line of a dropped unfinished property."""

    properties: tuple[PropertyLine, ...]
    dropped_line: int | None


def java_trim(text: str) -> str:
    """String.trim(): strip every character up to and including the space."""
    return text.strip(_JAVA_TRIMMED)


def is_comment_line(line: str) -> bool:
    """PropertiesConfiguration.isCommentLine: blank, or starting with ``#`` or ``!``."""
    stripped = java_trim(line)
    return not stripped or stripped[0] in "#!"


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def logical_lines(text: str) -> tuple[tuple[tuple[int, str], ...], int | None]:
    """Join continuation lines. Returns ((first line number, joined line), ...) and the line
    number of an unfinished continuation at the end of the text (dropped), if any."""
    joined: list[tuple[int, str]] = []
    parts: list[str] = []
    start: int | None = None
    for number, physical in enumerate(_LINE_BREAK.split(text), start=1):
        if is_comment_line(physical):
            continue
        line = java_trim(physical)
        if start is None:
            start = number
        if _continues(line):
            parts.append(line[:-1])
            continue
        parts.append(line)
        joined.append((start, "".join(parts)))
        parts, start = [], None
    return tuple(joined), start


def split_key_value(line: str) -> tuple[str, str]:
    """PropertiesReader.doParseProperty: the raw (still escaped) key and value of a line."""
    match = _PROPERTY.fullmatch(line)
    assert match is not None, line  # the pattern matches every string
    return java_trim(match.group(1)), java_trim(match.group(3))


def _combine_utf16(units: str) -> str:
    """Join \\uXXXX surrogate pairs into one character; a lone surrogate is an error."""
    try:
        return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError as exc:
        raise ValueError("a \\u escape names half of a surrogate pair") from exc


def unescape_value(raw: str, *, keep_unknown: bool = True) -> str:
    """PropertiesConfiguration.unescapeJava (classic mode). Raises ValueError on a bad
    ``\\u`` escape. With ``keep_unknown`` False every escaped character loses its backslash
    (the key rule of StringEscapeUtils)."""
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append(char)
            index += 1
            continue
        escaped = raw[index + 1]
        if escaped == "u":
            digits = raw[index + 2 : index + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"bad unicode escape \\u{digits}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        if escaped in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escaped])
        elif escaped in _UNESCAPE_CHARACTERS or not keep_unknown:
            out.append(escaped)
        else:
            out.append("\\" + escaped)
        index += 2
    return _combine_utf16("".join(out))


def split_items(value: str) -> tuple[str, ...]:
    """DefaultListDelimiterHandler(',').splitString with trimming: ``\\,`` is a literal comma,
    ``\\\\`` a backslash, any other backslash is kept."""
    items: list[str] = []
    token: list[str] = []
    escaping = False
    for char in value:
        if escaping:
            if char not in ",\\":
                token.append("\\")
            token.append(char)
            escaping = False
        elif char == ",":
            items.append(java_trim("".join(token)))
            token = []
        elif char == "\\":
            escaping = True
        else:
            token.append(char)
    if escaping:
        token.append("\\")
    items.append(java_trim("".join(token)))
    return tuple(items)


def parse_properties(text: str) -> PropertiesText:
    """Every property of a bk_server.conf-style text, in order (repeats kept)."""
    lines, dropped = logical_lines(text)
    found: list[PropertyLine] = []
    for number, line in lines:
        raw_key, raw_value = split_key_value(line)
        try:
            key = unescape_value(raw_key, keep_unknown=False)
            items = split_items(unescape_value(raw_value))
        except ValueError as exc:
            raise ConfigError(f"line {number}: {exc}; write the character itself") from exc
        found.append(PropertyLine(key, items, number))
    return PropertiesText(tuple(found), dropped)


def parse_override(text: str) -> tuple[str, tuple[str, ...]]:
    """A ``--set key=value`` argument: the key and its value items (same escapes as a file)."""
    if "=" not in text:
        raise ConfigError(
            f"--set {text!r}: expected key=value, for example --set logSizeLimit=1048576"
        )
    raw_key, raw_value = text.split("=", 1)
    key = java_trim(raw_key)
    if not key:
        raise ConfigError(f"--set {text!r}: the key before '=' is empty; expected key=value")
    try:
        return key, split_items(unescape_value(java_trim(raw_value)))
    except ValueError as exc:
        raise ConfigError(f"--set {text!r}: {exc}; write the character itself") from exc


# --- writing .properties text ----------------------------------------------------------


def escape_item(item: str) -> str:
    """The text that reads back as exactly ``item`` (one list item). Anything outside
    printable ASCII is written as ``\\uXXXX``, as java.util.Properties.store does."""
    out: list[str] = []
    for char in item:
        if char == "\\":
            out.append("\\\\\\\\")  # unescapeJava halves it, splitString halves it again
        elif char == ",":
            out.append("\\,")
        elif " " <= char <= "~":
            out.append(char)
        else:
            units = char.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    return "".join(out)


def render_value(value: Value) -> str:
    """A value as it is written after ``key=`` in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(escape_item(item) for item in value)
    if isinstance(value, str):
        return escape_item(value)
    return repr(value)


# --- typed values ----------------------------------------------------------------------

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BINARY = re.compile(r"[01]+")
_JAVA_FLOAT = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0"})


def parse_java_integer(text: str) -> int | None:
    """PropertyConverter.toNumber for integers: decimal with a sign, ``0x`` hex or ``0b``
    binary. None if the text is not one."""
    if text.startswith("0x") and _HEX.fullmatch(text[2:]):
        return int(text[2:], 16)
    if text.startswith("0b") and _BINARY.fullmatch(text[2:]):
        return int(text[2:], 2)
    if _DECIMAL.fullmatch(text):
        return int(text)
    return None


def parse_java_float(text: str) -> float | None:
    """Float/Double(String) after PropertyConverter's ``0x``/``0b`` integer forms."""
    whole = parse_java_integer(text)
    if whole is not None and text.startswith(("0x", "0b")):
        return float(whole)
    if not _JAVA_FLOAT.fullmatch(text):
        return None
    number = text.rstrip("fFdD") if text[-1] in "fFdD" else text
    return float(number.replace("Infinity", "inf"))


def parse_java_boolean(text: str) -> bool | None:
    """BooleanUtils.toBooleanObject: true/false, yes/no, on/off, y/n, t/f, 1/0, any case."""
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return None
