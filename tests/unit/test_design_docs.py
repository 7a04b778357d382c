"""docs/design.md and spec/properties.md, checked against the tree they describe.

The design page's module map (docs/design.md, "Module map") and the properties page say where
every concept lives and which checker and which known-bad variant stand behind every
property. Prose drifts silently when code moves, so these checks make the drift loud:

- every repository path written in backticks on either page exists, and a ``path::name``
  reference names a function, class or constant defined in that file;
- every engine module (impl/**/*.py but ``__init__.py``) has a row in the module map, and
  each column holds paths of its own package;
- every known-bad variant named (a backticked ``test_...`` name) is a test function in
  tests/quality/, and every quality test that catches something is named on the properties
  page, so a new variant is filed under the property it breaks;
- every name of ``spec.properties.PROPERTIES`` is on the properties page under the number
  spec/properties.py gives it, and properties 1 to 7 keep their established titles;
- every section of docs/design.md and every property number that the repository cites
  exists;
- no tracked file mentions the founders' brief, which lives outside the repository, a path
  into the directory above the repository, or the architecture page that docs/design.md
  replaced.

Each check is a small function that returns the problems it finds, and each is shown to
fail on a synthetic bad input (a table naming a missing path, a tree with an unmapped
module, a page without a number, a file with the forbidden name).
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from spec import properties
from tests.paths import ROOT

DESIGN_PAGE = "docs/design.md"
PROPERTIES_PAGE = "spec/properties.md"
QUALITY_DIR = "tests/quality"

MODULE_MAP_COLUMNS = (
    "concept",
    "spec page",
    "model module",
    "impl module(s)",
    "BookKeeper class",
    "checker",
    "quality variants",
)
#: Which package the paths of a module-map column must belong to.
COLUMN_PACKAGES = {"spec page": "spec/", "model module": "models/", "impl module(s)": "impl/"}
#: A backticked reference into the repository starts with one of these.
TOP_LEVEL = ("spec/", "models/", "impl/", "proofs/", "tests/", "docs/", "README.md")
#: The titles of properties 1 to 7, which the code and the docs cite by number.
ESTABLISHED = {
    1: "Durability",
    2: "Fence durability",
    3: "Auth",
    4: "No resurrection",
    5: "Compaction atomicity",
    6: "Forward progress",
    7: "Format validity",
}
#: Strings no tracked file may hold, built here so that this file does not hold them.
FORBIDDEN = (
    "DESIGN" + ".md",  # the founders' brief, outside the repository
    ".." + "/shared",  # a path into the directory above the repository
    "architecture" + ".md",  # folded into docs/design.md and deleted
)

_BACKTICKED = re.compile(r"`([^`\n]+)`")
_TEST_NAME = re.compile(r"test_\w+")
_PROPERTY_HEADING = re.compile(r"^## (\d+)\. (.+?)(?: \[(\w+)\])?\s*$", re.MULTILINE)
_DOCSTRING_PROPERTY = re.compile(r"^(\d+)\. ([A-Za-z ]+?) \[(\w+)\]", re.MULTILINE)
_CITED_SECTION = re.compile(r'docs/design\.md,?\s+\(?"([^"\n]+)"')
_CITED_PROPERTIES = re.compile(
    r"spec/properties\.md,?\s+(?:propert(?:y|ies)\s+)?(\d+(?:(?:\s*(?:,|-|and)\s*)\d+)*)"
)
_HEADING = re.compile(r"^#+ (.+?)\s*$", re.MULTILINE)


def _read(relative: str, root: Path = ROOT) -> str:
    return (root / relative).read_text(encoding="utf-8")


# --- references: paths and names --------------------------------------------------------------


def backticked(text: str) -> list[str]:
    """Everything written between backticks, in order."""
    return _BACKTICKED.findall(text)


def repo_references(text: str) -> list[str]:
    """The backticked paths into the repository (``path`` or ``path::name``)."""
    return [
        token
        for token in backticked(text)
        if token.startswith(TOP_LEVEL) and not any(c in token for c in " <>*")
    ]


def defines(path: Path, dotted: str) -> bool:
    """Whether the module at ``path`` defines ``dotted`` (``f``, ``Class``, ``Class.method``,
    or a module-level constant)."""
    body: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        found: ast.stmt | None = None
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == part:
                    found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == part for t in targets):
                    found = node
        if found is None:
            return False
        body = found.body if isinstance(found, ast.ClassDef) else []
    return True


def reference_problems(root: Path, references: Iterable[str]) -> list[str]:
    """Each reference whose file is missing, or whose ``::name`` the file does not define."""
    problems: list[str] = []
    for reference in references:
        relative, _, name = reference.partition("::")
        path = root / relative.rstrip("/")
        if not path.exists():
            problems.append(f"`{reference}`: {relative} does not exist")
        elif name and (not path.is_file() or not defines(path, name)):
            problems.append(f"`{reference}`: {relative} defines no {name}")
    return problems


# --- the module map -----------------------------------------------------------------------------


def module_map_rows(text: str) -> list[dict[str, str]]:
    """The rows of the table whose header is MODULE_MAP_COLUMNS, as column -> cell. Raises
    ValueError when there is no such table or a row has another number of cells."""
    lines = text.splitlines()
    header = "| " + " | ".join(MODULE_MAP_COLUMNS) + " |"
    try:
        start = lines.index(header)
    except ValueError:
        raise ValueError(f"no module map: no line {header!r}") from None
    rows: list[dict[str, str]] = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != len(MODULE_MAP_COLUMNS):
            raise ValueError(f"a module map row has {len(cells)} cells: {line}")
        rows.append(dict(zip(MODULE_MAP_COLUMNS, cells, strict=True)))
    if not rows:
        raise ValueError("the module map has no rows")
    return rows


def package_modules(root: Path, package: str) -> list[str]:
    """The modules of ``package`` (relative, ``/``-separated), ``__init__.py`` left out."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in (root / package).rglob("*.py")
        if path.name != "__init__.py"
    )


def unmapped_impl_modules(root: Path, rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The engine modules that no row names in its "impl module(s)" column."""
    named = {token for row in rows for token in backticked(row["impl module(s)"])}
    return [module for module in package_modules(root, "impl") if module not in named]


def column_problems(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """Paths in a package column that belong to another package, and rows with no concept."""
    problems: list[str] = []
    for row in rows:
        if not row["concept"] or row["concept"] == "-":
            problems.append(f"a row names no concept: {row}")
        for column, package in COLUMN_PACKAGES.items():
            for path in repo_references(row[column]):
                if not path.startswith(package):
                    problems.append(f"{row['concept']}: {column} {path} is not under {package}")
    return problems


# --- quality tests ------------------------------------------------------------------------------


def quality_tests(root: Path) -> set[str]:
    """The names of the test functions in tests/quality/*.py."""
    names: set[str] = set()
    for path in sorted((root / QUALITY_DIR).glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                names.add(node.name)
    return names


def named_tests(text: str) -> list[str]:
    """The backticked bare test names (``test_...``, no path)."""
    return [token for token in backticked(text) if _TEST_NAME.fullmatch(token)]


def unknown_quality_tests(root: Path, names: Iterable[str]) -> list[str]:
    known = quality_tests(root)
    return sorted({name for name in names if name not in known})


def catches_missing_from(root: Path, text: str) -> list[str]:
    """The quality tests that catch something (``catches`` in the name) not named in
    ``text``."""
    named = set(named_tests(text))
    return sorted(name for name in quality_tests(root) if "catches" in name and name not in named)


# --- the properties page ------------------------------------------------------------------------


def property_headings(text: str) -> list[tuple[int, str, str | None]]:
    """The numbered property headings: (number, title, name in brackets or None)."""
    return [(int(m.group(1)), m.group(2), m.group(3)) for m in _PROPERTY_HEADING.finditer(text)]


def predicate_numbers(docstring: str) -> dict[str, int]:
    """Name -> number, as the docstring of spec/properties.py numbers its predicates."""
    return {name: int(number) for number, _, name in _DOCSTRING_PROPERTY.findall(docstring)}


def property_page_problems(
    text: str, names: Sequence[str], numbers: Mapping[str, int]
) -> list[str]:
    """Every name appears on a numbered heading, under the number spec/properties.py gives
    it; numbers run 1, 2, 3, ... with no gap; properties 1-7 keep their titles."""
    headings = property_headings(text)
    problems: list[str] = []
    found = [number for number, _, _ in headings]
    if found != list(range(1, len(found) + 1)):
        problems.append(f"the properties are numbered {found}, not 1, 2, 3, ...")
    by_name = {name: number for number, _, name in headings if name is not None}
    for name in names:
        if name not in by_name:
            problems.append(f"no numbered heading '## N. Title [{name}]' for property {name}")
        elif name not in numbers:
            problems.append(f"spec/properties.py's docstring gives {name} no number")
        elif by_name[name] != numbers[name]:
            problems.append(
                f"{name} is property {by_name[name]} on the page but {numbers[name]} in "
                "spec/properties.py"
            )
    titles = {number: title for number, title, _ in headings}
    for number, title in ESTABLISHED.items():
        if titles.get(number) != title:
            problems.append(
                f"property {number} must be titled {title!r}, not {titles.get(number)!r}"
            )
    return problems


# --- citations across the repository ------------------------------------------------------------


def tracked_files(root: Path) -> list[Path]:
    """The files git tracks (every file but .git and caches when git cannot tell)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        return sorted(
            path
            for path in root.rglob("*")
            if path.is_file() and not skip & set(path.relative_to(root).parts)
        )
    names = [name for name in listed.decode("utf-8").split("\0") if name]
    return sorted(root / name for name in names if (root / name).is_file())


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file (NUL bytes, or not UTF-8)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def files_mentioning(root: Path, paths: Iterable[Path], needles: Sequence[str]) -> list[str]:
    """``file: needle`` for every text file holding a needle."""
    found: list[str] = []
    for path in paths:
        text = text_of(path)
        if text is None:
            continue
        found += [f"{path.relative_to(root).as_posix()}: {n}" for n in needles if n in text]
    return found


def cited_design_sections(text: str) -> set[str]:
    """The sections of the design page cited by its path and the quoted section title (with
    or without a comma between them)."""
    return set(_CITED_SECTION.findall(text))


def headings(text: str) -> set[str]:
    return set(_HEADING.findall(text))


def cited_property_numbers(text: str) -> set[int]:
    """The numbers cited as ``spec/properties.md property N``, ``... properties 1-4``,
    ``... properties 1, 2 and 3`` or ``spec/properties.md, N``."""
    numbers: set[int] = set()
    for cited in _CITED_PROPERTIES.findall(text):
        numbers.update(int(n) for n in re.findall(r"\d+", cited))
    return numbers


def citation_problems(
    root: Path, paths: Iterable[Path], sections: set[str], numbers: set[int]
) -> list[str]:
    """Citations of a design section that is not a heading, or of a property number that
    is not on the properties page."""
    problems: list[str] = []
    for path in paths:
        text = text_of(path)
        if text is None:
            continue
        where = path.relative_to(root).as_posix()
        for section in sorted(cited_design_sections(text) - sections):
            problems.append(f'{where} cites {DESIGN_PAGE} "{section}", which has no such heading')
        for number in sorted(cited_property_numbers(text) - numbers):
            problems.append(
                f"{where} cites {PROPERTIES_PAGE} property {number}, which is not there"
            )
    return problems


# --- the pages as they are -----------------------------------------------------------------------


def test_the_module_map_parses_with_a_row_per_concept() -> None:
    rows = module_map_rows(_read(DESIGN_PAGE))
    assert len(rows) >= 20, len(rows)
    assert column_problems(rows) == []


def test_every_path_in_the_module_map_exists() -> None:
    rows = module_map_rows(_read(DESIGN_PAGE))
    references = [ref for row in rows for cell in row.values() for ref in repo_references(cell)]
    assert len(references) > 50, references
    assert reference_problems(ROOT, references) == []


def test_every_impl_module_has_a_row_in_the_module_map() -> None:
    rows = module_map_rows(_read(DESIGN_PAGE))
    missing = unmapped_impl_modules(ROOT, rows)
    assert missing == [], (
        f"add a row (or a path to a row) of docs/design.md's module map: {missing}"
    )


def test_every_quality_variant_in_the_module_map_exists() -> None:
    rows = module_map_rows(_read(DESIGN_PAGE))
    names = [name for row in rows for name in named_tests(row["quality variants"])]
    assert names
    assert unknown_quality_tests(ROOT, names) == []


@pytest.mark.parametrize("page", [DESIGN_PAGE, PROPERTIES_PAGE])
def test_every_reference_on_the_page_exists(page: str) -> None:
    text = _read(page)
    references = repo_references(text)
    assert any("::" in reference for reference in references), "no path::name reference"
    assert reference_problems(ROOT, references) == []
    assert unknown_quality_tests(ROOT, named_tests(text)) == []


def test_every_property_name_appears_with_its_number() -> None:
    numbers = predicate_numbers(properties.__doc__ or "")
    assert set(numbers) == set(properties.PROPERTIES), numbers
    assert property_page_problems(_read(PROPERTIES_PAGE), properties.PROPERTIES, numbers) == []


def test_every_quality_catch_is_filed_under_a_property() -> None:
    missing = catches_missing_from(ROOT, _read(PROPERTIES_PAGE))
    assert missing == [], (
        f"name these in spec/properties.md under the property they break: {missing}"
    )


def test_every_cited_section_and_property_number_exists() -> None:
    sections = headings(_read(DESIGN_PAGE))
    numbers = {number for number, _, _ in property_headings(_read(PROPERTIES_PAGE))}
    files = tracked_files(ROOT)
    cited = [path for path in files if cited_design_sections(text_of(path) or "")]
    assert cited, "nothing cites a section of docs/design.md: the check would pass vacuously"
    assert citation_problems(ROOT, files, sections, numbers) == []


def test_no_tracked_file_mentions_the_brief_or_a_path_outside_the_repository() -> None:
    files = tracked_files(ROOT)
    assert ROOT / "README.md" in files, "the file list misses README.md: the check would be vacuous"
    assert files_mentioning(ROOT, files, FORBIDDEN) == []


# --- each check fails on a bad input --------------------------------------------------------------


def _table(*rows: str) -> str:
    header = "| " + " | ".join(MODULE_MAP_COLUMNS) + " |"
    return "\n".join([header, "| --- " * len(MODULE_MAP_COLUMNS) + "|", *rows, ""])


def _write(root: Path, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_table_naming_a_missing_path_or_name_is_caught(tmp_path: Path) -> None:
    _write(tmp_path, "impl/there.py", "def here() -> None: ...\nclass C:\n    def m(self): ...\n")
    text = _table(
        "| a | - | - | `impl/there.py`, `impl/gone.py` | - | `impl/there.py::here` | - |",
        "| b | - | - | `impl/there.py::C.m` | - | `impl/there.py::C.gone` | - |",
    )
    references = [
        ref for row in module_map_rows(text) for c in row.values() for ref in repo_references(c)
    ]
    problems = reference_problems(tmp_path, references)
    assert problems == [
        "`impl/gone.py`: impl/gone.py does not exist",
        "`impl/there.py::C.gone`: impl/there.py defines no C.gone",
    ]


def test_a_malformed_module_map_is_caught() -> None:
    with pytest.raises(ValueError, match="no module map"):
        module_map_rows("| concept | checker |\n| --- | --- |\n| a | b |\n")
    with pytest.raises(ValueError, match="cells"):
        module_map_rows(_table("| a | - | - | `impl/a.py` | - | - |"))
    rows = module_map_rows(
        _table("| - | `models/a.py` | `impl/a.py` | `models/a.py` | - | - | - |")
    )
    assert len(column_problems(rows)) == 4  # no concept; three columns of the wrong package


def test_a_missing_impl_module_is_caught(tmp_path: Path) -> None:
    for module in ("impl/__init__.py", "impl/a.py", "impl/b/__init__.py", "impl/b/c.py"):
        _write(tmp_path, module)
    rows = module_map_rows(_table("| a | - | - | `impl/a.py` | - | - | - |"))
    assert unmapped_impl_modules(tmp_path, rows) == ["impl/b/c.py"]
    rows = module_map_rows(_table("| a | - | - | `impl/a.py`, `impl/b/c.py` | - | - | - |"))
    assert unmapped_impl_modules(tmp_path, rows) == []


def test_an_unknown_or_unfiled_quality_test_is_caught(tmp_path: Path) -> None:
    _write(tmp_path, "tests/quality/test_x.py", "def test_catches_x(): ...\ndef test_ok(): ...\n")
    assert unknown_quality_tests(tmp_path, ["test_catches_x", "test_catches_y"]) == [
        "test_catches_y"
    ]
    assert catches_missing_from(tmp_path, "`test_ok` only") == ["test_catches_x"]
    assert catches_missing_from(tmp_path, "caught by `test_catches_x`") == []


def test_a_property_page_without_a_number_is_caught() -> None:
    numbers = {"durability": 1, "fence": 2}
    good = "## 1. Durability [durability]\n\n## 2. Fence durability [fence]\n"
    assert property_page_problems(good, ["durability", "fence"], numbers) == [
        f"property {n} must be titled {ESTABLISHED[n]!r}, not None" for n in range(3, 8)
    ]
    unnumbered = "## Durability [durability]\n\n## 2. Fence durability [fence]\n"
    problems = property_page_problems(unnumbered, ["durability", "fence"], numbers)
    assert "the properties are numbered [2], not 1, 2, 3, ..." in problems
    assert "no numbered heading '## N. Title [durability]' for property durability" in problems
    swapped = "## 1. Durability [fence]\n\n## 2. Fence durability [durability]\n"
    problems = property_page_problems(swapped, ["durability", "fence"], numbers)
    assert "durability is property 2 on the page but 1 in spec/properties.py" in problems


def test_the_predicate_numbers_come_from_the_docstring() -> None:
    doc = "1. Durability [durability]: after ...\n6. Forward progress [progress], over\n"
    assert predicate_numbers(doc) == {"durability": 1, "progress": 6}


def test_a_file_with_the_forbidden_name_is_caught(tmp_path: Path) -> None:
    _write(tmp_path, "docs/old.md", "see " + FORBIDDEN[0] + " for the plan\n")
    _write(tmp_path, "impl/a.py", "# " + FORBIDDEN[1] + "/x\n")
    _write(tmp_path, "docs/clean.md", "see docs/design.md\n")
    (tmp_path / "blob.bin").write_bytes(b"\0" + FORBIDDEN[0].encode())
    files = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    assert files_mentioning(tmp_path, files, FORBIDDEN) == [
        f"docs/old.md: {FORBIDDEN[0]}",
        f"impl/a.py: {FORBIDDEN[1]}",
    ]


def test_a_citation_of_a_missing_section_or_property_is_caught(tmp_path: Path) -> None:
    # Built from the constants, so that this file cites nothing itself.
    _write(
        tmp_path,
        "impl/a.py",
        f'"""See {DESIGN_PAGE} "Data flow" and {DESIGN_PAGE}, "Nowhere"; {PROPERTIES_PAGE}\n'
        f'properties 1-4, {PROPERTIES_PAGE} property 12 and {PROPERTIES_PAGE}, 7."""\n',
    )
    assert cited_property_numbers(_read("impl/a.py", tmp_path)) == {1, 4, 7, 12}
    problems = citation_problems(tmp_path, [tmp_path / "impl/a.py"], {"Data flow"}, {1, 2, 3, 4, 7})
    assert problems == [
        f'impl/a.py cites {DESIGN_PAGE} "Nowhere", which has no such heading',
        f"impl/a.py cites {PROPERTIES_PAGE} property 12, which is not there",
    ]
