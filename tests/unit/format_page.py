"""Reading the normative pages under spec/format/ in tests: sections, tables and the
constants table, so every page test checks its codec the same way."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

FORMAT_DIR = Path(__file__).resolve().parents[2] / "spec" / "format"


def page_path(name: str) -> Path:
    """The path of ``spec/format/<name>``."""
    return FORMAT_DIR / name


def section(page: Path, title: str) -> str:
    """The text of the ``## <title>`` section of a page, up to the next ``## ``."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The rows of the Markdown tables in ``text``, cells stripped of spaces and backticks,
    without the first row (the column titles) and the separator lines."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows[1:]


def page_constants(page: Path) -> dict[str, object]:
    """name -> value from the page's "Constants" table (values are Python literals)."""
    return {row[0]: ast.literal_eval(row[1]) for row in table_rows(section(page, "Constants"))}


def codec_constants(
    codec: ModuleType, imported_from: ModuleType, kinds: tuple[type, ...]
) -> dict[str, object]:
    """Every public upper-case constant of ``kinds`` that ``codec`` defines itself (names it
    imports from ``imported_from`` are left out)."""
    imported = set(vars(imported_from))
    return {
        name: value
        for name, value in vars(codec).items()
        if name.isupper()
        and not name.startswith("_")
        and name not in imported
        and isinstance(value, kinds)
    }


def parse_page_hex(block: str) -> bytes:
    """The bytes of a worked example written as ``<decimal offset>  <hex bytes>  <comment>``
    lines (columns two or more spaces apart); the bytes between lines are zero."""
    out = bytearray()
    for line in block.splitlines():
        if not line.strip():
            continue
        columns = re.split(r"\s{2,}", line.strip())
        offset, hex_bytes = int(columns[0]), columns[1]
        assert offset >= len(out), f"offsets must grow: {line!r}"
        out += bytes(offset - len(out))
        out += bytes.fromhex(hex_bytes)
    return bytes(out)
